"""A row program with a further output run by Triton's interpreter on the CPU (TRITON_INTERPRET=1, set
before Triton is imported: hence a script of its own, which test_row_outputs.py runs) against PyTorch:
a pre-norm block's residual sum and the RMS norm of it, the sum stored as the second result. In f32
only: the interpreter converts to bf16 with numpy, not as the GPU's cvt.rn does, and lands a step or
two away (bf16 is checked on the GPU, in the real models' runs). Exits non-zero on a mismatch."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import tempfile
from pathlib import Path

import torch

from kiln.targets.cuda.kernels import row_source
from kiln.targets.cuda.kernels.contraction import RowProgram

ROWS, WIDTH = 6, 48
# h = x + a (step 0, also stored), then h * rsqrt(mean(h * h) + eps) * w
STEPS = (
    ("add", "f32", 0, 1), ("mul", "f32", 3, 3), ("sum", "f32", 4), ("div", "f32", 5, float(WIDTH)),
    ("add", "f32", 6, 1e-6), ("rsqrt", "f32", 7), ("mul", "f32", 3, 8), ("mul", "f32", 2, 9),
)  # fmt: skip


def main() -> None:
    torch.manual_seed(0)
    program = RowProgram((ROWS, WIDTH), (((ROWS, WIDTH), "f32"), ((ROWS, WIDTH), "f32"), ((WIDTH,), "f32")), STEPS, outputs=(0,))
    x, a, w = torch.randn(ROWS, WIDTH), torch.randn(ROWS, WIDTH), torch.rand(WIDTH) + 0.5
    h = x + a
    want = w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6))
    out, also = torch.full_like(h, float("nan")), torch.full_like(h, float("nan"))
    with tempfile.TemporaryDirectory() as folder:
        kernel = getattr(row_source.write_module(program, Path(folder)), row_source.ENTRY)
        kernel[(ROWS // 2,)](x, a, w, out, also, R=ROWS, H=WIDTH, BLOCK_R=2, BLOCK_H=64)
    error = ((out - want).abs() / want.abs().clamp(min=1)).max().item()
    print(f"norm max error {error:.1e}, residual sum {'equal' if torch.equal(also, h) else 'differs'}")
    raise SystemExit(0 if error < 1e-6 and torch.equal(also, h) else 1)


if __name__ == "__main__":
    main()
