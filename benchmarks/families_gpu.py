"""The model-family suite on a GPU: compile the families for cuda here, check them on the device machine.

    python benchmarks/families_gpu.py compile -o .device-carry/families-cuda            # here
    python3 benchmarks/families_gpu.py run .device-carry/families-cuda                  # on the GPU machine

`compile` builds each family (kiln.conformance.families: tiny, seeded, nothing downloaded), runs it
in eager PyTorch on this CPU for the reference, compiles it for cuda and writes a kiln.measure
bundle: each artifact with its weights inline (the families are small) and a reference file of
inputs and eager outputs. `run` needs only torch, iree-base-runtime and kiln's runtime (neither
transformers nor timm): it calls each artifact with CUDA tensors and compares its outputs with the
reference by relative L2 error (kiln.runtime.numerics: 1e-3 for f32, as for every device run),
then prints the table and writes `results.json` into the bundle.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import click
import torch

from kiln.errors import KilnError
from kiln.measure.bundle import Bundle, Entry, add_artifact, open_entry, read_reference, write_reference
from kiln.measure.timing import environment

# The default cuda subset: the CI families, the mixture-of-experts LMs, and the families whose
# fixes touch code generation (Whisper's cuda retry, FNet's DFT, Funnel's pooling, Swin's and the
# timm models' tables, TinyViT's attention mask). Compiling timm's needs timm; running needs neither.
SUBSET = (
    "gpt2", "llama", "bert", "t5", "whisper", "swin", "mixtral", "qwen2_moe", "olmoe", "granitemoe", "jamba",
    "deepseek_v3", "gpt_oss", "fnet", "funnel", "vit", "wav2vec2", "qwen3", "gemma2", "bart",
    "timm_resnet", "timm_selecsls", "timm_levit", "timm_tiny_vit", "timm_eva02",
)  # fmt: skip


def compile_families(out: Path, patterns: tuple[str, ...], gpu_arch: str, target: str = "cuda") -> None:
    from kiln.compiler import CompileOptions, run_pipeline, spec_from_module
    from kiln.conformance.families import FAMILIES
    from kiln.targets import get_target

    out.mkdir(parents=True, exist_ok=True)
    selected = [family for family in FAMILIES if any(fnmatch.fnmatchcase(family.name, p) for p in patterns)]
    entries = []
    for family in selected:
        entry = Entry(family.name, labels={"library": family.library})
        try:
            module, inputs = family.instantiate()
            with torch.no_grad():
                expected = module(*inputs)
            entry = replace(entry, reference=write_reference(out, family.name, {"main": {"inputs": list(inputs), "expected": [expected]}}))
            start = time.perf_counter()
            options = CompileOptions(target=target, gpu_arch=gpu_arch if target == "cuda" else None, params="inline")
            compiled = run_pipeline(spec_from_module(module, inputs), options).compiled
            entry = replace(add_artifact(out, entry, compiled), compile_s=round(time.perf_counter() - start, 1))
            print(f"{family.name}: compiled in {entry.compile_s} s", file=sys.stderr, flush=True)
        except KilnError as error:
            entry = replace(entry, error=f"[{error.stage}] {error.message}")
            print(f"{family.name}: {entry.error}", file=sys.stderr, flush=True)
        entries.append(entry)
    machine, versions = environment("cpu")
    Bundle(
        target=target,
        driver=get_target(target).driver,
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=" ".join(["python", "benchmarks/families_gpu.py", *sys.argv[1:]]),
        compiled_on=machine,
        versions=versions,
        settings={"gpu_arch": gpu_arch},
        entries=tuple(entries),
    ).write(out)


def run_families(folder: Path, device: str) -> list[dict[str, object]]:
    from kiln.runtime.numerics import compare_all

    bundle = Bundle.read(folder)
    rows = []
    for entry in bundle.entries:
        row: dict[str, object] = {"family": entry.name, "compile_s": entry.compile_s}
        if entry.error is not None:
            rows.append({**row, "result": f"does not compile: {entry.error.splitlines()[0][:200]}"})
            continue
        try:
            reference = read_reference(folder, entry)["main"]
            inputs = [tensor.to("cuda" if device.startswith("cuda") else "cpu") for tensor in reference["inputs"]]
            actual = open_entry(folder, entry, device)(*inputs)
            actual = list(actual) if isinstance(actual, tuple) else [actual]
            comparisons = compare_all([tensor.cpu() for tensor in actual], reference["expected"])
        except Exception as error:  # a row, not a crash: the table is the point
            rows.append({**row, "result": f"FAIL: {type(error).__name__}: {str(error).strip()[:200]}"})
            continue
        worst = max(comparison.rel_l2 for comparison in comparisons)
        ok = all(comparison.close_in_l2 for comparison in comparisons)
        rows.append({**row, "rel_l2": worst, "result": "pass" if ok else "MISMATCH"})
    return rows


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """The model-family suite on cuda: compile here, check on the GPU machine."""


@main.command("compile")
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True, help="The bundle folder to write.")
@click.option("--only", "patterns", multiple=True, metavar="GLOB", help="Families to compile [default: the cuda subset].")
@click.option("--gpu-arch", default="sm_80", show_default=True)
@click.option("--target", type=click.Choice(["cuda", "llvm-cpu"]), default="cuda", show_default=True, help="llvm-cpu: to try the run side here.")
def compile_command(out: Path, patterns: tuple[str, ...], gpu_arch: str, target: str) -> None:
    """Compile the families for cuda into a bundle, with CPU eager references."""
    compile_families(out, patterns or SUBSET, gpu_arch, target)


@main.command("run")
@click.argument("folder", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--device", default="cuda", show_default=True, help="cuda, cuda:1; cpu for an llvm-cpu bundle.")
def run_command(folder: Path, device: str) -> None:
    """Run each family's artifact on the GPU and compare it with the CPU eager reference."""
    rows = run_families(folder, device)
    click.echo("| family | compile s | result | rel. L2 |\n|---|---|---|---|")
    for row in rows:
        error = f"{row['rel_l2']:.1e}" if "rel_l2" in row else ""
        click.echo(f"| {row['family']} | {row['compile_s'] or ''} | {row['result']} | {error} |")
    passed = sum(row["result"] == "pass" for row in rows)
    click.echo(f"\n{device}: {passed} of {len(rows)} families match the eager reference")
    (folder / "results.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
