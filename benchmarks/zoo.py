"""The model zoo's table: compile time, artifact size and run time of each zoo model, for one target.

    python benchmarks/zoo.py compile --target llvm-cpu -o build/zoo-cpu      # here (needs the compiler)
    python benchmarks/zoo.py run build/zoo-cpu                               # anywhere with kiln.runtime

`compile` writes a kiln.measure bundle whose artifacts keep their weights external (`--params
external`) and leave the `.irpa` behind: `run` rebuilds each model from its file (seeded, no
downloads), writes its weights into the archive the artifact reads, checks the artifact against
eager PyTorch on the same device, and times both. So the artifacts travel to a GPU machine without
their weights, and the run side needs only torch, iree-base-runtime and kiln's runtime (plus
transformers for GPT-2 and BERT), never the compiler.
"""

from __future__ import annotations

import datetime
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click
import torch

from kiln.cli.options import TARGET_NAMES, TimingChoice, timing_options
from kiln.measure.bundle import Bundle, Entry, ModelRecipe, open_entry, rebuild
from kiln.measure.timing import environment, torch_device_for
from kiln.runtime.module import LoadedModule

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "examples" / "zoo"
MODELS = ("gpt2", "bert", "resnet50", "vit", "mixtral", "whisper")


def compile_zoo(target: str, gpu_arch: str | None, out: Path, names: tuple[str, ...]) -> None:
    from kiln.targets import get_target

    out.mkdir(parents=True, exist_ok=True)
    kiln = str(Path(sys.executable).parent / "kiln")
    entries = []
    for name in names:
        command = [kiln, "compile", str(ZOO / f"{name}.py"), "-o", str(out / f"{name}.vmfb"), "-q"]
        command += ["--target", target, "--params", "external", "--dump-dir", str(out / f"{name}.stages")]
        command += ["--gpu-arch", gpu_arch] if gpu_arch else []
        start = time.perf_counter()
        subprocess.run(command, check=True)
        labels = {
            "vmfb_mib": (out / f"{name}.vmfb").stat().st_size / 2**20,
            "irpa_mib": (out / f"{name}.irpa").stat().st_size / 2**20,
        }
        (out / f"{name}.irpa").unlink()  # `run` rebuilds it from the model file
        shutil.rmtree(out / f"{name}.stages")
        recipe = ModelRecipe(f"examples/zoo/{name}.py")
        entry = Entry(name, f"{name}.vmfb", round(time.perf_counter() - start, 1), model=recipe, parameters=f"{name}.irpa", labels=labels)
        entries.append(entry)
        print(f"{name}: {entry.compile_s} s, {labels}", flush=True)
    machine, versions = environment("cpu")
    Bundle(
        target=target,
        driver=get_target(target).driver,
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        command=" ".join(["python", "benchmarks/zoo.py", *sys.argv[1:]]),
        compiled_on=machine,
        versions=versions,
        settings={"gpu_arch": gpu_arch},
        entries=tuple(entries),
    ).write(out)


def open_model(out: Path, entry: Entry, device: str | None) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], LoadedModule]:
    """A zoo entry's eager model, example inputs and artifact, the weights written afresh from the
    model file (the bundle travels without them)."""
    model, inputs = rebuild(entry, ROOT)
    (out / (entry.parameters or "")).unlink(missing_ok=True)
    return model, inputs, open_entry(out, entry, device, model)


def run_zoo(out: Path, timing: TimingChoice) -> str:
    from kiln.measure.bench import bench

    bundle = Bundle.read(out)
    inductor = timing.settings.inductor
    rows = [
        "| model | parameters | compile | .vmfb | .irpa | kiln | eager | rel. L2 error vs eager |" + (" Inductor |" if inductor else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|" if inductor else ""),
    ]
    settings = timing.settings
    torch_device = torch_device_for(bundle.driver, timing.device)
    for entry in bundle.entries:
        model, inputs, module = open_model(out, entry, timing.device)
        numerics, timings, _ = bench(module, model, inputs, settings, timing.device)
        count = sum(p.numel() for p in model.parameters()) / 1e6
        labels = entry.labels
        rows.append(
            f"| {entry.name} | {count:.1f}M | {entry.compile_s:.0f} s | {labels['vmfb_mib']:.2f} MiB "
            f"| {labels['irpa_mib']:.0f} MiB | {timings['kiln'].median_ms:.2f} ms | {timings['eager'].median_ms:.2f} ms "
            f"| {numerics.rel_l2_error:.1e} {'ok' if numerics.ok else 'MISMATCH'} |"
            + (f" {timings['inductor'].median_ms:.2f} ms |" if "inductor" in timings else " failed |" if inductor else "")
        )
        print(rows[-1], flush=True)
    machine, versions = environment(torch_device)
    gpu_arch = bundle.settings.get("gpu_arch")
    title = f"target {bundle.target}" + (f" ({gpu_arch})" if gpu_arch else "")
    return "\n".join([f"{title}; machine: {machine}; versions: {versions}", "", *rows])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """The model zoo: compile here, check and time anywhere with kiln's runtime."""


@main.command("compile")
@click.option("--target", type=click.Choice(TARGET_NAMES), default="llvm-cpu", show_default=True)
@click.option("--gpu-arch", help="GPU targets: the architecture, e.g. sm_80.")
@click.option("--model", "names", multiple=True, type=click.Choice(MODELS), help="Zoo model (repeatable) [default: all].")
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True, help="The bundle folder to write.")
def compile_command(target: str, gpu_arch: str | None, names: tuple[str, ...], out: Path) -> None:
    """Compile the zoo models into a bundle, their weights left behind."""
    compile_zoo(target, gpu_arch, out, names or MODELS)


@main.command("run")
@click.argument("out", type=click.Path(path_type=Path, exists=True, file_okay=False))
@timing_options(warmup=3, iterations=20, time_s=10.0)
def run_command(out: Path, timing: TimingChoice) -> None:
    """Check and time the compiled zoo models against eager PyTorch on the artifacts' device."""
    torch.manual_seed(0)
    # The reference computes in f32 as the artifact does: no TF32 in cuDNN's convolutions (torch's
    # default) or in matmuls, whose error ResNet-50's random-init activations amplify past 1e-3.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    click.echo(run_zoo(out, timing))


if __name__ == "__main__":
    main()
