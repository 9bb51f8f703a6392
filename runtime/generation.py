"""Generating with an artifact compiled with `--generate`: the loop over its `prefill` and `decode`.

Why it lives in the runtime: a deployment generates with `kiln.runtime` alone. The loop keeps every
token on the artifact's device: `decode` takes the tensors the previous call returned (the greedy
token, or the one sampled here from the logits with torch on that device, and the position), so a
step copies nothing across the boundary; only the check for end-of-sequence, once a window of
tokens (`stream`), and the caller's reading of the ids wait on it.
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
EOS_WINDOW = 8  # tokens between the host's reads of which rows have ended (stream)


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

    Stops after `max_new_tokens`, or once every row has chosen an end-of-sequence token; a row that
    ended before the others goes on with an end-of-sequence token, as transformers pads it. Whether
    rows ended is read on the host once every EOS_WINDOW tokens (the first token at once), not after
    every step: reading it waits on the device, and the torch ops that track it ran before each
    synchronous decode call (0.15 ms a step of Llama-3.2-1B's 1.7 on the H200). Tokens therefore come
    in groups of up to EOS_WINDOW, each as the device chose it; the decode steps run past the end by
    less than a window, and their tokens are dropped."""
    spec = spec_of(module)
    ids = _checked_prompt(input_ids, spec, max_new_tokens)
    sampling.check()
    ids = ids.to(module.boundary.home)
    generator = None
    if sampling.do_sample:
        generator = torch.Generator(device=ids.device)
        generator.manual_seed(sampling.seed if sampling.seed is not None else torch.seed())
    decode = module.functions[spec.decode]
    ends = _Ends(torch.tensor(spec.eos_token_ids, dtype=torch.int64, device=ids.device), spec.batch)
    greedy, logits, position = _prefill_chunks(module, spec, ids)
    chosen: list[torch.Tensor] = []
    for step in range(max_new_tokens):
        token = _sampled(logits, sampling, generator) if sampling.do_sample else greedy
        chosen.append(token)
        last = step + 1 == max_new_tokens
        if last or step % EOS_WINDOW == 0:  # the first token, then every EOS_WINDOW
            kept, ended = ends.through(chosen)
            yield from kept
            if ended:
                return
            chosen = []
        if not last:  # a row that ended goes on from its own token: rows do not read each other
            greedy, logits, position = decode(token, position)


class _Ends:
    """Which rows have chosen an end-of-sequence token, over the windows of tokens `stream` hands it."""

    def __init__(self, eos: torch.Tensor, batch: int) -> None:
        self.eos = eos
        self.ended = torch.zeros(batch, dtype=torch.bool, device=eos.device)

    def through(self, tokens: list[torch.Tensor]) -> tuple[list[torch.Tensor], bool]:
        """`tokens` (one [batch] tensor a step), each row's tokens after its end replaced by an
        end-of-sequence token, up to the step where every row has ended; and whether they all have."""
        if not self.eos.numel():
            return tokens, False
        steps = torch.stack(tokens)  # [window, batch]
        ended_by = torch.cummax(torch.isin(steps, self.eos).int(), dim=0).values.bool() | self.ended  # through each step
        before = torch.cat([self.ended[None], ended_by[:-1]])  # before each step
        steps = torch.where(before, self.eos[0], steps)
        self.ended = ended_by[-1]
        done = ended_by.all(dim=1).tolist()  # the one wait on the device a window
        count = done.index(True) + 1 if True in done else len(tokens)
        return list(steps[:count].unbind(0)), True in done


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
