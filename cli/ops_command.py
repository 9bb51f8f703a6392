"""`kiln ops`: run the op conformance suite and rewrite SUPPORT.md, the table of what kiln supports.

SUPPORT.md is this command's output and also its memory: a run merges its results into the table
already there (other targets' columns, cases a `--only` run skipped, the hand-written notes), and
tests/ops reads it back to know which cases are expected to fail. So its format lives here, in
`render_support` and `read_support`, and nowhere else.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .common import debug_option, progress
from .compile_command import TARGETS

if TYPE_CHECKING:
    from kiln.compiler.conformance import Case, Outcome

# A source checkout (editable install): SUPPORT.md lives at its root, beside tests/ops.
_CHECKOUT = Path(__file__).resolve().parents[1]
DEFAULT_SUPPORT = _CHECKOUT / "SUPPORT.md" if (_CHECKOUT / "tests" / "ops").is_dir() else Path("SUPPORT.md")

NOTES_BEGIN, NOTES_END = "<!-- notes: hand-written, kept by `kiln ops` -->", "<!-- end of notes -->"
NOT_RUN = "not run"


@click.command("ops")
@click.option("--target", type=click.Choice(TARGETS), default="llvm-cpu", show_default=True, help="The column to (re)fill.")
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
    default=DEFAULT_SUPPORT,
    show_default=True,
    help="The support table to update (read first, then rewritten).",
)
@click.option("--list", "list_only", is_flag=True, help="List the selected cases (name, ATen op, dtypes); run nothing.")
@debug_option
def ops_command(target: str, patterns: tuple[str, ...], jobs: int, output: Path, list_only: bool) -> None:
    """Check which ATen ops kiln compiles, and rewrite SUPPORT.md with the result.

    Each case of the conformance suite (kiln/compiler/conformance.py: hundreds of op variants over
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

    tests/ops runs the same cases under pytest and expects exactly the failures SUPPORT.md lists,
    so rerun `kiln ops` after making an op work (or after adding a case).
    """
    from kiln.compiler.conformance import CASES

    selected = [case for case in CASES if _selected(case, patterns)]
    if not selected:
        raise click.UsageError(f"no case matches {', '.join(patterns)}; `kiln ops --list` lists them")
    if list_only:
        for case in selected:
            click.echo(f"{case.name:<48} {case.op:<40} {case.input_dtypes()}")
        return
    table = read_support(output.read_text()) if output.is_file() else {}
    notes = read_notes(output.read_text()) if output.is_file() else None
    likely_failures = {name for name, row in table.items() if target in row and not row[target].ok}
    start = time.perf_counter()
    outcomes = run_cases(selected, target, likely_failures, jobs)
    seconds = time.perf_counter() - start
    for name, outcome in outcomes.items():
        table.setdefault(name, {})[target] = outcome
    output.write_text(render_support(CASES, table, notes))
    failed = [name for name, outcome in outcomes.items() if not outcome.ok]
    click.echo(
        f"{target}: {len(outcomes) - len(failed)} of {len(outcomes)} cases {'pass' if target == 'llvm-cpu' else 'compile'}"
        f" ({seconds:.0f}s); wrote {output}"
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
    from kiln.compiler.conformance import Checker, plan_groups

    checked = 0

    def report(found: dict[str, Outcome]) -> None:
        nonlocal checked
        checked += len(found)
        progress(f"{checked}/{len(cases)} cases checked")

    with Checker(target, jobs) as checker:
        return checker.check(plan_groups(cases, likely_failures), report)


def render_support(cases: Sequence[Case], table: dict[str, dict[str, Outcome]], notes: str | None) -> str:
    """SUPPORT.md: a summary per target, the notes, then one row per case with its status per target."""
    targets = [target for target in TARGETS if any(target in row for row in table.values())]
    lines = [
        "# Op support",
        "",
        "What kiln compiles, op by op: each row is one case of the conformance suite",
        "(`compiler/conformance.py`), a tiny module that kiln compiles and, on llvm-cpu, runs and compares",
        "with eager PyTorch on the same inputs. GPU columns are compile-only (no GPU where they were made).",
        "Generated by `kiln ops` (see `kiln ops --help`); tests/ops expects exactly the failures listed here.",
        f"Last written {date.today().isoformat()}.",
        "",
        "## Summary",
        "",
        "| target | cases | pass | rate |",
        "|---|---|---|---|",
    ]
    for target in targets:
        ran = [row[target] for row in (table.get(case.name, {}) for case in cases) if target in row]
        passed = sum(outcome.ok for outcome in ran)
        word = "pass" if target == "llvm-cpu" else "compile"
        lines.append(f"| {target} | {len(ran)} | {passed} {word} | {100 * passed / max(len(ran), 1):.1f}% |")
    variants = {case.variant for case in cases}
    ops = {case.op for case in cases}
    lines += [
        "",
        f"{len(cases)} cases: {len(variants)} op variants over {len(ops)} distinct ATen operator overloads (as torch.export",
        "names them), in f32, f16, bf16, integer and bool dtypes.",
        "",
        NOTES_BEGIN,
        (notes or "## Notes\n\n(none yet)").strip(),
        NOTES_END,
        "",
        "## Cases",
        "",
        "| case | ATen op | dtypes | " + " | ".join(targets) + " |",
        "|---|---|---|" + "---|" * len(targets),
    ]
    for case in cases:
        row = table.get(case.name, {})
        cells = [_escape(str(row[target])) if target in row else NOT_RUN for target in targets]
        lines.append(f"| `{case.name}` | {case.op} | {case.input_dtypes()} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def read_support(text: str) -> dict[str, dict[str, Outcome]]:
    """The case rows of a SUPPORT.md: case name -> target -> outcome ("not run" cells and rows left out)."""
    from kiln.compiler.conformance import Outcome

    table: dict[str, dict[str, Outcome]] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = [_unescape(cell.strip()) for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if cells[0] == "case":
            header = cells
        elif header is not None and not cells[0].startswith("---"):
            row = dict(zip(header, cells, strict=True))
            name = row["case"].strip("`")
            cells = {t: Outcome.parse(row[t]) for t in TARGETS if row.get(t, NOT_RUN) != NOT_RUN}
            if cells:
                table[name] = cells
    return table


def read_notes(text: str) -> str | None:
    """The hand-written notes between the markers, kept from one run to the next."""
    begin, end = text.find(NOTES_BEGIN), text.find(NOTES_END)
    return text[begin + len(NOTES_BEGIN) : end].strip() if 0 <= begin < end else None


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def _unescape(cell: str) -> str:
    return cell.replace("\\|", "|")
