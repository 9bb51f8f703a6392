"""The llvm-cpu room's choices: its pass, its kernels and its runtime driver, resolved once per compile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import nn

from kiln.compiler import run_pipeline, spec_from_module
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


class RmsNorm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def test_iree_splits_its_dispatches_for_more_workers_than_its_default(tmp_path: Path) -> None:
    """IREE's default (8 threads) splits a norm over 512 rows into 16 workgroups, one per worker of a
    16-core host, which left them idle half the time; kiln asks for up to 64. A user's flag still wins."""

    def workgroups(dumps: Path, *iree_flags: str) -> set[str]:
        options = CompileOptions(cpu="haswell", dump_dir=dumps, extra_iree_flags=iree_flags)
        run_pipeline(spec_from_module(RmsNorm(), (torch.randn(512, 2048),)), options)
        hal = next(dumps.glob("*-vmfb-*-hal.mlir")).read_text()
        return set(re.findall(r"workgroups\(\[(%c\d+), %c1, %c1\]\)", hal))

    assert workgroups(tmp_path / "kiln") == {"%c32"}
    assert workgroups(tmp_path / "user", "--iree-llvmcpu-number-of-threads=8") == {"%c16"}
