"""kiln_gemv over stacked weights (Matmul.stacked: a decode step's Q, K and V projections of one input
in one dispatch), run by Triton's interpreter on the CPU (TRITON_INTERPRET=1, set before Triton is
imported: a script of its own, which test_cuda_kernels.py runs) against PyTorch: three weights and two,
with and without their biases, widths that are not multiples of the program's columns (so a program
never straddles two weights), a K that is not a multiple of the K step, 1 and 3 rows. In f32. Exits
non-zero on a mismatch."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import math

import torch

from kiln.targets.cuda.kernels.triton_source import kiln_gemv

K, BLOCK_N = 72, 16


def run(rows: int, widths: tuple[int, ...], bias: bool) -> float:
    x = torch.randn(rows, K)
    weights = [torch.randn(n, K) / K**0.5 for n in widths]
    biases = [torch.randn(n) if bias else None for n in widths]
    out = torch.full((rows, sum(widths)), float("nan"))
    padded = (*weights, None)[:3], (*biases, None)[:3]
    grid = (sum(math.ceil(n / BLOCK_N) for n in widths),)
    kiln_gemv[grid](
        x, padded[0][0], padded[1][0], padded[0][1], padded[1][1], padded[0][2], padded[1][2], out,
        M=rows, N=sum(widths), K=K, B_SK=1, B_SN=K, N1=widths[0], N2=widths[1],
        BLOCK_M=4, BLOCK_N=BLOCK_N, BLOCK_K=32, EPILOGUE=None,
    )  # fmt: skip
    want = torch.cat([x @ w.T + (b if b is not None else 0) for w, b in zip(weights, biases, strict=True)], 1)
    error = (out - want).abs().max().item()
    print(f"{rows} rows, weights of {widths}{' with biases' if bias else ''}: max abs error {error:.1e}")
    return error


def main() -> None:
    torch.manual_seed(0)
    errors = [run(rows, widths, bias) for rows in (1, 3) for widths in ((40, 24, 24), (33, 16)) for bias in (False, True)]
    raise SystemExit(0 if max(errors) < 1e-5 else 1)


if __name__ == "__main__":
    main()
