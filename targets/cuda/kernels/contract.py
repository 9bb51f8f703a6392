"""The contract between the cuda room's passes and its kernels: what outline-contractions marks, and
which contractions the kernels take. The importer asks it too (through the room's KernelProvider),
to keep attention whole where the kernel computes it.
"""

from __future__ import annotations

ATTRIBUTE = "kiln.contraction"  # outline-contractions' description of each function it makes
KERNEL_DTYPES = ("f32", "bf16", "f16")
# The attention kernel holds whole head rows, padded to a power of two (80 as 128: Phi-2; IREE's own
# attention took 13.9 ms a layer for Phi-2 at 8x512 on the H200, 91% of the call), up to 128; in 16-bit
# dtypes up to 256 (Gemma's heads). f32's smallest flash tile at 256 (64 x 32, two stages) needs 262 KB
# of shared memory, more than an SM has, and spilled.
HEAD_DIMS = tuple(range(16, 129, 16))
WIDE_HEAD_DIMS = tuple(range(144, 257, 16))


def head_dim_taken(head_dim: int, dtype: str) -> bool:
    """Whether the attention kernels take heads of `head_dim` in `dtype` (MLIR's spelling)."""
    return head_dim in HEAD_DIMS or (dtype != "f32" and head_dim in WIDE_HEAD_DIMS)


# Two matmuls of one input by two weights whose products only elementwise ops read together (SwiGLU's
# gate and up) are one kernel only with fewer rows than this: kiln's GEMV (a decode step) then reads
# both weights in one pass, the input row once (Llama-3.2-1B decode on the H200: 2.28 -> 2.20 ms a
# step). On tensor cores a kernel holding both products' tiles ran 1.25-1.45x slower than the two
# matmuls apart on four decoders' gate/up shapes (kiln's PTX, Triton 3.9: results/ptx-matmuls-h200.json),
# more than the separate SiLU-times-up pass it saves; and the gate's kernel loading the up product
# for its epilogue was no faster than the gate and the pass apart (results/ptx-matmuls-other-h200.json:
# its epilogue's loads are not overlapped with the tensor cores' work). Both are left out.
GATED_ROWS_BELOW = 8
# Matmuls of one input by weights whose products are read apart (a decode step's Q, K and V projections)
# are one GEMV dispatch too, with fewer rows than GATED_ROWS_BELOW: the weights stacked along N, up to
# this many a dispatch (Matmul.stacked). Llama-3.2-1B's three (2048, 512 and 512 rows) took 147 us a
# step apart and 88 as one on the H200, and IREE then fused two rotary dispatches (benchmarks/NOTES.md,
# "A decode step's dispatches and its host work").
MAX_STACKED = 3


def gated_outlined(rows: int) -> bool:
    """Whether outline-contractions makes one function of two such matmuls with `rows` rows."""
    return rows < GATED_ROWS_BELOW


def attention_outlined(
    query: tuple[int, ...], key: tuple[int, ...], value: tuple[int, ...], dtype: str, plain: bool,
    mask: tuple[tuple[int, ...], str] | None = None,
) -> bool:  # fmt: skip
    """Whether outline-contractions takes a scaled_dot_product_attention with these (static) operand shapes and dtype
    (MLIR's spelling); `plain`: no dropout, no grouped heads; `mask`: the mask tensor's shape and dtype
    (i1, or a float dtype: added to the scores), rank 4 and broadcastable."""
    if mask is not None:
        full = (query[0], query[1], query[2], key[2]) if len(query) == 4 and len(key) == 4 else ()
        shape, mask_dtype = mask
        if mask_dtype not in ("i1", *KERNEL_DTYPES) or not _broadcasts(shape, full):
            return False
    return (
        plain
        and dtype in KERNEL_DTYPES
        and len(query) == 4
        and len(key) == 4
        and tuple(value) == tuple(key)
        and tuple(query[:2]) == tuple(key[:2])
        and query[3] == key[3]
        and head_dim_taken(query[3], dtype)
    )


def _broadcasts(shape: tuple[int, ...], full: tuple[int, ...]) -> bool:
    """Whether a rank-4 `shape` broadcasts to `full` (each size 1 or the full one)."""
    return len(shape) == 4 == len(full) and all(size in (1, whole) for size, whole in zip(shape, full, strict=True))
