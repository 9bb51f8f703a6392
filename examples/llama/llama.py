"""Llama-shaped decoders from transformers' LlamaConfig, and checkpoints of random weights for them.

The model files beside this one (llama_124m.py, llama_1b.py, llama_7b.py) build the model without
its weights and name the checkpoint this script writes; nothing is downloaded:

    python examples/llama/llama.py 1b                      # writes examples/llama/checkpoints/1b/
    kiln compile examples/llama/llama_1b.py --timing       # never holds the 4.4 GB of weights

The checkpoint is safetensors files in transformers' names, written tensor by tensor from a seed
(each tensor's values depend only on the seed and its name), so any machine rebuilds the same
weights (benchmarks/large_models.py does, on the GPU machine) and the writer's memory stays under
SHARD_BYTES plus one tensor, even for 7B parameters.
"""

from __future__ import annotations

import argparse
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import LlamaConfig

HERE = Path(__file__).resolve().parent
CHECKPOINTS = HERE / "checkpoints"
SHARD_BYTES = 1 << 30
SEED = 0
VOCAB = 32000

# name -> (hidden, intermediate, layers, attention heads, key/value heads, tokens in the example input)
SHAPES: dict[str, tuple[int, int, int, int, int, int]] = {
    "tiny": (64, 128, 2, 4, 2, 16),  # for tests: 0.1M parameters besides the vocabulary
    "124m": (768, 2048, 12, 12, 12, 128),  # GPT-2 small's width and depth: 134M parameters
    "1b": (2048, 5632, 22, 32, 4, 128),  # TinyLlama-1.1B: 1.1B
    "7b": (4096, 11008, 32, 32, 32, 128),  # Llama-2-7B: 6.7B
    "3.2-1b": (2048, 8192, 16, 32, 8, 128),  # Llama-3.2-1B (untied head): 1.5B
    "3.1-8b": (4096, 14336, 32, 32, 8, 128),  # Llama-3.1-8B: 8.0B
}
VOCABS = {"3.2-1b": 128256, "3.1-8b": 128256}  # Llama 3's; the others take VOCAB


def config(size: str, vocab: int | None = None) -> LlamaConfig:
    from transformers import LlamaConfig

    vocab = vocab or VOCABS.get(size, VOCAB)
    hidden, intermediate, layers, heads, kv_heads, _ = SHAPES[size]
    result = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        vocab_size=vocab,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    result._attn_implementation = "sdpa"
    return result


def build(size: str, vocab: int | None = None) -> nn.Module:
    """The model, with transformers' parameter names; forward(input_ids) -> logits."""
    from transformers import LlamaForCausalLM

    class LlamaLogits(LlamaForCausalLM):
        """kiln artifacts return tensors, not a ModelOutput; no KV cache (a forward over a prompt)."""

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
            return super().forward(input_ids=input_ids, use_cache=False).logits

    return LlamaLogits(config(size, vocab)).eval()


def build_causal_lm(size: str, vocab: int | None = None) -> nn.Module:
    """The model as transformers has it, with `generate` and a KV cache: what `kiln compile --generate` takes."""
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM(config(size, vocab)).eval()


def prompt(size: str, vocab: int | None = None) -> tuple[torch.Tensor, ...]:
    tokens = SHAPES[size][-1]
    vocab = vocab or VOCABS.get(size, VOCAB)
    return (torch.randint(0, vocab, (1, tokens), generator=torch.Generator().manual_seed(SEED)),)


def random_weight(name: str, shape: torch.Size, seed: int = SEED) -> torch.Tensor:
    """One tensor's random values, in f32: norms are ones, the rest N(0, 0.02) as transformers
    initializes them; seeded by `seed` and the name alone, so tensors can be made in any order."""
    if name.endswith("norm.weight"):
        return torch.ones(shape)
    generator = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
    return torch.randn(shape, generator=generator) * 0.02


def write_checkpoint(model: nn.Module, directory: Path, dtype: torch.dtype = torch.float32, seed: int = SEED) -> list[Path]:
    """Random weights for `model` (its parameters may be on the meta device) as safetensors shards of
    about SHARD_BYTES, in transformers' file names; returns the files."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    shards = list(_shards(model, dtype))
    shapes = dict(model.named_parameters())
    files = []
    for index, names in enumerate(shards, start=1):
        tensors = {name: random_weight(name, shapes[name].shape, seed).to(dtype) for name in names}
        path = directory / f"model-{index:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, path, metadata={"format": "pt"})
        files.append(path)
        del tensors
    return files


def _shards(model: nn.Module, dtype: torch.dtype) -> Iterator[list[str]]:
    """Parameter names grouped into shards of at most SHARD_BYTES (or one larger tensor)."""
    element = torch.empty((), dtype=dtype).element_size()
    shard: list[str] = []
    size = 0
    for name, parameter in model.named_parameters():
        nbytes = parameter.numel() * element
        if shard and size + nbytes > SHARD_BYTES:
            yield shard
            shard, size = [], 0
        shard.append(name)
        size += nbytes
    if shard:
        yield shard


def main() -> None:
    parser = argparse.ArgumentParser(description="Write a random-weight checkpoint for a Llama-shaped model.")
    parser.add_argument("size", choices=sorted(SHAPES))
    parser.add_argument("-o", "--out", type=Path, help="[default: examples/llama/checkpoints/SIZE]")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    parser.add_argument("--seed", type=int, default=SEED)
    arguments = parser.parse_args()
    with torch.device("meta"):
        model = build(arguments.size)
    dtype = torch.bfloat16 if arguments.dtype == "bf16" else torch.float32
    files = write_checkpoint(model, arguments.out or CHECKPOINTS / arguments.size, dtype, arguments.seed)
    total = sum(file.stat().st_size for file in files)
    print(f"wrote {len(files)} files, {total / 2**30:.2f} GiB, under {files[0].parent}")


if __name__ == "__main__":
    main()
