"""Run kiln's GPU artifacts on a real GPU and compare them with eager PyTorch there; print a table.

Two halves, because the GPU machine has no compiler:

    # here: any machine with kiln installed, no GPU needed (cross-compiles every example)
    python benchmarks/gpu_check.py compile -o .device-carry/gpu_check --target cuda:sm_90 --target vulkan-spirv:sm_90
    # there: torch (CUDA), iree-base-runtime and this checkout; run from the repository root
    python3 benchmarks/gpu_check.py run .device-carry/gpu_check --markdown gpu_check.md

`compile` writes a kiln.measure bundle: one entry per example and target (labels: example,
target, arch; an error for whatever did not compile), each with a reference `<example>.pt` (the
example inputs, the weights, and the outputs of eager PyTorch on this CPU). `run` rebuilds each
model from examples/, loads those weights, and runs eager PyTorch on the GPU next to the
artifact, loaded on the same GPU and called with CUDA tensors. A row passes when every output is
close to eager's on the GPU (kiln.runtime.numerics, --verify's per-element tolerances) and comes
back on the GPU.
"""

from __future__ import annotations

import datetime
import platform
import subprocess
import sys
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click
import torch

from kiln.errors import KilnError
from kiln.measure.bundle import (
    Bundle,
    Entry,
    ModelRecipe,
    add_artifact,
    open_entry,
    read_reference,
    rebuild,
    write_reference,
)
from kiln.measure.timing import environment
from kiln.runtime.numerics import compare_all

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SKIPPED_EXAMPLES = ("demo",)  # a script that loads an artifact, not a model


@dataclass(frozen=True)
class Row:
    model: str
    dtype: str
    target: str
    arch: str
    error_vs_gpu: float | None  # max abs error against eager PyTorch on the GPU
    error_vs_cpu: float | None  # max abs error against eager PyTorch on the compiling machine's CPU
    tolerance: float | None
    result: str  # "pass", "FAIL", or "FAIL: <why>"


# ---------------------------------------------------------------------------------------------
# compile (here)


def compile_examples(out: Path, targets: tuple[str, ...], names: list[str]) -> None:
    from kiln.compiler import CompileOptions, load_model_file, run_pipeline
    from kiln.targets import get_target

    out.mkdir(parents=True, exist_ok=True)
    entries: list[Entry] = []
    for name in names:
        spec = load_model_file(EXAMPLES / f"{name}.py")
        with torch.no_grad():
            expected = _as_tuple(spec.module(*spec.example_inputs))
        reference = {
            "main": {"inputs": list(spec.example_inputs), "expected": list(expected)},
            "state_dict": spec.module.state_dict(),
        }
        reference_file = write_reference(out, name, reference)
        for target_arch in targets:
            target, _, arch = target_arch.partition(":")
            labels = {"example": name, "target": target, "dtype": _dtypes(spec.example_inputs)}
            entry = Entry(f"{name}.{target}", model=ModelRecipe(f"examples/{name}.py"), reference=reference_file, labels=labels)
            try:
                # f32 convolutions at f32-class precision: `run` compares with eager at TF32 off, per element.
                options = CompileOptions(target=target, gpu_arch=arch or None, conv_precision="highest")
                compiled = run_pipeline(spec, options).compiled
            except KilnError as error:
                print(f"{name} {target_arch}: compile failed: {error.message}", file=sys.stderr)
                entries.append(replace(entry, error=error.message, labels={**labels, "arch": arch}))
                continue
            details = compiled.manifest.target_details
            compiled_arch = details.get("gpu_arch") or arch or "default"
            if details.get("gpu_arch_requested") not in (None, "", compiled_arch):
                compiled_arch = f"{details['gpu_arch_requested']} -> {compiled_arch}"
            entry = replace(entry, name=f"{name}.{target}.{details.get('gpu_arch', 'default')}", labels={**labels, "arch": compiled_arch})
            entries.append(add_artifact(out, entry, compiled))
            note = details.get("gpu_arch_note")
            print(f"{name} {target_arch}: wrote {entries[-1].artifact}" + (f" ({note})" if note else ""), file=sys.stderr)
    machine, versions = environment("cpu")
    drivers = {get_target(target.partition(":")[0]).driver for target in targets}
    Bundle(
        target=",".join(targets),
        driver=",".join(sorted(drivers)),
        created=_now(),
        command=" ".join(["python", "benchmarks/gpu_check.py", *sys.argv[1:]]),
        compiled_on=machine,
        versions=versions,
        settings={},
        entries=tuple(entries),
    ).write(out)


# ---------------------------------------------------------------------------------------------
# run (on the GPU machine)


def run_artifacts(folder: Path, only: str) -> list[Row]:
    torch.backends.cuda.matmul.allow_tf32 = False  # an f32 reference computed in f32, not tf32
    torch.backends.cudnn.allow_tf32 = False
    bundle = Bundle.read(folder)
    selected = [entry for entry in bundle.entries if Path(entry.name).match(only)]
    return [_check(folder, entry) for entry in selected]


def _check(folder: Path, entry: Entry) -> Row:
    labels = entry.labels
    row = Row(labels["example"], labels["dtype"], labels["target"], labels["arch"], None, None, None, "FAIL")
    if entry.error is not None:
        return replace(row, result="FAIL: does not compile: " + entry.error.splitlines()[0][:160])
    gpu = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: try the script out on a machine without a GPU
    try:
        reference = read_reference(folder, entry)
        model, _ = rebuild(entry, ROOT)
        model.load_state_dict(reference["state_dict"])
        inputs = [tensor.to(gpu) for tensor in reference["main"]["inputs"]]
        with torch.no_grad():
            eager = _as_tuple(model.to(gpu)(*inputs))
        actual = _as_tuple(open_entry(folder, entry, _device_kind(labels["target"]))(*inputs))
    except Exception as error:  # a row, not a crash: the table is the point
        print(f"{entry.name}: {type(error).__name__}: {error}", file=sys.stderr)  # all of it, for the log
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return replace(row, result=f"FAIL: {first_line[:240]}")
    vs_gpu, vs_cpu = compare_all(actual, eager), compare_all(actual, reference["main"]["expected"])
    on_gpu = all(got.device == want.device for got, want in zip(actual, eager, strict=False))  # CUDA in, CUDA out
    close = on_gpu and all(comparison.close for comparison in vs_gpu)
    return replace(
        row,
        error_vs_gpu=max(c.max_abs for c in vs_gpu),
        error_vs_cpu=max(c.max_abs for c in vs_cpu),
        tolerance=max(c.tolerance.atol for c in vs_gpu),
        result="pass" if close else "FAIL",
    )


def runtime_checks(folder: Path) -> list[tuple[str, str]]:
    """The runtime's promises beyond numbers: device selection, CPU inputs, and the errors."""
    import kiln

    bundle = Bundle.read(folder)
    try:
        entry = bundle.entry("mlp.cuda.sm_80")
    except KeyError:
        return []
    vmfb = folder / (entry.artifact or "")
    x = read_reference(folder, entry)["main"]["inputs"][0]
    checks = []

    def check(what: str, action: Any) -> None:
        try:
            checks.append((what, action()))
        except KilnError as error:
            checks.append((what, f"KilnError: {error.message}"))
        except Exception as error:
            checks.append((what, f"UNEXPECTED {type(error).__name__}: {error}"))

    check("device='cuda:0', CPU tensor in", lambda: f"output on {kiln.load(vmfb, device='cuda:0')(x).device}")
    check("device='cuda', numpy in", lambda: f"output {type(kiln.load(vmfb, device='cuda')(x.numpy(), as_numpy=True)).__name__}")
    check(
        f"device='cuda:{torch.cuda.device_count()}' (one past the last)",
        lambda: kiln.load(vmfb, device=f"cuda:{torch.cuda.device_count()}"),
    )
    check("device='vulkan' for a cuda artifact", lambda: kiln.load(vmfb, device="vulkan"))
    return checks


def _device_kind(target: str) -> str:
    return {"cuda": "cuda", "vulkan-spirv": "vulkan", "rocm": "rocm"}.get(target, "cpu")


def _dtypes(tensors: Any) -> str:
    return "+".join(dict.fromkeys(str(t.dtype).removeprefix("torch.") for t in tensors))


def _as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------
# report


def table(rows: list[Row]) -> str:
    lines = [
        "| model | dtype | target | arch | max abs error vs eager on the GPU | vs eager on CPU | tolerance | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = (
            row.model, row.dtype, row.target, row.arch,
            _number(row.error_vs_gpu), _number(row.error_vs_cpu), _number(row.tolerance), row.result,
        )  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def header() -> list[str]:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        driver = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 and smi.stdout.strip() else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        driver = "unknown"
    versions = environment("cpu")[1]
    return [
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- device: {gpu} (driver, compute capability: {driver}); {platform.machine()}, Python {platform.python_version()}",
        f"- torch {torch.__version__}, iree-base-runtime {versions['iree-base-runtime']}",
    ]


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Check kiln's GPU artifacts against eager PyTorch on a real GPU (compile here, run there)."""


@main.command("compile")
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True, help="The bundle folder to write.")
@click.option("--target", "targets", multiple=True, required=True, metavar="TARGET[:ARCH]", help="e.g. cuda:sm_90 (repeatable).")
@click.option("--example", "examples", multiple=True, help="Example name (repeatable) [default: all].")
def compile_command(out: Path, targets: tuple[str, ...], examples: tuple[str, ...]) -> None:
    """Cross-compile the examples into a bundle (here; no GPU needed)."""
    names = list(examples) or sorted(p.stem for p in EXAMPLES.glob("*.py") if p.stem not in SKIPPED_EXAMPLES)
    compile_examples(out, targets, names)


@main.command("run")
@click.argument("folder", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--markdown", type=click.Path(path_type=Path), help="Also write the table and environment to this file.")
@click.option("--only", default="*", metavar="GLOB", help="Entries to run, e.g. 'mlp.cuda.*'.")
def run_command(folder: Path, markdown: Path | None, only: str) -> None:
    """Run the bundle's artifacts on the GPU and print the table (there)."""
    rows = run_artifacts(folder, only)
    try:
        checks = runtime_checks(folder) if torch.cuda.is_available() and only == "*" else []
    except Exception:
        traceback.print_exc()
        checks = []
    report = [*header(), "", table(rows), ""]
    if checks:
        report += ["Runtime checks (mlp, cuda):", "", *(f"- {what}: {outcome}" for what, outcome in checks), ""]
    text = "\n".join(report)
    click.echo(text)
    if markdown:
        markdown.write_text(text)
    sys.exit(0 if all(row.result == "pass" for row in rows) else 1)


if __name__ == "__main__":
    main()
