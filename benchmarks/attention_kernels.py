"""kiln's attention kernel on a GPU: each configuration worth trying, on the suite's attention shapes.

Three steps, the middle one where the GPU is (which has no compiler):

    # here: one small artifact per (shape, dtype, configuration), and IREE's own code for each shape
    python benchmarks/attention_kernels.py compile -o .device-carry/attention
    # there, from the repository root, with kiln.runtime importable:
    python3 benchmarks/attention_kernels.py time .device-carry/attention -o $OUT/attention-h100.json
    # here again: the fastest correct configuration per shape into targets/cuda/kernels/measured.json,
    # and benchmarks/ATTENTION.md, the table of every shape against eager PyTorch
    python benchmarks/attention_kernels.py record benchmarks/results/attention-h100.json

Each artifact is one `scaled_dot_product_attention` with the transposes around it that attention
code writes, compiled for cuda on Hopper (sm_90a) as `kiln compile` would, but for the configuration
given. `time` checks every result against float64 attention on the GPU (eager PyTorch in the same
dtype is checked the same way: its error is the bar) and times kiln's call and eager PyTorch's.
"""

from __future__ import annotations

import json
import statistics
import sys
from functools import partial
from pathlib import Path

import click
import torch
from torch import nn
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "compiler" / "kernels" / "measured.json"
TABLE = ROOT / "benchmarks" / "ATTENTION.md"
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
# The suite's attention at its large batch: GPT-2 block (causal, heads split from [batch, seq, ...]),
# transformer encoder (nn.MultiheadAttention: [batch, heads, seq, dim] as SDPA takes it).
# Then edge cases, default configuration only: sequences no block divides, fewer keys than queries
# (causal rows that see every key), other head dimensions.
SHAPES = {
    "gpt2_block": dict(batch=8, heads=12, seq=1024, seq_k=1024, head_dim=64, causal=True, peeled=True, sweep=True),
    "transformer_encoder": dict(batch=16, heads=12, seq=512, seq_k=512, head_dim=64, causal=False, peeled=False, sweep=True),
    "odd_causal": dict(batch=2, heads=3, seq=200, seq_k=77, head_dim=32, causal=True, peeled=True, sweep=False),
    "odd": dict(batch=3, heads=2, seq=197, seq_k=300, head_dim=128, causal=False, peeled=False, sweep=False),
    # masks as Hugging Face models pass them: a boolean padding mask over the keys, [batch, 1, 1, keys]
    # (the first image keeps no key at all: PyTorch's safe softmax gives zeros), and an additive one
    "padding_mask": dict(batch=2, heads=12, seq=77, seq_k=77, head_dim=64, causal=False, peeled=True, sweep=False, mask="bool"),
    "additive_mask": dict(batch=2, heads=4, seq=128, seq_k=128, head_dim=64, causal=False, peeled=False, sweep=False, mask="float"),
}


class Attention(nn.Module):
    """SDPA as the suite's models call it; `peeled`: inputs and result are [batch, seq, heads, dim]."""

    def __init__(self, causal: bool, peeled: bool) -> None:
        super().__init__()
        self.causal, self.peeled = causal, peeled

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *mask: torch.Tensor) -> torch.Tensor:
        if self.peeled:
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[0] if mask else None, is_causal=self.causal)
        return y.transpose(1, 2) if self.peeled else y


def inputs(shape: dict, dtype: str, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)

    def dims(seq: int) -> tuple[int, ...]:
        if shape["peeled"]:
            return (shape["batch"], seq, shape["heads"], shape["head_dim"])
        return (shape["batch"], shape["heads"], seq, shape["head_dim"])

    sizes = (dims(shape["seq"]), dims(shape["seq_k"]), dims(shape["seq_k"]))
    qkv = tuple(torch.randn(*size, generator=generator).to(DTYPES[dtype]) for size in sizes)
    mask: tuple[torch.Tensor, ...] = ()
    if shape.get("mask") == "bool":
        keep = torch.rand(shape["batch"], 1, 1, shape["seq_k"], generator=generator) > 0.3
        keep[0] = False
        mask = (keep,)
    elif shape.get("mask") == "float":
        mask = (torch.randn(1, shape["heads"], shape["seq"], shape["seq_k"], generator=generator).to(DTYPES[dtype]),)
    return tuple(x.to(device) for x in (*qkv, *mask))


@click.group()
def main() -> None:
    """Compile, time and record kiln's attention kernel configurations."""


@main.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Folder for the artifacts and index.json.")
def compile(output: Path) -> None:
    """One artifact per shape, dtype and configuration (and one of IREE's code per shape and dtype)."""
    from kiln.compiler import CompileOptions, run_pipeline, spec_from_module
    from kiln.compiler import pipeline as compile_pipeline
    from kiln.targets.cuda.kernels.contraction import Attention as Described
    from kiln.targets.cuda.kernels.substitute import plan
    from kiln.targets.cuda.kernels.tiles import Choice, attention_candidates

    output.mkdir(parents=True, exist_ok=True)
    index = []
    for name, shape in SHAPES.items():
        for dtype in DTYPES:
            described = Described(
                shape["batch"], shape["heads"], shape["seq"], shape["seq_k"], shape["head_dim"], dtype, shape["causal"],
                shape["head_dim"] ** -0.5, "tf32x3" if dtype == "f32" else "",
            )  # fmt: skip (the key of measured tiles: the same without a mask)
            spec = spec_from_module(Attention(shape["causal"], shape["peeled"]), inputs(shape, dtype))
            candidates = attention_candidates(described)
            for tiles in [None, *(candidates if shape["sweep"] else candidates[:1])]:
                label = f"{name}-{dtype}-{tiles.label if tiles else 'iree'}"
                if tiles is not None:  # every outlined attention gets these tiles
                    fixed = partial(plan, chooser=lambda c, t=tiles: Choice(t, c.layout, "sweep"))
                    compile_pipeline.plan_kernels = fixed  # type: ignore[attr-defined]
                options = CompileOptions(target="cuda", gpu_arch="sm_90", kernels="on" if tiles else "off")
                try:
                    compiled = run_pipeline(spec, options).compiled
                finally:
                    compile_pipeline.plan_kernels = plan  # type: ignore[attr-defined]
                compiled.save(output / f"{label}.vmfb")
                index.append(dict(label=label, model=name, dtype=dtype, tiles=tiles.label if tiles else None,
                                  shape_key=described.shape_key, kernels=list(compiled.manifest.kernels)))  # fmt: skip
                click.echo(f"compiled {label}", err=True)
    (output / "index.json").write_text(json.dumps(dict(shapes=SHAPES, artifacts=index), indent=1))


def _time_ms(fn) -> float:
    """Median milliseconds of a call of `fn`, each synchronized, as the suite times every contender."""
    from kiln.measure.timing import Settings, measure

    return statistics.median(measure(fn, torch.cuda.synchronize, Settings(warmup=3, iterations=50, budget_s=1.0))) / 1e6


def _kernel_ms(fn, calls: int = 10) -> float:
    """Milliseconds of GPU kernels a call of `fn` runs (CUPTI, through torch.profiler): the computation
    without the per-call overhead, which the kernel table compares."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as trace:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = [event for event in trace.events() if event.device_type.name == "CUDA" and not event.name.startswith("Memcpy")]
    return sum(event.time_range.elapsed_us() for event in kernels) / 1000 / calls


def _error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    actual = actual.double()
    return float(torch.linalg.vector_norm(actual - reference) / torch.linalg.vector_norm(reference))


@main.command()
@click.argument("folder", type=click.Path(path_type=Path, exists=True))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def time(folder: Path, output: Path) -> None:
    """Check and time every artifact of FOLDER against float64 and eager attention on the GPU."""
    import kiln

    index = json.loads((folder / "index.json").read_text())
    rows = []
    for name, shape in index["shapes"].items():
        model = Attention(shape["causal"], shape["peeled"])
        for dtype in DTYPES:
            xs = inputs(shape, dtype, "cuda")
            with torch.no_grad():
                reference = model(*(x.double() if x.is_floating_point() else x for x in xs))
                eager = model(*xs)
                eager_ms = _time_ms(partial(model, *xs))
                eager_kernel_ms = _kernel_ms(partial(model, *xs))
            for artifact in (a for a in index["artifacts"] if a["model"] == name and a["dtype"] == dtype):
                row = dict(artifact, eager_ms=eager_ms, eager_kernel_ms=eager_kernel_ms, eager_error=_error(eager, reference))
                try:
                    module = kiln.load(folder / f"{artifact['label']}.vmfb", device="cuda")
                    row.update(error=_error(module(*xs), reference), kiln_ms=_time_ms(partial(module, *xs)))
                    row.update(kiln_kernel_ms=_kernel_ms(partial(module, *xs)))
                except Exception as error:  # a configuration that fails is a row, not the end of the run
                    row.update(failed=f"{type(error).__name__}: {str(error)[:300]}")
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "kernels"}), file=sys.stderr)
    device = torch.cuda.get_device_name()
    output.write_text(json.dumps(dict(gpu=device, torch=torch.__version__, shapes=index["shapes"], rows=rows), indent=1))


@main.command()
@click.argument("results", type=click.Path(path_type=Path, exists=True))
def record(results: Path) -> None:
    """Per swept shape, the fastest configuration (GPU kernel time) whose error is within twice eager's
    (and 1e-5), into measured.json (IREE's code where it was faster); then a table of them all."""
    data = json.loads(results.read_text())
    measured = json.loads(MEASURED.read_text())
    by_shape: dict[str, list[dict]] = {}
    for row in data["rows"]:
        by_shape.setdefault(row["shape_key"], []).append(row)
    table = [
        "| attention | kiln tiles | kiln kernel us | TFLOP/s | torch kernel us | TFLOP/s | IREE's code us | kiln call ms | eager call ms | error (eager's) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, rows in sorted(by_shape.items()):
        ok = [r for r in rows if "kiln_ms" in r and r["error"] <= max(2 * r["eager_error"], 1e-5)]
        kernels = [r for r in ok if r["tiles"] is not None]
        iree = next((r for r in rows if r["tiles"] is None), None)
        if not kernels:
            click.echo(f"{key}: no correct kernel configuration; left out", err=True)
            continue
        best = min(kernels, key=lambda r: r["kiln_kernel_ms"])
        flops = _flops(data["shapes"][best["model"]])
        iree_us = iree["kiln_kernel_ms"] * 1000 if iree is not None and "kiln_kernel_ms" in iree else None
        table.append(
            f"| {best['kernels'][0]['contraction']} | {best['tiles']} | {best['kiln_kernel_ms'] * 1000:.1f} | {flops / best['kiln_kernel_ms'] / 1e9:.0f} | "
            f"{best['eager_kernel_ms'] * 1000:.1f} | {flops / best['eager_kernel_ms'] / 1e9:.0f} | "
            f"{f'{iree_us:.1f}' if iree_us is not None else 'failed'} | {best['kiln_ms']:.3f} | {best['eager_ms']:.3f} | "
            f"{best['error']:.1e} ({best['eager_error']:.1e}) |"
        )
        if not data["shapes"][best["model"]]["sweep"]:
            continue  # an edge case, checked with the default configuration only
        entry = dict(
            iree_ok=iree is not None and iree in ok, iree_us=round(iree_us, 2) if iree_us is not None else None,
            kernel_us=round(best["kiln_kernel_ms"] * 1000, 2), layout=best["kernels"][0]["layout"], tiles=best["tiles"],
            torch_us=round(best["eager_kernel_ms"] * 1000, 2), use="kiln",
        )  # fmt: skip
        if entry["iree_ok"] and iree_us is not None and iree_us < entry["kernel_us"]:
            entry.update(use="iree", why=f"{iree_us:.0f} us against the kernel's {entry['kernel_us']:.0f} us")
        measured["shapes"][key] = entry
    MEASURED.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
    TABLE.write_text(
        f"# kiln's attention kernel against eager PyTorch on the {data['gpu']}\n\n"
        f"Generated by `python benchmarks/attention_kernels.py record {results.name}` (torch {data['torch']}). "
        "Kernel times are CUPTI's, the GPU kernels of one call (kiln: its attention kernel and IREE's "
        "dispatches around it; eager: SDPA's kernels and the transposes); call times (medians of synchronized calls, as the suite times them) include the per-call "
        "overhead. TFLOP/s count the two products' multiply-adds (the scores a causal mask keeps). "
        "kiln's f32 runs tf32x3 (PyTorch's \"highest\"), eager's f32 SDPA its f32 kernels. The H100's dense "
        "peaks: bf16 989, tf32x3 165 TFLOP/s. Errors are relative L2 against float64 attention; eager's in "
        "brackets. The last rows are edge cases (masks, sequences no block divides, head dimensions 32 and "
        "128), checked with the default configuration.\n\n" + "\n".join(table) + "\n"
    )
    click.echo("\n".join(table))


def _flops(shape: dict) -> int:
    from kiln.targets.cuda.kernels.contraction import Attention as Described

    sizes = (shape["batch"], shape["heads"], shape["seq"], shape["seq_k"], shape["head_dim"])
    return Described(*sizes, "bf16", shape["causal"], shape["head_dim"] ** -0.5).flops


if __name__ == "__main__":
    main()
