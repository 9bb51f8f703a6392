"""kiln_cache_write run by Triton's interpreter on the CPU (TRITON_INTERPRET=1, set before Triton is
imported: a script of its own, which test_cache_writes.py runs) against compiler/generation.py's
`_written` (the select the kernel replaces): a decode step's one token at a position read from a tensor,
at the cache's first and last slots, and a prefill chunk whose padding runs past the cache's end (those
slots are not written). Every slot the step does not write keeps its old value. Exits non-zero on a
mismatch."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import torch

from kiln.compiler.generation import _written
from kiln.targets.cuda.kernels.tiles import CACHE_WRITE_TILES
from kiln.targets.cuda.kernels.triton_source import kiln_cache_write

BATCH, HEADS, SEQ, DIM = 2, 3, 16, 8


def run(tokens: int, start: int) -> float:
    cache, new = torch.randn(BATCH, HEADS, SEQ, DIM), torch.randn(BATCH, HEADS, tokens, DIM)
    positions = start + torch.arange(tokens)
    want = _written(cache, new, positions)
    block = CACHE_WRITE_TILES.block_n
    kiln_cache_write[(-(-new.numel() // block),)](positions, new, cache, ROWS=BATCH * HEADS, TOKENS=tokens, SEQ=SEQ, DIM=DIM, BLOCK=block)
    error = (cache - want).abs().max().item()
    print(f"{tokens} tokens from slot {start}: max abs error {error:.1e}")
    return error


def main() -> None:
    torch.manual_seed(0)
    errors = [run(1, 0), run(1, SEQ - 1), run(1, 7), run(6, 13), run(4, 0)]
    raise SystemExit(0 if max(errors) == 0 else 1)


if __name__ == "__main__":
    main()
