"""The op conformance suite under pytest: every case of kiln.conformance.runner, on llvm-cpu.

Each case is compiled by kiln and compared with eager PyTorch on the same inputs. A case that
conformance/status.json records as failing is xfail(strict=True) with the recorded reason, so a
change that makes it pass fails here until `kiln ops` has recorded it. Cases are compiled in groups (one
artifact per group, see conformance.plan_groups) by worker processes (conformance.Checker).
"""

from __future__ import annotations

import os

import pytest
import torch

from kiln.conformance.cases import CASES
from kiln.conformance.runner import PASS, Case, Checker, Outcome, plan_groups
from kiln.conformance.support import read_status

TABLE = read_status()
EXPECTED = {name: row["llvm-cpu"] for name, row in TABLE.items() if "llvm-cpu" in row}
LIKELY_FAILURES = {name for name, outcome in EXPECTED.items() if not outcome.ok}


JOBS = min(2, os.cpu_count() or 1)  # CI's machine has 2 cores


@pytest.fixture(scope="session")
def outcomes(request: pytest.FixtureRequest) -> dict[str, Outcome]:
    """The outcome of every case this session runs, checked up front in worker processes.

    Only the groups holding a selected case are compiled (`-k conv` compiles a few). Workers, not
    this process: a compile that hangs or crashes must cost one case, not the test run.
    """
    selected = {item.callspec.params["case"].name for item in request.session.items if _is_op_test(item)}
    groups = [group for group in plan_groups(CASES, LIKELY_FAILURES) if any(case.name in selected for case in group)]
    with Checker("llvm-cpu", JOBS) as checker:
        return checker.check(groups)


def _is_op_test(item: pytest.Item) -> bool:
    return isinstance(item, pytest.Function) and item.function is test_op


def _param(case: Case) -> object:
    expected = EXPECTED.get(case.name)
    marks = [pytest.mark.xfail(strict=True, reason=str(expected))] if expected is not None and not expected.ok else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_op(case: Case, outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes[case.name]
    assert outcome.status == PASS, str(outcome)


def test_record_lists_every_case() -> None:
    names = [case.name for case in CASES]
    assert len(set(names)) == len(names), "case names must be unique"
    missing = sorted(set(names) - set(EXPECTED))
    stale = sorted(set(TABLE) - set(names))
    assert not missing and not stale, f"the recorded outcomes are out of date (run `kiln ops`): missing {missing[:5]}, stale {stale[:5]}"


def test_each_case_exercises_its_op() -> None:
    """The op a case names is in its torch.export graph: the table says what was really tested."""
    wrong = []
    for case in CASES:
        try:
            program = torch.export.export(case.module(), case.inputs())
        except Exception:  # a case torch.export cannot capture is a failure at `exported`, in the table
            continue
        ops = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
        if case.op not in ops:
            wrong.append(f"{case.name}: {case.op} not in {sorted(ops)}")
    assert not wrong, "\n".join(wrong)
