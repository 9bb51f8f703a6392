"""A CPU artifact whose dispatch takes a large stack runs on IREE's workers, from a user's first load."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import torch
from torch import nn

import kiln

# A fresh process, as a user's first load is: the workers' stack size is an IREE flag, read once, when the
# CPU driver is made.
FIRST_LOAD = textwrap.dedent(
    """
    import sys
    import torch
    import kiln

    ids, expected = torch.load(sys.argv[2])
    actual = kiln.load(sys.argv[1])(ids)
    print(max(float((a - e).norm() / e.norm()) for a, e in zip(actual, expected)))
    """
)


class Embed(nn.Module):
    """GPT-2's embeddings and its first layer norm; the embeddings' sum is returned too, as GPT-2's residual
    stream reads it again."""

    def __init__(self) -> None:
        super().__init__()
        self.wte, self.wpe, self.ln = nn.Embedding(1000, 768), nn.Embedding(512, 768), nn.LayerNorm(768)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        return self.ln(h), h


def test_a_layer_norm_fused_with_gpt2_embeddings_compiles_and_runs_on_the_workers(tmp_path: Path) -> None:
    """At 8 x 512 tokens IREE fuses the embeddings' gather and sum into the layer norm's dispatch, whose
    CPU code takes 792 KiB of stack. It failed to compile under kiln's 256 KiB limit (plain IREE fails
    alike), and with the limit raised it crashed on its first load: kiln set the workers' stack size only
    after the CPU driver had started them with IREE's 128 KiB."""
    torch.manual_seed(0)
    model, ids = Embed().eval(), torch.randint(0, 1000, (8, 512))
    kiln.compile(model, (ids,)).save(tmp_path / "embed.vmfb")
    with torch.no_grad():
        torch.save((ids, model(ids)), tmp_path / "expected.pt")
    run = [sys.executable, "-c", FIRST_LOAD, str(tmp_path / "embed.vmfb"), str(tmp_path / "expected.pt")]
    result = subprocess.run(run, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert float(result.stdout.split()[-1]) < 1e-5
