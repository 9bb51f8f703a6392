"""What the real models' files share: building a transformers model from a config written out in the
file, its weights set by name (_weights.py), a wrapper that returns tensors, and the example inputs.

A model file imports this module and _weights.py from its own folder (it puts the folder on sys.path
first: the suite runs model files with runpy, `kiln compile` with importlib). Files whose names start
with "_" are not model files: the suite's `find_cases` skips them.

Sizes: "full" is the published configuration (each file names the checkpoint whose config.json it
copies, and says where it departs from it, e.g. fewer layers); "tiny" is the CI slice
(tests/test_real_models.py): the same code paths (GQA, rotary scaling, shifted windows, relative
position bias, depthwise convolutions, squeeze-excitation, ...) at widths of 16-64 and one or two
layers, with batch 2 and short inputs, compiled for llvm-cpu and checked against eager in f32.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import Any

import torch
from _weights import normal_input, set_weights, token_input
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
SIZES = ("full", "tiny")
TINY_BATCH = 2  # batch 2 in the CI slice: some bugs show only past batch 1


def missing(modules: Sequence[str]) -> list[str]:
    """The modules of a model file's REQUIRES (beyond torch and transformers) that are not installed."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


class Outputs(nn.Module):
    """A transformers model called with its inputs by name (and `fixed` keyword arguments), returning
    the named fields of its output as tensors: kiln artifacts return tensors, not ModelOutputs."""

    def __init__(self, model: nn.Module, inputs: Sequence[str], fields: Sequence[str], **fixed: Any) -> None:
        super().__init__()
        self.model, self.inputs, self.fields, self.fixed = model, tuple(inputs), tuple(fields), fixed

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        output = self.model(**dict(zip(self.inputs, inputs, strict=True)), **self.fixed)
        values = tuple(output[field] for field in self.fields)
        return values[0] if len(values) == 1 else values


def config(config_class: str, settings: dict[str, Any]) -> Any:
    """A transformers config object of `config_class` from the settings written out in a model file."""
    transformers = importlib.import_module("transformers")
    return getattr(transformers, config_class)(**settings)


def build(
    config_class: str,
    model_class: str,
    settings: dict[str, Any],
    *,
    fan_in: bool = False,
    std: float | None = None,
) -> nn.Module:
    """`model_class` (a name in transformers, or a path below it) built from a config of `config_class`, eval mode, float32, every weight set by name.
    `std`: the normal's standard deviation for weights (default: the config's initializer_range, or
    init_std, or 0.02); `fan_in`: He's sqrt(2 / fan_in) per convolution and matrix instead (CNNs)."""
    module, _, name = f"transformers.{model_class}".rpartition(".")  # "WhisperEncoder" or "models.whisper.modeling_whisper.WhisperEncoder"
    made = config(config_class, settings)
    model = getattr(importlib.import_module(module), name)(made)
    if std is None:
        std = getattr(made, "initializer_range", None) or getattr(made, "init_std", None) or 0.02
    return set_weights(model, std=std, fan_in=fan_in).eval()


def finish(model: nn.Module, dtype: str) -> nn.Module:
    """The model in the case's dtype (f32 weights rounded to bf16: the same bits everywhere)."""
    return model.to(DTYPES[dtype]).eval()


def batch_of(batches: dict[str, Any], batch: str, size: str) -> Any:
    """The case's batch point: BATCHES[batch] at full size, TINY_BATCH in the CI slice."""
    if size not in SIZES:
        raise ValueError(f"size is one of {SIZES}, not {size!r}")
    return batches[batch] if size == "full" else TINY_BATCH


def pixels(name: str, batch: int, image: int, dtype: str, channels: int = 3) -> torch.Tensor:
    return normal_input(f"{name}.pixels", (batch, channels, image, image)).to(DTYPES[dtype])


def features(name: str, shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    return normal_input(f"{name}.features", shape).to(DTYPES[dtype])


def tokens(name: str, batch: int, sequence: int, vocab: int, last: int | None = None) -> torch.Tensor:
    """Token ids in [0, vocab); `last`: the id every sequence ends with (an end-of-text token)."""
    ids = token_input(f"{name}.tokens", (batch, sequence), vocab)
    if last is not None:
        ids[:, -1] = last
    return ids


def padding_mask(batch: int, sequence: int) -> torch.Tensor:
    """An attention mask as a served batch has one: every sequence but the first ends in padding (up
    to a quarter of the length, longer for later ones); batch 1 is unpadded."""
    mask = torch.ones(batch, sequence, dtype=torch.int64)
    for row in range(1, batch):
        mask[row, sequence - (row * sequence // 4) // max(batch - 1, 1) - 1 :] = 0
    return mask


PREFILL = {"latency": (1, 512), "throughput": (8, 512)}  # (batch, tokens) of a decoder LM's prefill
TINY_TOKENS = 16


def causal_lm(config_class: str, model_class: str, settings: dict[str, Any], size: str, dtype: str) -> nn.Module:
    """A decoder LM in prefill: token ids in, logits out, no KV cache returned. At full size only the
    last position's logits, as generation's prefill computes them (`logits_to_keep=1`); in the CI
    slice every position's, so that the check sees every query's attention."""
    model = build(config_class, model_class, settings)
    return finish(Outputs(model, ["input_ids"], ["logits"], use_cache=False, logits_to_keep=1 if size == "full" else 0), dtype)


def prefill_tokens(name: str, batch: str, size: str, vocab: int) -> tuple[torch.Tensor]:
    """A prefill's token ids: PREFILL[batch] at full size, TINY_BATCH x TINY_TOKENS in the CI slice."""
    if size == "full":
        batch_size, sequence = PREFILL[batch]
    else:
        batch_size, sequence = batch_of(PREFILL, batch, size), TINY_TOKENS
    return (tokens(name, batch_size, sequence, vocab),)
