"""The llvm-cpu room's choices: its pass, its kernels and its runtime driver, resolved once per compile."""

from __future__ import annotations

import pytest

from kiln.compiler.options import CompileOptions
from kiln.passes import DEFAULT_PIPELINE, with_placements
from kiln.targets.llvm_cpu.kernels.provider import CpuKernels
from kiln.targets.resolve import resolve


def placed(options: CompileOptions) -> list[str]:
    return [name for group in with_placements(DEFAULT_PIPELINE, resolve(options).passes) for name in group.passes]


def test_depthwise_to_nhwc_follows_fold_truncf_constants_on_the_cpu_only():
    passes = placed(CompileOptions(target="llvm-cpu"))
    assert passes[passes.index("fold-truncf-constants") + 1] == "depthwise-to-nhwc"
    assert "slice-strided-pointwise-conv" not in passes  # a GPU workaround that costs the CPU 20-200x
    assert "split-spatial-sum" not in passes


@pytest.mark.parametrize("target", ["cuda", "vulkan-spirv", "rocm"])
def test_gpu_targets_place_no_depthwise_to_nhwc(target):
    passes = placed(CompileOptions(target=target))
    assert "depthwise-to-nhwc" not in passes and "slice-strided-pointwise-conv" in passes and "split-spatial-sum" in passes


def test_kernels_by_isa_and_handoff():
    resolved = resolve(CompileOptions(cpu="sapphirerapids"))
    assert isinstance(resolved.kernels, CpuKernels) and resolved.kernels.isa.name == "amx" and resolved.kernels.attention
    assert resolved.details["kernels"] == "amx"
    assert resolve(CompileOptions(cpu="sapphirerapids", cpu_attention="f32")).kernels.attention is False
    for options in (CompileOptions(cpu="sapphirerapids", handoff="torch"), CompileOptions(cpu="sapphirerapids", kernels="off")):
        assert resolve(options).kernels is None and resolve(options).details["kernels"] == "off"


def test_the_driver_is_the_targets_unless_one_is_asked_for():
    assert resolve(CompileOptions()).driver == "local-task"
    assert resolve(CompileOptions(cpu_driver="local-sync")).driver == "local-sync"
