"""Large models in bounded memory: Llama shapes of 134M to 6.7B parameters compiled without their weights.

    python benchmarks/large_models.py compile -o build/large                 # here: LARGE_MODELS.md's table
    python benchmarks/large_models.py compile -o .device-carry/large-cuda \\
        --target cuda --gpu-arch sm_80 --size 1b                            # here: artifacts for the GPU
    python3 benchmarks/large_models.py run .device-carry/large-cuda        # there: check and time

`compile` writes each size's checkpoint (random weights from a seed, examples/llama/llama.py; f32,
bf16 for 7B) unless it is there, then compiles examples/llama/llama_<size>.py in f32 and with --dtype bf16, each
compile in a process of its own, and records its time, the peak resident memory of every stage
(kiln's own, and iree-compile's), and the sizes of the .vmfb and the .irpa, into a kiln.measure
bundle. The .irpa is deleted once measured (it is the weights: 25 GiB for 7B in f32), and so is a
checkpoint this command wrote, unless --keep. This process imports no torch until the compiles are
done, so the processes it starts inherit no memory from it.

`run` needs torch, transformers, safetensors and kiln's runtime: it writes the same checkpoint from
the same seed, streams it into each artifact's .irpa in the artifact's dtype (as the compile would:
kiln.compiler.checkpoint and parameter_archive, which import no compiler), loads the artifact, and
checks and times it against eager PyTorch and Inductor on the same device, the model built from the
checkpoint as safetensors reads it: one forward over the example prompt, in tokens per second.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from kiln.cli.options import TARGET_NAMES, TimingChoice, timing_options

if TYPE_CHECKING:
    import torch

    from kiln.compiler.checkpoint import BoundWeights

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / "examples" / "llama"
SIZES = ("124m", "1b", "7b")
DTYPES = ("f32", "bf16")
# The checkpoint's dtype: f32, but bf16 for 7B (as Llama-2-7B's own), whose f32 checkpoint and f32
# .irpa together (50 GiB) would not fit this machine's shared disk. The f32 model widens it exactly.
CHECKPOINT_DTYPES = {"7b": "bf16"}


def compile_all(
    out: Path, sizes: tuple[str, ...], dtypes: tuple[str, ...], target: str, gpu_arch: str | None, keep: bool, in_memory: bool
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for size in sizes:
        if in_memory:  # the model built with its weights, as before checkpoints: what the table is against
            for dtype in dtypes:
                rows.append(measure_in_child(size, dtype, out, target, gpu_arch, in_memory=True))
                print(table_row(rows[-1]), flush=True)
            continue
        checkpoint = LLAMA / "checkpoints" / size
        wrote = not checkpoint.is_dir()
        if wrote:
            subprocess.run([sys.executable, str(LLAMA / "llama.py"), size, "--dtype", CHECKPOINT_DTYPES.get(size, "f32")], check=True)
        for dtype in dtypes:
            rows.append(measure_in_child(size, dtype, out, target, gpu_arch))
            print(table_row(rows[-1]), flush=True)
        if wrote and not keep:
            shutil.rmtree(checkpoint)
    write_bundle(out, rows, target, gpu_arch)
    print("\n".join(table([entry.labels for entry in _bundle(out).entries])))


def measure_in_child(size: str, dtype: str, out: Path, target: str, gpu_arch: str | None, in_memory: bool = False) -> dict[str, Any]:
    """One compile in a fresh process: what `measure` prints, plus the process tree's largest peak."""
    stem = out / (f"llama_{size}_{dtype}" + ("_in_memory" if in_memory else ""))
    command = [sys.executable, __file__, "measure", size, dtype, str(stem), "--target", target]
    command += ["--gpu-arch", gpu_arch] if gpu_arch else []
    command += ["--in-memory"] if in_memory else []
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    output = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"compiling llama_{size} in {dtype} failed")
    row = json.loads(output.strip().splitlines()[-1])
    # wait4 counts the children a process waited for: the largest of kiln and iree-compile, and the
    # CPU time of both (on a shared machine, steadier than the wall time).
    row["largest_process_mib"] = round(usage.ru_maxrss / 1024)
    row["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 1)
    irpa = stem.with_suffix(".irpa")
    row["irpa_bytes"] = irpa.stat().st_size
    irpa.unlink()  # the weights again: `run` rebuilds them
    shutil.rmtree(stem.with_suffix(".stages"), ignore_errors=True)
    stem.with_suffix(".py").unlink(missing_ok=True)  # an --in-memory compile's model file
    return row


def measure_one(size: str, dtype: str, stem: Path, target: str, gpu_arch: str | None, in_memory: bool) -> None:
    """Compile one model in this process and print one JSON line: what `compile` records."""
    from kiln.compiler.driver import compile_file
    from kiln.compiler.model_file import ModelSource
    from kiln.compiler.options import CompileOptions

    model_file = LLAMA / f"llama_{size}.py"
    if in_memory:  # the same model file without `weights`: get_model() builds the weights (random)
        model_file = stem.with_suffix(".py")
        text = (LLAMA / f"llama_{size}.py").read_text()
        model_file.write_text(f"import sys\nsys.path.insert(0, {str(LLAMA)!r})\n" + text.replace("\nweights = ", "\n_unused = "))
    source = ModelSource(model_file, precision="bf16" if dtype == "bf16" else None)
    options = CompileOptions(target=target, gpu_arch=gpu_arch, params="external", dump_dir=stem.with_suffix(".stages"))
    start = time.perf_counter()
    result = compile_file(source, options, stem.with_suffix(".vmfb"))
    seconds = time.perf_counter() - start
    assert result.compilation.spec is not None  # compiled from a model file, not a dump
    parameters = list(result.compilation.spec.module.parameters())
    row = {
        "size": size,
        "dtype": dtype,
        "in_memory": in_memory,
        "parameters": sum(p.numel() for p in parameters),
        "weight_bytes": sum(p.numel() * p.element_size() for p in parameters),  # in the compiled dtype
        "compile_s": round(seconds, 1),
        "stages": [_stage(report) for report in result.reports],
        "vmfb_bytes": result.path.stat().st_size,
        "load_average": [round(load, 1) for load in os.getloadavg()],  # other work on this shared machine
    }
    print(json.dumps(row))


def _stage(report: Any) -> dict[str, Any]:
    usage = report.usage
    return {
        "name": report.name,
        "seconds": round(report.seconds, 2),
        "cpu_s": round(usage.cpu_seconds, 2),
        "kiln_mib": round(usage.peak / 2**20) if usage.peak else None,
        "iree_compile_mib": round(usage.child_peak / 2**20) if usage.child_peak else None,
    }


def write_bundle(out: Path, rows: list[dict[str, Any]], target: str, gpu_arch: str | None) -> None:
    """The rows as a kiln.measure bundle: one entry per artifact, its weights to be rebuilt there."""
    from kiln.measure.bundle import Bundle, Entry, ModelRecipe
    from kiln.measure.timing import environment
    from kiln.targets import get_target

    old = {entry.name: entry for entry in _bundle(out).entries} if (out / "bundle.json").is_file() else {}
    for row in rows:
        name = f"llama_{row['size']}_{row['dtype']}" + ("_in_memory" if row.get("in_memory") else "")
        recipe = ModelRecipe(f"examples/llama/llama_{row['size']}.py")
        old[name] = Entry(name, f"{name}.vmfb", row["compile_s"], model=recipe, parameters=f"{name}.irpa", labels=row)
    machine, versions = environment("cpu")
    Bundle(
        target=target,
        driver=get_target(target).driver,
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=" ".join(["python", "benchmarks/large_models.py", *sys.argv[1:]]),
        compiled_on=machine,
        versions=versions,
        settings={"gpu_arch": gpu_arch},
        entries=tuple(old.values()),
    ).write(out)


def _bundle(out: Path) -> Any:
    from kiln.measure.bundle import Bundle

    return Bundle.read(out)


def peaks(row: dict[str, Any]) -> tuple[int, int, int]:
    """MiB: kiln's highest stage peak; iree-compile's peak; and the two together, bounded above by
    kiln's peak during the vmfb stage (while iree-compile runs) plus iree-compile's peak."""
    kiln = max(stage["kiln_mib"] or 0 for stage in row["stages"])
    iree = max(stage["iree_compile_mib"] or 0 for stage in row["stages"])
    vmfb = next(stage for stage in row["stages"] if stage["name"] == "vmfb")
    return kiln, iree, max(kiln, (vmfb["kiln_mib"] or 0) + iree)


def table(rows: list[dict[str, Any]]) -> list[str]:
    header = [
        "| model | parameters | dtype | weights | compile | CPU: graph | CPU: .irpa | peak: kiln | peak: iree-compile "
        "| peak: both | .vmfb | .irpa |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = [(size, dtype, in_memory) for size in SIZES for dtype in DTYPES for in_memory in (False, True)]
    return header + [
        table_row(row) for row in sorted(rows, key=lambda r: order.index((r["size"], r["dtype"], r.get("in_memory", False))))
    ]


def table_row(row: dict[str, Any]) -> str:
    kiln, iree, both = peaks(row)
    save = sum(stage["cpu_s"] for stage in row["stages"] if stage["name"] == "save")
    graph = sum(stage["cpu_s"] for stage in row["stages"] if stage["name"] != "save")
    return (
        f"| llama_{row['size']}{' (weights in memory)' if row.get('in_memory') else ''} | {row['parameters'] / 1e9:.2f}B "
        f"| {row['dtype']} | {row['weight_bytes'] / 2**30:.2f} GiB | {row['compile_s']:.0f} s | {graph:.0f} s | {save:.0f} s "
        f"| {kiln} MiB | {iree} MiB | {both} MiB "
        f"| {row['vmfb_bytes'] / 2**20:.2f} MiB | {row['irpa_bytes'] / 2**30:.2f} GiB |"
    )


def stage_table(row: dict[str, Any]) -> list[str]:
    lines = ["| stage | time | CPU time | peak: kiln | peak: iree-compile |", "|---|---|---|---|---|"]
    for stage in row["stages"]:
        child = f"{stage['iree_compile_mib']} MiB" if stage["iree_compile_mib"] else ""
        lines.append(f"| {stage['name']} | {stage['seconds']:.1f} s | {stage['cpu_s']:.1f} s | {stage['kiln_mib']} MiB | {child} |")
    return lines


def run_all(out: Path, sizes: tuple[str, ...], timing: TimingChoice) -> str:
    """On the device's machine: rebuild each artifact's weights, check it against eager, time kiln, eager, Inductor."""
    import torch
    from safetensors.torch import load_file

    from kiln.compiler.checkpoint import SafetensorsCheckpoint, bind, meta_parameters
    from kiln.measure.bench import bench
    from kiln.measure.bundle import open_entry
    from kiln.measure.timing import environment, torch_device_for

    sys.path.insert(0, str(LLAMA))
    import llama

    torch.backends.cuda.matmul.allow_tf32 = False  # the reference computes f32 in f32, as the artifact does
    bundle = _bundle(out)
    lines = [
        "| model | dtype | tokens | kiln | eager | Inductor | kiln tokens/s | eager tokens/s | Inductor tokens/s | rel. L2 error vs eager |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    torch_device = torch_device_for(bundle.driver, timing.device)
    for entry in bundle.entries:
        if entry.labels.get("in_memory") or (sizes and entry.labels["size"] not in sizes):
            continue  # in memory: a comparison of compiles (its artifact is the checkpoint's one)
        size, dtype = entry.labels["size"], entry.labels["dtype"]
        checkpoint = out / "checkpoints" / size
        if not checkpoint.is_dir():
            with torch.device("meta"):
                shapes = llama.build(size)
            llama.write_checkpoint(shapes, checkpoint)
        files = sorted(checkpoint.glob("*.safetensors"))
        with meta_parameters():
            model = llama.build(size)
        torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        write_archive(model, bind(SafetensorsCheckpoint(files), model, checkpoint), torch_dtype, out / (entry.parameters or ""))
        state: dict[str, torch.Tensor] = {}
        for file in files:
            state |= load_file(file)
        model.load_state_dict(state, assign=True)  # the reference: the checkpoint as safetensors reads it
        model = model.to(torch_dtype)
        del state
        module = open_entry(out, entry, timing.device)
        inputs = llama.prompt(size)
        numerics, timings, error = bench(module, model, inputs, timing.settings, timing.device)
        tokens = inputs[0].numel()
        rate = {side: tokens / (t.median_ms / 1e3) for side, t in timings.items()}
        inductor = f"{timings['inductor'].median_ms:.1f} ms" if "inductor" in timings else (error or "-")
        inductor_rate = f"{rate['inductor']:.0f}" if "inductor" in rate else "-"
        lines.append(
            f"| llama_{size} ({entry.labels['parameters'] / 1e9:.2f}B) | {dtype} | {tokens} "
            f"| {timings['kiln'].median_ms:.1f} ms | {timings['eager'].median_ms:.1f} ms | {inductor} "
            f"| {rate['kiln']:.0f} | {rate['eager']:.0f} | {inductor_rate} "
            f"| {numerics.rel_l2_error:.1e} {'ok' if numerics.ok else 'MISMATCH'} |"
        )
        print(lines[-1], flush=True)
        del model, module
        (out / (entry.parameters or "")).unlink()
    machine, versions = environment(torch_device)
    title = f"target {bundle.target} ({bundle.settings.get('gpu_arch')}); machine: {machine}; versions: {versions}"
    return "\n".join([title, "", *lines])


def write_archive(model: torch.nn.Module, bound: BoundWeights, dtype: torch.dtype, path: Path) -> None:
    """The .irpa the compile wrote: every parameter under its name, streamed from the checkpoint in `dtype`."""
    from kiln.compiler.parameter_archive import ArchiveEntry, write_parameter_archive

    def writer(name: str) -> Callable[[BinaryIO], None]:
        return lambda file: bound.write(name, dtype, file)

    entries = [ArchiveEntry(name, p.numel() * dtype.itemsize, writer(name)) for name, p in model.named_parameters()]
    write_parameter_archive(path, entries)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Llama shapes of 134M to 6.7B parameters compiled without their weights: compile here, run anywhere."""


@main.command("compile")
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True, help="The bundle folder to write.")
@click.option("--size", "sizes", multiple=True, type=click.Choice(SIZES), help="Model size (repeatable) [default: all].")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(DTYPES), help="Compiled dtype (repeatable) [default: both].")
@click.option("--target", type=click.Choice(TARGET_NAMES), default="llvm-cpu", show_default=True)
@click.option("--gpu-arch", help="GPU targets: the architecture, e.g. sm_80.")
@click.option("--keep", is_flag=True, help="Keep the checkpoints this command writes.")
@click.option("--in-memory", is_flag=True, help="Instead, compile the models built with their (random) weights, without a checkpoint.")
def compile_command(
    out: Path, sizes: tuple[str, ...], dtypes: tuple[str, ...], target: str, gpu_arch: str | None, keep: bool, in_memory: bool
) -> None:
    """Compile each size and dtype, one process each; record time, memory and sizes."""
    compile_all(out, sizes or SIZES, dtypes or DTYPES, target, gpu_arch, keep, in_memory)


@main.command("measure")
@click.argument("size", type=click.Choice(SIZES))
@click.argument("dtype", type=click.Choice(DTYPES))
@click.argument("stem", type=click.Path(path_type=Path))
@click.option("--target", default="llvm-cpu")
@click.option("--gpu-arch")
@click.option("--in-memory", is_flag=True)
def measure_command(size: str, dtype: str, stem: Path, target: str, gpu_arch: str | None, in_memory: bool) -> None:
    """Compile one model in this process and print its record (what `compile` runs)."""
    measure_one(size, dtype, stem, target, gpu_arch, in_memory)


@main.command("table")
@click.argument("out", type=click.Path(path_type=Path, exists=True, file_okay=False))
def table_command(out: Path) -> None:
    """Print a bundle's table, and each compile's stages."""
    rows = [entry.labels for entry in _bundle(out).entries]
    click.echo("\n".join(table(rows)))
    for row in rows:
        click.echo(f"\nllama_{row['size']}, {row['dtype']}:\n" + "\n".join(stage_table(row)))


@main.command("run")
@click.argument("out", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--size", "sizes", multiple=True, type=click.Choice(SIZES), help="Only these sizes (repeatable) [default: all].")
@timing_options(warmup=3, iterations=20, time_s=10.0, inductor=True)
def run_command(out: Path, sizes: tuple[str, ...], timing: TimingChoice) -> None:
    """Check and time the compiled models against eager PyTorch and Inductor on the artifacts' device."""
    click.echo(run_all(out, sizes, timing))


if __name__ == "__main__":
    main()
