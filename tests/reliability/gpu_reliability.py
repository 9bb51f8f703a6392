"""The reliability checks that need a GPU: index checks on CUDA, their cost there, threads, devices.

Two halves, because the GPU machine has no compiler:

    # here (no GPU needed): compile the artifacts and eager references into a folder
    python tests/reliability/gpu_reliability.py compile -o .device-carry/reliability
    # there: torch with CUDA, iree-base-runtime and this checkout; from the repository root
    python3 tests/reliability/gpu_reliability.py run .device-carry/reliability

`run` prints one line per check and a JSON summary (with --json, to a file); it exits non-zero if
any check fails. The checks:
- an embedding model (CUDA, torch hand-off) with ids in range matches eager PyTorch on the GPU;
  ids out of range are a KilnError naming the input (eager raises IndexError);
- the same artifact compiled without check-index-inputs, called with an out-of-range id in a
  child process: what the GPU does without the check (recorded, not judged);
- the check's cost: median time per call with and without it, CUDA tensors in;
- 8 threads calling one CUDA module 2,000 times each, every result equal to the single-threaded one;
- a CUDA artifact called with CPU tensors, and a CPU artifact with CUDA tensors: results equal the
  same-device call's; a damaged CUDA .vmfb: a KilnError naming the file.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import click
import torch
from torch import nn

UNCHECKED_S = 60  # how long the call without the check may take before it counts as hung
MODELS = {"checked": "lookup.vmfb", "unchecked": "lookup-unchecked.vmfb", "cpu": "lookup-cpu.vmfb"}


class Lookup(nn.Module):
    """Token ids through a 32,000-row embedding table (8 MiB: the carried folder stays under 40 MiB), then a projection: a language model's front."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.table = nn.Embedding(32_000, 64)
        self.out = nn.Linear(64, 64)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.table(ids))


@click.group()
def main() -> None:
    """Reliability checks on a GPU: compile here, run there."""


@main.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Folder to write.")
@click.option("--gpu-arch", default="sm_80", show_default=True, help="CUDA architecture to compile for.")
def compile(output: Path, gpu_arch: str) -> None:
    """Compile the artifacts (CUDA with and without the index check, and llvm-cpu) and the reference."""
    import kiln

    model = Lookup().eval()
    ids = torch.randint(0, 32_000, (8, 128), generator=torch.Generator().manual_seed(1))
    builds = {
        "checked": {"target": "cuda", "gpu_arch": gpu_arch},
        "unchecked": {"target": "cuda", "gpu_arch": gpu_arch, "disable_passes": ("check-index-inputs",)},
        "cpu": {"target": "llvm-cpu", "cpu": "x86-64-v3"},
    }
    for name, options in builds.items():
        options = dict(options)
        target = options.pop("target")
        kiln.compile(model, (ids,), target, params="external", **options).save(output / MODELS[name])
        click.echo(f"wrote {output / MODELS[name]}")
    torch.save({"ids": ids, "state": model.state_dict()}, output / "reference.pt")


@main.command()
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Also write the summary here.")
def run(folder: Path, json_path: Path | None) -> None:
    """Run every check on the local GPU; exit 1 if any fails."""
    import kiln
    from kiln.errors import KilnError

    reference = torch.load(folder / "reference.pt", weights_only=True)
    model = Lookup().eval()
    model.load_state_dict(reference["state"])
    gpu_model = Lookup().eval().cuda()
    gpu_model.load_state_dict(reference["state"])
    ids = reference["ids"].cuda()
    results: dict[str, object] = {"device": torch.cuda.get_device_name()}
    failures: list[str] = []

    def check(name: str, ok: bool, detail: object) -> None:
        results[name] = detail
        click.echo(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        if not ok:
            failures.append(name)

    checked = kiln.load(folder / MODELS["checked"])
    with torch.no_grad():
        expected = gpu_model(ids)
    got = checked(ids)
    error = (got - expected).abs().max().item()
    check("in-range ids match eager on the GPU", got.is_cuda and error < 1e-3, f"max abs error {error:.2e}")
    for bad in (32_000, 10**9, -1):
        wrong = ids.clone()
        wrong[3, 7] = bad
        try:
            checked(wrong)
            check(f"id {bad} is an error", False, "no error")
        except KilnError as exc:
            check(f"id {bad} is an error", "input 'ids' holds an index outside [0, 32000)" in str(exc), str(exc)[:160])
    try:  # an out-of-range read on the GPU may fault, or hang the context: recorded either way
        survey = subprocess.run(
            [sys.executable, __file__, "unchecked-call", str(folder)], capture_output=True, text=True, timeout=UNCHECKED_S
        )
        outcome = f"exit {survey.returncode}: {(survey.stdout + survey.stderr).strip()[-300:]}"
    except subprocess.TimeoutExpired:
        outcome = f"hung: no answer in {UNCHECKED_S} s (killed)"
    results["without the check, id 10**9"] = outcome
    click.echo(f"info without the check, id 10**9: {results['without the check, id 10**9']}")

    unchecked = kiln.load(folder / MODELS["unchecked"])
    times = {}
    for name, module in (("checked", checked), ("unchecked", unchecked)):
        for _ in range(50):
            module(ids)
        samples = []
        for _ in range(20):
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(50):
                module(ids)
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - started) / 50 * 1e6)
        times[name] = statistics.median(samples)
    check("the check's cost", True, {name: f"{value:.1f} us/call" for name, value in times.items()})

    single = checked(ids)
    wrong_calls = [0] * 8

    def work(index: int) -> None:
        for _ in range(2000):
            wrong_calls[index] += int(not torch.equal(checked(ids), single))

    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check("8 threads x 2,000 calls, results bit for bit", sum(wrong_calls) == 0, f"{sum(wrong_calls)} differ")

    on_cpu = checked(ids.cpu())
    check("CPU tensors into the CUDA artifact", torch.equal(on_cpu.to(single.device), single), f"result on {on_cpu.device}")
    cpu_module = kiln.load(folder / MODELS["cpu"])
    check("CUDA tensors into the CPU artifact", torch.equal(cpu_module(ids).cpu(), cpu_module(ids.cpu())), "equal")
    damaged = folder / "damaged"
    damaged.mkdir(exist_ok=True)
    for suffix in (".vmfb", ".json", ".irpa"):
        data = bytearray((folder / MODELS["checked"]).with_suffix(suffix).read_bytes())
        if suffix == ".vmfb":
            data[len(data) // 2] ^= 0x10
        (damaged / f"lookup{suffix}").write_bytes(data)
    try:
        kiln.load(damaged / "lookup.vmfb")
        check("a damaged CUDA .vmfb is an error", False, "loaded")
    except KilnError as exc:
        check("a damaged CUDA .vmfb is an error", "lookup.vmfb does not match its manifest" in str(exc), str(exc)[:160])

    if json_path is not None:
        json_path.write_text(json.dumps(results, indent=2) + "\n")
    sys.exit(1 if failures else 0)


@main.command("unchecked-call", hidden=True)
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
def unchecked_call(folder: Path) -> None:
    """In a child process: what an out-of-range id does without the check (it may bring the process down)."""
    import kiln

    module = kiln.load(folder / MODELS["unchecked"])
    ids = torch.load(folder / "reference.pt", weights_only=True)["ids"].cuda()
    ids[3, 7] = 10**9
    result = module(ids)
    torch.cuda.synchronize()
    click.echo(f"returned; finite: {bool(result.isfinite().all())}, row 3 max {result[3].abs().max().item():.3g}")


if __name__ == "__main__":
    main()
