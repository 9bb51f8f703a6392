"""`kiln families`: run the model-family suite, record each family's outcome, and rewrite FAMILIES.md.

The outcomes are data (kiln.conformance.family_runner: `conformance/families.json`); a run merges
its results into them (other targets' columns and families a `--only` run skipped are kept) and
renders FAMILIES.md from them.
"""

from __future__ import annotations

import fnmatch
import time
from pathlib import Path

import click

from .common import debug_option, progress
from .options import TARGET_NAMES


@click.command("families")
@click.option("--target", type=click.Choice(TARGET_NAMES), default="llvm-cpu", show_default=True, help="The column to (re)fill.")
@click.option("--only", "patterns", multiple=True, metavar="GLOB", help="Only families matching, e.g. 'gpt2', 'timm_*' (repeatable).")
@click.option("--ci", "ci_only", is_flag=True, help="Only the fast subset tests/families runs.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=Path("FAMILIES.md"),
    show_default=True,
    help="The table to write (from the recorded outcomes; run from the checkout's root).",
)
@click.option(
    "--status",
    "status_file",
    type=click.Path(path_type=Path),
    help="The recorded outcomes to merge into and rewrite [default: kiln.conformance's families.json].",
)
@click.option("--list", "list_only", is_flag=True, help="List the selected families; run nothing.")
@debug_option
def families_command(
    target: str,
    patterns: tuple[str, ...],
    ci_only: bool,
    jobs: int,
    output: Path,
    status_file: Path | None,
    list_only: bool,
) -> None:
    """Compile real model families (transformers, timm) and compare each with eager PyTorch.

    Each family (conformance/families.py) is a real architecture from its library's own modeling
    code, built from a tiny configuration with seeded random weights; nothing is downloaded. kiln
    compiles it and, on llvm-cpu, runs it and compares it with eager PyTorch on the same inputs; a
    GPU target is compile-only here. The outcome, compile time and relative L2 error of each go
    into conformance/families.json, and FAMILIES.md is rewritten from it.

    \b
    Examples:
      kiln families                    # every family on llvm-cpu (about 15 minutes on 2 cores)
      kiln families --only 'mixtral'   # one row; the others keep their status
      kiln families --target cuda      # the cuda column: compile-only, no GPU needed
    """
    from kiln.conformance.families import FAMILIES
    from kiln.conformance.family_runner import read_status, render_families, run_families, write_status

    selected = [
        family
        for family in FAMILIES
        if (not patterns or any(fnmatch.fnmatchcase(family.name, pattern) for pattern in patterns))
        and (family.ci or not ci_only)
    ]
    if not selected:
        raise click.UsageError("no family matches; `kiln families --list` lists them")
    if list_only:
        for family in selected:
            click.echo(f"{family.name:<24} {family.library:<13} {'CI' if family.ci else ''}")
        return
    status = read_status(status_file)
    start = time.perf_counter()
    checked = 0

    def report(found: dict) -> None:
        nonlocal checked
        checked += len(found)
        for name, outcome in found.items():
            progress(f"[{checked}/{len(selected)}] {name}: {outcome}")

    outcomes = run_families(selected, target, jobs, report)
    for name, outcome in outcomes.items():
        status.setdefault(name, {})[target] = outcome
    known = {family.name for family in FAMILIES}
    status = {name: row for name, row in status.items() if name in known}
    write_status(status, status_file)
    output.write_text(render_families(FAMILIES, status))
    passed = sum(outcome.ok for outcome in outcomes.values())
    word = "pass" if target == "llvm-cpu" else "compile"
    click.echo(f"{target}: {passed} of {len(outcomes)} families {word} ({time.perf_counter() - start:.0f}s); wrote {output}")
