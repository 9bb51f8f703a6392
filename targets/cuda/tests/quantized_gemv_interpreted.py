"""kiln_gemv_quantized (weights as `--quantize` stores them, compiler/quantize.py) run by Triton's
interpreter on the CPU (TRITON_INTERPRET=1, set before Triton is imported: a script of its own, which
test_quantized_weights.py runs) against PyTorch's product with the dequantized weight (QuantizedLinear's
own, in f32): int8 and int4 in groups of 32, one weight, stacked weights (three and two, with biases,
widths that are not multiples of the program's columns) and two weights under SwiGLU's epilogue (a
generated function, as row_source.py writes them), 1 and 3 rows, K not a multiple of int8's K step.
Exits non-zero on a mismatch."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kiln.compiler.quantize import QuantizedLinear, Scheme, quantize_rows
from kiln.targets.cuda.kernels.triton_source import kiln_gemv_quantized

BLOCK_N = 16


@triton.jit
def swiglu(gate, up):
    return gate / (1.0 + tl.exp(-gate)) * up


def _quantized(n: int, k: int, scheme: Scheme, bias: bool) -> QuantizedLinear:
    values, scales = quantize_rows(torch.randn(n, k) / k**0.5, scheme)
    return QuantizedLinear(k, n, scheme, values, scales, torch.randn(n) if bias else None)


def run(rows: int, k: int, scheme: Scheme, widths: tuple[int, ...], bias: bool, gated: bool = False) -> float:
    x = torch.randn(rows, k)
    layers = [_quantized(n, k, scheme, bias) for n in widths]
    block_k = 32 if scheme.bits == 8 else 2 * scheme.group if (k // 2) % (2 * scheme.group) == 0 else scheme.group
    if gated:
        gate, up = layers
        out = torch.full((rows, widths[0]), float("nan"))
        grid = (math.ceil(widths[0] / BLOCK_N),)
        kiln_gemv_quantized[grid](
            x, gate.weight_q, gate.weight_scale, None, up.weight_q, up.weight_scale, None, None, None, None, out,
            M=rows, N=widths[0], K=k, N1=0, N2=0, BITS=scheme.bits, GROUP=scheme.group,
            BLOCK_M=4, BLOCK_N=BLOCK_N, BLOCK_K=block_k, EPILOGUE=swiglu,
        )  # fmt: skip
        want = F.silu(x @ gate.dequantized(torch.float32).T) * (x @ up.dequantized(torch.float32).T)
    else:
        padded = [*layers, None, None][:3]
        pointers = [p for layer in padded for p in ((layer.weight_q, layer.weight_scale, layer.bias) if layer else (None, None, None))]
        out = torch.full((rows, sum(widths)), float("nan"))
        grid = (sum(math.ceil(n / BLOCK_N) for n in widths),)
        stacked = len(widths) > 1
        kiln_gemv_quantized[grid](
            x, *pointers, out,
            M=rows, N=sum(widths), K=k, N1=widths[0] if stacked else 0, N2=widths[1] if stacked else 0,
            BITS=scheme.bits, GROUP=scheme.group, BLOCK_M=4, BLOCK_N=BLOCK_N, BLOCK_K=block_k, EPILOGUE=None,
        )  # fmt: skip
        want = torch.cat([layer(x) for layer in layers], 1)  # dequantized to f32: no rounding
    error = (out - want).abs().max().item()
    print(f"{scheme.name}, {rows} rows, K {k}, weights of {widths}{' with biases' if bias else ''}{' gated' if gated else ''}: max abs error {error:.1e}")
    return error


def main() -> None:
    torch.manual_seed(0)
    errors = []
    for scheme, k in ((Scheme(8), 72), (Scheme(4, 32), 128), (Scheme(4, 32), 192)):
        for rows in (1, 3):
            errors += [run(rows, k, scheme, widths, bias) for widths in ((40,), (40, 24, 24), (33, 16)) for bias in (False, True)]
            errors.append(run(rows, k, scheme, (24, 24), False, gated=True))
    raise SystemExit(0 if max(errors) < 1e-4 else 1)


if __name__ == "__main__":
    main()
