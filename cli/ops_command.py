"""`kiln ops`: run the op conformance suite, record each case's outcome, and rewrite SUPPORT.md.

The outcomes are data (kiln.conformance.support: `conformance/status.json`); a run merges its
results into them (other targets' columns and cases a `--only` run skipped are kept) and renders
SUPPORT.md from them and the hand-written notes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .common import debug_option, progress
from .options import TARGET_NAMES

if TYPE_CHECKING:
    from kiln.conformance.runner import Case, Outcome
    from kiln.conformance.support import Status


@click.command("ops")
@click.option("--target", type=click.Choice(TARGET_NAMES), default="llvm-cpu", show_default=True, help="The column to (re)fill.")
@click.option(
    "--suite",
    type=click.Choice(["ops", "modules"]),
    default="ops",
    show_default=True,
    help="ops: one case per op variant (conformance/cases.py); modules: whole modules and how they are "
    "called (conformance/modules.py).",
)
@click.option(
    "--plain",
    is_flag=True,
    help="Also run each case through the plain stack beneath kiln (torch-mlir and IREE alone, "
    "conformance/plain.py) and record it in its own column; cases only kiln fails are listed first.",
)
@click.option(
    "--only",
    "patterns",
    multiple=True,
    metavar="GLOB",
    help="Only cases whose name or ATen op matches, e.g. 'conv*', '*[bf16]', 'aten.pad.*' (repeatable). "
    "The other rows keep what the table says.",
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=Path("SUPPORT.md"),
    show_default=True,
    help="The support table to write (from the recorded outcomes; run from the checkout's root).",
)
@click.option(
    "--status",
    "status_file",
    type=click.Path(path_type=Path),
    help="The recorded outcomes to merge into and rewrite [default: kiln.conformance's status.json, which tests/ops checks].",
)
@click.option("--list", "list_only", is_flag=True, help="List the selected cases (name, ATen op, dtypes); run nothing.")
@debug_option
def ops_command(
    target: str,
    suite: str,
    plain: bool,
    patterns: tuple[str, ...],
    jobs: int,
    output: Path,
    status_file: Path | None,
    list_only: bool,
) -> None:
    """Check which ATen ops kiln compiles, and rewrite SUPPORT.md with the result.

    Each case of the conformance suite (conformance/cases.py: hundreds of op variants over
    the ATen operator set, in f32, f16, bf16, integer and bool dtypes) is a tiny module. kiln compiles it
    and, on llvm-cpu, runs it and compares it with eager PyTorch on the same inputs; a GPU target
    is compile-only here. Cases are compiled in groups, one artifact each, and a group that fails
    is redone case by case, so every failure names one case.

    \b
    Each case's status in the table is one of:
      pass                         the artifact matches eager PyTorch (llvm-cpu)
      compiles                     it compiles (GPU targets: nothing is run)
      numerics mismatch: ...       it runs, but differs from eager: the largest error
      fails at STAGE: ...          the stage that failed (exported, aten, prims, ..., vmfb,
                                   runtime) and the first line of kiln's error

    \b
    Examples:
      kiln ops                              # every case on llvm-cpu; rewrites SUPPORT.md (minutes)
      kiln ops -j 2                         # the same on two processes
      kiln ops --suite modules --plain      # the module suite, kiln and the plain stack side by side
      kiln ops --only 'conv*' --only 'pad.*' # a few rows; the others keep their status
      kiln ops --target cuda                # the cuda column: compile-only, no GPU needed
      kiln ops --list --only 'aten.sort.*'  # which cases exercise an op

    tests/ops runs the same cases under pytest and expects exactly the failures recorded in conformance/status.json,
    so rerun `kiln ops` after making an op work (or after adding a case).
    """
    from kiln.conformance.runner import suite_cases
    from kiln.conformance.support import PLAIN, kiln_only_failures, read_status, status_path, write_status

    cases = suite_cases(suite)
    selected = [case for case in cases if _selected(case, patterns)]
    if not selected:
        raise click.UsageError(f"no case matches {', '.join(patterns)}; `kiln ops --list` lists them")
    if list_only:
        for case in selected:
            click.echo(f"{case.name:<48} {case.op:<40} {case.input_dtypes()}")
        return
    if plain and target != "llvm-cpu":
        raise click.UsageError("--plain runs on llvm-cpu only (the plain stack's artifacts are run here)")
    status_file = status_file or status_path(suite)
    status = read_status(status_file)
    paths = {target: "kiln", **({PLAIN + target: "plain"} if plain else {})}
    for column, path in paths.items():
        likely_failures = {name for name, row in status.items() if column in row and not row[column].ok}
        start = time.perf_counter()
        outcomes = run_cases(selected, target, likely_failures, jobs, suite, path)
        seconds = time.perf_counter() - start
        for name, outcome in outcomes.items():
            status.setdefault(name, {})[column] = outcome
        failed = [name for name, outcome in outcomes.items() if not outcome.ok]
        verb = "pass" if target == "llvm-cpu" else "compile"
        click.echo(f"{column}: {len(outcomes) - len(failed)} of {len(outcomes)} cases {verb} ({seconds:.0f}s)")
        if path == "kiln" and not plain:
            for name in failed:
                click.echo(f"  {name}: {outcomes[name]}")
    known = {case.name for case in cases}
    status = {name: row for name, row in status.items() if name in known}  # cases removed from the table
    write_status(status, status_file)
    output.write_text(render_all({suite: status}))
    if plain:
        only_kiln = kiln_only_failures(selected, status, target)
        click.echo(f"kiln-only failures (the plain stack passes them): {len(only_kiln)}")
        for name in only_kiln:
            click.echo(f"  {name}: {status[name][target]}")
        click.echo("other kiln failures:")
        for case in selected:
            if case.name not in only_kiln and not status[case.name][target].ok:
                click.echo(f"  {case.name}: {status[case.name][target]}  (plain: {status[case.name][PLAIN + target]})")
    click.echo(f"wrote {output} and the recorded outcomes")


def render_all(records: dict[str, Status] | None = None) -> str:
    """SUPPORT.md from both suites' records (`records` where given, else their files) and the notes."""
    from kiln.conformance.runner import suite_cases
    from kiln.conformance.support import notes_path, read_status, render_modules, render_support, status_path

    records = records or {}
    ops, modules = (records.get(suite) or read_status(status_path(suite)) for suite in ("ops", "modules"))
    return render_support(suite_cases("ops"), ops, notes_path().read_text(), render_modules(suite_cases("modules"), modules))


def _selected(case: Case, patterns: Sequence[str]) -> bool:
    return not patterns or any(_glob(p).fullmatch(case.name) or _glob(p).fullmatch(case.op) for p in patterns)


def _glob(pattern: str) -> re.Pattern[str]:
    """`*` and `?` as in the shell; brackets are literal, as in case names (`relu[f32]`)."""
    return re.compile(re.escape(pattern).replace(r"\*", ".*").replace(r"\?", "."))


def run_cases(
    cases: Sequence[Case], target: str, likely_failures: set[str], jobs: int, suite: str = "ops", path: str = "kiln"
) -> dict[str, Outcome]:
    """Every case's outcome, its groups spread over `jobs` worker processes; progress on stderr."""
    from functools import partial

    from kiln.conformance.runner import Checker, check_suite, plan_groups

    checked = 0

    def report(found: dict[str, Outcome]) -> None:
        nonlocal checked
        checked += len(found)
        progress(f"{checked}/{len(cases)} cases checked")

    with Checker(target, jobs, check=partial(check_suite, suite, path)) as checker:
        return checker.check(plan_groups(cases, likely_failures), report)
