"""kiln_matmul and kiln_gemv with an epilogue, run by Triton's interpreter on the CPU (TRITON_INTERPRET=1,
set before Triton is imported: a script of its own, which test_matmul_epilogues.py runs) against
PyTorch: SwiGLU's silu(x @ Wg^T) * (x @ Wu^T) (the GEMV over both weights), and an erf GELU after a
Linear with its bias (the GEMV and the matmul), as the generated epilogue computes them (row_source.epilogue_source), with a K that is not a multiple of the
K step. In f32 (the interpreter rounds to bf16 with numpy, not as the GPU does). Exits non-zero on a
mismatch."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import math
import tempfile
from pathlib import Path

import torch

from kiln.targets.cuda.kernels import row_source
from kiln.targets.cuda.kernels.contraction import Matmul
from kiln.targets.cuda.kernels.triton_source import kiln_gemv, kiln_matmul

M, N, K = 40, 48, 72
# silu(v0) * v1, as the graph spells SiLU: v0 * reciprocal(1 + exp(-v0))
SWIGLU = (("neg", "f32", 0), ("exp", "f32", 2), ("add", "f32", 3, 1.0), ("reciprocal", "f32", 4), ("mul", "f32", 0, 5), ("mul", "f32", 6, 1))
# 0.5 * v0 * (1 + erf(v0 / sqrt(2))) (the interpreter has no libdevice, which a tanh GELU needs)
GELU = (("mul", "f32", 0, 0.5), ("div", "f32", 0, math.sqrt(2)), ("erf", "f32", 3), ("add", "f32", 4, 1.0), ("mul", "f32", 2, 5))


def run(rows: int, gated: bool, folder: Path) -> float:
    """The GEMV (rows < 8) gated or after a bias; the matmul after a bias."""
    x, w, w2, bias = torch.randn(rows, K), torch.randn(N, K) / K**0.5, torch.randn(N, K) / K**0.5, torch.randn(N)
    gemv = rows < 8
    mm = Matmul(rows, N, K, "f32", "f32", precision="ieee", bias=not gated, gated=gated, epilogue=SWIGLU if gated else GELU, product_dtype="f32")
    epilogue = row_source.write_epilogue(mm, folder)
    out = torch.full((rows, N), float("nan"))
    if gemv:
        weights = dict(b_ptr=w, bias_ptr=None, b2_ptr=w2) if gated else dict(b_ptr=w, bias_ptr=bias, b2_ptr=None)
        unstacked = dict(bias2_ptr=None, b3_ptr=None, bias3_ptr=None, N1=0, N2=0)
        kiln_gemv[(N // 16,)](x, **weights, **unstacked, c_ptr=out, M=rows, N=N, K=K, B_SK=1, B_SN=K, BLOCK_M=8, BLOCK_N=16, BLOCK_K=32, EPILOGUE=epilogue)
    else:
        operands = (x, w, bias, out)
        strides = dict(A_SB=rows * K, A_SM=K, A_SK=1, B_SB=N * K, B_SK=1, B_SN=K, C_SB=rows * N, C_SM=N, C_SN=1)
        grid = (math.ceil(rows / 16) * math.ceil(N / 32), 1)
        kiln_matmul[grid](*operands, M=rows, N=N, K=K, **strides, BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, GROUP_M=2, PRECISION="ieee", EPILOGUE=epilogue)
    if gated:
        want = torch.nn.functional.silu(x @ w.T) * (x @ w2.T)
    else:
        want = torch.nn.functional.gelu(x @ w.T + bias)
    error = ((out - want).abs() / want.abs().clamp(min=1)).max().item()
    what = "SwiGLU, two weights" if gated else "bias + GELU"
    print(f"{'gemv' if gemv else 'matmul'} {what}: max error {error:.1e}")
    return error


def main() -> None:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        errors = [run(M, False, Path(folder)), *(run(3, gated, Path(folder)) for gated in (True, False))]
    raise SystemExit(0 if max(errors) < 1e-5 else 1)


if __name__ == "__main__":
    main()
