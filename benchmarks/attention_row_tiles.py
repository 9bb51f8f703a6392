"""kiln's one-query-row attention kernel against its flash kernel and torch's SDPA, on a CUDA GPU.

A decode step attends one query over the whole cache per head. `kiln_attention` (flash, 16 query
rows or more a program, tl.dot) computed it with 63 of 64 rows wasted and 64 keys a step: 27 us a
layer for Llama-3.2-1B's 1,024 positions on the H200, 55 us for Llama-3.1-8B's
(benchmarks/generation.py --profile). `kiln_attention_row` (targets/cuda/kernels/triton_source.py)
computes one row a program with f32 FMAs. This times its configurations, launched from Triton
directly, on the decode attention of several decoders, each two ways (keys and values repeated to
the query heads, as transformers' repeat_kv makes them; and each GQA group's query heads as rows of
its key/value head, as kiln's generation traces it), under an additive mask over the cache, next
to the flash kernel's configuration for that shape and torch's SDPA, and checks each against f32:

    python3 benchmarks/attention_row_tiles.py -o attention-row-h200.json      # on the GPU machine

The shapes are grouped by model, so a default fitted on some is checked on the others.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import click
import torch
import torch.nn.functional as F
from gemv_tiles import timed_configurations, timed_us

from kiln.targets.cuda.kernels.contraction import Attention
from kiln.targets.cuda.kernels.tiles import Tiles, attention_candidates

# model -> (query heads, key/value heads, head dim, cached positions) of its decode step's attention
MODELS = {
    "llama-3.2-1b": (32, 8, 64, 1024),
    "llama-3.1-8b": (32, 8, 128, 1024),
    "qwen2.5-0.5b": (14, 2, 64, 2048),
    "gpt2": (12, 12, 64, 1024),
    "mistral-7b": (32, 8, 128, 4096),
}


def launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, out: torch.Tensor, tiles: Tiles) -> None:
    """kiln_attention_row (block_m 1) or kiln_attention over contiguous [batch, heads, seq, dim] tensors."""
    from kiln.targets.cuda.kernels.triton_source import kiln_attention, kiln_attention_row

    batch, heads, seq_q, d = q.shape
    seq_k = k.shape[2]
    strides = {name: t.stride()[:3] for name, t in (("Q", q), ("K", k), ("V", v), ("O", out))}
    constants = {f"{name}_S{axis}": stride for name, (sb, sh, ss) in strides.items() for axis, stride in (("B", sb), ("H", sh), ("S", ss))}
    kernel = kiln_attention_row if tiles.block_m == 1 else kiln_attention
    grid = (math.ceil(seq_q / tiles.block_m), batch * heads)
    kernel[grid](
        q, k, v, mask, out, HEADS=heads, SEQ_Q=seq_q, SEQ_K=seq_k, HEAD_DIM=d, **constants, Q_OFF=0, K_OFF=0, V_OFF=0,
        M_SB=0, M_SH=0, M_SQ=0, M_SK=1, MASK=2, QK_SCALE=d**-0.5 * math.log2(math.e), CAUSAL=False,
        BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, PRECISION="ieee", num_warps=tiles.num_warps, num_stages=tiles.num_stages,
    )  # fmt: skip


def time_shape(model: str, heads: int, d: int, seq_k: int, batch: int, groups: int) -> list[dict]:
    """One decode attention: `heads` query heads over as many key/value heads (groups 1: repeated, as
    transformers' repeat_kv makes them), or `groups` query heads as rows of each of heads / groups
    key/value heads (as kiln's generation traces GQA)."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    rows, heads = groups, heads // groups
    q, k, v = (torch.randn(batch, heads, s, d, device="cuda", generator=generator).to(torch.bfloat16) for s in (rows, seq_k, seq_k))
    mask = torch.zeros(1, 1, 1, seq_k, device="cuda", dtype=torch.bfloat16)
    mask[..., seq_k // 2 :] = float("-inf")  # half the cache is past the step's position, as in a generation
    reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask.float())
    out = torch.empty_like(q)
    bytes_read = 2 * k.numel() * k.element_size()
    torch_us = timed_us(functools.partial(F.scaled_dot_product_attention, q, k, v, attn_mask=mask))
    contraction = Attention(batch, heads, rows, seq_k, d, "bf16", causal=False, scale=d**-0.5, mask="bf16", mask_shape=(1, 1, 1, seq_k))
    chosen = attention_candidates(contraction)[0]
    flash = Tiles(64, 64, d, 4, 3)  # the flash kernel's choice for one query row before
    calls = {tiles: functools.partial(launch, q, k, v, mask, out, tiles) for tiles in [chosen, *attention_candidates(contraction), flash]}
    row = {"model": model, "batch": batch, "heads": heads, "rows": rows, "head_dim": d, "seq_k": seq_k, "torch_us": round(torch_us, 2)}
    found = timed_configurations(row, calls, chosen, out, reference, bytes_read, model)
    best = min((row for row in found if row["tiles"].startswith("1x")), key=lambda row: row["us"])
    mine = next(row for row in found if row["chosen"])
    old = next((row for row in found if row["tiles"] == flash.label), None)
    print(
        f"{model:13} b{batch} h{heads}x{rows} d{d} s{seq_k}  torch {torch_us:6.1f} us  flash {old['us'] if old else float('nan'):6.1f} us"
        f"  best row {best['tiles']:>12} {best['us']:6.1f} us ({best['gb_s']:5.0f} GB/s)  chosen {mine['tiles']:>12} {mine['us']:6.1f} us"
        f"  max rel. L2 {max(row['rel_l2'] for row in found):.1e}",
        flush=True,
    )
    return found


@click.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
@click.option("--batch", "batches", multiple=True, type=int, default=(1, 8), show_default=True)
def main(output: Path, batches: tuple[int, ...]) -> None:
    rows: list[dict] = []
    for batch in batches:
        for model, (heads, kv_heads, d, seq_k) in MODELS.items():
            for groups in dict.fromkeys((1, heads // kv_heads)):
                rows += time_shape(model, heads, d, seq_k, batch, groups)
            output.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
