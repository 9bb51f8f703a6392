"""The hand-off point: kiln's linalg, or the torch dialect into IREE's own input pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kiln.compiler import CompileOptions, run_pipeline, run_until, spec_from_module, stage_names
from kiln.errors import KilnError


class Attention(torch.nn.Module):
    def __init__(self, causal: bool) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.view(2, 16, 4, 8).transpose(1, 2) for t in self.qkv(x).split(32, dim=2))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("handoff", ["linalg", "torch"])
def test_handoff_matches_eager_and_keeps_attention_whole_only_at_torch(
    handoff: str, causal: bool, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    model, x = Attention(causal), torch.randn(2, 16, 32)
    options = CompileOptions(handoff=handoff, dump_dir=tmp_path)
    compiled = run_pipeline(spec_from_module(model, (x,)), options).compiled
    np.testing.assert_allclose(np.asarray(compiled(x)), model(x).detach().numpy(), rtol=1e-4, atol=1e-5)
    assert compiled.manifest.target_details["handoff"] == handoff
    assert ("--iree-input-type=torch" in compiled.manifest.iree_flags) == (handoff == "torch")
    (dispatch_creation,) = tmp_path.glob("*-vmfb-05-dispatch-creation.mlir")
    assert ("iree_linalg_ext.attention" in dispatch_creation.read_text()) == (handoff == "torch")


def test_torch_handoff_drops_the_linalg_stages() -> None:
    assert stage_names(CompileOptions(handoff="torch")) == ("exported", "aten", "prims", "simplified", "vmfb")
    assert "linalg" in stage_names(CompileOptions())  # llvm-cpu hands off at linalg by default


def test_stopping_at_a_stage_the_torch_handoff_leaves_to_iree_says_so() -> None:
    options = CompileOptions(handoff="torch", stop_after="linalg")
    with pytest.raises(KilnError, match="unknown stage 'linalg'; stages: exported, aten, prims, simplified, vmfb") as error:
        run_until(spec_from_module(Attention(causal=True), (torch.randn(2, 16, 32),)), options)
    assert "--handoff torch, IREE lowers to linalg itself" in (error.value.hint or "")


def test_unknown_handoff_is_an_error() -> None:
    with pytest.raises(KilnError, match="unknown hand-off 'mlir'; known: linalg, torch"):
        stage_names(CompileOptions(handoff="mlir"))


@pytest.mark.parametrize(("dtype", "fused"), [(torch.float32, False), (torch.bfloat16, True)], ids=["f32", "bf16"])
def test_cuda_keeps_only_16_bit_attention_whole(dtype: torch.dtype, fused: bool, tmp_path: Path) -> None:
    """cuda's torch hand-off: IREE's fused attention in 16 bits; f32 attention as matmuls and a
    softmax, which measured 3.5-6x faster on an H100 (Target.fused_attention_dtypes)."""
    model, x = Attention(causal=True).to(dtype), torch.randn(2, 16, 32, dtype=dtype)
    options = CompileOptions(target="cuda", gpu_arch="sm_80", dump_dir=tmp_path)
    compiled = run_pipeline(spec_from_module(model, (x,)), options).compiled
    assert compiled.manifest.target_details["handoff"] == "torch"
    aten = next(tmp_path.glob("*-aten.mlir")).read_text()
    assert ("torch.aten.scaled_dot_product_attention" in aten) == fused
    (dispatch_creation,) = tmp_path.glob("*-vmfb-05-dispatch-creation.mlir")
    assert ("iree_linalg_ext.attention" in dispatch_creation.read_text()) == fused


def test_two_compiles_of_one_model_give_the_same_artifact(tmp_path):
    """An artifact is a function of the model and the options: IREE keeps the input's file name in the
    executables of kiln's kernels (cuda, sm_90a), which was kiln's random working folder (a regression:
    two compiles of one model differed in those bytes)."""
    from testkit import example_spec

    from kiln.compiler import CompileOptions, run_pipeline

    spec = example_spec("mlp")
    first, second = (run_pipeline(spec, CompileOptions(target="cuda", gpu_arch="sm_90a")).compiled for _ in range(2))
    assert first.vmfb == second.vmfb
