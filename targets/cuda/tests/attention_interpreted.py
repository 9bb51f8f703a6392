"""kiln_attention run by Triton's interpreter on the CPU (TRITON_INTERPRET=1, set before Triton is
imported: a script of its own, which test_cuda_kernels.py runs) against PyTorch's attention, with the
masks decoders bring: causal and sliding-window byte masks, padding (a row that keeps nothing), an
additive -inf mask, a mask with causal as well, and the same shapes without a mask; grouped heads
(GQA: two query heads a key/value head, read unrepeated); a head dimension that is not a power of two
(48, padded to 64; 240, padded to 256), in the flash kernel and the one-row kernel. And masks whose trailing keys are
all hidden, which both kernels stop reading (_visible_end): a decode step's one query over a cache
filled up to its position (additive, transformers' finfo.min, and bytes), a window within it, a
padded batch whose rows share one mask row (flash kernel), and a row that keeps nothing at all.
Exits non-zero on a mismatch."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import torch
import torch.nn.functional as F

from kiln.targets.cuda.kernels import triton_source
from kiln.targets.cuda.kernels.build import attention_constants
from kiln.targets.cuda.kernels.contraction import Attention
from kiln.targets.cuda.kernels.tiles import Tiles

BATCH, HEADS, SEQ, DIM = 2, 2, 40, 16
TILES = Tiles(16, 8, 1, 4, 1)  # 16 query rows, 8 keys a block: 5 key blocks, 3 query blocks (the last partial)


def _masks() -> dict[str, tuple[torch.Tensor | None, bool]]:
    """name -> (mask [batch or 1, 1, seq, seq], causal)."""
    q, k = torch.arange(SEQ)[:, None], torch.arange(SEQ)[None, :]
    causal = (k <= q)[None, None]
    window = causal & (k > q - 12)[None, None]  # each query sees its 12 latest keys
    padded = causal.expand(BATCH, 1, SEQ, SEQ).clone()
    padded[1, :, :, 30:] = False  # the second sequence's last ten keys are padding
    padded[1, :, 3, :] = False  # and one query row keeps nothing
    additive = torch.zeros(1, 1, SEQ, SEQ).masked_fill(~window, float("-inf"))
    return {
        "causal mask": (causal, False), "sliding window": (window, False), "padding": (padded, False),
        "additive -inf": (additive, False), "window and causal": (window, True), "no mask": (None, False),
    }  # fmt: skip


def run(mask: torch.Tensor | None, causal: bool, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    kind = "" if mask is None else ("bool" if mask.dtype == torch.bool else "f32")
    shape = () if mask is None else tuple(mask.shape)
    group, (seq_q, dim), seq_k = q.shape[1] // k.shape[1], q.shape[2:], k.shape[2]
    op = Attention(BATCH, HEADS, seq_q, seq_k, dim, "f32", causal, dim**-0.5, "ieee", mask=kind, mask_shape=shape, kv_group=group)
    out = torch.empty_like(q)
    given = None if mask is None else (mask.to(torch.int8) if kind == "bool" else mask).contiguous()
    tiles = TILES if seq_q > 1 else Tiles(1, 16, dim, 4, 1)
    kernel = triton_source.kiln_attention if seq_q > 1 else triton_source.kiln_attention_row
    kernel[(-(-seq_q // tiles.block_m), BATCH * HEADS)](q, k, v, given, out, **attention_constants(op, tiles))
    return out


def main() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(BATCH, HEADS, SEQ, DIM) for _ in range(3))
    failures = []
    for name, (mask, causal) in _masks().items():
        if mask is not None and mask.dtype == torch.bool:
            scores = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
        else:
            scores = mask
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=scores, is_causal=causal and mask is None)
        if causal and mask is not None:
            want = F.scaled_dot_product_attention(q, k, v, attn_mask=scores.masked_fill(torch.ones(SEQ, SEQ).triu(1).bool(), float("-inf")))
        want = torch.nan_to_num(want, nan=0.0)  # a row that keeps nothing: PyTorch's math path gives NaN, the kernel 0
        error = (run(mask, causal, q, k, v) - want).abs().max().item()
        print(f"{name}: max abs error {error:.1e}")
        failures += [name] if error > 1e-4 else []
    k1, v1 = k[:, :1].contiguous(), v[:, :1].contiguous()  # one key/value head for both query heads
    want = F.scaled_dot_product_attention(q, k1, v1, is_causal=True, enable_gqa=True)
    error = (run(None, True, q, k1, v1) - want).abs().max().item()
    print(f"grouped heads: max abs error {error:.1e}")
    failures += ["grouped heads"] if error > 1e-4 else []
    for dim in (48, 240):  # padded to 64 and to 256 (Gemma's 256-wide heads take that tile)
        for rows in (SEQ, 1):  # the flash kernel, and a decode step's one-row kernel
            qd, kd, vd = torch.randn(BATCH, HEADS, rows, dim), torch.randn(BATCH, HEADS, SEQ, dim), torch.randn(BATCH, HEADS, SEQ, dim)
            error = (run(None, False, qd, kd, vd) - F.scaled_dot_product_attention(qd, kd, vd)).abs().max().item()
            print(f"head dimension {dim}, {rows} query rows: max abs error {error:.1e}")
            failures += [f"head dimension {dim}"] if error > 1e-4 else []
    failures += _hidden_tails(q, k, v)
    raise SystemExit(1 if failures else 0)


def _hidden_tails(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> list[str]:
    """Masks hiding every key after some position, as a decode step's and a padded batch's do."""
    keys = torch.arange(SEQ)
    position = torch.tensor([5, 21])[:, None, None, None]  # batch 0 sees keys 0..5 (one block), batch 1 0..21
    seen = keys <= position  # [batch, 1, 1, seq]
    lowest = torch.finfo(torch.float32).min
    one = q[:, :, :1].contiguous()
    cases = {
        "decode, additive finfo.min": (one, torch.zeros(seen.shape).masked_fill(~seen, lowest)),
        "decode, bytes": (one, seen),
        "decode, window in the cache": (one, seen & (keys > position - 4)),
        "decode, nothing kept": (one, seen & False),
        "padded rows sharing a mask row": (q, torch.zeros(seen.shape).masked_fill(~seen, float("-inf"))),
    }
    failures = []
    for name, (query, mask) in cases.items():
        scores = (
            torch.zeros(mask.shape).masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else mask
        )
        want = torch.nan_to_num(F.scaled_dot_product_attention(query, k, v, attn_mask=scores), nan=0.0)
        error = (run(mask, False, query, k, v) - want).abs().max().item()
        print(f"{name}: max abs error {error:.1e}")
        failures += [name] if error > 1e-4 else []
    return failures


if __name__ == "__main__":
    main()
