"""LLM generation: kiln's prefill and decode against eager transformers and `torch.compile`, in one run.

Llama shapes (examples/llama: Llama-3.2-1B's and Llama-3.1-8B's) with random weights from a seed.
`compile` (here) writes the checkpoint, compiles `--generate` from it and drops the `.irpa`, so the
bundle is small enough to carry; `time` (on the device machine) makes random weights on the device,
writes them into the `.irpa` and keeps them in the transformers model, then times, in one process and
one run:

- eager: transformers' forward over its `StaticCache`, a Python loop of one-token steps (greedy);
- torch.compile of that step, default mode, and on CUDA `mode="reduce-overhead"` (CUDA graphs; the
  recipe of gpt-fast: `cudagraph_mark_step_begin()` before each step);
- kiln, last (a failing artifact costs no peer's numbers): `prefill` once per prompt (timed alone),
  then decode as users generate, through `kiln.runtime.generation.stream` (each step takes the previous
  step's token and position; the loop's end-of-sequence check included).

Each reports decode tokens/s (rows included) and the share of the bound that memory sets (every
weight read once per step, at the rate a device-to-device copy reaches in the same run), prefill
tokens/s, how many greedy tokens kiln's first row shares with eager's (bf16 drifts apart after
a while: the count is where), and the rel. L2 of kiln's prefill logits from eager's. A `--quantize`
case's archive is quantized here as the compile would (compiler/quantize.py); its peers run the bf16
model (eager only: the bf16 case has the compiled ones), and its bound counts the quantized bytes. benchmarks/README.md says how to run it on the device machine.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from kiln.runtime.manifest import QUANTIZE_SCHEMES

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / "examples" / "llama"
MODEL_FILES = {"3.2-1b": "llama3_1b.py", "3.1-8b": "llama3_8b.py"}
DTYPES = {"bf16": "bfloat16", "f32": "float32"}


def _llama() -> Any:
    sys.path.insert(0, str(LLAMA))
    import llama

    return llama


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Generation benchmark: compile here (`compile`), time on the device machine (`time`)."""


@main.command("compile")
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True, help="The bundle folder.")
@click.option("--size", "sizes", multiple=True, type=click.Choice(sorted(MODEL_FILES)), required=True)
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default="bf16", show_default=True)
@click.option("--target", default="cuda", show_default=True)
@click.option("--gpu-arch", default=None, help="e.g. sm_90")
@click.option("--cpu", default=None, help="llvm-cpu: the CPU, e.g. sapphirerapids")
@click.option("--max-seq-len", type=int, default=1024, show_default=True)
@click.option("--batch", "batches", multiple=True, type=int, default=(1,), show_default=True)
@click.option("--kernels", type=click.Choice(("on", "off")), default="on", show_default=True, help="kiln's own kernels (off: IREE's alone; the case's name says so).")
@click.option("--quantize", type=click.Choice(QUANTIZE_SCHEMES), help="Weight-only quantization (kiln compile --quantize; the case's name says so).")
def compile_command(
    out: Path, sizes: tuple[str, ...], dtype: str, target: str, gpu_arch: str | None, cpu: str | None, max_seq_len: int, batches: tuple[int, ...], kernels: str,
    quantize: str | None,
) -> None:
    """Compile each size (and batch) for generation from its checkpoint; keep the artifact, drop the weights."""
    import subprocess

    from kiln.compiler.driver import compile_file
    from kiln.compiler.model_file import GenerationOptions, ModelSource
    from kiln.compiler.options import CompileOptions

    out.mkdir(parents=True, exist_ok=True)
    cases = json.loads((out / "cases.json").read_text()) if (out / "cases.json").exists() else []
    for size in sizes:
        checkpoint = LLAMA / "checkpoints" / size
        if not checkpoint.is_dir():
            subprocess.run([sys.executable, str(LLAMA / "llama.py"), size, "--dtype", "bf16"], check=True)
        for batch in batches:
            name = f"{size}-{dtype}-b{batch}" + (f"-{quantize}" if quantize else "") + ("-iree" if kernels == "off" else "")
            options = CompileOptions(target=target, kernels=kernels, **({"gpu_arch": gpu_arch} if gpu_arch else {}), **({"cpu": cpu} if cpu else {}))
            source = ModelSource(
                LLAMA / MODEL_FILES[size], precision=dtype if dtype != "f32" else None, generation=GenerationOptions(max_seq_len, batch), quantize=quantize
            )
            start = time.perf_counter()
            result = compile_file(source, options, out / f"{name}.vmfb", progress=lambda line: print(line, flush=True))
            seconds = time.perf_counter() - start
            result.path.with_suffix(".irpa").unlink()  # the weights: `time` makes them again from the seed
            with result.path.open("rb") as plain, gzip.open(result.path.with_suffix(".vmfb.gz"), "wb") as packed:
                shutil.copyfileobj(plain, packed)  # the cache's zeros are most of the .vmfb: they travel packed
            result.path.unlink()
            shutil.rmtree(result.path.with_suffix(".stages"), ignore_errors=True)
            cases = [case for case in cases if case["name"] != name]
            case = {"name": name, "size": size, "dtype": dtype, "batch": batch, "max_seq_len": max_seq_len, "target": target, "compile_s": round(seconds, 1)}
            cases.append({**case, **({"quantize": quantize} if quantize else {})})
            print(f"{name}: compiled in {seconds:.0f} s", flush=True)
    (out / "cases.json").write_text(json.dumps(cases, indent=2) + "\n")


@main.command("time")
@click.argument("bundle", type=click.Path(path_type=Path, exists=True))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="The results (JSON).")
@click.option("--only", multiple=True, help="Case names to time [default: all].")
@click.option("--prompt", "prompt_tokens", type=int, default=128, show_default=True)
@click.option("--new", "new_tokens", type=int, default=256, show_default=True)
@click.option("--peers/--no-peers", default=True, show_default=True, help="Also time eager and torch.compile.")
@click.option("--profile", is_flag=True, help="CUDA: also profile kiln's decode, kernel by kernel (torch.profiler), into the row and printed.")
@click.option("--work-dir", type=click.Path(path_type=Path), default=Path("/tmp/kiln-generation"), show_default=True)
def time_command(bundle: Path, output: Path, only: tuple[str, ...], prompt_tokens: int, new_tokens: int, peers: bool, profile: bool, work_dir: Path) -> None:
    """Time each case of BUNDLE against its peers, in this process; write the rows as they come."""
    import torch

    import kiln

    cases = [case for case in json.loads((bundle / "cases.json").read_text()) if not only or case["name"] in only]
    device = "cuda" if any(case["target"] == "cuda" for case in cases) else "cpu"
    rows: list[dict[str, Any]] = []
    report = {"machine": _machine(device), "copy_gb_s": _copy_rate(device), "rows": rows}
    work_dir.mkdir(parents=True, exist_ok=True)
    for case in cases:
        row: dict[str, Any] = {**case, "prompt": prompt_tokens, "new": new_tokens}
        rows.append(row)
        try:
            dtype = getattr(torch, DTYPES[case["dtype"]])
            model = _model(case["size"], dtype, device)
            artifact = work_dir / f"{case['name']}.vmfb"
            shutil.copy(bundle / f"{case['name']}.json", artifact.with_suffix(".json"))
            with gzip.open(bundle / f"{case['name']}.vmfb.gz", "rb") as packed, artifact.open("wb") as plain:
                shutil.copyfileobj(packed, plain)
            stored = _quantized(model, case.get("quantize"))
            row["weight_bytes"] = _write_archive(stored, artifact.with_suffix(".irpa"))
            ids = torch.randint(0, model.config.vocab_size, (case["batch"], prompt_tokens), generator=torch.Generator().manual_seed(0)).to(device)
            module = kiln.load(artifact, verify_weights=False)
            if peers:  # first: a failing artifact must not cost the peers' numbers
                eager_ids = _measured(row, "eager", _time_transformers(model, ids, new_tokens, case["max_seq_len"], None), report, output)
                # a quantized case's peers run the bf16 model: its own bf16 case has their compiled times
                for mode in () if "quantize" in case else ("default", "reduce-overhead") if device == "cuda" else ("default",):
                    _measured(row, f"compile-{mode}", _time_transformers(model, ids, new_tokens, case["max_seq_len"], mode), report, output)
            kiln_ids = _measured(row, "kiln", _time_kiln(module, ids, new_tokens), report, output)
            if profile and device == "cuda":
                row["kiln_decode_kernels"] = _decode_kernels(module, ids)
            if peers:
                row["agree"] = _agreement(kiln_ids, eager_ids)
            row["logits_rel_l2"] = _logits_error(module, model, ids)
            if stored is not model:  # the scheme's own error: eager with the same quantized weights
                row["eager_quantized_logits_rel_l2"] = _logits_error(None, model, ids, stored)
            del stored
            del module, model
            artifact.with_suffix(".irpa").unlink()
        except Exception as exc:  # one case's failure is a row, not the end of the run
            row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        output.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(row), flush=True)


def _measured(row: dict[str, Any], key: str, rates: dict[str, Any], report: dict[str, Any], output: Path) -> list[int]:
    """Record one way's rates in its row (and the report on disk, in case a later one runs out of time);
    returns its first row's ids."""
    ids = rates.pop("ids")
    rates["bound_share"] = round(rates["decode_tok_s"] / row["batch"] * row["weight_bytes"] / (report["copy_gb_s"] * 1e9), 3)
    row[key] = rates
    output.write_text(json.dumps(report, indent=2) + "\n")
    return ids


def _model(size: str, dtype: Any, device: str) -> Any:
    """The transformers model of `size` with random weights made on `device` from one seed: the
    `.irpa` is written from these tensors, so kiln and its peers run the same weights."""
    import torch

    from kiln.compiler.checkpoint import meta_parameters

    with meta_parameters():  # parameters on the meta device, buffers (rotary frequencies) real
        model = _llama().build_causal_lm(size)
    generator = torch.Generator(device=device).manual_seed(0)
    for name, parameter in list(model.named_parameters()):
        owner, _, leaf = name.rpartition(".")
        if name.endswith("norm.weight"):
            value = torch.ones(parameter.shape, dtype=dtype, device=device)
        else:  # N(0, 0.02), as transformers initializes them
            value = torch.randn(parameter.shape, generator=generator, device=device).mul_(0.02).to(dtype)
        setattr(model.get_submodule(owner), leaf, torch.nn.Parameter(value, requires_grad=False))
    return model.to(device=device, dtype=dtype).eval()


def _quantized(model: Any, quantize: str | None) -> Any:
    """`model`, or a copy with its Linear layers' weights quantized as `--quantize` does (compiler/quantize.py, on the device)."""
    import copy

    from kiln.compiler.quantize import Scheme, quantize_module

    if quantize is None:
        return model
    quantized = copy.deepcopy(model)
    quantize_module(quantized, Scheme.parse(quantize))
    return quantized


def _write_archive(model: Any, path: Path) -> int:
    """The `.irpa` the compile wrote (and `compile` dropped): every parameter under its name.
    Returns its bytes: what a decode step reads (the bound's weight bytes)."""
    import torch

    from kiln.compiler.parameter_archive import ArchiveEntry, write_parameter_archive

    def writer(tensor: Any) -> Callable[[Any], None]:
        return lambda file: file.write(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())

    entries = [ArchiveEntry(name, p.numel() * p.element_size(), writer(p)) for name, p in model.named_parameters()]
    write_parameter_archive(path, entries)
    return sum(entry.nbytes for entry in entries)


def _synchronize(device: Any) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _time_kiln(module: Any, ids: Any, new_tokens: int) -> dict[str, Any]:
    """Prefill (best of 3) and a greedy decode of `new_tokens - 1` steps (after one warm-up generation)."""
    from kiln.runtime.generation import prefill, stream

    stage = "prefill"  # warm-up, and a failure that names the function
    try:
        token, _, position = prefill(module, ids)
        _synchronize(ids.device)
        stage = "decode"
        module.decode(token, position)
        _synchronize(ids.device)
    except Exception as exc:
        raise RuntimeError(f"kiln's {stage}: {exc}") from exc
    module.generate(ids, 8)  # first calls pick executors and allocate
    prefill_s = []
    for _ in range(3):
        start = time.perf_counter()
        token, _, position = prefill(module, ids)
        _synchronize(ids.device)
        prefill_s.append(time.perf_counter() - start)
    tokens: list[Any] = []  # decode timed as users generate: from the prompt's token to the last
    for token in stream(module, ids, new_tokens):
        if not tokens:
            _synchronize(ids.device)
            start = time.perf_counter()
        tokens.append(token)
    _synchronize(ids.device)
    decode = time.perf_counter() - start
    return _rates(ids, min(prefill_s), decode, len(tokens), tokens)  # fewer where every row ended


def _decode_kernels(module: Any, ids: Any, top: int = 20) -> list[dict[str, Any]]:
    """kiln's decode step kernel by kernel (CUPTI through torch.profiler): microseconds a step, most first."""
    from dispatch_profile import profile_on_cuda

    from kiln.runtime.generation import prefill

    token, _, position = prefill(module, ids)
    profile = profile_on_cuda(module.decode, (token, position), seconds=1.0)
    print(f"kiln decode: {profile['call_ms']:.3f} ms a step", flush=True)
    kernels = []
    for group in profile["dispatches"][:top]:
        kernel = {"name": group["name"], "per_step": group["count"] // profile["calls"], "us": round(group["total_ns"] / profile["calls"] / 1e3, 1)}
        print(f"  {kernel['us']:9.1f} us x{kernel['per_step']:<4} {kernel['name']}", flush=True)
        kernels.append(kernel)
    return kernels


def _time_transformers(model: Any, ids: Any, new_tokens: int, max_seq_len: int, mode: str | None) -> dict[str, Any]:
    """transformers' forward over a StaticCache: prefill eagerly, then one-token steps (compiled with `mode`)."""
    import torch
    from transformers import StaticCache

    def step(token: Any, cache: Any) -> Any:
        return model(input_ids=token, past_key_values=cache, use_cache=True).logits[:, -1].argmax(-1, keepdim=True)

    compiled = torch.compile(step, mode=mode) if mode is not None else step
    result: dict[str, Any] = {}
    for attempt in range(2):  # the first run compiles and warms up; the second is timed
        cache = StaticCache(config=model.config, max_cache_len=max_seq_len)
        with torch.no_grad():
            _synchronize(ids.device)
            start = time.perf_counter()
            token = step(ids, cache)
            _synchronize(ids.device)
            prefill = time.perf_counter() - start
            tokens = [token[:, 0]]
            start = time.perf_counter()
            for _ in range(new_tokens - 1 if attempt else 8):
                if mode == "reduce-overhead":
                    torch.compiler.cudagraph_mark_step_begin()
                token = compiled(token, cache).clone()
                tokens.append(token[:, 0])
            _synchronize(ids.device)
            decode = time.perf_counter() - start
        if attempt:
            result = _rates(ids, prefill, decode, new_tokens, tokens)
    return result


def _rates(ids: Any, prefill_s: float, decode_s: float, new_tokens: int, tokens: list[Any]) -> dict[str, Any]:
    import torch

    batch, prompt = ids.shape
    return {
        "prefill_ms": round(prefill_s * 1e3, 2),
        "prefill_tok_s": round(batch * prompt / prefill_s, 1),
        "decode_ms_per_step": round(decode_s / (new_tokens - 1) * 1e3, 3),
        "decode_tok_s": round(batch * (new_tokens - 1) / decode_s, 1),
        "ids": torch.stack(tokens, dim=1)[0].tolist(),
    }


def _logits_error(module: Any, model: Any, ids: Any, eager: Any = None) -> float:
    """rel. L2 of kiln's prefill logits (the prompt's last position; or, given, `eager`'s) from eager's
    in the model's dtype (unquantized): the accuracy a quantized case trades, beside a bf16 case's own."""
    import torch

    from kiln.runtime.generation import prefill

    with torch.no_grad():
        logits = prefill(module, ids)[1] if eager is None else eager(ids).logits[:, -1]
        expected = model(ids).logits[:, -1].float()
    return round(((logits.float() - expected).norm() / expected.norm()).item(), 5)


def _agreement(mine: list[int], theirs: list[int]) -> int:
    """How many leading greedy tokens two runs share."""
    return next((index for index, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), min(len(mine), len(theirs)))


def _copy_rate(device: str) -> float:
    """GB/s of a 1 GiB device-to-device copy (read and write counted once each): the bandwidth bound's rate."""
    import torch

    source = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(10):
        target.copy_(source)
    _synchronize(device)
    return round(2 * 10 * source.numel() / (time.perf_counter() - start) / 1e9, 1)


def _machine(device: str) -> dict[str, Any]:
    import os
    import platform

    import torch
    import transformers

    machine = {"cpu": platform.processor(), "cores": os.cpu_count(), "torch": torch.__version__, "transformers": transformers.__version__}
    if device == "cuda":
        machine["gpu"] = torch.cuda.get_device_name()
    return machine


if __name__ == "__main__":
    main()
