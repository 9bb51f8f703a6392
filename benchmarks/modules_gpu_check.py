"""The module suite's calling convention on a real GPU: state, write-back, dtypes and nesting there.

The module suite (kiln.conformance.modules) runs on llvm-cpu in CI; this checks the same cases'
artifacts on a GPU, where the runtime moves values between torch's CUDA tensors and IREE: state
kept in the artifact (mutable globals on the device), inputs written back into CUDA tensors,
float64 carried as float32 and converted at the boundary, uint8 and bool results, nested results.

    # here: kiln installed, no GPU needed (cross-compiles each case, computes eager's answers on this CPU)
    python benchmarks/modules_gpu_check.py compile -o .device-carry/modules_gpu --target cuda:sm_80
    # there: torch (CUDA), iree-base-runtime and this checkout; imports kiln.runtime only
    python3 benchmarks/modules_gpu_check.py run .device-carry/modules_gpu

`compile` writes `<case>.vmfb` and `.json` per case that compiles, and `<case>.pt`: for each call,
the inputs, eager's result as leaves with its nesting, and the inputs after the call. `run`
loads each artifact on the GPU, calls it with the inputs moved there, and compares: the nesting,
each leaf (kiln.runtime.numerics: dtype, shape, values within --verify's tolerances), that tensor
results are on the GPU, and the inputs after the call.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import click
import torch
from torch.utils._pytree import tree_flatten, tree_map


def _nesting(value: Any) -> str:
    """forward's nesting in one line, containers by class name (the GPU side cannot import the cases'
    own classes, and the runtime rebuilds a named tuple it cannot import under the same name)."""

    def text(spec: Any) -> str:
        if spec.is_leaf():
            return "*"
        cls = spec.context if spec.type is collections.namedtuple else spec.type
        return f"{getattr(cls, '__name__', cls)}({', '.join(text(child) for child in spec.children())})"

    return text(tree_flatten(value)[1])


@click.group()
def main() -> None:
    """Check the module suite's artifacts on a GPU (see the file's docstring)."""


@main.command("compile")
@click.option("-o", "--out", type=click.Path(path_type=Path), required=True)
@click.option("--target", "target_arch", default="cuda:sm_80", show_default=True, help="TARGET:ARCH, e.g. cuda:sm_80, vulkan-spirv:ampere.")
@click.option("--only", multiple=True, help="Case names (default: every case kiln passes on llvm-cpu).")
def compile_cases(out: Path, target_arch: str, only: tuple[str, ...]) -> None:
    import kiln
    from kiln.conformance.modules import MODULE_CASES
    from kiln.conformance.support import read_status, status_path

    target, _, arch = target_arch.partition(":")
    passing = {name for name, row in read_status(status_path("modules")).items() if row.get("llvm-cpu") and row["llvm-cpu"].ok}
    out.mkdir(parents=True, exist_ok=True)
    compiled = []
    for case in MODULE_CASES:
        if (only and case.name not in only) or (not only and case.name not in passing):
            continue
        try:
            kiln.compile(case.module(), case.inputs(), target=target, gpu_arch=arch or None).save(out / f"{case.name}.vmfb")
        except kiln.KilnError as error:
            click.echo(f"{case.name}: does not compile for {target_arch}: {error.message.splitlines()[0][:160]}")
            continue
        eager, calls = case.module(), []
        for _ in range(case.calls):
            inputs, after = case.inputs(), case.inputs()
            with torch.no_grad():
                expected = eager(*after)
            leaves, _ = tree_flatten(expected)
            calls.append({"inputs": inputs, "leaves": leaves, "nesting": _nesting(expected), "after": after})
        torch.save({"calls": calls, "tolerance": case.tolerance}, out / f"{case.name}.pt")
        compiled.append(case.name)
    (out / "cases.json").write_text(json.dumps({"target": target_arch, "cases": compiled}, indent=1))
    click.echo(f"{len(compiled)} cases compiled for {target_arch} into {out}")


@main.command("run")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--device", default=None, help="cuda, cuda:1, vulkan [default: each artifact's own].")
def run_cases(folder: Path, device: str | None) -> None:
    from kiln.runtime import load
    from kiln.runtime.numerics import Tolerance, compare

    names = json.loads((folder / "cases.json").read_text())["cases"]
    failures = 0
    for name in names:
        module = load(folder / f"{name}.vmfb", device)
        reference = torch.load(folder / f"{name}.pt", weights_only=False)
        tolerance = reference["tolerance"]
        override = Tolerance(tolerance[0], tolerance[1], float("inf")) if tolerance else None
        verdict = "pass"
        for index, call in enumerate(reference["calls"]):
            on_gpu = tree_map(lambda v: v.cuda() if isinstance(v, torch.Tensor) and torch.cuda.is_available() else v, call["inputs"])
            got = module(*on_gpu)
            leaves, _ = tree_flatten(got)
            problems = [] if _nesting(got) == call["nesting"] else [f"nesting {_nesting(got)}, eager {call['nesting']}"]
            for position, (g, w) in enumerate(zip(leaves, call["leaves"], strict=False)):
                if isinstance(w, torch.Tensor):
                    if not isinstance(g, torch.Tensor):
                        problems.append(f"result {position}: {type(g).__name__}, eager a tensor")
                        continue
                    if torch.cuda.is_available() and not g.is_cuda:
                        problems.append(f"result {position}: came back on {g.device}")
                    comparison = compare(g.cpu(), w, override)
                    if not comparison.close:
                        problems.append(f"result {position}: {comparison.describe()}")
                elif g != w:
                    problems.append(f"result {position}: {g!r}, eager {w!r}")
            after, _ = tree_flatten(on_gpu)
            for position, (g, w) in enumerate(zip(after, tree_flatten(call["after"])[0], strict=True)):
                if isinstance(w, torch.Tensor) and not compare(g.cpu(), w, override).close:
                    problems.append(f"input {position} after the call differs from eager's")
            if problems:
                verdict = f"FAIL (call {index + 1}): " + "; ".join(problems)
                break
        failures += verdict != "pass"
        click.echo(f"{name:<36} {verdict}")
    click.echo(f"{len(names) - failures} of {len(names)} cases pass on {device or 'each artifact device'}")


if __name__ == "__main__":
    main()
