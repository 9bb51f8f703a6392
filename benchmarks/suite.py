"""The benchmark suite: every model file in benchmarks/models/, for one target, against eager and Inductor.

Two phases, so that artifacts compiled here can be timed on a machine that has only the runtime:

    python benchmarks/suite.py run --target llvm-cpu               # compile and time here
    python benchmarks/suite.py compile --target cuda --thin -o .device-carry/bench-cuda
    python benchmarks/suite.py time .device-carry/bench-cuda       # there: needs kiln.runtime and torch
    python benchmarks/suite.py collect                             # results/*.json -> RESULTS.md
    python benchmarks/suite.py ab BEFORE AFTER                     # two bundles, timed in turn

A case is one model file at one dtype and one batch size, named `<model>-<dtype>-<batch>`. A model
file lists its `DTYPES` and `BATCHES` and takes them as `get_model(dtype=...)` and
`get_example_inputs(batch=..., dtype=...)`; its defaults make it a plain model file for `kiln
compile`. `compile` writes a bundle folder (kiln.measure.bundle: one artifact and manifest per case,
`bundle.json` with the cases, their compile times and the compile machine; with `--thin` the weights
stay behind and the model files restore them there), and `one_add.vmfb`, kiln.measure.overhead's
one-add model, whose times give each report's per-call overhead. `time` writes `results/<target>-<device>.json`
and `.md`, after every case, so a run stopped at a time limit keeps what it measured; `--resume`
carries on from such a file. benchmarks/README.md says how to run it on the GPU machine.
"""

from __future__ import annotations

import fnmatch
import gc
import json
import runpy
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import torch

from kiln.cli.options import TimingChoice, target_options, timing_options
from kiln.measure.bench import bench, compare_artifacts
from kiln.measure.bundle import Bundle, Entry, ModelRecipe, add_artifact, open_entry, rebuild
from kiln.measure.overhead import call_overhead
from kiln.measure.results import SCHEMA, CaseResult, Report, Timing, report_markdown
from kiln.measure.timing import (
    CpuClock,
    Settings,
    cpu_clock,
    environment,
    fresh_inductor_cache,
    others_share,
    torch_device_for,
    use_threads,
)
from kiln.passes import parse_pipeline, pipeline_text
from kiln.runtime.module import load
from kiln.runtime.tensors import describe_inputs

if TYPE_CHECKING:
    from kiln.compiler import CompileOptions

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
MODELS = BENCHMARKS / "models"
RESULTS = BENCHMARKS / "results"


@dataclass(frozen=True)
class Case:
    """One model file at one dtype and batch size."""

    name: str  # <model>-<dtype>-<batch>
    model: str
    file: str  # the model file, relative to the repository root when inside it
    dtype: str
    batch: str

    def entry(self) -> Entry:
        """The bundle's entry for this case: how the run side rebuilds its model and inputs."""
        recipe = ModelRecipe(self.file, {"dtype": self.dtype}, {"batch": self.batch, "dtype": self.dtype})
        return Entry(self.name, model=recipe, labels={"model": self.model, "dtype": self.dtype, "batch": self.batch})


def find_cases(models: Path, only: tuple[str, ...]) -> list[Case]:
    """Every (model, dtype, batch) of the model files in `models`, kept if a name matches a pattern of `only`."""
    cases = []
    for file in sorted(models.glob("*.py")):
        namespace = _run(file)
        for name in ("DTYPES", "BATCHES", "get_model", "get_example_inputs"):
            if name not in namespace:
                raise click.ClickException(f"{file} defines no {name}; a suite model file needs all four")
        for dtype in namespace["DTYPES"]:
            for batch in namespace["BATCHES"]:
                case = Case(f"{file.stem}-{dtype}-{batch}", file.stem, _relative(file), dtype, batch)
                if not only or any(fnmatch.fnmatch(case.name, pattern) for pattern in only):
                    cases.append(case)
    return cases


def compile_cases(cases: list[Case], options: CompileOptions, bundle: Path, thin_artifacts: bool) -> None:
    """Compile every case into `bundle`; a case that fails to compile is recorded with its error."""
    from kiln.compiler import run_pipeline, spec_from_module  # not on a runtime-only machine
    from kiln.compiler.targets import resolve

    options = replace(options, params=_thin_params(options)) if thin_artifacts else options
    resolved = resolve(options)
    bundle.mkdir(parents=True, exist_ok=True)
    machine, versions = environment("cpu")
    header = Bundle(
        target=options.target,
        driver=resolved.target.driver,
        created=_now(),
        command=_command(),
        compiled_on=machine,
        versions=versions,
        settings={
            **resolved.details,
            "iree_flags": list(options.extra_iree_flags),
            "pipeline": pipeline_text(options.pipeline),
            "kiln_source": _git_state(),
            "overhead": _compile_one_add(options, bundle),
        },
        entries=(),
    )
    done: list[Entry] = []
    for case in cases:
        click.echo(f"compile {case.name} ...", err=True)
        entry = case.entry()
        model, inputs = rebuild(entry, ROOT)
        start = time.perf_counter()
        try:
            compiled = run_pipeline(spec_from_module(model, inputs), options, say=lambda line: click.echo(f"  {line}", err=True)).compiled
        except Exception as exc:  # a model kiln cannot compile is a result, not the end of the run
            done.append(replace(entry, error=f"kiln compile failed: {_first_line(exc)}"))
            click.echo(f"  {done[-1].error}", err=True)
        else:
            assert compiled is not None
            compile_s = time.perf_counter() - start
            entry = add_artifact(bundle, replace(entry, compile_s=compile_s), compiled, model if thin_artifacts else None)
            if compiled.parameters is not None:
                entry = replace(entry, parameters=f"{case.name}.irpa")  # rebuilt from the model file there
            done.append(entry)
            size = (bundle / (entry.artifact or "")).stat().st_size / 2**20
            click.echo(f"  {compile_s:.1f}s, {size:.1f} MiB", err=True)
        replace(header, entries=tuple(done)).write(bundle)
        del model, inputs
        gc.collect()


ONE_ADD = "one_add.vmfb"  # in a bundle: kiln.measure.overhead's model, for the per-call overhead


def _compile_one_add(options: CompileOptions, bundle: Path) -> dict[str, str]:
    """The one-add model compiled like the cases, into the bundle: {"artifact": ...} or {"error": ...}."""
    from kiln.compiler import run_pipeline, spec_from_module
    from kiln.measure.overhead import OneAdd, example_inputs

    try:
        compiled = run_pipeline(spec_from_module(OneAdd(), example_inputs()), replace(options, params="inline")).compiled
    except Exception as exc:
        return {"error": f"kiln compile failed: {_first_line(exc)}"}
    assert compiled is not None
    compiled.save(bundle / ONE_ADD)
    return {"artifact": ONE_ADD}


def _time_overhead(bundle: Path, data: Bundle, device: str | None) -> dict[str, Timing]:
    """The per-call overhead, from the bundle's one-add artifact (nothing for bundles without one)."""
    artifact = data.settings.get("overhead", {}).get("artifact")
    if artifact is None:
        return {}
    click.echo("time the per-call overhead ...", err=True)
    try:
        return call_overhead(load(bundle / artifact, device), device)
    except Exception as exc:  # a finding, not the end of the run
        click.echo(f"  failed: {type(exc).__name__}: {_first_line(exc)}", err=True)
        return {}


def _thin_params(options: CompileOptions) -> str:
    """Where a thin bundle's weights go: nowhere, either way. Inline ones are zeroed in the artifact
    (thin.py) and put back there; external ones are not written, and the run side makes the .irpa from
    the model file. On llvm-cpu they are external: data tiling and kiln's CPU kernels pack inline
    weights at compile time, into bytes that thinning cannot find, so the artifact would carry them."""
    if options.params != "auto":
        return options.params
    return "external" if options.target == "llvm-cpu" else "inline"


def time_cases(
    bundle: Path,
    device: str | None,
    settings: Settings,
    threads: int,
    only: tuple[str, ...],
    resume: Path | None,
    deadline_s: float | None,
    output: Path | None,
) -> Path:
    """Time every compiled case of `bundle`; returns the results file (its .md is beside it)."""
    use_threads(threads)  # before the first artifact is loaded
    data = Bundle.read(bundle)
    cases = [entry for entry in data.entries if not only or any(fnmatch.fnmatch(entry.name, p) for p in only)]
    torch_device = torch_device_for(data.driver, device)
    label = _device_label(torch_device)
    output = output or RESULTS / f"{data.target}-{label}.json"
    results = list(Report.from_json(resume.read_text()).cases) if resume and resume.is_file() else []
    machine, versions = environment(torch_device)
    for name in ("iree-base-compiler", "torch-mlir"):  # what compiled the artifacts, wherever that was
        versions[name] = data.versions[name]
    report = Report(
        target=data.target,
        device=label,
        created=_now(),
        command=_command(),
        machine=machine,
        versions=versions,
        settings={
            **asdict(settings),
            "threads": threads,
            "gpu_arch": data.settings.get("gpu_arch"),
            "compiled_on": data.compiled_on["cpu"],
            "kiln_source": data.settings.get("kiln_source", "unknown"),
            "compile_command": data.command,
            "inductor_cache": "fresh",
        },
        cases=(),
    )
    previous = Report.from_json(resume.read_text()).overhead if resume and resume.is_file() else {}
    report = replace(report, overhead=previous or _time_overhead(bundle, data, device))
    fresh_inductor_cache(tempfile.mkdtemp(prefix="kiln-bench-inductor-"))
    order = {case.name: index for index, case in enumerate(cases)}
    start, clock, left = time.perf_counter(), cpu_clock(), []
    for case in cases:
        if case.name in {result.name for result in results}:
            continue
        if deadline_s is not None and time.perf_counter() - start > deadline_s:
            left.append(case.name)
            continue
        click.echo(f"time {case.name} ...", err=True)
        results.append(_time_case(case, bundle, device, settings))
        results.sort(key=lambda result: order.get(result.name, len(order)))
        gc.collect()  # the case's model and artifact, before the next one's
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        _write(report, results, clock, output)
    _write(report, results, clock, output)
    if left:
        click.echo(f"{len(left)} case(s) left at the deadline; carry on with --resume {output}", err=True)
    return output


def _time_case(entry: Entry, bundle: Path, device: str | None, settings: Settings) -> CaseResult:
    labels = entry.labels
    result = CaseResult(entry.name, labels["model"], labels["dtype"], labels["batch"], "", error=entry.error)
    if entry.error is not None or entry.artifact is None:
        return result
    try:
        model, inputs = rebuild(entry, ROOT)
        result = replace(result, inputs=describe_inputs(inputs))
        module = open_entry(bundle, entry, device, model)
        numerics, timings, error = bench(module, model, inputs, settings, device, entry.compile_s)
        return replace(result, timings=timings, numerics=numerics, error=error)
    except Exception as exc:  # one case's failure is a result; the run goes on
        return replace(result, error=f"{type(exc).__name__}: {_first_line(exc)}")


def compare_bundles(bundles: tuple[Path, ...], device: str | None, settings: Settings, threads: int, only: tuple[str, ...]) -> dict[str, Any]:
    """Every case the bundles share, their artifacts timed in turn (`compare_artifacts`): a change's
    effect measured in one run; returns the comparison as JSON-ready data, rows printed as they come."""
    use_threads(threads)  # before the first artifact is loaded
    data = [Bundle.read(bundle) for bundle in bundles]
    names = [{entry.name: entry for entry in bundle.entries if entry.artifact is not None} for bundle in data]
    cases = [name for name in names[0] if all(name in other for other in names[1:])]
    cases = [name for name in cases if not only or any(fnmatch.fnmatch(name, pattern) for pattern in only)]
    labels = [bundle.name for bundle in bundles]
    click.echo(f"| case | {' | '.join(f'{label} ms' for label in labels)} | {' | '.join(f'{label} / {labels[0]}' for label in labels[1:])} | numerics (rel L2) |")
    click.echo("|---" * (2 * len(bundles) + 1) + "|")
    rows = []
    for name in cases:
        try:
            model, inputs = rebuild(names[0][name], ROOT)
            modules = [open_entry(bundle, entries[name], device, model) for bundle, entries in zip(bundles, names, strict=True)]
            numerics, timings = compare_artifacts(modules, model, inputs, settings, device)
        except Exception as exc:  # one case's failure is a result; the run goes on
            rows.append({"case": name, "error": f"{type(exc).__name__}: {_first_line(exc)}"})
            click.echo(f"| {name} | {rows[-1]['error']} |")
            continue
        medians = [timing.median_ms for timing in timings]
        rows.append({"case": name, "timings": [asdict(t) for t in timings], "numerics": [asdict(n) for n in numerics]})
        errors = ", ".join(f"{'ok' if n.ok else 'MISMATCH'} {n.rel_l2_error:.1e}" for n in numerics)
        ratios = " | ".join(f"{median / medians[0]:.2f}x" for median in medians[1:])
        click.echo(f"| {name} | {' | '.join(f'{median:.3g}' for median in medians)} | {ratios} | {errors} |")
        del model, inputs, modules
        gc.collect()
    machine, versions = environment(torch_device_for(data[0].driver, device))
    return {"created": _now(), "command": _command(), "machine": machine, "versions": versions, "threads": threads,
            "settings": asdict(settings), "bundles": [{"path": str(b), "kiln_source": d.settings.get("kiln_source")} for b, d in zip(bundles, data, strict=True)],
            "cases": rows}


GENERATED = "<!-- Everything below is generated from results/*.json by `python benchmarks/suite.py collect`. -->"


def collect(results: Path, destination: Path) -> None:
    """Rewrite RESULTS.md below its GENERATED line from every results/*.json (and each .md beside its .json)."""
    reports = []
    for path in sorted(results.glob("*.json")):
        if json.loads(path.read_text()).get("schema") != SCHEMA:
            continue  # another tool's results
        report = Report.from_json(path.read_text())
        path.with_suffix(".md").write_text(report_markdown(report))
        reports.append(report)
    text = destination.read_text() if destination.is_file() else ""
    preface = text.split(GENERATED)[0].rstrip() if GENERATED in text else text.rstrip()
    sections = "\n\n".join(report_markdown(report) for report in reports)
    destination.write_text(f"{preface}\n\n{GENERATED}\n\n{sections}".lstrip())


def _write(report: Report, cases: list[CaseResult], clock: CpuClock | None, output: Path) -> None:
    """The report so far, with the share of the CPUs other processes took since `clock`."""
    busy = others_share(clock, cpu_clock())
    report = replace(report, machine={**report.machine, "others_cpu_share": busy}).with_cases(cases)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report.to_json())
    output.with_suffix(".md").write_text(report_markdown(report))


def _run(file: Path) -> dict[str, Any]:
    return runpy.run_path(str(file), run_name=f"kiln_bench_{file.stem}")


def _device_label(torch_device: str) -> str:
    """"cpu", or the GPU's name without its maker: "NVIDIA H200" -> "h200"."""
    if torch_device == "cpu":
        return "cpu"
    name = torch.cuda.get_device_name(torch.device(torch_device)).lower()
    return name.removeprefix("nvidia ").removeprefix("amd ").replace(" ", "-")


def _git_state() -> str:
    """The commit the compiler came from, "-dirty" if the working tree had changes: e.g. "b9cf343-dirty"."""
    try:
        result = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return result.stdout.strip() or "unknown"


def _relative(file: Path) -> str:
    return str(file.relative_to(ROOT)) if file.is_relative_to(ROOT) else str(file)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _command() -> str:
    return shlex.join(["python", "benchmarks/suite.py", *sys.argv[1:]])


# ---------------------------------------------------------------------------------------------------
# The command line


def _settings_options(function: Any) -> Any:
    options = (
        timing_options(time_s=5.0),
        click.option("--resume", type=click.Path(path_type=Path), help="Keep the cases already in this results file."),
        click.option("--deadline-s", type=float, help="Start no case after this many seconds; --resume carries on."),
        click.option("-o", "--output", type=click.Path(path_type=Path), help="Results file [default: results/<target>-<device>.json]."),
    )
    for option in reversed(options):
        function = option(function)
    return function


def _only_option(function: Any) -> Any:
    return click.option("--only", multiple=True, metavar="PATTERN", help="Cases matching this glob, e.g. 'mlp-*' or '*-f32-small' (repeatable).")(function)


def _run_time(bundle: Path, timing: TimingChoice, only: tuple[str, ...], resume: Path | None, deadline_s: float | None, output: Path | None) -> None:
    threads = timing.threads or torch.get_num_threads()
    output = time_cases(bundle, timing.device, timing.settings, threads, only, resume, deadline_s, output)
    click.echo(output.with_suffix(".md").read_text())
    click.echo(f"wrote {output} and {output.with_suffix('.md')}")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
def suite() -> None:
    """kiln's benchmark suite: compile, time against eager PyTorch and Inductor, tabulate."""


@suite.command("compile")
@target_options
@click.option("--models", type=click.Path(path_type=Path), default=MODELS, show_default=True, help="Folder of model files.")
@_only_option
@click.option(
    "--thin",
    "thin_artifacts",
    is_flag=True,
    help="Leave the weights out (the model files restore them there): for carrying. With --params auto, weights "
    "are inline and zeroed on GPU targets, external (an .irpa made there) on llvm-cpu.",
)
@click.option("--pipeline", default="default", show_default=True, help="kiln pass pipeline, as `kiln compile --pipeline` takes it.")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Bundle folder [default: build/bench/<target>].")
def compile_command(
    options: CompileOptions, models: Path, only: tuple[str, ...], thin_artifacts: bool, pipeline: str, output: Path | None
) -> None:
    """Compile every case into a bundle folder (target options as `kiln compile` takes them)."""
    bundle = output or ROOT / "build" / "bench" / options.target
    options = replace(options, pipeline=parse_pipeline(pipeline))
    compile_cases(find_cases(models, only), options, bundle, thin_artifacts)
    click.echo(f"wrote {bundle}/")


@suite.command("time")
@click.argument("bundle", type=click.Path(path_type=Path, exists=True, file_okay=False))
@_only_option
@_settings_options
def time_command(
    bundle: Path, only: tuple[str, ...], timing: TimingChoice, resume: Path | None, deadline_s: float | None, output: Path | None
) -> None:
    """Time every case of BUNDLE: kiln against eager and Inductor, on the artifacts' device."""
    _run_time(bundle, timing, only, resume, deadline_s, output)


@suite.command("run")
@target_options
@click.option("--models", type=click.Path(path_type=Path), default=MODELS, show_default=True, help="Folder of model files.")
@_only_option
@click.option("--bundle", type=click.Path(path_type=Path), help="Bundle folder [default: build/bench/<target>].")
@_settings_options
def run_command(
    options: CompileOptions,
    models: Path,
    only: tuple[str, ...],
    bundle: Path | None,
    timing: TimingChoice,
    resume: Path | None,
    deadline_s: float | None,
    output: Path | None,
) -> None:
    """Compile and time the suite on this machine."""
    bundle = bundle or ROOT / "build" / "bench" / options.target
    compile_cases(find_cases(models, only), options, bundle, thin_artifacts=False)
    _run_time(bundle, timing, (), resume, deadline_s, output)


@suite.command("ab")
@click.argument("bundles", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False))
@_only_option
@timing_options(time_s=5.0, inductor=False)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Also write the comparison here (JSON).")
def ab_command(bundles: tuple[Path, ...], only: tuple[str, ...], timing: TimingChoice, output: Path | None) -> None:
    """Time the cases two or more BUNDLES share, call by call in turn (the "kiln" column): a change's
    before and after in one run, on one machine. Each artifact's numerics are checked against eager.

    \b
    Example, compiled here before and after a change, timed on the 16-core host:
      python benchmarks/suite.py compile --cpu sapphirerapids --thin --only 'gelu*' -o .device-carry/before
      python benchmarks/suite.py compile --cpu sapphirerapids --thin --only 'gelu*' -o .device-carry/after
      python benchmarks/suite.py ab .device-carry/before .device-carry/after --threads 16
    """
    if len(bundles) < 2:
        raise click.UsageError("give two bundles or more")
    threads = timing.threads or torch.get_num_threads()
    comparison = compare_bundles(bundles, timing.device, timing.settings, threads, only)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(comparison, indent=1) + "\n")
        click.echo(f"wrote {output}")


@suite.command("collect")
@click.option("--results", type=click.Path(path_type=Path), default=RESULTS, show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=BENCHMARKS / "RESULTS.md", show_default=True)
def collect_command(results: Path, output: Path) -> None:
    """Rebuild RESULTS.md (and each results .md) from the results .json files."""
    collect(results, output)
    click.echo(f"wrote {output}")


if __name__ == "__main__":
    suite()
