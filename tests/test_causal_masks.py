"""causal_masks_as_flags: an attention mask computed from constants that is exactly a causal mask
becomes SDPA's is_causal, one that keeps every score goes; every other mask stays. Checked on
exported programs, against eager."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kiln.compiler.causal_masks import causal_masks_as_flags

SEQ = 12


class Masked(nn.Module):
    """Attention with a mask built in the graph, as transformers builds a decoder's."""

    def __init__(self, mask: str) -> None:
        super().__init__()
        self.mask = mask
        self.register_buffer("offset", torch.zeros((), dtype=torch.long), persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(q.shape[-2])[:, None] + self.offset
        cols = torch.arange(k.shape[-2])[None, :]
        causal = (cols <= rows)[None, None].expand(q.shape[0], 1, -1, -1)
        mask = {
            "causal": causal,
            "additive": torch.zeros(causal.shape).masked_fill(~causal, float("-inf")),
            "finite": torch.zeros(causal.shape).masked_fill(~causal, torch.finfo(torch.float32).min),
            "window": causal & (cols > rows - 4),
            "padding": causal & keep[:, None, None, :],
            "shifted": (cols <= rows + 1)[None, None],
            "everything": (rows >= 0).expand(-1, k.shape[-2])[None, None].expand(q.shape[0], 1, -1, -1),
            "zeros": torch.zeros(causal.shape),
        }[self.mask]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _exported(mask: str) -> tuple[torch.export.ExportedProgram, tuple[torch.Tensor, ...], torch.Tensor]:
    torch.manual_seed(0)
    inputs = (*(torch.randn(2, 3, SEQ, 8) for _ in range(3)), torch.ones(2, SEQ, dtype=torch.bool))
    model = Masked(mask)
    return torch.export.export(model, inputs), inputs, model(*inputs)


def _attention_arguments(program: torch.export.ExportedProgram) -> list[tuple[object, object]]:
    nodes = [n for n in program.graph.nodes if n.target == torch.ops.aten.scaled_dot_product_attention.default]
    return [(n.args[3] if len(n.args) > 3 else n.kwargs.get("attn_mask"), n.kwargs.get("is_causal", False)) for n in nodes]


def test_a_causal_mask_from_constants_becomes_the_causal_flag():
    for kind in ("causal", "additive"):  # boolean, and 0 / -inf added to the scores
        program, inputs, want = _exported(kind)
        assert causal_masks_as_flags(program) == 1
        assert _attention_arguments(program) == [(None, True)]
        assert not any(n.target == torch.ops.aten.arange.default for n in program.graph.nodes)  # the mask's ops dropped
        torch.testing.assert_close(program.module()(*inputs), want)


def test_a_mask_from_constants_that_keeps_every_score_goes():
    """transformers' padding mask of an encoder that takes none (`arange(n) >= 0`, ViT's), and an
    additive mask of zeros."""
    for kind in ("everything", "zeros"):
        program, inputs, want = _exported(kind)
        assert causal_masks_as_flags(program) == 1, kind
        assert _attention_arguments(program) == [(None, False)]
        torch.testing.assert_close(program.module()(*inputs), want)


def test_other_masks_stay():
    """A sliding window, a mask an input affects, a finite additive mask (finfo.min is not -inf: a row
    it masks wholly is uniform, not zero) and a causal mask shifted off the diagonal."""
    for kind in ("window", "padding", "finite", "shifted"):
        program, inputs, want = _exported(kind)
        assert causal_masks_as_flags(program) == 0, kind
        mask, causal = _attention_arguments(program)[0]
        assert mask is not None and not causal
        torch.testing.assert_close(program.module()(*inputs), want)
