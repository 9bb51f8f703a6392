"""`stream`'s end-of-sequence handling, against transformers' rule step by step: a row that chose an
end-of-sequence token goes on with one, and generation stops at the step where every row has ended.
kiln reads which rows ended once a window of tokens (runtime/generation.py EOS_WINDOW), so these
cases put the ends inside windows, on their edges and on the first token, with an artifact stand-in
whose decode returns scripted tokens (no compile: the rule is the runtime's alone)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kiln.runtime.generation import EOS_WINDOW, stream
from kiln.runtime.manifest import GenerationSpec

EOS = (7, 9)


def _artifact(script: torch.Tensor) -> SimpleNamespace:
    """An artifact whose prefill chooses script[0] and whose n-th decode chooses script[n]; each
    decode also records the token it was given."""
    fed: list[torch.Tensor] = []
    steps = iter(script)
    logits = torch.zeros(script.shape[1], 16)

    def prefill(ids: torch.Tensor, start: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return next(steps), logits, start + count

    def decode(token: torch.Tensor, position: torch.Tensor) -> tuple[torch.Tensor, ...]:
        fed.append(token)
        return next(steps), logits, position + 1

    spec = GenerationSpec(max_seq_len=256, batch=script.shape[1], vocab=16, prefill_chunk=4, eos_token_ids=EOS)
    return SimpleNamespace(manifest=SimpleNamespace(generation=spec), boundary=SimpleNamespace(home=torch.device("cpu")), functions={"prefill": prefill, "decode": decode}, fed=fed)


def _transformers_rule(script: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    eos = torch.tensor(EOS)
    ended = torch.zeros(script.shape[1], dtype=torch.bool)
    out = []
    for token in script[:max_new_tokens]:
        token = torch.where(ended, eos[0], token)
        ended |= torch.isin(token, eos)
        out.append(token)
        if bool(ended.all()):
            break
    return torch.stack(out)


def _script(ends: dict[int, int], steps: int = 40) -> torch.Tensor:
    """Two rows of tokens 1-5, row r choosing an end-of-sequence token at step ends[r] (and random
    tokens, some of them ends again, after it)."""
    generator = torch.Generator().manual_seed(0)
    script = torch.randint(1, 6, (steps, 2), generator=generator)
    for row, step in ends.items():
        script[step, row] = EOS[row % 2]
        script[step + 1 :, row] = torch.randint(5, 10, (steps - step - 1,), generator=generator)
    return script


@pytest.mark.parametrize(
    ("ends", "max_new_tokens"),
    [
        ({0: 3, 1: 11}, 30),  # ends in two windows
        ({0: 2, 1: 5}, 30),  # both in the first window after the first token
        ({0: 0, 1: 0}, 30),  # both on the first token
        ({0: EOS_WINDOW, 1: 1}, 30),  # the last on a window's last step
        ({0: EOS_WINDOW + 1, 1: 3}, 30),  # the last on a window's first step
        ({0: 4}, 13),  # one row never ends: max_new_tokens, mid-window
        ({0: 20, 1: 25}, 17),  # max_new_tokens before the ends
    ],
)
def test_stream_stops_and_pads_as_transformers(ends, max_new_tokens):
    script = _script(ends)
    artifact = _artifact(script)
    got = torch.stack(list(stream(artifact, torch.ones(2, 3, dtype=torch.int64), max_new_tokens)))  # type: ignore[arg-type]
    want = _transformers_rule(script, max_new_tokens)
    assert torch.equal(got, want), (got.T, want.T)
    assert len(artifact.fed) < len(want) + EOS_WINDOW  # decode ran past the end by less than a window
