"""The benchmark suite: every model file in benchmarks/models/, for one target, against eager and Inductor.

Two phases, so that artifacts compiled here can be timed on a machine that has only the runtime:

    python benchmarks/suite.py run --target llvm-cpu               # compile and time here
    python benchmarks/suite.py compile --target cuda --thin -o .device-carry/bench-cuda
    python benchmarks/suite.py time .device-carry/bench-cuda       # there: needs kiln.runtime and torch
    python benchmarks/suite.py collect                             # results/*.json -> RESULTS.md
    python benchmarks/suite.py ab BEFORE AFTER                     # two bundles, timed in turn
    python benchmarks/suite.py merge PART0 PART1 -o RESULTS        # one run's parts, one report

A case is one model file at one dtype and one batch size, named `<model>-<dtype>-<batch>`. A model
file lists its `DTYPES` and `BATCHES` and takes them as `get_model(dtype=...)` and
`get_example_inputs(batch=..., dtype=...)`; its defaults make it a plain model file for `kiln
compile`. `compile` writes a bundle folder (kiln.measure.bundle: one artifact and manifest per case,
`bundle.json` with the cases, their compile times and peak memory, and the compile machine; with
`--thin` the weights stay behind and the model files restore them there), and `one_add.vmfb`,
kiln.measure.overhead's one-add model, whose times give each report's per-call overhead. `time`
writes `results/<target>-<device>.json` and `.md`, after every case, so a run stopped at a time limit
keeps what it measured; `--resume` carries on from such a file, and `merge` joins the results of a
run timed in parts (shards on several GPUs, or calls cut by a time limit). benchmarks/README.md says how to run
it on the GPU machine. `--models DIR` takes another folder of model files: benchmarks/real/ (real
architectures at their published sizes) writes `results/real-<target>-<device>.json` (the folder's
name first, for any folder but benchmarks/models/).

This file is the command line; the logic is the library's, where `kiln bench` shares it:
kiln.tune.bench compiles (the model files' cases, the one-add model), kiln.measure.suite times a
bundle, compares bundles and collects the results (it runs without the compiler).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import torch

from kiln.cli.options import TimingChoice, target_options, timing_options
from kiln.errors import KilnError
from kiln.measure.bundle import Bundle, entry_digest
from kiln.measure.results import Held, Report, merge_reports, report_markdown
from kiln.measure.suite import collect, compare_bundles, time_cases
from kiln.passes import parse_pipeline

if TYPE_CHECKING:
    from kiln.compiler import CompileOptions

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
MODELS = BENCHMARKS / "models"
RESULTS = BENCHMARKS / "results"


def _say(line: str) -> None:
    """Progress, on stderr: stdout is the tables'."""
    click.echo(line, err=True)


def _compile(options: CompileOptions, models: Path, only: tuple[str, ...], bundle: Path, thin_artifacts: bool) -> None:
    from kiln.tune.bench import compile_suite, find_cases  # the compiler: not on a runtime-only machine

    try:
        cases = find_cases(models, only, ROOT, say=_say)
    except KilnError as error:
        raise click.ClickException(error.message) from error
    compile_suite(
        cases, options, bundle, thin_artifacts,
        root=ROOT, command=_command(), kiln_source=_git_state(), suite=suite_name(models), say=_say,
    )  # fmt: skip


def suite_name(models: Path) -> str | None:
    """The suite a folder of model files is: None for benchmarks/models (the suite), else the folder's
    name (benchmarks/real: "real"), which prefixes its results file: results/real-<target>-<device>.json."""
    return None if models.resolve() == MODELS else models.resolve().name


def _git_state() -> str:
    """The commit the compiler came from, "-dirty" if the working tree had changes: e.g. "b9cf343-dirty"."""
    try:
        result = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return result.stdout.strip() or "unknown"


def _command() -> str:
    return shlex.join(["python", "benchmarks/suite.py", *sys.argv[1:]])


# ---------------------------------------------------------------------------------------------------
# The command line


def _settings_options(function: Any) -> Any:
    options = (
        timing_options(time_s=5.0),
        click.option("--resume", type=click.Path(path_type=Path), help="Keep the cases already in this results file."),
        click.option("--deadline-s", type=float, help="Start no case after this many seconds; --resume carries on."),
        click.option(
            "--case-timeout-s", type=float,
            help="A case still running after this many seconds (stuck in a load or a device call) is recorded as an error and the run stops with exit status 3; --resume carries on past it.",
        ),
        click.option("-o", "--output", type=click.Path(path_type=Path), help="Results file [default: results/<target>-<device>.json]."),
    )
    for option in reversed(options):
        function = option(function)
    return function


def _only_option(function: Any) -> Any:
    return click.option("--only", multiple=True, metavar="PATTERN", help="Cases matching this glob, e.g. 'mlp-*' or '*-f32-small' (repeatable).")(function)


def _run_time(
    bundle: Path, timing: TimingChoice, only: tuple[str, ...], resume: Path | None, deadline_s: float | None, case_timeout_s: float | None, output: Path | None
) -> None:
    threads = timing.threads or torch.get_num_threads()
    output = time_cases(
        bundle, timing.device, timing.settings, threads, only, resume, deadline_s, output,
        root=ROOT, results=RESULTS, command=_command(), say=_say, case_timeout_s=case_timeout_s,
    )  # fmt: skip
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
    _compile(options, models, only, bundle, thin_artifacts)
    click.echo(f"wrote {bundle}/")


@suite.command("time")
@click.argument("bundle", type=click.Path(path_type=Path, exists=True, file_okay=False))
@_only_option
@_settings_options
def time_command(
    bundle: Path,
    only: tuple[str, ...],
    timing: TimingChoice,
    resume: Path | None,
    deadline_s: float | None,
    case_timeout_s: float | None,
    output: Path | None,
) -> None:
    """Time every case of BUNDLE: kiln against eager and Inductor, on the artifacts' device."""
    _run_time(bundle, timing, only, resume, deadline_s, case_timeout_s, output)


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
    case_timeout_s: float | None,
    output: Path | None,
) -> None:
    """Compile and time the suite on this machine."""
    bundle = bundle or ROOT / "build" / "bench" / options.target
    _compile(options, models, only, bundle, thin_artifacts=False)
    _run_time(bundle, timing, (), resume, deadline_s, case_timeout_s, output)


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
    comparison = compare_bundles(bundles, timing.device, timing.settings, threads, only, root=ROOT, command=_command(), row=click.echo)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(comparison, indent=1) + "\n")
        click.echo(f"wrote {output}")


@suite.command("merge")
@click.argument("parts", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option(
    "--same-as",
    "held",
    multiple=True,
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="A bundle: merge parts timed from kiln at different revisions when every case's artifact is "
    "this bundle's, byte for byte (the merged run is the bundle's revision). Repeatable: bundles of "
    "one revision compiled apart (a model that needs other packages on the path).",
)
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="The merged results file (.json; its .md beside it).")
def merge_command(parts: tuple[Path, ...], held: tuple[Path, ...], output: Path) -> None:
    """Merge the results files of one run's PARTS into one: shards timed side by side on a host's
    GPUs, or the calls a device's time limit cut a run into.

    Each timed case records its artifact's SHA-256; a part timed before that may carry them in
    `<part>.sha256.json` beside it ({"artifacts": {case: sha256}}).

    \b
    Example, two shards of one bundle on a two-GPU host, 16 cores each:
      CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 python benchmarks/suite.py time B --only 'a*' --threads 16 -o p0.json &
      CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 python benchmarks/suite.py time B --only 'b*' --threads 16 -o p1.json &
      wait; python benchmarks/suite.py merge p0.json p1.json -o results/real-cuda-h200.json
    Parts timed at older revisions whose artifacts a bundle compiled now still has, and the cases
    whose artifacts changed timed again from that bundle (those timings replace the older ones):
      python benchmarks/suite.py merge old.json again.json --same-as .device-carry/now -o results/real-cuda-h200.json
    """
    try:
        reports = [_with_sidecar_digests(Report.from_json(part.read_text()), part) for part in parts]
        report = merge_reports(reports, _held(held) if held else None)
    except KilnError as exc:  # a folder that is no bundle
        raise click.ClickException(exc.message) from exc
    except ValueError as exc:  # a file that is no results file, or parts of different runs
        raise click.ClickException(str(exc)) from exc
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report.to_json())
    output.with_suffix(".md").write_text(report_markdown(report))
    click.echo(f"wrote {output} ({len(report.cases)} cases from {len(parts)} parts)")


def _with_sidecar_digests(report: Report, path: Path) -> Report:
    """`report` with its cases' artifact digests from `<path>.sha256.json` where it recorded none."""
    sidecar = path.with_suffix(".sha256.json")
    if not sidecar.is_file():
        return report
    digests = json.loads(sidecar.read_text())["artifacts"]
    return report.with_cases(replace(case, artifact=case.artifact or digests.get(case.name)) for case in report.cases)


def _held(folders: tuple[Path, ...]) -> Held:
    """The digests of one revision's bundles, by case."""
    bundles = {folder: Bundle.read(folder) for folder in folders}
    sources = sorted({data.settings.get("kiln_source", "unknown") for data in bundles.values()})
    if len(sources) > 1:
        raise ValueError(f"the --same-as bundles were compiled from different kiln sources: {', '.join(sources)}")
    digests = {
        entry.name: digest
        for folder, data in bundles.items()
        for entry in data.entries
        if (digest := entry_digest(folder, entry))
    }
    return Held(sources[0], digests)


@suite.command("collect")
@click.option("--results", type=click.Path(path_type=Path), default=RESULTS, show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=BENCHMARKS / "RESULTS.md", show_default=True)
def collect_command(results: Path, output: Path) -> None:
    """Rebuild RESULTS.md (and each results .md) from the results .json files."""
    collect(results, output)
    click.echo(f"wrote {output}")


if __name__ == "__main__":
    suite()
