"""Large models in bounded memory: compile Llama-shaped models of 124M to 7B parameters without their weights.

    python benchmarks/large_models.py compile -o build/large                 # here: the table (LARGE_MODELS.md)
    python benchmarks/large_models.py compile -o .device-carry/large-cuda \\
        --target cuda --gpu-arch sm_80 --sizes 1b                           # here: artifacts for the GPU
    python3 benchmarks/large_models.py run .device-carry/large-cuda --device cuda   # there: check and time

`compile` writes each size's checkpoint (random f32 weights from a seed, examples/llama/llama.py)
unless it is there, then compiles examples/llama/llama_<size>.py in f32 and with --dtype bf16,
each compile in its own process, and records its time, the peak resident memory of every stage
(kiln's own, and iree-compile's), and the sizes of the .vmfb and the .irpa. The .irpa is deleted
after measuring (it is the weights: 27 GB for 7B in f32), and so is a checkpoint it wrote, unless
--keep. This process never imports torch, so the compiles it starts inherit no memory from it.

`run` needs only torch, transformers, safetensors and kiln's runtime: it writes the same checkpoint
from the same seed, streams it into each artifact's .irpa (converted to the artifact's dtype, as
the compile would), loads the artifact, checks it against eager PyTorch on the same device and
times kiln, eager and Inductor on a forward over the example prompt (tokens per second).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # torch is imported only where used: `compile` must not hold its memory (see above)
    import torch

    from kiln.compiler.checkpoint import BoundWeights

ROOT = Path(__file__).resolve().parent.parent
LLAMA = ROOT / "examples" / "llama"
SIZES = ("124m", "1b", "7b")
DTYPES = ("f32", "bf16")


def compile_all(out: Path, sizes: list[str], dtypes: list[str], target: str, gpu_arch: str | None, keep: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    record_path = out / "compile.json"
    records = json.loads(record_path.read_text())["rows"] if record_path.exists() else []
    for size in sizes:
        checkpoint = LLAMA / "checkpoints" / size
        wrote = not checkpoint.is_dir()
        if wrote:
            subprocess.run([sys.executable, str(LLAMA / "llama.py"), size], check=True)
        for dtype in dtypes:
            row = measure_in_child(size, dtype, out, target, gpu_arch)
            records = [r for r in records if (r["size"], r["dtype"]) != (size, dtype)] + [row]
            record_path.write_text(json.dumps({"target": target, "gpu_arch": gpu_arch, "rows": records}, indent=2))
            print(table_row(row), flush=True)
        if wrote and not keep:
            shutil.rmtree(checkpoint)
    print("\n".join(table(records)))


def measure_in_child(size: str, dtype: str, out: Path, target: str, gpu_arch: str | None) -> dict:
    """One compile in a fresh process; its rusage adds the whole process tree's largest peak."""
    stem = out / f"llama_{size}_{dtype}"
    command = [sys.executable, __file__, "measure", size, dtype, str(stem), "--target", target]
    command += ["--gpu-arch", gpu_arch] if gpu_arch else []
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    output = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"compiling {size} {dtype} failed")
    row = json.loads(output.strip().splitlines()[-1])
    row["wall_s"] = round(time.perf_counter() - start, 1)
    row["largest_process_mib"] = round(usage.ru_maxrss / 1024)  # kiln or iree-compile, whichever was larger
    irpa = stem.with_suffix(".irpa")
    row["irpa_bytes"] = irpa.stat().st_size
    irpa.unlink()  # the weights again; `run` rebuilds it
    shutil.rmtree(stem.with_suffix(".stages"), ignore_errors=True)
    return row


def measure_one(size: str, dtype: str, stem: Path, target: str, gpu_arch: str | None) -> None:
    """Compile one model in this process and print one JSON line: what `compile` records."""
    import torch

    from kiln.compiler.driver import compile_file
    from kiln.compiler.model_file import ModelSource
    from kiln.compiler.options import CompileOptions

    torch.set_num_threads(2)
    source = ModelSource(LLAMA / f"llama_{size}.py", precision="bf16" if dtype == "bf16" else None)
    options = CompileOptions(target=target, gpu_arch=gpu_arch, params="external", dump_dir=stem.with_suffix(".stages"))
    start = time.perf_counter()
    result = compile_file(source, options, stem.with_suffix(".vmfb"))
    seconds = time.perf_counter() - start
    assert result.path is not None and result.compilation.spec is not None
    module = result.compilation.spec.module
    stages = [
        {
            "name": report.name,
            "seconds": round(report.seconds, 2),
            "kiln_mib": round(report.memory.process / 2**20) if report.memory and report.memory.process else None,
            "iree_compile_mib": round(report.memory.children / 2**20) if report.memory and report.memory.children else None,
        }
        for report in result.reports
    ]
    row = {
        "size": size,
        "dtype": dtype,
        "target": target,
        "parameters": sum(p.numel() for p in module.parameters()),
        "weight_bytes": sum(p.numel() * p.element_size() for p in module.parameters()),
        "compile_s": round(seconds, 1),
        "stages": stages,
        "vmfb_bytes": result.path.stat().st_size,
        "load_average": [round(load, 1) for load in os.getloadavg()],
    }
    print(json.dumps(row))


def peaks(row: dict) -> tuple[int, int, int]:
    """(kiln's highest stage peak, iree-compile's peak, both together at the vmfb stage: kiln's memory
    then plus iree-compile's peak, an upper bound on the two processes' sum), in MiB."""
    kiln = max(stage["kiln_mib"] or 0 for stage in row["stages"])
    iree = max(stage["iree_compile_mib"] or 0 for stage in row["stages"])
    vmfb = next(stage for stage in row["stages"] if stage["name"] == "vmfb")
    return kiln, iree, (vmfb["kiln_mib"] or 0) + iree


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| model | parameters | dtype | compile | peak: kiln | peak: iree-compile | peak: both | weights | .vmfb | .irpa |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = {size: index for index, size in enumerate(SIZES)}
    rows = sorted(rows, key=lambda r: (order.get(r["size"], 99), DTYPES.index(r["dtype"])))
    return lines + [table_row(row) for row in rows]


def table_row(row: dict) -> str:
    kiln, iree, both = peaks(row)
    weights = row["weight_bytes"]  # in the compiled dtype
    return (
        f"| llama_{row['size']} | {row['parameters'] / 1e9:.2f}B | {row['dtype']} | {row['compile_s']:.0f} s "
        f"| {kiln / 1024:.2f} GiB | {iree / 1024:.2f} GiB | {both / 1024:.2f} GiB | {weights / 2**30:.1f} GiB "
        f"| {row['vmfb_bytes'] / 2**20:.2f} MiB | {row['irpa_bytes'] / 2**30:.2f} GiB |"
    )


def stage_table(row: dict) -> list[str]:
    lines = ["| stage | time | peak: kiln | peak: iree-compile |", "|---|---|---|---|"]
    for stage in row["stages"]:
        child = f"{stage['iree_compile_mib']} MiB" if stage["iree_compile_mib"] else ""
        lines.append(f"| {stage['name']} | {stage['seconds']:.1f} s | {stage['kiln_mib']} MiB | {child} |")
    return lines


def run_all(out: Path, device: str | None) -> str:
    """On the GPU machine: rebuild each artifact's weights, check against eager, time kiln, eager, Inductor."""
    import torch
    from safetensors.torch import load_file

    import kiln
    from kiln.compiler.checkpoint import SafetensorsCheckpoint, bind, meta_parameters
    from kiln.measure.bench import bench
    from kiln.measure.timing import Settings, environment, torch_device_for

    sys.path.insert(0, str(LLAMA))
    import llama

    torch.backends.cuda.matmul.allow_tf32 = False  # the reference computes f32 in f32, as the artifact does
    compiled = json.loads((out / "compile.json").read_text())
    settings = Settings(warmup=3, iterations=20, budget_s=10.0, inductor=True)
    lines = [
        "| model | dtype | tokens | kiln | eager | Inductor | kiln tokens/s | eager tokens/s | Inductor tokens/s | rel. L2 error vs eager |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    torch_device = "cpu"
    for row in compiled["rows"]:
        size, dtype = row["size"], row["dtype"]
        checkpoint = out / "checkpoints" / size
        if not checkpoint.is_dir():
            with torch.device("meta"):
                llama.write_checkpoint(llama.build(size), checkpoint)
        with meta_parameters():
            model = llama.build(size)
        torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        bound = bind(SafetensorsCheckpoint(sorted(checkpoint.glob("*.safetensors"))), model, checkpoint)
        stem = out / f"llama_{size}_{dtype}"
        write_archive(model, bound, torch_dtype, stem.with_suffix(".irpa"))
        state: dict[str, torch.Tensor] = {}
        for file in sorted(checkpoint.glob("*.safetensors")):
            state |= load_file(file)
        model.load_state_dict(state, assign=True)  # the reference: the checkpoint as safetensors reads it
        model = model.to(torch_dtype).eval()
        del state
        module = kiln.load(stem.with_suffix(".vmfb"), device)
        torch_device = torch_device_for(module.manifest.driver, device)
        inputs = llama.prompt(size)
        numerics, timings, error = bench(module, model, inputs, settings, device)
        tokens = inputs[0].numel()
        rate = {side: tokens / (timing.median_ms / 1e3) for side, timing in timings.items()}
        inductor_ms = f"{timings['inductor'].median_ms:.1f} ms" if "inductor" in timings else error or "-"
        lines.append(
            f"| llama_{size} ({row['parameters'] / 1e9:.2f}B) | {dtype} | {tokens} | {timings['kiln'].median_ms:.1f} ms "
            f"| {timings['eager'].median_ms:.1f} ms | {inductor_ms} | {rate['kiln']:.0f} | {rate['eager']:.0f} "
            f"| {rate.get('inductor', 0):.0f} | {numerics.rel_l2_error:.1e} {'ok' if numerics.ok else 'MISMATCH'} |"
        )
        print(lines[-1], flush=True)
        del model, module
        stem.with_suffix(".irpa").unlink()
    machine, versions = environment(torch_device)
    header = f"target {compiled['target']} ({compiled['gpu_arch']}); machine: {machine}; versions: {versions}"
    return "\n".join([header, "", *lines])


def write_archive(model: torch.nn.Module, bound: BoundWeights, dtype: torch.dtype, path: Path) -> None:
    """The .irpa the compile wrote: every parameter under its name, streamed from the checkpoint in `dtype`."""
    from kiln.compiler.parameter_archive import ArchiveEntry, write_parameter_archive

    def writer(name: str) -> Callable[[BinaryIO], None]:
        return lambda file: bound.write(name, dtype, file)

    entries = [ArchiveEntry(name, p.numel() * dtype.itemsize, writer(name)) for name, p in model.named_parameters()]
    write_parameter_archive(path, entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    compile_parser = commands.add_parser("compile", help="compile each size and dtype, one process each (here)")
    compile_parser.add_argument("-o", "--out", type=Path, required=True)
    compile_parser.add_argument("--sizes", nargs="+", choices=SIZES, default=list(SIZES))
    compile_parser.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    compile_parser.add_argument("--target", default="llvm-cpu")
    compile_parser.add_argument("--gpu-arch")
    compile_parser.add_argument("--keep", action="store_true", help="keep the checkpoints written")
    measure_parser = commands.add_parser("measure", help="compile one model in this process (used by compile)")
    measure_parser.add_argument("size", choices=SIZES)
    measure_parser.add_argument("dtype", choices=DTYPES)
    measure_parser.add_argument("stem", type=Path)
    measure_parser.add_argument("--target", default="llvm-cpu")
    measure_parser.add_argument("--gpu-arch")
    table_parser = commands.add_parser("table", help="print the tables of a compile.json")
    table_parser.add_argument("out", type=Path)
    run_parser = commands.add_parser("run", help="check and time compiled models (on the GPU machine)")
    run_parser.add_argument("out", type=Path)
    run_parser.add_argument("--device")
    arguments = parser.parse_args()
    if arguments.command == "compile":
        compile_all(arguments.out, arguments.sizes, arguments.dtypes, arguments.target, arguments.gpu_arch, arguments.keep)
    elif arguments.command == "measure":
        measure_one(arguments.size, arguments.dtype, arguments.stem, arguments.target, arguments.gpu_arch)
    elif arguments.command == "table":
        rows = json.loads((arguments.out / "compile.json").read_text())["rows"]
        print("\n".join(table(rows)))
        for row in rows:
            print(f"\nllama_{row['size']} {row['dtype']}:\n" + "\n".join(stage_table(row)))
    else:
        print(run_all(arguments.out, arguments.device))


if __name__ == "__main__":
    main()
