"""The model zoo's table: compile time, artifact size and run time of each zoo model, for one target.

    python benchmarks/zoo.py compile --target llvm-cpu -o build/zoo-cpu      # here (needs the compiler)
    python benchmarks/zoo.py run build/zoo-cpu                               # anywhere with kiln.runtime

Artifacts keep their weights external (`--params external`): `run` rebuilds each model from its
file (seeded, no downloads), writes its weights into the `.irpa` the artifact reads, checks the
artifact against eager PyTorch on the same device, and times both. So the artifacts travel to a GPU
machine without their weights, and the run side needs only torch, iree-base-runtime and kiln's
runtime (plus transformers for GPT-2 and BERT), never the compiler.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

ZOO = Path(__file__).resolve().parent.parent / "examples" / "zoo"
MODELS = ("gpt2", "bert", "resnet50", "vit", "mixtral")


def compile_zoo(target: str, gpu_arch: str | None, out: Path, models: tuple[str, ...] = MODELS) -> None:
    out.mkdir(parents=True, exist_ok=True)
    records = {}
    kiln = str(Path(sys.executable).parent / "kiln")
    for name in models:
        command = [kiln, "compile", str(ZOO / f"{name}.py"), "-o", str(out / f"{name}.vmfb"), "-q"]
        command += ["--target", target, "--params", "external", "--dump-dir", str(out / f"{name}.stages")]
        command += ["--gpu-arch", gpu_arch] if gpu_arch else []
        start = time.perf_counter()
        subprocess.run(command, check=True)
        records[name] = {
            "compile_s": round(time.perf_counter() - start, 1),
            "vmfb_mib": (out / f"{name}.vmfb").stat().st_size / 2**20,
            "irpa_mib": (out / f"{name}.irpa").stat().st_size / 2**20,
        }
        (out / f"{name}.irpa").unlink()  # `run` rebuilds it from the model file
        shutil.rmtree(out / f"{name}.stages")
        print(f"{name}: {records[name]}", flush=True)
    (out / "compile.json").write_text(json.dumps({"target": target, "gpu_arch": gpu_arch, "models": records}, indent=2))


def run_zoo(out: Path, device: str | None, inductor: bool = False) -> str:
    import iree.runtime as rt

    import kiln
    from kiln.measure.bench import bench
    from kiln.measure.timing import Settings, environment, torch_device_for
    from kiln.runtime.tensors import to_host_array

    compiled = json.loads((out / "compile.json").read_text())
    rows = [
        "| model | parameters | compile | .vmfb | .irpa | kiln | eager | rel. L2 error vs eager |"
        + (" Inductor |" if inductor else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|" if inductor else ""),
    ]
    settings = Settings(warmup=3, iterations=20, budget_s=10.0, inductor=inductor)
    torch_device = "cpu"
    for name, record in compiled["models"].items():
        model_file = _load(ZOO / f"{name}.py")
        model = model_file.get_model().eval()
        inputs = model_file.get_example_inputs()
        weights = dict(model.named_parameters(remove_duplicate=False)) | dict(model.named_buffers(remove_duplicate=False))
        rt.save_archive_file({key: to_host_array(t.detach()) for key, t in weights.items()}, out / f"{name}.irpa")
        module = kiln.load(out / f"{name}.vmfb", device)
        torch_device = torch_device_for(module.manifest.driver, device)
        numerics, timings, _ = bench(module, model, inputs, settings, device)
        count = sum(p.numel() for p in model.parameters()) / 1e6
        rows.append(
            f"| {name} | {count:.1f}M | {record['compile_s']:.0f} s | {record['vmfb_mib']:.2f} MiB "
            f"| {record['irpa_mib']:.0f} MiB | {timings['kiln'].median_ms:.2f} ms | {timings['eager'].median_ms:.2f} ms "
            f"| {numerics.rel_l2_error:.1e} {'ok' if numerics.ok else 'MISMATCH'} |"
            + (f" {_median(timings, 'inductor')} |" if inductor else "")
        )
        print(rows[-1], flush=True)
    machine, versions = environment(torch_device)
    header = f"target {compiled['target']}" + (f" ({compiled['gpu_arch']})" if compiled["gpu_arch"] else "")
    return "\n".join([f"{header}; machine: {machine}; versions: {versions}", "", *rows])


def _median(timings: dict, key: str) -> str:
    return f"{timings[key].median_ms:.2f} ms" if key in timings else "failed"


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    compile_parser = commands.add_parser("compile", help="compile every zoo model (here)")
    compile_parser.add_argument("--target", default="llvm-cpu")
    compile_parser.add_argument("--gpu-arch")
    compile_parser.add_argument("-o", "--out", type=Path, required=True)
    compile_parser.add_argument("--models", nargs="+", choices=MODELS, default=MODELS, help="default: all")
    run_parser = commands.add_parser("run", help="check and time compiled zoo models")
    run_parser.add_argument("out", type=Path)
    run_parser.add_argument("--device")
    run_parser.add_argument("--inductor", action="store_true", help="also time torch.compile")
    arguments = parser.parse_args()
    if arguments.command == "compile":
        compile_zoo(arguments.target, arguments.gpu_arch, arguments.out, tuple(arguments.models))
    else:
        torch.manual_seed(0)
        # The reference computes in f32 as the artifact does: no TF32 in cuDNN's convolutions (torch's
        # default) or in matmuls, whose error ResNet-50's random-init activations amplify past 1e-3.
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        print(run_zoo(arguments.out, arguments.device, arguments.inductor))


if __name__ == "__main__":
    main()
