"""kiln_rotary_cache_write run by Triton's interpreter on the CPU (TRITON_INTERPRET=1, set before Triton
is imported: a script of its own, which test_cache_writes.py runs) against what it replaces: transformers'
rotary embedding of a decode step's queries and keys (`x * cos + rotate_half(x) * sin` in the dtype, as
eager computes it) and compiler/generation.py's `_written` of the keys and values at the step's slot.
Grouped heads, batch 2 with cos shared by the rows or one a row, the cache's first and last slots, and a
slot outside the cache (nothing written). Every slot the step does not write keeps its value. f32 matches
eager exactly; bf16 within 2^-6 of the largest value (the interpreter rounds bf16 otherwise than CUDA:
a product alone is 2^-7 off there; the GPU generation tests run the kernel itself). Exits non-zero on a
mismatch."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import torch

from kiln.compiler.generation import _written
from kiln.targets.cuda.kernels.contraction import RotaryCacheWrite
from kiln.targets.cuda.kernels.tiles import choose
from kiln.targets.cuda.kernels.triton_source import kiln_rotary_cache_write

BATCH, Q_HEADS, KV_HEADS, SEQ = 2, 4, 2, 16


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def run(dim: int, dtype: torch.dtype, slot: int, cos_batch: int) -> float:
    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape).to(dtype)

    q, k, v = randn(BATCH, Q_HEADS, 1, dim), randn(BATCH, KV_HEADS, 1, dim), randn(BATCH, KV_HEADS, 1, dim)
    angles = torch.rand(cos_batch, 1, 1, dim) * 6.0
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    key_cache, value_cache = randn(BATCH, KV_HEADS, SEQ, dim), randn(BATCH, KV_HEADS, SEQ, dim)
    positions = torch.tensor([slot])
    want_q = q * cos + rotate_half(q) * sin
    want_keys = _written(key_cache, k * cos + rotate_half(k) * sin, positions)
    want_values = _written(value_cache, v, positions)
    described = RotaryCacheWrite(BATCH, Q_HEADS, KV_HEADS, SEQ, dim, 1, cos_batch, "bf16" if dtype == torch.bfloat16 else "f32")
    queries = torch.empty_like(q)
    kiln_rotary_cache_write[(BATCH * (Q_HEADS + 2 * KV_HEADS),)](
        positions, q, k, v, cos, sin, key_cache, value_cache, queries,
        Q_HEADS=Q_HEADS, KV_HEADS=KV_HEADS, SEQ=SEQ, DIM=dim, COS_BATCH=cos_batch, BLOCK=choose(described).tiles.block_n,
    )  # fmt: skip
    pairs = ((queries, want_q), (key_cache, want_keys), (value_cache, want_values))
    error = max(((got.float() - want.float()).abs().max() / want.float().abs().max()).item() for got, want in pairs)
    print(f"dim {dim} {dtype} slot {slot} cos batch {cos_batch}: max error {error:.1e} of the largest value")
    return error


def main() -> None:
    torch.manual_seed(0)
    errors = [
        run(64, torch.bfloat16, 0, 1), run(64, torch.bfloat16, SEQ - 1, BATCH), run(80, torch.bfloat16, 7, 1),
        run(16, torch.float32, 3, BATCH), run(64, torch.float32, SEQ, 1),
    ]  # fmt: skip
    raise SystemExit(0 if max(errors[:3]) < 2**-6 and max(errors[3:]) == 0 else 1)


if __name__ == "__main__":
    main()
