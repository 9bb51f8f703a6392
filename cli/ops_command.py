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


@click.command("ops")
@click.option("--target", type=click.Choice(TARGET_NAMES), default="llvm-cpu", show_default=True, help="The column to (re)fill.")
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
    target: str, patterns: tuple[str, ...], jobs: int, output: Path, status_file: Path | None, list_only: bool
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
      kiln ops --only 'conv*' --only 'pad.*' # a few rows; the others keep their status
      kiln ops --target cuda                # the cuda column: compile-only, no GPU needed
      kiln ops --list --only 'aten.sort.*'  # which cases exercise an op

    tests/ops runs the same cases under pytest and expects exactly the failures recorded in conformance/status.json,
    so rerun `kiln ops` after making an op work (or after adding a case).
    """
    from kiln.conformance.cases import CASES
    from kiln.conformance.support import notes_path, read_status, render_support, write_status

    selected = [case for case in CASES if _selected(case, patterns)]
    if not selected:
        raise click.UsageError(f"no case matches {', '.join(patterns)}; `kiln ops --list` lists them")
    if list_only:
        for case in selected:
            click.echo(f"{case.name:<48} {case.op:<40} {case.input_dtypes()}")
        return
    status = read_status(status_file)
    likely_failures = {name for name, row in status.items() if target in row and not row[target].ok}
    start = time.perf_counter()
    outcomes = run_cases(selected, target, likely_failures, jobs)
    seconds = time.perf_counter() - start
    for name, outcome in outcomes.items():
        status.setdefault(name, {})[target] = outcome
    known = {case.name for case in CASES}
    status = {name: row for name, row in status.items() if name in known}  # cases removed from the table
    write_status(status, status_file)
    output.write_text(render_support(CASES, status, notes_path().read_text()))
    failed = [name for name, outcome in outcomes.items() if not outcome.ok]
    click.echo(
        f"{target}: {len(outcomes) - len(failed)} of {len(outcomes)} cases {'pass' if target == 'llvm-cpu' else 'compile'}"
        f" ({seconds:.0f}s); wrote {output} and the recorded outcomes"
    )
    for name in failed:
        click.echo(f"  {name}: {outcomes[name]}")


def _selected(case: Case, patterns: Sequence[str]) -> bool:
    return not patterns or any(_glob(p).fullmatch(case.name) or _glob(p).fullmatch(case.op) for p in patterns)


def _glob(pattern: str) -> re.Pattern[str]:
    """`*` and `?` as in the shell; brackets are literal, as in case names (`relu[f32]`)."""
    return re.compile(re.escape(pattern).replace(r"\*", ".*").replace(r"\?", "."))


def run_cases(cases: Sequence[Case], target: str, likely_failures: set[str], jobs: int) -> dict[str, Outcome]:
    """Every case's outcome, its groups spread over `jobs` worker processes; progress on stderr."""
    from kiln.conformance.runner import Checker, plan_groups

    checked = 0

    def report(found: dict[str, Outcome]) -> None:
        nonlocal checked
        checked += len(found)
        progress(f"{checked}/{len(cases)} cases checked")

    with Checker(target, jobs) as checker:
        return checker.check(plan_groups(cases, likely_failures), report)
