"""The cuda room's choices: where its own passes and kernels apply, resolved once per compile.

The room places heads-last-attention-inputs, outline-cache-writes, outline-contractions and outline-row-programs only where
its kernels run (sm_90a, the torch hand-off, --kernels on); the passes themselves no longer ask the module which target it is
for, so these cases are the "must not fire" half of their lit tests.
"""

from __future__ import annotations

import pytest

from kiln.compiler.options import CompileOptions
from kiln.passes import DEFAULT_PIPELINE, with_placements
from kiln.targets.cuda.kernels.provider import CudaKernels
from kiln.targets.resolve import resolve

OUTLINING = ("heads-last-attention-inputs", "outline-cache-writes", "outline-contractions", "outline-row-programs")


def placed(options: CompileOptions) -> list[str]:
    return [name for group in with_placements(DEFAULT_PIPELINE, resolve(options).passes) for name in group.passes]


def test_kernels_apply_on_sm_90a_at_the_torch_handoff():
    resolved = resolve(CompileOptions(target="cuda", gpu_arch="sm_90a"))
    assert isinstance(resolved.kernels, CudaKernels) and resolved.details["kernels"] == "on"
    passes = placed(CompileOptions(target="cuda", gpu_arch="sm_90a"))
    at = passes.index("cse", passes.index("expand-pow-small"))  # simplified's cse, the rooms' anchor
    assert passes[at + 1 : at + 6] == [*OUTLINING, "pointwise-conv-to-mm"]


@pytest.mark.parametrize(
    "options",
    [
        CompileOptions(target="cuda", gpu_arch="sm_80"),  # the kernels are sm_90a PTX
        CompileOptions(target="cuda", gpu_arch="sm_90a", handoff="linalg"),
        CompileOptions(target="cuda", gpu_arch="sm_90a", kernels="off"),
    ],
    ids=["sm_80", "linalg-handoff", "kernels-off"],
)
def test_no_kernels_and_no_outlining_where_they_do_not_apply(options):
    resolved = resolve(options)
    assert resolved.kernels is None and resolved.details["kernels"] == "off"
    passes = placed(options)
    assert not set(OUTLINING) & set(passes)
    assert "pointwise-conv-to-mm" in passes  # IREE's 16-bit 1x1 convolutions need it on any cuda arch


@pytest.mark.parametrize("target", ["llvm-cpu", "vulkan-spirv", "rocm"])
def test_other_targets_place_none_of_cudas_passes(target):
    assert not {*OUTLINING, "pointwise-conv-to-mm"} & set(placed(CompileOptions(target=target)))


def test_precision_options_reach_the_module_and_the_manifest():
    resolved = resolve(CompileOptions(target="cuda", gpu_arch="sm_90a", matmul_precision="high", conv_precision="highest"))
    assert resolved.module_attributes["kiln.matmul_precision"] == "high"
    assert resolved.module_attributes["kiln.conv_precision"] == "highest"
    assert (resolved.details["matmul_precision"], resolved.details["conv_precision"]) == ("high", "highest")
