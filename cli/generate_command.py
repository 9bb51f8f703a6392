"""`kiln generate`: generate with an artifact compiled with `--generate`, printing tokens as they come."""

from __future__ import annotations

import time
from pathlib import Path

import click

from kiln.errors import KilnError

from .common import debug_option


@click.command("generate")
@click.argument("artifact", type=click.Path(path_type=Path))
@click.option("--ids", "id_rows", multiple=True, metavar="1,2,3", help="The prompt as token ids, comma-separated; one --ids per row of the batch.")
@click.option("--prompt", "prompts", multiple=True, metavar="TEXT", help="The prompt as text, through the tokenizer the model file names; one per row.")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=32, show_default=True, help="The most tokens to generate.")
@click.option("--sample", "do_sample", is_flag=True, help="Sample the next token (temperature, top-k, top-p) instead of greedy.")
@click.option("--temperature", type=float, default=1.0, show_default=True, help="With --sample: the logits are divided by it.")
@click.option("--top-k", type=click.IntRange(min=1), help="With --sample: only the k most likely tokens.")
@click.option("--top-p", type=click.FloatRange(min=0, max=1, min_open=True), help="With --sample: the most likely tokens up to this probability.")
@click.option("--seed", type=int, help="With --sample: the seed, for the same tokens again.")
@click.option("--device", help="cpu, cuda, cuda:1 [default: the artifact's own].")
@debug_option
def generate_command(
    artifact: Path,
    id_rows: tuple[str, ...],
    prompts: tuple[str, ...],
    max_new_tokens: int,
    do_sample: bool,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    seed: int | None,
    device: str | None,
) -> None:
    """Generate with ARTIFACT (compiled with `kiln compile MODEL --generate --max-seq-len N`).

    Prints the new tokens of each row as they come (ids, or text with --prompt; in groups of up to 8,
    as often as the loop checks for end-of-sequence), then the prefill and decode rates in tokens per
    second (rows included). Greedy unless --sample.

    \b
    Examples:
      kiln compile examples/llama/llama_124m.py --generate --max-seq-len 512 -o llama.vmfb
      kiln generate llama.vmfb --ids 1,15043,29892 --max-new-tokens 64
      kiln generate llama.vmfb --ids 1,2,3 --sample --temperature 0.8 --top-p 0.95 --seed 0
      kiln generate gpt2.vmfb --prompt "The kiln was" --max-new-tokens 40
    """
    import torch

    import kiln
    from kiln.runtime.generation import Sampling, spec_of, stream

    if bool(id_rows) == bool(prompts):
        raise KilnError("give the prompt either as --ids or as --prompt", stage="generate")
    module = kiln.load(artifact, device)
    spec = spec_of(module)
    tokenizer = _tokenizer(spec.tokenizer) if prompts else None
    rows = [tokenizer.encode(text) for text in prompts] if tokenizer is not None else [_ids(row) for row in id_rows]
    if len({len(row) for row in rows}) != 1:
        raise KilnError("every row's prompt must have the same number of tokens (kiln does not pad)", stage="generate")
    input_ids = torch.tensor(rows, dtype=torch.int64)
    sampling = Sampling(do_sample, temperature, top_k, top_p, seed)
    start = time.perf_counter()
    first = None
    count = 0
    for token in stream(module, input_ids, max_new_tokens, sampling):
        count += 1
        first = first or time.perf_counter()
        _show(token.tolist(), tokenizer, len(rows))
    end = time.perf_counter()
    click.echo()
    assert first is not None  # max_new_tokens >= 1
    prompt_tokens = input_ids.numel()
    prefill_s, decode_s = first - start, end - first
    line = f"prefill: {prompt_tokens} tokens in {prefill_s * 1e3:.1f} ms ({prompt_tokens / prefill_s:.0f} tok/s)"
    if count > 1:
        decoded = (count - 1) * len(rows)
        line += f"; decode: {decoded} tokens in {decode_s * 1e3:.1f} ms ({decoded / decode_s:.1f} tok/s)"
    click.echo(line, err=True)


def _ids(row: str) -> list[int]:
    try:
        return [int(item) for item in row.split(",") if item.strip()]
    except ValueError as exc:
        raise KilnError(f"--ids {row!r}: expected comma-separated token ids, e.g. 1,2,3", stage="generate") from exc


def _tokenizer(name: str | None):  # type: ignore[no-untyped-def]
    if name is None:
        raise KilnError(
            "the artifact records no tokenizer", stage="generate", hint="give --ids, or name one in the model file (`tokenizer = \"...\"`)"
        )
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name)
    except Exception as exc:  # not installed, not cached, not a tokenizer: all the user's to fix
        raise KilnError(
            f"--prompt needs the tokenizer {name!r}, which could not be loaded: {type(exc).__name__}: {exc}",
            stage="generate",
            hint="give --ids instead, or install the tokenizer",
        ) from exc


def _show(tokens: list[int], tokenizer, rows: int) -> None:  # type: ignore[no-untyped-def]
    """One step's tokens: ids (rows separated by ' | '), or the text of row 0 alone."""
    if tokenizer is not None and rows == 1:
        click.echo(tokenizer.decode(tokens), nl=False)
    else:
        click.echo(" ".join(str(token) for token in tokens) + (" | " if rows > 1 else " "), nl=False)
