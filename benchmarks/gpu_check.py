"""Run kiln's GPU artifacts on a real GPU and compare them with eager PyTorch there; print a table.

Two halves, because the GPU machine needs neither the compiler nor a kiln install:

    # here: any machine with kiln installed, no GPU needed (cross-compiles every example)
    python benchmarks/gpu_check.py compile --out .device-carry/gpu_check \\
        --target cuda:sm_90 --target vulkan-spirv:sm_90
    # there: python with torch (CUDA) and iree-base-runtime; run from the repository root
    python3 benchmarks/gpu_check.py run .device-carry/gpu_check --markdown gpu_check.md

`compile` writes each artifact as `<example>.<target>.<arch>.vmfb` (+ .json), one
`<example>.pt` per example (the example inputs, the weights, and the outputs of eager PyTorch on
this CPU), and `failures.json` for whatever did not compile. `run` rebuilds each model from
examples/, loads those weights, and runs eager PyTorch on the GPU next to the artifact, loaded
with `kiln.load` on the same GPU and called with CUDA tensors. Each row passes when the outputs
agree within the dtype's tolerance (kiln's --verify defaults) and come back on the GPU.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import platform
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SKIPPED_EXAMPLES = ("demo",)  # a script that loads an artifact, not a model

# kiln --verify's defaults (kiln.compiler.verify, which needs the compiler to import).
TOLERANCES: dict[torch.dtype, float] = {torch.float16: 1e-2, torch.bfloat16: 4e-2}
FLOAT32_TOLERANCE = 1e-4


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


def compile_examples(out: Path, targets: list[str], names: list[str]) -> None:
    from kiln.compiler import CompileOptions, load_model_file, run_pipeline
    from kiln.errors import KilnError

    out.mkdir(parents=True, exist_ok=True)
    failures_file = out / "failures.json"
    failures = json.loads(failures_file.read_text()) if failures_file.is_file() else []
    for name in names:
        spec = load_model_file(EXAMPLES / f"{name}.py")
        with torch.no_grad():
            expected = _as_tuple(spec.module(*spec.example_inputs))
        bundle = {
            "inputs": list(spec.example_inputs),
            "state_dict": spec.module.state_dict(),
            "expected": list(expected),
        }
        torch.save(bundle, out / f"{name}.pt")
        for target_arch in targets:
            target, _, arch = target_arch.partition(":")
            options = CompileOptions(target=target, gpu_arch=arch or None)
            try:
                compiled = run_pipeline(spec, options).compiled
            except KilnError as error:
                print(f"{name} {target_arch}: compile failed: {error.message}", file=sys.stderr)
                failures.append(
                    {
                        "model": name,
                        "target": target,
                        "arch": arch,
                        "dtype": _dtypes(spec.example_inputs),
                        "why": error.message,
                    }
                )
                continue
            assert compiled is not None
            compiled_arch = compiled.manifest.target_details.get("gpu_arch") or arch or "default"
            path = compiled.save(out / f"{name}.{target}.{compiled_arch}.vmfb")
            note = compiled.manifest.target_details.get("gpu_arch_note")
            print(
                f"{name} {target_arch}: wrote {path.name}" + (f" ({note})" if note else ""), file=sys.stderr
            )
    failures_file.write_text(json.dumps(failures, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------
# run (on the GPU machine)


def run_artifacts(folder: Path, only: str) -> list[Row]:
    runtime = _import_kiln_runtime()
    torch.backends.cuda.matmul.allow_tf32 = False  # an f32 reference computed in f32, not tf32
    torch.backends.cudnn.allow_tf32 = False
    rows = [_check_artifact(runtime, vmfb) for vmfb in sorted(folder.glob(f"{only}.vmfb"))]
    failures_file = folder / "failures.json"
    for failure in json.loads(failures_file.read_text()) if failures_file.is_file() and only == "*" else []:
        why = "FAIL: does not compile: " + failure["why"].splitlines()[0][:160]
        rows.append(
            Row(failure["model"], failure["dtype"], failure["target"], failure["arch"], None, None, None, why)
        )
    return rows


def _check_artifact(runtime: Any, vmfb: Path) -> Row:
    manifest = json.loads(vmfb.with_suffix(".json").read_text())
    name = vmfb.name.split(".")[0]
    details = manifest["target_details"]
    target, arch = manifest["target"], details.get("gpu_arch", details.get("cpu", ""))
    if details.get("gpu_arch_requested", arch) not in ("", arch):
        arch = f"{details['gpu_arch_requested']} -> {arch}"
    bundle = torch.load(vmfb.parent / f"{name}.pt", weights_only=True)
    dtype = _dtypes(bundle["inputs"])
    gpu = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: try the script out on a machine without a GPU
    try:
        module = _eager_model(name, bundle["state_dict"]).to(gpu)
        inputs = [tensor.to(gpu) for tensor in bundle["inputs"]]
        with torch.no_grad():
            eager = _as_tuple(module(*inputs))
        artifact = runtime.load(vmfb, device=_device_kind(manifest["driver"]))
        actual = _as_tuple(artifact(*inputs))
    except Exception as error:  # a row, not a crash: the table is the point
        print(f"{vmfb.name}: {type(error).__name__}: {error}", file=sys.stderr)  # all of it, for the log
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return Row(name, dtype, target, arch, None, None, None, f"FAIL: {first_line[:240]}")
    errors_vs_gpu = [_max_abs_error(got, want) for got, want in zip(actual, eager, strict=True)]
    errors_vs_cpu = [_max_abs_error(got, want) for got, want in zip(actual, bundle["expected"], strict=True)]
    tolerances = [TOLERANCES.get(want.dtype, FLOAT32_TOLERANCE) for want in eager]
    close = all(
        got.dtype == want.dtype
        and got.shape == want.shape
        and got.device == want.device  # CUDA tensors in, CUDA tensors out
        and torch.allclose(got.double(), want.double(), rtol=tolerance, atol=tolerance)
        for got, want, tolerance in zip(actual, eager, tolerances, strict=True)
    )
    return Row(
        name,
        dtype,
        target,
        arch,
        max(errors_vs_gpu),
        max(errors_vs_cpu),
        max(tolerances),
        "pass" if close else "FAIL",
    )


def runtime_checks(folder: Path) -> list[tuple[str, str]]:
    """The runtime's promises beyond numbers: device selection, CPU inputs, and the errors."""
    runtime = _import_kiln_runtime()
    from kiln.errors import KilnError

    vmfb = folder / "mlp.cuda.sm_80.vmfb"
    if not vmfb.is_file():
        return []
    bundle = torch.load(folder / "mlp.pt", weights_only=True)
    x = bundle["inputs"][0]
    checks = []

    def check(what: str, action: Any) -> None:
        try:
            checks.append((what, action()))
        except KilnError as error:
            checks.append((what, f"KilnError: {error.message}"))
        except Exception as error:
            checks.append((what, f"UNEXPECTED {type(error).__name__}: {error}"))

    check(
        "device='cuda:0', CPU tensor in", lambda: f"output on {runtime.load(vmfb, device='cuda:0')(x).device}"
    )
    check(
        "device='cuda', numpy in",
        lambda: f"output {type(runtime.load(vmfb, device='cuda')(x.numpy(), as_numpy=True)).__name__}",
    )
    check(
        f"device='cuda:{torch.cuda.device_count()}' (one past the last)",
        lambda: runtime.load(vmfb, device=f"cuda:{torch.cuda.device_count()}"),
    )
    check("device='vulkan' for a cuda artifact", lambda: runtime.load(vmfb, device="vulkan"))
    return checks


def _import_kiln_runtime() -> Any:
    try:
        import kiln.runtime
    except (
        ImportError
    ):  # a plain checkout: map the kiln.* packages onto the repository's folders, as pyproject does
        sys.path.insert(0, str(ROOT))
        import kiln

        kiln.__path__.append(str(ROOT))
        import kiln.runtime
    return kiln.runtime


def _eager_model(name: str, state_dict: dict[str, torch.Tensor]) -> torch.nn.Module:
    spec = importlib.util.spec_from_file_location(f"gpu_check_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    namespace = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(namespace)
    module = namespace.model if hasattr(namespace, "model") else namespace.get_model()
    module.load_state_dict(state_dict)
    return module.eval()


def _device_kind(driver: str) -> str:
    return {"cuda": "cuda", "vulkan": "vulkan", "hip": "rocm"}.get(driver, "cpu")


def _max_abs_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double().cpu() - want.double().cpu()).abs().max()) if want.numel() else 0.0


def _dtypes(tensors: Any) -> str:
    return "+".join(dict.fromkeys(str(t.dtype).removeprefix("torch.") for t in tensors))


def _as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)


# ---------------------------------------------------------------------------------------------
# report


def table(rows: list[Row]) -> str:
    lines = [
        "| model | dtype | target | arch | max abs error vs eager on the GPU | vs eager on CPU | tolerance | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = (
            row.model,
            row.dtype,
            row.target,
            row.arch,
            _number(row.error_vs_gpu),
            _number(row.error_vs_cpu),
            _number(row.tolerance),
            row.result,
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def environment() -> list[str]:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        driver = (
            smi.stdout.strip().splitlines()[0] if smi.returncode == 0 and smi.stdout.strip() else "unknown"
        )
    except (OSError, subprocess.TimeoutExpired):
        driver = "unknown"
    from importlib.metadata import version

    return [
        f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- device: {gpu} (driver, compute capability: {driver}); {platform.machine()}, Python {platform.python_version()}",
        f"- torch {torch.__version__}, iree-base-runtime {version('iree-base-runtime')}",
    ]


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    compile_parser = commands.add_parser("compile", help="cross-compile the examples (here)")
    compile_parser.add_argument("--out", type=Path, required=True)
    compile_parser.add_argument("--target", action="append", required=True, help="TARGET[:ARCH], repeatable")
    compile_parser.add_argument("--example", action="append", help="example name, repeatable [default: all]")
    run_parser = commands.add_parser("run", help="run the artifacts on the GPU and print the table (there)")
    run_parser.add_argument("folder", type=Path)
    run_parser.add_argument("--markdown", type=Path, help="also write the table and environment to this file")
    run_parser.add_argument("--only", default="*", metavar="GLOB", help="artifacts to run, e.g. 'mlp.cuda.*'")
    arguments = parser.parse_args()

    if arguments.command == "compile":
        names = arguments.example or sorted(
            p.stem for p in EXAMPLES.glob("*.py") if p.stem not in SKIPPED_EXAMPLES
        )
        compile_examples(arguments.out, arguments.target, names)
        return
    rows = run_artifacts(arguments.folder, arguments.only)
    try:
        checks = (
            runtime_checks(arguments.folder) if torch.cuda.is_available() and arguments.only == "*" else []
        )
    except Exception:
        traceback.print_exc()
        checks = []
    report = [*environment(), "", table(rows), ""]
    if checks:
        report += [
            "Runtime checks (mlp, cuda):",
            "",
            *(f"- {what}: {outcome}" for what, outcome in checks),
            "",
        ]
    text = "\n".join(report)
    print(text)
    if arguments.markdown:
        arguments.markdown.write_text(text)
    sys.exit(0 if all(row.result == "pass" for row in rows) else 1)


if __name__ == "__main__":
    main()
