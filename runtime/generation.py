"""Generating with an artifact compiled with `--generate`: the loop over its `prefill` and `decode`.

Why it lives in the runtime: a deployment generates with `kiln.runtime` alone. The loop keeps every
token on the artifact's device: `decode` takes the tensors the previous call returned (the greedy
token, or the one sampled here from the logits with torch on that device, and the position), so a
step copies nothing across the boundary; only the caller's reading of the ids (to stop at
end-of-sequence) waits on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from kiln.errors import KilnError

from .manifest import GenerationSpec

if TYPE_CHECKING:
    from .module import LoadedModule

STAGE = "runtime"


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen: greedy (the artifact's own argmax) unless `do_sample`, as in transformers."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def check(self) -> None:
        if self.temperature <= 0:
            raise KilnError(f"temperature must be above 0, got {self.temperature}", stage=STAGE)
        if self.top_k is not None and self.top_k < 1:
            raise KilnError(f"top_k must be 1 or more, got {self.top_k}", stage=STAGE)
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise KilnError(f"top_p must be in (0, 1], got {self.top_p}", stage=STAGE)


def spec_of(module: LoadedModule) -> GenerationSpec:
    spec = module.manifest.generation
    if spec is None:
        raise KilnError(
            "the artifact was not compiled for generation", stage=STAGE, hint="compile the model with --generate --max-seq-len N"
        )
    return spec


def stream(
    module: LoadedModule, input_ids: torch.Tensor, max_new_tokens: int, sampling: Sampling = Sampling()
) -> Iterator[torch.Tensor]:
    """The new tokens, [batch] each, as they are chosen: the first from the prompt (prefill), then one per decode.

    Stops after `max_new_tokens`, or once every row has chosen an end-of-sequence token."""
    spec = spec_of(module)
    ids = _checked_prompt(input_ids, spec, max_new_tokens)
    sampling.check()
    ids = ids.to(module.boundary.home)
    generator = None
    if sampling.do_sample:
        generator = torch.Generator(device=ids.device)
        generator.manual_seed(sampling.seed if sampling.seed is not None else torch.seed())
    decode = module.functions[spec.decode]
    eos = torch.tensor(spec.eos_token_ids, dtype=torch.int64, device=ids.device)
    finished = torch.zeros(spec.batch, dtype=torch.bool, device=ids.device)
    greedy, logits, position = _prefill_chunks(module, spec, ids)
    for step in range(max_new_tokens):
        token = _sampled(logits, sampling, generator) if sampling.do_sample else greedy
        if eos.numel():  # rows that ended go on with an end-of-sequence token, as transformers pads them
            token = torch.where(finished, eos[0], token)
            finished |= torch.isin(token, eos)
        yield token
        if step + 1 == max_new_tokens or (eos.numel() and bool(finished.all())):
            return
        greedy, logits, position = decode(token, position)


def prefill(module: LoadedModule, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The prompt [batch, tokens] into the artifact's cache from position 0, in chunks of the size its
    `prefill` takes (the last one padded): the greedy next token [batch], the logits [batch, vocab]
    and the position [1] where the next token goes, as `decode` takes them."""
    spec = spec_of(module)
    return _prefill_chunks(module, spec, _checked_prompt(input_ids, spec, 1).to(module.boundary.home))


def _prefill_chunks(module: LoadedModule, spec: GenerationSpec, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`prefill` of a checked prompt already on the artifact's device."""
    function = module.functions[spec.prefill]
    prompt, chunk = ids.shape[1], spec.prefill_chunk
    padded = torch.nn.functional.pad(ids, (0, -prompt % chunk))
    for start in range(0, prompt, chunk):
        at, count = (torch.tensor([value], dtype=torch.int64, device=ids.device) for value in (start, min(chunk, prompt - start)))
        result = function(padded[:, start : start + chunk].contiguous(), at, count)  # a few ids copied, not warned about
    return result


def generate(
    module: LoadedModule, input_ids: torch.Tensor, max_new_tokens: int, sampling: Sampling = Sampling()
) -> torch.Tensor:
    """The prompt and its new tokens, [batch, prompt + new], on the prompt's device (as transformers' `generate`)."""
    new = torch.stack(list(stream(module, input_ids, max_new_tokens, sampling)), dim=1)  # one token at least
    return torch.cat([input_ids, new.to(input_ids.device)], dim=1)


def _checked_prompt(input_ids: torch.Tensor, spec: GenerationSpec, max_new_tokens: int) -> torch.Tensor:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.dtype.is_floating_point:
        raise KilnError("input_ids must be an integer tensor [batch, prompt tokens]", stage=STAGE)
    batch, prompt = input_ids.shape
    if batch != spec.batch:
        raise KilnError(
            f"input_ids has {batch} rows; the artifact generates {spec.batch} at once",
            stage=STAGE,
            hint=f"compile with --batch {batch}, or pass {spec.batch} rows",
        )
    if prompt < 1 or max_new_tokens < 1:
        raise KilnError(f"need a prompt of 1 token or more and max_new_tokens of 1 or more (got {prompt}, {max_new_tokens})", stage=STAGE)
    if prompt + max_new_tokens - 1 > spec.max_seq_len:
        raise KilnError(
            f"a prompt of {prompt} tokens and {max_new_tokens} new ones need a cache of {prompt + max_new_tokens - 1} "
            f"positions; the artifact's holds {spec.max_seq_len}",
            stage=STAGE,
            hint="compile with a larger --max-seq-len, or ask for fewer new tokens",
        )
    if bool((input_ids < 0).any()) or bool((input_ids >= spec.vocab).any()):
        raise KilnError(f"input_ids must be token ids from 0 to {spec.vocab - 1}", stage=STAGE)
    return input_ids.to(torch.int64)


def _sampled(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row from the logits, filtered by temperature, top-k and top-p as transformers does."""
    scores = logits.float() / sampling.temperature
    if sampling.top_k is not None:
        kth = torch.topk(scores, min(sampling.top_k, scores.shape[-1]), dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if sampling.top_p is not None:
        ordered, order = torch.sort(scores, descending=False, dim=-1)
        cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
        dropped = cumulative <= 1 - sampling.top_p
        dropped[:, -1] = False  # keep at least the most likely token
        scores = scores.masked_fill(dropped.scatter(1, order, dropped), float("-inf"))
    return torch.multinomial(scores.softmax(dim=-1), 1, generator=generator).squeeze(1)
