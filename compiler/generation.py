"""`--generate`: a causal LM compiled as two functions, `prefill` and `decode`, over a static KV cache.

Why this shape: what users measure of a decoder is tokens per second while generating, and a decode step
is small (one token per row) and repeated hundreds of times. So the cache lives in the artifact as state
(mutable globals on the device: no cache crosses the boundary per token), both functions share the
weights, and each returns the greedy next token beside the logits, so the next `decode` call takes the
previous call's result as it is.

The cache is kiln's own transformers `Cache` over buffers that kiln adds to the model (`kiln_kv.*`),
so the model's own parameter names, and so its checkpoint, are unchanged. Each function writes its
tokens' keys and values at explicit positions (an in-place update of the state; `_written` says how) and
attends over the whole cache under an additive mask that hides every position after the token's own:
a later call never reads what an earlier, longer generation left behind, so nothing is reset. The
position where the next token goes is not state but a result, which the next `decode` takes back
(on the device: no copy): the only state is the cache, and it is only ever updated in place.

`prefill` takes the prompt in chunks of a fixed size (`--prefill-chunk`), padded, so that its shapes
are static; the runtime feeds a prompt through it (runtime/generation.py, `prefill`).

The cache's zeros are stored in the artifact as they are. A splat of zeros would save the bytes, but
IREE 3.13 then treats a global that is only updated in place as the constant it starts as: its loads
fold to zeros and decode never sees the prompt (tests/test_generation.py fails that way).

Scope: transformers decoder LMs whose attention layers call `past_key_values.update(...)` with keys
and values of `num_key_value_heads` heads (Llama, Mistral, Qwen, Phi-3, GPT-2, ...). A model with
sliding-window layers narrower than the cache is refused (the mask here is full causal); rows of a
batch share one prompt length (no padding).
"""

from __future__ import annotations

from dataclasses import replace
from types import MethodType
from typing import Any

import torch
from torch import nn

from kiln.errors import KilnError
from kiln.runtime.manifest import GenerationSpec

from .model_file import EntryPoint, GenerationOptions, ModelSpec

STAGE = "load"
CACHE = "kiln_kv"  # the submodule kiln adds to the model: its buffers are the artifact's state
GREEDY_BLOCK = 256  # logits a block of the greedy argmax (_greedy): 128,256 = 501 blocks
GROUPED_ATTENTION = "kiln_grouped_sdpa"  # the attention the functions trace with (_grouped_attention)


class _KVBuffers(nn.Module):
    """One layer's keys and values, [batch, kv heads, max_seq_len, head dim], as buffers (state)."""

    def __init__(self, shape: tuple[int, int, int, int], dtype: torch.dtype) -> None:
        super().__init__()
        self.register_buffer("keys", torch.zeros(shape, dtype=dtype))
        self.register_buffer("values", torch.zeros(shape, dtype=dtype))


class _KVCache(nn.Module):
    """Every layer's buffers."""

    def __init__(self, layers: int, shape: tuple[int, int, int, int], dtype: torch.dtype) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_KVBuffers(shape, dtype) for _ in range(layers))


def _positioned_cache(kv: _KVCache, positions: torch.Tensor) -> Any:
    """A transformers Cache whose layers write this call's keys and values at `positions`.

    Built per call, reading the buffers through the module, so that torch.export sees buffer
    mutations (not constants)."""
    from transformers.cache_utils import Cache, CacheLayerMixin

    class PositionedLayer(CacheLayerMixin):
        is_compileable = True
        is_sliding = False

        def __init__(self, buffers: _KVBuffers) -> None:
            super().__init__()
            self.buffers = buffers
            self.is_initialized = True

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            pass

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            keys, values = self.buffers.keys, self.buffers.values
            if key_states.shape[1] != keys.shape[1] or key_states.shape[-1] != keys.shape[-1]:
                raise KilnError(
                    f"--generate: an attention layer caches keys of {key_states.shape[1]} heads of "
                    f"{key_states.shape[-1]}, but the model's config gives {keys.shape[1]} of {keys.shape[-1]}",
                    stage="exported",
                    hint="kiln sizes the cache from num_key_value_heads and head_dim of the model's config",
                )
            keys.copy_(_written(keys, key_states, positions))
            values.copy_(_written(values, value_states, positions))
            return keys, values

        def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
            return keys_length(self), 0

        def get_seq_length(self) -> int:
            return 0

        def get_max_length(self) -> int:
            return keys_length(self)

    def keys_length(layer: PositionedLayer) -> int:
        return int(layer.buffers.keys.shape[2])

    return Cache(layers=[PositionedLayer(buffers) for buffers in kv.layers])


def _written(cache: torch.Tensor, new: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """`cache` [batch, heads, max_seq_len, dim] with `new` [batch, heads, tokens, dim] at `positions`
    (contiguous, ascending) along the sequence: a gather and a select over the whole cache.

    Not `index_copy_`: it becomes a scatter with a position from the device, which IREE 3.13's CUDA
    code writes to wrong places (a 16-slot cache written at slot 3 also changed slot 0; the next call's
    write at slot 7 also overwrote slot 3), so decode read garbage or faulted on the H200. The gather
    and select are elementwise on every target; they cost one more read and write of the cache per
    call, which attention reads whole anyway."""
    tokens = new.shape[2]
    offsets = torch.arange(cache.shape[2]) - positions[0]
    inside = (offsets >= 0) & (offsets < tokens)
    spread = new.to(cache.dtype).index_select(2, offsets.clamp(0, tokens - 1))
    return torch.where(inside[:, None], spread, cache)


def _step(model: nn.Module, input_ids: torch.Tensor, positions: torch.Tensor, last: torch.Tensor | int) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward over `input_ids` at `positions`: the greedy next token and the logits of each row's
    token at index `last` (a tensor [1]), or of its last token (1)."""
    kv: _KVCache = getattr(model, CACHE)
    batch, tokens = input_ids.shape
    cache_length = kv.layers[0].keys.shape[2]
    visible = torch.arange(cache_length)[None, :] <= positions[:, None]  # [tokens, cache]
    dtype = kv.layers[0].keys.dtype
    mask = torch.zeros((), dtype=dtype).masked_fill(~visible, torch.finfo(dtype).min)
    output = type(model).forward(  # the class's forward: export shadows the instance's with this method
        model,
        input_ids=input_ids,
        position_ids=positions[None, :].expand(batch, tokens),
        attention_mask=mask[None, None].expand(batch, 1, tokens, cache_length),
        past_key_values=_positioned_cache(kv, positions),
        use_cache=True,
        logits_to_keep=last,  # an int keeps that many last tokens; a tensor, the tokens at those indices
    )
    logits = output.logits[:, -1, :]
    return _greedy(logits), logits


def _grouped_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: torch.Tensor | None, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, except that one query token attends over the key/value heads
    themselves (GQA): the query heads of a group become rows of one head, as transformers' own
    `pack_gqa` does outside torch.export, instead of the keys and values repeated to every query head
    (`repeat_kv`: two copies of the cache's length a layer, and their dispatches, in every decode step)."""
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, tokens, _ = query.shape
    shared_mask = attention_mask is None or attention_mask.shape[1] == 1
    if groups == 1 or tokens != 1 or not shared_mask or kwargs.get("dropout", 0.0) or kwargs.get("position_bias") is not None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, *args, **kwargs)
    rows = query.reshape(batch, heads // groups, groups, query.shape[-1])
    out = nn.functional.scaled_dot_product_attention(rows, key, value, attn_mask=attention_mask, scale=kwargs.get("scaling"))
    return out.reshape(batch, heads, 1, value.shape[-1]).transpose(1, 2).contiguous(), None


def _greedy(logits: torch.Tensor) -> torch.Tensor:
    """Each row's first index of its largest logit, as `argmax`, in two steps: within blocks of
    GREEDY_BLOCK logits, then across the blocks. IREE 3.13's CUDA code reduces one row's argmax in
    one thread: over Llama's 128,256 entries that took 2.8 ms a decode step on the H200 (and 4.9 ms
    written as a max and a min, which IREE fused back into one such reduction), as long as all 16
    layers' weights take to read. Blocks give it a reduction per block, in parallel."""
    batch, vocab = logits.shape
    blocks = -(-vocab // GREEDY_BLOCK)
    padded = nn.functional.pad(logits, (0, blocks * GREEDY_BLOCK - vocab), value=float("-inf")).view(batch, blocks, GREEDY_BLOCK)
    best_block = padded.amax(-1).argmax(-1)  # the first block holding the largest logit
    within = padded.argmax(-1).gather(1, best_block[:, None])[:, 0]
    return best_block * GREEDY_BLOCK + within


def _prefill(model: nn.Module, input_ids: torch.Tensor, start: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One chunk of the prompt, [batch, chunk] at positions `start` [1] on, of which the first `count`
    [1] tokens are the prompt's (the rest is padding): their keys and values cached, the token chosen
    after the last of them; and the position [1] where that token goes.

    The chunk's padding is cached too, at the positions after the prompt, where nothing reads it:
    each decode step writes its own position before attending up to it."""
    positions = start + torch.arange(input_ids.shape[1])
    token, logits = _step(model, input_ids, positions, count - 1)
    return token, logits, start + count


def _decode(model: nn.Module, token: torch.Tensor, position: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The last chosen tokens [batch] at `position` [1]: cached, the next token chosen; and the next position."""
    token, logits = _step(model, token[:, None], position, 1)
    return token, logits, position + 1


def for_generation(spec: ModelSpec, options: GenerationOptions) -> ModelSpec:
    """`spec`'s model as the `prefill` and `decode` functions of one artifact, sharing weights and cache."""
    where = str(spec.source) if spec.source is not None else "kiln.compile"
    if len(spec.entries) != 1:
        raise KilnError(f"{where}: --generate compiles one causal LM; the file defines {len(spec.entries)} entry points", stage=STAGE)
    model = spec.module
    config = _config_of(model, where)
    if options.max_seq_len < 2 or options.batch < 1:
        raise KilnError(
            f"--generate needs --max-seq-len of 2 or more and --batch of 1 or more (got {options.max_seq_len}, {options.batch})",
            stage="options",
        )
    _refuse_sliding_window(config, options.max_seq_len, where)
    layers = config.num_hidden_layers
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    shape = (options.batch, kv_heads, options.max_seq_len, head_dim)
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    model.add_module(CACHE, _KVCache(layers, shape, dtype))
    if getattr(config, "_attn_implementation", None) == "sdpa":
        from transformers import AttentionInterface  # here: every compile imports this module, few generate

        AttentionInterface.register(GROUPED_ATTENTION, _grouped_attention)
        model.set_attn_implementation(GROUPED_ATTENTION)
    model.kiln_prefill = MethodType(_prefill, model)
    model.kiln_decode = MethodType(_decode, model)
    chunk = min(options.prefill_chunk, options.max_seq_len)
    entries = (
        EntryPoint("prefill", model, (torch.zeros((options.batch, chunk), dtype=torch.int64), torch.tensor([0]), torch.tensor([chunk])), method="kiln_prefill"),
        EntryPoint(
            "decode", model, (torch.zeros(options.batch, dtype=torch.int64), torch.ones(1, dtype=torch.int64)), method="kiln_decode"
        ),
    )
    generation = GenerationSpec(
        max_seq_len=options.max_seq_len,
        batch=options.batch,
        vocab=int(config.vocab_size),
        prefill_chunk=chunk,
        eos_token_ids=_eos_ids(model, config),
        tokenizer=spec.tokenizer,
    )
    return replace(spec, entries=entries, generation=generation)


def _config_of(model: nn.Module, where: str) -> Any:
    config = getattr(model, "config", None)
    needed = ("num_hidden_layers", "num_attention_heads", "hidden_size", "vocab_size")
    if config is None or not all(hasattr(config, name) for name in needed) or not hasattr(model, "generate"):
        raise KilnError(
            f"{where}: --generate needs a transformers causal LM (a PreTrainedModel with `generate` and a config "
            f"giving {', '.join(needed)}); the model is a {type(model).__name__}",
            stage=STAGE,
        )
    return config


def _refuse_sliding_window(config: Any, max_seq_len: int, where: str) -> None:
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None) or ()
    sliding = any("sliding" in str(kind) for kind in layer_types) or (window is not None and not layer_types)
    if sliding and window is not None and window < max_seq_len:
        raise KilnError(
            f"{where}: the model attends over a sliding window of {window} tokens, shorter than --max-seq-len "
            f"{max_seq_len}; kiln's generation cache is full causal",
            stage="options",
            hint=f"compile with --max-seq-len {window} or less",
        )


def _eos_ids(model: nn.Module, config: Any) -> tuple[int, ...]:
    generation_config = getattr(model, "generation_config", None)
    value = getattr(generation_config, "eos_token_id", None)
    if value is None:
        value = getattr(config, "eos_token_id", None)
    if value is None:
        return ()
    return tuple(int(v) for v in (value if isinstance(value, list | tuple) else [value]))

