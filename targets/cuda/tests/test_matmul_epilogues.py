"""Matmul epilogues: the elementwise ops after a matmul (a GELU after a Linear layer) are computed by the
matmul's kernel on its tile, so the product is not written and read back; in a decode step (fewer
than 8 rows) SwiGLU's gate and up are one GEMV over both weights. With more rows SwiGLU is left to the
row program that reads both products once. The outlined module (IREE's body of each function, run
on the CPU without a GPU) matches eager; the kernels' arithmetic matches PyTorch in Triton's
interpreter; where another op reads the product too, nothing is fused. Likewise a decode step's
projections of one input whose products are read apart (attention's Q, K and V) are one GEMV over
their weights stacked."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from kiln.compiler import CompileOptions, run_pipeline, run_until, spec_from_module
from kiln.compiler.artifact import Compiled
from kiln.targets.cuda.kernels.build import Unsupported, compile_kernel
from kiln.targets.cuda.kernels.contraction import Matmul
from kiln.targets.cuda.kernels.tiles import Tiles, choose


class SwiGLU(nn.Module):
    """Llama's MLP: down(silu(gate(x)) * up(x)), no biases."""

    def __init__(self, width: int = 64, hidden: int = 96) -> None:
        super().__init__()
        self.gate, self.up = nn.Linear(width, hidden, bias=False), nn.Linear(width, hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


class GeluMLP(nn.Module):
    """GPT-2's and BERT's MLP: fc2(gelu(fc1(x))), with biases; `also_product` returns fc1(x) too."""

    def __init__(self, approximate: str = "tanh", also_product: bool = False) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 128), nn.Linear(128, 64)
        self.approximate, self.also_product = approximate, also_product

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        h = self.fc1(x)
        y = self.fc2(nn.functional.gelu(h, approximate=self.approximate))
        return (y, h) if self.also_product else y


class Projections(nn.Module):
    """Attention's Q, K and V projections of one input (Llama's: K and V narrower, grouped heads; with
    `bias`, Qwen2's), each product read apart: reshaped into heads."""

    def __init__(self, bias: bool = False) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(64, 64, bias=bias), nn.Linear(64, 32, bias=bias), nn.Linear(64, 32, bias=bias)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        heads = lambda y: y.view(*x.shape[:-1], -1, 16).transpose(-3, -2)  # noqa: E731
        return heads(self.q(x)), heads(self.k(x)), heads(self.v(x))


def _outlined(model: nn.Module, x: torch.Tensor | tuple[torch.Tensor, ...], tmp_path: Path) -> str:
    spec = spec_from_module(model, x if isinstance(x, tuple) else (x,))
    run_until(spec, CompileOptions(target="cuda", gpu_arch="sm_90a", dump_dir=tmp_path, print_after_all=True, stop_after="simplified"))
    (outlined,) = tmp_path.glob("*.after-outline-contractions.mlir")
    return outlined.read_text()


def _compiled_on_the_cpu(tmp_path: Path) -> Compiled:
    """The outlined module of `_outlined`'s dumps, each function computing with IREE's code as no
    kernel replaces it, compiled for the CPU."""
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    (outlined,) = tmp_path.glob("*.after-outline-row-programs.mlir")
    shutil.copy(outlined, cpu / "03-simplified.mlir")
    return run_pipeline(None, CompileOptions(start_from=cpu / "03-simplified.mlir", handoff="torch")).compiled


def _matches_eager_on_the_cpu(model: nn.Module, x: torch.Tensor, tmp_path: Path) -> None:
    """The outlined module, each function computing with IREE's code as no kernel replaces it, against eager."""
    compiled = _compiled_on_the_cpu(tmp_path)
    with torch.no_grad():
        got, want = compiled(x), model(x)
    for actual, expected in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), strict=True):
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def _descriptions(text: str) -> list[str]:
    return re.findall(r"kiln\.contraction = \{([^}]*kind = \"mm\"[^}]*)\}", text)


def test_swiglu_with_more_rows_keeps_its_silu_for_the_row_program_and_matches_eager(tmp_path):
    """Not the gate's epilogue: the SiLU's only reader multiplies it by the up projection's product,
    which outline-row-programs computes together, reading each product once."""
    torch.manual_seed(0)
    model, x = SwiGLU().eval(), torch.randn(2, 24, 64)
    text = _outlined(model, x, tmp_path)
    assert not any("epilogue = [" in found or "gated" in found for found in _descriptions(text)), text
    main = text.split("func.func private")[0]
    assert len(re.findall(r"call @kiln_mm_\d+", main)) == 3, main
    assert "torch.aten.exp" in main and "torch.aten.mul.Tensor" in main, main
    _matches_eager_on_the_cpu(model, x, tmp_path)


def test_a_decode_steps_swiglu_is_one_gemv_over_both_weights_and_matches_eager(tmp_path):
    torch.manual_seed(0)
    model, x = SwiGLU().eval(), torch.randn(1, 1, 64)
    text = _outlined(model, x, tmp_path)
    gated = [found for found in _descriptions(text) if "gated = true" in found]
    assert len(gated) == 1 and "m = 1 " in gated[0] and '"exp"' in gated[0], text
    main = text.split("func.func private")[0]
    assert len(re.findall(r"call @kiln_mm_\d+", main)) == 2, main  # gate and up in one call, then down
    _matches_eager_on_the_cpu(model, x, tmp_path)


@pytest.mark.parametrize("bias", [False, True], ids=["llama", "qwen2-biases"])
def test_a_decode_steps_q_k_and_v_are_one_gemv_over_their_stacked_weights_and_match_eager(bias, tmp_path):
    torch.manual_seed(0)
    model, x = Projections(bias).eval(), torch.randn(1, 1, 64)
    text = _outlined(model, x, tmp_path)
    (stacked,) = _descriptions(text)
    assert "stacked = [64, 32, 32]" in stacked and "n = 128" in stacked and f"bias = {str(bias).lower()}" in stacked, text
    main = text.split("func.func private")[0]
    assert len(re.findall(r"call @kiln_mm_\d+", main)) == 1, main
    _matches_eager_on_the_cpu(model, x, tmp_path)


def test_projections_with_more_rows_stay_apart(tmp_path):
    """Prefill's (many rows) are three tensor-core matmuls: the stacking is the GEMV's."""
    torch.manual_seed(0)
    model, x = Projections().eval(), torch.randn(2, 24, 64)
    text = _outlined(model, x, tmp_path)
    assert len(_descriptions(text)) == 2 and not any("stacked" in found for found in _descriptions(text)), text  # Q; K and V share one
    _matches_eager_on_the_cpu(model, x, tmp_path)


def test_stacked_weights_on_tensor_cores_are_unsupported():
    with pytest.raises(Unsupported, match="only the GEMV kernel takes more than one"):
        compile_kernel(Matmul(64, 128, 64, "bf16", "bf16", stacked=(64, 32, 32)), Tiles(64, 64, 64))


def test_the_stacked_gemv_kernel_matches_torch_in_tritons_interpreter():
    script = Path(__file__).with_name("stacked_gemv_interpreted.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert result.stdout.count("max abs error") == 8


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_a_gelu_after_a_linear_is_its_epilogue_and_matches_eager(approximate, tmp_path):
    torch.manual_seed(0)
    model, x = GeluMLP(approximate).eval(), torch.randn(2, 24, 64)
    text = _outlined(model, x, tmp_path)
    fused = [found for found in _descriptions(text) if "epilogue = [" in found]
    assert len(fused) == 1 and "bias = true" in fused[0] and ('"tanh"' if approximate == "tanh" else '"erf"') in fused[0], text
    assert "gated" not in fused[0]
    main = text.split("func.func private")[0]
    assert "torch.aten.tanh" not in main and "torch.aten.erf" not in main, main
    _matches_eager_on_the_cpu(model, x, tmp_path)


def test_no_epilogue_where_another_op_reads_the_product(tmp_path):
    torch.manual_seed(0)
    model, x = GeluMLP(also_product=True).eval(), torch.randn(2, 24, 64)
    text = _outlined(model, x, tmp_path)
    assert not any("epilogue = [" in found for found in _descriptions(text)), text
    _matches_eager_on_the_cpu(model, x, tmp_path)


@pytest.mark.parametrize(("n", "k"), [(8192, 2048), (4864, 896), (14336, 4096)])
def test_a_gemv_over_two_weights_holds_as_many_weight_elements_a_step(n, k):
    plain = choose(Matmul(1, n, k, "bf16", "bf16")).tiles
    gated = choose(Matmul(1, n, k, "bf16", "bf16", gated=True, epilogue=(("mul", "bf16", 0, 1),), product_dtype="bf16")).tiles
    assert gated is not None and plain is not None
    assert (gated.block_m, gated.block_k, gated.num_warps) == (plain.block_m, plain.block_k, plain.num_warps)
    assert gated.block_n == max(1, plain.block_n // 2)


def test_two_weights_on_tensor_cores_are_unsupported():
    """The pass pairs two weights only for the GEMV (contract.gated_outlined); a description asking for
    more rows falls back to IREE's code rather than to a kernel that was measured slower."""
    mm = Matmul(64, 128, 64, "bf16", "bf16", gated=True, epilogue=(("mul", "bf16", 0, 1),), product_dtype="bf16")
    with pytest.raises(Unsupported, match="only the GEMV kernel takes more than one"):
        compile_kernel(mm, Tiles(64, 64, 64))


def test_the_epilogue_kernels_match_torch_in_tritons_interpreter():
    script = Path(__file__).with_name("epilogue_interpreted.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert result.stdout.count("max error") == 3, result.stdout
