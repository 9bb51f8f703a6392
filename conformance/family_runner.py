"""The model-family suite: each family of families.py compiled by kiln, run, and compared with eager.

Like the op suite, outcomes are data: `families.json` (beside this file) holds each family's last
outcome per target, with its compile time and relative L2 error; `kiln families` merges a run into
it and renders FAMILIES.md from it (nothing reads FAMILIES.md back); tests/families expects
exactly the recorded outcomes of its fast subset. Families compile one at a time in the op
suite's worker processes (runner.Checker), so a hang or a crash costs one family, not the run.

Unlike the op suite, an error keeps its pointer into the model's source (shortened to the
library's path, e.g. `transformers/models/gpt2/modeling_gpt2.py:123`): for a real model, the
line is what a user needs.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import date
from importlib import resources
from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten

from kiln.compiler.model_file import spec_from_module
from kiln.compiler.options import CompileOptions
from kiln.compiler.pipeline import run_pipeline
from kiln.errors import KilnError
from kiln.runtime.numerics import compare_all

from .families import FAMILIES, Family
from .runner import COMPILES, FAILS, MISMATCH, PASS, RUNNABLE_TARGETS, Checker, Outcome, StageTracker

FAMILY_SECONDS = (300.0, 0.0)  # a worker's time for one family: export, import and iree-compile of a tiny model
TARGET_ORDER = ("llvm-cpu", "cuda")

Status = dict[str, dict[str, Outcome]]  # family name -> target -> outcome


def check_families(names: Sequence[str], target: str, on_stage: Callable[[str], None]) -> dict[str, Outcome]:
    """Each named family compiled for `target` and, where this machine runs it, compared with eager."""
    by_name = {family.name: family for family in FAMILIES}
    return {name: check_family(by_name[name], target, on_stage) for name in names}


def check_family(family: Family, target: str, on_stage: Callable[[str], None] = lambda stage: None) -> Outcome:
    tracker = StageTracker("build", on_stage)
    try:
        module, inputs = family.instantiate()
        with torch.no_grad():
            expected = module(*inputs)
        spec = spec_from_module(module, inputs)
        start = time.perf_counter()
        compiled = run_pipeline(spec, CompileOptions(target=target), progress=tracker).compiled
        seconds = round(time.perf_counter() - start, 1)
    except KilnError as error:
        return Outcome(FAILS, error.stage or tracker.stage, _first_line(error.message))
    except Exception as error:  # an exception kiln let through: a kiln bug, recorded as such
        return Outcome(FAILS, tracker.stage, f"internal error: {type(error).__name__}: {_first_line(str(error))}")
    if target not in RUNNABLE_TARGETS:
        return Outcome(COMPILES, seconds=seconds)
    on_stage("runtime")
    try:
        actual = compiled(*inputs)
    except KilnError as error:
        return Outcome(FAILS, "runtime", _first_line(error.message), seconds=seconds)
    want, _ = tree_flatten(expected)
    got, _ = tree_flatten(actual)
    comparisons = compare_all(got, want)
    rel_l2 = max(comparison.rel_l2 for comparison in comparisons)
    rel_l2 = float(f"{rel_l2:.2g}") if rel_l2 != float("inf") else None
    bad = next((comparison for comparison in comparisons if not comparison.close), None)
    if bad is None:
        return Outcome(PASS, seconds=seconds, rel_l2=rel_l2)
    return Outcome(MISMATCH, detail=bad.describe(), seconds=seconds, rel_l2=rel_l2)


def run_families(
    families: Sequence[Family],
    target: str,
    jobs: int = 1,
    progress: Callable[[dict[str, Outcome]], None] = lambda found: None,
) -> dict[str, Outcome]:
    """Every family's outcome, one per worker task, spread over `jobs` worker processes."""
    with Checker(target, jobs, check=check_families, seconds=FAMILY_SECONDS) as checker:
        return checker.check([(family,) for family in families], progress)  # type: ignore[misc]


# Where a message points into a library: ".../site-packages/transformers/models/x.py:12" -> "transformers/models/x.py:12".
_LIBRARY_PATH = re.compile(r"/\S*?/(?:site|dist)-packages/")


def _first_line(text: str, limit: int = 240) -> str:
    text = _LIBRARY_PATH.sub("", text.strip())
    line = text.splitlines()[0] if text else "(no message)"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def status_path() -> Path:
    return Path(str(resources.files("kiln.conformance") / "families.json"))


def read_status(path: Path | None = None) -> Status:
    path = path or status_path()
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {name: {target: Outcome(**cell) for target, cell in row.items()} for name, row in data.items()}


def write_status(status: Status, path: Path | None = None) -> None:
    """One line per family, sorted: a diff of this file says which families changed."""
    lines = [
        f"{json.dumps(name)}: {json.dumps({target: _cell(outcome) for target, outcome in sorted(row.items())})}"
        for name, row in sorted(status.items())
    ]
    (path or status_path()).write_text("{\n" + ",\n".join(lines) + "\n}\n")


def _cell(outcome: Outcome) -> dict[str, object]:
    return {key: value for key, value in asdict(outcome).items() if value not in (None, "")}


def render_families(families: Sequence[Family], status: Status) -> str:
    """FAMILIES.md: a summary per target, then one row per family."""
    targets = [target for target in TARGET_ORDER if any(target in row for row in status.values())]
    lines = [
        "# Model families",
        "",
        "Real architectures from transformers and timm, each built from a tiny configuration with seeded",
        "random weights (nothing downloaded), compiled by kiln and, on llvm-cpu, run and compared with eager",
        "PyTorch on the same inputs (dtype, shape and every element within the f32 tolerance). The builders",
        "are `conformance/families.py`; the outcomes are `conformance/families.json`, which tests/families",
        "checks against. Generated by `kiln families` (`make models`); compile seconds are on the 2-core",
        "development machine; in the cuda column, `pass` rows ran on an H100 against the eager reference",
        f"(`benchmarks/families_gpu.py`), `compiles` rows are compile-only. Last written {date.today().isoformat()}.",
        "",
        "## Summary",
        "",
        "| target | families | pass | rate |",
        "|---|---|---|---|",
    ]
    for target in targets:
        ran = [status[family.name][target] for family in families if target in status.get(family.name, {})]
        passed = sum(outcome.ok for outcome in ran)
        word = "pass" if target in RUNNABLE_TARGETS else "compile"
        checked = sum(outcome.status == PASS for outcome in ran) if target not in RUNNABLE_TARGETS else 0
        on_gpu = f" ({checked} of them pass on a GPU)" if checked else ""
        lines.append(f"| {target} | {len(ran)} | {passed} {word}{on_gpu} | {100 * passed / max(len(ran), 1):.0f}% |")
    lines += [
        "",
        "## Families",
        "",
        "| family | library | " + " | ".join(f"{target} | compile s | rel. L2" for target in targets) + " | note |",
        "|---|---|" + "---|---|---|" * len(targets) + "---|",
    ]
    for family in families:
        row = status.get(family.name, {})
        cells = []
        for target in targets:
            outcome = row.get(target)
            if outcome is None:
                cells += ["not run", "", ""]
                continue
            seconds = f"{outcome.seconds:.0f}" if outcome.seconds is not None else ""
            error = f"{outcome.rel_l2:.1e}" if outcome.rel_l2 is not None else ""
            cells += [_escape(str(outcome)), seconds, error]
        ci = " (CI)" if family.ci else ""
        lines.append(f"| `{family.name}`{ci} | {family.library} | " + " | ".join(cells) + f" | {family.note} |")
    return "\n".join(lines) + "\n"


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")
