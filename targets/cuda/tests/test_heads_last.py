"""heads-last-attention-inputs on a whole module: a decoder's rotary between its head transposes and
attention, rewritten heads last, still computes the model's numbers, and the attention kernel then reads
all of Q, K and V where the projections wrote them. No GPU: the module after the pass is compiled on
for the CPU (its ops are torch ops), and the sm_90a compile stops before IREE."""

from __future__ import annotations

import shutil

import torch
import torch.nn.functional as F
from torch import nn

from kiln.compiler import CompileOptions, run_pipeline, run_until, spec_from_module


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


class RotaryAttention(nn.Module):
    """Qwen2's and Llama's attention from the projections on: heads transposed, rotary, repeat_kv, SDPA."""

    def forward(self, q, k, v, cos, sin):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [b, s, h, d] -> [b, h, s, d]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        b, kv_heads, s, d = k.shape
        k, v = (t[:, :, None].expand(b, kv_heads, 2, s, d).reshape(b, kv_heads * 2, s, d) for t in (k, v))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)


def inputs(seed: int) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(seed)
    angles = torch.arange(6.0)[None, :, None] * torch.rand(8)
    table = torch.cat((angles, angles), dim=-1)
    return torch.randn(2, 6, 4, 16), torch.randn(2, 6, 2, 16), torch.randn(2, 6, 2, 16), table.cos(), table.sin()


def test_rotary_before_attention_is_rewritten_heads_last_and_matches_eager(tmp_path):
    model = RotaryAttention()
    spec = spec_from_module(model, inputs(0))
    options = CompileOptions(target="cuda", gpu_arch="sm_90a", dump_dir=tmp_path, print_after_all=True, stop_after="simplified")
    run_until(spec, options)
    (after,) = tmp_path.glob("*.after-heads-last-attention-inputs.mlir")
    (outlined,) = tmp_path.glob("*.after-outline-contractions.mlir")
    assert 'layout = "bshd"' in outlined.read_text()  # all three peeled: no transpose left to IREE
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    shutil.copy(after, cpu / "03-simplified.mlir")
    compiled = run_pipeline(None, CompileOptions(start_from=cpu / "03-simplified.mlir")).compiled
    fresh = inputs(1)
    with torch.no_grad():
        torch.testing.assert_close(compiled(*fresh), model(*fresh), rtol=1e-5, atol=1e-5)
