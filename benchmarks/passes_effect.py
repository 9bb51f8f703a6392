"""What kiln's own passes do to each model: linalg ops, IREE dispatches and run time, on and off.

    python benchmarks/passes_effect.py [--runs 50] [--out benchmarks/passes_effect.md] [MODEL.py ...]

Compiles each model (default: every example and benchmarks/models/gelu_layernorm.py) twice for
llvm-cpu: with kiln's default pipeline ("on") and with torch-mlir's lowering alone ("off", i.e.
`--pipeline torch-mlir`). One row per model:
  linalg ops   off (torch-mlir's `linalg` stage); on, before fuse-elementwise (`linalg`) and after (`fused`)
  dispatches   `flow.dispatch` ops in IREE's flow phase, on and off
  median ms    of --runs calls through kiln.load on the CPU, on and off, calls interleaved (a call
               runs each of the artifact's functions once, on its example inputs)
  max |on - eager|  on the example inputs
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import torch

import kiln
from kiln.compiler import CompileOptions, ModelSpec, load_model_file, run_pipeline
from kiln.compiler.dispatches import count_dispatches
from kiln.passes import DEFAULT_PIPELINE, TORCH_MLIR_PIPELINE

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = [
    *sorted(p for p in (ROOT / "examples").glob("*.py") if p.stem != "demo"),
    ROOT / "benchmarks" / "models" / "gelu_layernorm.py",
]


@dataclass(frozen=True)
class Row:
    name: str
    linalg_off: int
    linalg_before: int
    linalg_after: int
    dispatches_on: int
    dispatches_off: int
    ms_on: float
    ms_off: float
    max_error: float


def measure(model_file: Path, work: Path, runs: int) -> Row:
    spec = load_model_file(model_file)
    on_dumps, off_dumps = work / f"{model_file.stem}-on", work / f"{model_file.stem}-off"
    on = _compile(spec, CompileOptions(pipeline=DEFAULT_PIPELINE, dump_dir=on_dumps), on_dumps / "model.vmfb")
    off = _compile(spec, CompileOptions(pipeline=TORCH_MLIR_PIPELINE, dump_dir=off_dumps), off_dumps / "model.vmfb")
    ms_on, ms_off = _median_ms(on, off, spec, runs)
    loaded = kiln.load(on)
    error = 0.0
    for entry in spec.entries:
        expected, actual = entry(*entry.example_inputs), getattr(loaded, entry.name)(*entry.example_inputs)
        pairs = zip(expected, actual, strict=True) if isinstance(expected, tuple) else [(expected, actual)]
        error = max([error, *(float((want.float() - got.float()).abs().max()) for want, got in pairs)])
    return Row(
        name=model_file.stem,
        linalg_off=_linalg_ops(next(off_dumps.glob("*-linalg.mlir"))),
        linalg_before=_linalg_ops(next(on_dumps.glob("*-linalg.mlir"))),
        linalg_after=_linalg_ops(next(on_dumps.glob("*-fused.mlir"))),
        dispatches_on=count_dispatches(on_dumps),
        dispatches_off=count_dispatches(off_dumps),
        ms_on=ms_on,
        ms_off=ms_off,
        max_error=error,
    )


def _compile(spec: object, options: CompileOptions, path: Path) -> Path:
    return run_pipeline(spec, options).compiled.save(path)  # type: ignore[arg-type]


def _median_ms(on: Path, off: Path, spec: ModelSpec, runs: int) -> tuple[float, float]:
    """Median milliseconds per call of each artifact; calls alternate, so drift hits both alike."""
    modules = {"on": kiln.load(on), "off": kiln.load(off)}

    def call(module: Any) -> None:
        for entry in spec.entries:
            getattr(module, entry.name)(*entry.example_inputs)

    times: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(3):  # warm up
        for module in modules.values():
            call(module)
    for _ in range(runs):
        for key, module in modules.items():
            start = time.perf_counter()
            call(module)
            times[key].append((time.perf_counter() - start) * 1000)
    return statistics.median(times["on"]), statistics.median(times["off"])


# A linalg op, not an attribute (#linalg.iterator_type) nor the yield and index inside a body.
_LINALG_OP = re.compile(r"(?<![#\w.])linalg\.(?!yield\b|index\b)\w+")


def _linalg_ops(dump: Path) -> int:
    """Linalg ops in a stage dump, counted in its text: dumps may hold dialects these bindings lack."""
    return len(_LINALG_OP.findall(dump.read_text()))


def table(rows: list[Row]) -> str:
    lines = [
        "| model | linalg ops off | linalg ops on: before -> after fusion | dispatches on / off "
        "| median ms on / off | max abs error vs eager (on) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.name} | {row.linalg_off} | {row.linalg_before} -> {row.linalg_after} | {row.dispatches_on} / {row.dispatches_off} "
            f"| {row.ms_on:.3f} / {row.ms_off:.3f} | {row.max_error:.2g} |"
        )
    return "\n".join(lines)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("models", nargs=-1, type=click.Path(path_type=Path))
@click.option("--runs", type=int, default=50, show_default=True, help="Timed calls per artifact.")
@click.option("--out", type=click.Path(path_type=Path), help="Also write the table here.")
def main(models: tuple[Path, ...], runs: int, out: Path | None) -> None:
    """kiln's passes on (default pipeline) against off (--pipeline torch-mlir), model by model."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="kiln-passes-effect-") as work:
        for model_file in models or DEFAULT_MODELS:
            click.echo(f"{model_file.stem} ...", err=True)
            rows.append(measure(model_file, Path(work), runs))
    threads = torch.get_num_threads()
    header = f"kiln passes on (default pipeline) vs off (--pipeline torch-mlir); llvm-cpu, {threads} CPU threads\n\n"
    text = header + table(rows)
    click.echo(text)
    if out is not None:
        out.write_text(text + "\n")


if __name__ == "__main__":
    main()
