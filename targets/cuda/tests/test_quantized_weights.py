"""`--quantize`'s weights on the cuda room's GEMV: a decode step's matmuls whose weight is dequantized
from int8 or int4 bytes (compiler/quantize.py) are outlined taking the bytes and the scales, not the
dequantized weight; stacked (Q, K, V) and gated (SwiGLU) too. The outlined module (IREE's body of each
function, run on the CPU) matches eager, and the kernel matches PyTorch in Triton's interpreter. With
more rows (prefill) the matmul takes the dequantized weight, as before."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_matmul_epilogues import Projections, SwiGLU, _descriptions, _matches_eager_on_the_cpu, _outlined

from kiln.compiler.quantize import Scheme, quantize_module
from kiln.targets.cuda.kernels.build import Unsupported, compile_kernel
from kiln.targets.cuda.kernels.contraction import Matmul
from kiln.targets.cuda.kernels.tiles import Tiles, gemv_tiles


def _quantized(model: torch.nn.Module, scheme: str) -> torch.nn.Module:
    quantize_module(model, Scheme.parse(scheme))
    return model.eval()


@pytest.mark.parametrize("scheme", ["int8", "int4-g32"])
def test_a_decode_steps_quantized_swiglu_is_one_gemv_over_the_bytes_and_matches_eager(scheme, tmp_path):
    torch.manual_seed(0)
    model, x = _quantized(SwiGLU(hidden=128), scheme), torch.randn(1, 1, 64)  # int4-g32: inputs in multiples of 64
    text = _outlined(model, x, tmp_path)
    found = _descriptions(text)
    bits = "8, 0" if scheme == "int8" else "4, 32"
    assert len(found) == 2 and all(f"quantized = [{bits}]" in one for one in found), text
    assert sum("gated = true" in one for one in found) == 1, text
    main = text.split("func.func private")[0]
    assert "torch.aten.cat" not in main and "torch.aten.mul.Tensor" not in main, main  # no dequantized weight is made
    assert re.search(r"func.func private @kiln_mm_\d+\(%arg0: !torch.vtensor<\[1,64\],f32>, %arg1: !torch.vtensor<\[\d+,\d+\],si8>, %arg2: !torch.vtensor<\[\d+,\d+\],f32>", text), text
    _matches_eager_on_the_cpu(model, x, tmp_path)


def test_quantized_projections_are_stacked_with_their_scales_and_biases(tmp_path):
    torch.manual_seed(0)
    model, x = _quantized(Projections(bias=True), "int4-g32"), torch.randn(1, 1, 64)
    text = _outlined(model, x, tmp_path)
    (stacked,) = [one for one in _descriptions(text) if "stacked" in one]
    assert "stacked = [64, 32, 32]" in stacked and "quantized = [4, 32]" in stacked and "bias = true" in stacked, text
    # A, then each weight's values, scales and bias
    expected = "%arg1: !torch.vtensor<[64,32],si8>, %arg2: !torch.vtensor<[64,2],f32>, %arg3: !torch.vtensor<[64],f32>, %arg4: !torch.vtensor<[32,32],si8>"
    assert expected in text, text
    _matches_eager_on_the_cpu(model, x, tmp_path)


def test_prefill_multiplies_the_dequantized_weight(tmp_path):
    """More rows than the GEMV takes: the tensor-core matmul, whose operand is the weight IREE dequantizes."""
    torch.manual_seed(0)
    model, x = _quantized(SwiGLU(), "int8"), torch.randn(2, 24, 64)
    text = _outlined(model, x, tmp_path)
    assert _descriptions(text) and not any("quantized" in one for one in _descriptions(text)), text
    _matches_eager_on_the_cpu(model, x, tmp_path)


def test_a_weight_that_is_not_quantizeds_form_is_left_alone(tmp_path):
    """int8 values scaled by a per-input vector (not QuantizedLinear's per-channel scale) are not a
    weight the kernel reads: the GEMV takes the dequantized weight."""

    class PerInput(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = torch.nn.Parameter(torch.randint(-127, 128, (32, 64), dtype=torch.int8), requires_grad=False)
            self.s = torch.nn.Parameter(torch.rand(1, 64), requires_grad=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.linear(x, self.q.to(torch.float32) * self.s)

    text = _outlined(PerInput().eval(), torch.randn(1, 64), tmp_path)
    assert _descriptions(text) and not any("quantized" in one for one in _descriptions(text)), text


def test_quantized_weights_on_tensor_cores_are_unsupported():
    with pytest.raises(Unsupported, match="only the GEMV kernel reads them"):
        compile_kernel(Matmul(64, 128, 64, "bf16", "bf16", quantized=(8, 0)), Tiles(64, 64, 64))


def test_int4_gemv_steps_are_whole_groups_that_divide_half_a_row():
    """Llama-3.2-1B's 2,048 inputs in groups of 128: 8 groups a step; Llama-3.1-8B's MLP down
    projection, 14,336 inputs: 56 groups a half, 8 a step; 384 inputs in groups of 64: 3 a half, 1; 8,192 in
    groups of 128: 32 a half, 8 a step (1,024 bytes, the most)."""
    for k, group, block_k in ((2048, 128, 1024), (14336, 128, 1024), (384, 64, 64), (8192, 128, 1024)):
        tiles = gemv_tiles(Matmul(1, 4096, k, "bf16", "bf16", quantized=(4, group)))
        assert tiles.block_k == block_k and (k // 2) % tiles.block_k == 0, (k, group, tiles)


def test_narrow_int4_weights_keep_a_few_programs_an_sm():
    """Qwen2.5-0.5B's MLP down projection, 896 x 4,864 (one group of 128 a step): 32 rows a program
    made 28 programs and took 1.79x the fastest configuration (2 rows) on the H200."""
    assert gemv_tiles(Matmul(1, 896, 4864, "bf16", "bf16", quantized=(4, 128))).block_n == 2
    assert gemv_tiles(Matmul(1, 14336, 4096, "bf16", "bf16", quantized=(4, 128))).block_n == 4  # wide: the step's bound


def test_the_quantized_gemv_kernel_matches_torch_in_tritons_interpreter():
    script = Path(__file__).with_name("quantized_gemv_interpreted.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert result.stdout.count("max abs error") == 42
