"""Where a compiled model's time goes, dispatch by dispatch, on the machine that runs it.

The suite says how long a model takes; this says which of its dispatches take that time, so the
next lever is chosen by measurement. It runs a bundle's artifacts (from `suite.py compile`, thin
ones made whole from their model files) on this machine:
- CPU: under IREE's own HAL profiler, `iree-benchmark-module --device_profiling_mode=host-execution`,
  then `iree-profile dispatch` sums each dispatch function's time. Both tools ship in the
  iree-base-runtime wheel. Artifacts with kiln's AMX kernel need the process's AMX permission,
  which kiln's runtime asks for in-process and iree-benchmark-module does not: the tool runs with
  `amx_permission.c` preloaded (built here by the C compiler kiln's kernel needs anyway).
- CUDA: IREE 3.13's CUDA HAL has no profiling ("not implemented"), so the artifact is called
  through kiln's runtime under torch.profiler, whose CUPTI activity sees IREE's kernels too. The
  timeline also says how long the device sat idle before each dispatch: a host that cannot keep up,
  or waits on the device in the middle of a call, shows there.

    python benchmarks/dispatch_profile.py .device-carry/bench-cpu --only 'gpt2_block-*-large' --threads 16

prints, per case, the dispatches by total time (ms per call and share), and with `-o` writes them as JSON.
On the CPU it also prints the sites, each dispatch function at each grid: kiln's one kernel function serves
every contraction, and its sites, labelled from the manifest, give each contraction's rate (TFLOP/s)
and how busy IREE kept the workers (their time in workgroups over the dispatch's time). `--also-with FLAG`
profiles each case again with an iree-benchmark-module flag added (a runtime setting against the default,
on the same files in the same session).
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import click
import iree._runtime_libs
import torch

from kiln.measure.bundle import Bundle, Entry, entry_files, open_entry, rebuild
from kiln.measure.timing import Settings, measure
from kiln.runtime.devices import CPU_WORKER_STACK_BYTES
from kiln.runtime.manifest import PARAMETER_SCOPE
from kiln.targets.llvm_cpu.kernels.build import c_compiler

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOOLS = Path(iree._runtime_libs.__file__).parent
TIMING = Settings(warmup=5, iterations=20, budget_s=1.0, inductor=False)
ELEMENT_TYPES = {
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.int64: "i64",
    torch.int32: "i32",
}


def input_flag(tensor: torch.Tensor, path: Path) -> str:
    """`--input=8x1024x768xbf16=@x.bin`: raw bytes, so bf16 needs no numpy dtype."""
    tensor.detach().contiguous().cpu().view(torch.uint8).numpy().tofile(path)
    shape = "x".join(str(size) for size in tensor.shape)
    return f"--input={shape}x{ELEMENT_TYPES[tensor.dtype]}=@{path}"


def amx_permission(folder: Path) -> Path:
    """amx_permission.c built into `folder` as a library to preload: iree-benchmark-module does not ask
    for AMX, which kiln's AMX kernel needs (SIGILL without it)."""
    library = folder / "amx_permission.so"
    subprocess.run(
        [c_compiler(), "-shared", "-fPIC", "-O1", str(HERE / "amx_permission.c"), "-o", str(library)],
        check=True,
    )
    return library


def profile_on_cpu(
    vmfb: Path,
    parameters: Path | None,
    inputs: tuple[torch.Tensor, ...],
    threads: int,
    seconds: float,
    preload: Path,
    runtime_flags: tuple[str, ...] = (),
) -> dict:
    """Per dispatch function: calls and total ns over a benchmark run of `seconds`, and the call count;
    `preload`: amx_permission's library."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        flags = [input_flag(tensor, folder / f"input{index}.bin") for index, tensor in enumerate(inputs)]
        run = subprocess.run(
            [
                str(TOOLS / "iree-benchmark-module"), f"--module={vmfb}", "--device=local-task", "--function=main",
                *flags, f"--task_topology_group_count={threads}", f"--task_worker_stack_size={CPU_WORKER_STACK_BYTES}",
                *([f"--parameters={PARAMETER_SCOPE}={parameters}"] if parameters else []),
                "--device_profiling_mode=host-execution", f"--device_profiling_output={folder / 'p.ireeprof'}",
                f"--benchmark_min_time={seconds}s", "--benchmark_format=json", *runtime_flags,
            ],
            capture_output=True, text=True, check=False, env={**os.environ, "LD_PRELOAD": str(preload)},
        )  # fmt: skip
        if run.returncode:
            raise RuntimeError(
                f"iree-benchmark-module failed (exit {run.returncode}): {run.stderr.strip()[-2000:]}"
            )
        benchmark = json.loads(run.stdout)["benchmarks"][0]
        events = subprocess.run(
            [str(TOOLS / "iree-profile"), "dispatch", "--dispatch_events", "--format=jsonl", str(folder / "p.ireeprof")],
            capture_output=True, text=True, check=True,
        ).stdout.splitlines()  # fmt: skip
    events = [json.loads(line) for line in events]
    by_site = sites(events, threads)
    functions: dict[str, dict] = {}  # the sites summed by dispatch function
    for site in by_site:
        function = functions.setdefault(site["name"], {"name": site["name"], "count": 0, "total_ns": 0})
        function["count"] += site["count"]
        function["total_ns"] += site["total_ns"]
    return {  # the profile holds the warm-up calls too: every dispatch runs at least once a call
        "calls": min((function["count"] for function in functions.values()), default=1),
        "workgroups": {event["key"]: event["workgroup_count"] for event in events if "workgroup_count" in event},
        "call_ms": benchmark["real_time"] / 1e6 if benchmark["time_unit"] == "ns" else benchmark["real_time"],
        "sites": by_site,
        "dispatches": sorted(functions.values(), key=lambda function: -function["total_ns"]),
    }


def sites(events: list[dict], threads: int) -> list[dict]:
    """Dispatch events grouped by function and workgroup count (one kernel function serves every
    contraction of a model; its grid tells them apart), with how busy the workers were: the time
    spent in workgroups over the dispatch's time on `threads` workers (low: workers waited, on an
    uneven or too short grid)."""
    grouped: dict[tuple[str, tuple[int, ...]], dict] = {}
    for event in events:
        if event.get("type") not in ("host_dispatch_event", "dispatch_event") or not event.get("valid", True):
            continue
        key = (event["key"], tuple(event["workgroup_count"]))
        site = grouped.setdefault(
            key, {"name": key[0], "workgroups": list(key[1]), "count": 0, "total_ns": 0, "busy_ns": 0}
        )
        site["count"] += 1
        site["total_ns"] += event["duration_ns"]
        site["busy_ns"] += event.get("tile_duration_sum_ns", 0)
    for site in grouped.values():
        site["busy"] = (
            site["busy_ns"] / (site["total_ns"] * threads) if site["total_ns"] and threads else None
        )
    return sorted(grouped.values(), key=lambda site: -site["total_ns"])


def profile_on_cuda(
    function: Callable[..., object], inputs: tuple[torch.Tensor, ...], seconds: float
) -> dict:
    """The same through torch.profiler: kiln's calls of `function` (a module, or one of its functions)
    on the GPU, each kernel's CUPTI time."""
    inputs = tuple(tensor.cuda() for tensor in inputs)
    per_call = min(measure(lambda: function(*inputs), torch.cuda.synchronize, TIMING))
    calls = max(3, int(seconds * 1e9 / per_call))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
        for _ in range(calls):
            function(*inputs)
        torch.cuda.synchronize()
    kernels = sorted(
        (event.time_range.start, event.time_range.end, event.name)
        for event in profiler.events()
        if event.device_type == torch.autograd.DeviceType.CUDA
    )
    totals: dict[str, list[int]] = {}
    idle: dict[str, int] = {}  # the device's idle time just before each dispatch, by its name
    last_end = None
    for start, end, name in kernels:
        total = totals.setdefault(name, [0, 0])
        total[0] += 1
        total[1] += int((end - start) * 1000)
        if last_end is not None and start > last_end:
            idle[name] = idle.get(name, 0) + int((start - last_end) * 1000)
        last_end = end if last_end is None else max(last_end, end)
    return {
        "calls": calls,
        "call_ms": per_call / 1e6,
        "dispatches": sorted(
            ({"name": name, "count": count, "total_ns": ns} for name, (count, ns) in totals.items()),
            key=lambda group: -group["total_ns"],
        ),
        "idle_before": sorted(
            ({"name": name, "idle_ns": ns} for name, ns in idle.items()), key=lambda gap: -gap["idle_ns"]
        ),
    }


def report(name: str, profile: dict, top: int, kernels: Sequence[dict] = ()) -> str:
    """The dispatch functions by time; on the CPU also the sites (function and grid), where a site of
    kiln's kernel gets its contractions and their rate from the manifest's `kernels`."""
    calls = profile["calls"]
    total = sum(group["total_ns"] for group in profile["dispatches"]) or 1
    lines = [f"{name}: {profile['call_ms']:.3f} ms a call, dispatches {total / calls / 1e6:.3f} ms"]
    for group in profile["dispatches"][:top]:
        per_call = group["total_ns"] / calls / 1e6
        lines.append(
            f"  {per_call:9.3f} ms {group['total_ns'] / total:6.1%} x{group['count'] // calls:<3} {group['name']}"
        )
    if profile.get("sites"):
        lines.append("  by site (function, workgroups; busy: the workers' time in workgroups):")
    for site in profile.get("sites", [])[:top]:
        per_call = site["total_ns"] / calls / 1e6
        busy = f"busy {site['busy']:4.0%}" if site["busy"] is not None else ""
        line = f"  {per_call:9.3f} ms {site['total_ns'] / total:6.1%} x{site['count'] // calls:<3} {site['name']} {site['workgroups']} {busy}"
        served = [
            kernel for kernel in kernels
            if kernel.get("kernel", "").endswith(f"::{site['name']}") and kernel.get("grid") == site["workgroups"][:2]
        ]  # fmt: skip
        # Contractions of one grid can differ (Llama's 2048 -> 2048 and 8192 -> 2048 at 64 channels).
        if served:
            gflop = sum(kernel["gflop"] for kernel in served)
            counts = Counter(kernel["contraction"] for kernel in served)
            line += " | " + ", ".join(f"{count} x {contraction}" for contraction, count in counts.items())
            line += f": {gflop / per_call:.2f} TFLOP/s"
        lines.append(line)
    gaps = profile.get("idle_before", [])
    if gaps:  # CUDA: where the device waited between dispatches (the host's launches, or a wait on it)
        idle = sum(gap["idle_ns"] for gap in gaps) / calls / 1e6
        lines.append(
            f"  idle between dispatches {idle:.3f} ms a call (the first of a call's includes the time between calls); most before:"
        )
        lines.extend(
            f"  {gap['idle_ns'] / calls / 1e6:9.3f} ms idle before {gap['name']}" for gap in gaps[:5]
        )
    return "\n".join(lines)


def case_profiles(
    bundle: Path,
    driver: str,
    entry: Entry,
    threads: int,
    seconds: float,
    preload: Path | None,
    runtime_flags: tuple[str, ...],
    variants: tuple[str, ...],
) -> Iterator[tuple[str, dict]]:
    """(name, profile) of one case, rebuilt once: on CUDA one profile; on the CPU one as it is and one
    per variant flag ("case [flag]"), so that a runtime setting is compared on the same files."""
    model, inputs = rebuild(entry, ROOT)
    if driver == "cuda":
        yield entry.name, profile_on_cuda(open_entry(bundle, entry, None, model), inputs, seconds)
        return
    vmfb, parameters = entry_files(bundle, entry, model)
    for variant in ((), *((flag,) for flag in variants)):
        flags = (*runtime_flags, *variant)
        name = f"{entry.name} [{variant[0]}]" if variant else entry.name
        yield name, profile_on_cpu(vmfb, parameters, inputs, threads, seconds, preload, flags)


@click.command()
@click.argument("bundle", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--only",
    "patterns",
    multiple=True,
    help="Cases to profile: a glob over case names (repeatable) [default: every case].",
)
@click.option("--threads", default=16, show_default=True, help="IREE's CPU worker threads.")
@click.option("--seconds", default=2.0, show_default=True, help="Benchmark time per case.")
@click.option("--top", default=12, show_default=True, help="Dispatches printed per case.")
@click.option(
    "--runtime-flag",
    "runtime_flags",
    multiple=True,
    help="CPU: an extra iree-benchmark-module flag (repeatable).",
)
@click.option(
    "--also-with",
    "variants",
    multiple=True,
    help="CPU: profile each case again with this iree-benchmark-module flag added, e.g. "
    "--also-with=--task_worker_spin_us=2000 (repeatable; one profile each, the case rebuilt once).",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the profiles as JSON."
)
def main(
    bundle: Path,
    patterns: tuple[str, ...],
    threads: int,
    seconds: float,
    top: int,
    runtime_flags: tuple[str, ...],
    variants: tuple[str, ...],
    output: Path | None,
) -> None:
    """Profile each case of BUNDLE dispatch by dispatch on this machine's device."""
    data = Bundle.read(bundle)
    if variants and data.driver == "cuda":
        raise click.UsageError("--also-with takes iree-benchmark-module flags: CPU bundles only")
    profiles = {}
    with tempfile.TemporaryDirectory() as scratch:
        preload = amx_permission(Path(scratch)) if data.driver != "cuda" else None
        for entry in data.entries:
            if (
                not any(fnmatch.fnmatch(entry.name, pattern) for pattern in patterns or ("*",))
                or entry.artifact is None
            ):
                continue
            kernels = json.loads((bundle / f"{entry.name}.json").read_text()).get("kernels", [])
            try:
                for name, profile in case_profiles(
                    bundle, data.driver, entry, threads, seconds, preload, runtime_flags, variants
                ):
                    profiles[name] = profile
                    click.echo(report(name, profile, top, kernels))
            except RuntimeError as exc:
                click.echo(f"{entry.name}: {exc}", err=True)
    if output is not None:
        output.write_text(json.dumps(profiles, indent=1) + "\n")


if __name__ == "__main__":
    main()
