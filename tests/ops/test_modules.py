"""The module suite under pytest: every case of kiln.conformance.modules, on llvm-cpu, like tests/ops.

Each case is compiled by kiln, called as forward is (several times where the module keeps state),
and compared with eager PyTorch on nesting, dtype, shape and values of its results and of its
inputs after the call. A case conformance/modules.json records as failing is xfail(strict=True)
with the recorded reason. The record also holds the plain stack's outcome of each case
(`kiln ops --suite modules --plain`): no case may fail through kiln that the plain stack passes.
"""

from __future__ import annotations

import os
from functools import partial

import pytest

from kiln.conformance.modules import MODULE_CASES, TOPICS
from kiln.conformance.runner import PASS, Case, Checker, Outcome, check_suite, plan_groups
from kiln.conformance.support import PLAIN, kiln_only_failures, read_status, status_path

TABLE = read_status(status_path("modules"))
EXPECTED = {name: row["llvm-cpu"] for name, row in TABLE.items() if "llvm-cpu" in row}
LIKELY_FAILURES = {name for name, outcome in EXPECTED.items() if not outcome.ok}

JOBS = min(2, os.cpu_count() or 1)


@pytest.fixture(scope="session")
def module_outcomes(request: pytest.FixtureRequest) -> dict[str, Outcome]:
    """The outcome of every module case this session runs, checked up front in worker processes."""
    selected = {item.callspec.params["case"].name for item in request.session.items if _is_module_test(item)}
    groups = [group for group in plan_groups(MODULE_CASES, LIKELY_FAILURES) if any(case.name in selected for case in group)]
    with Checker("llvm-cpu", JOBS, check=partial(check_suite, "modules", "kiln")) as checker:
        return checker.check(groups)


def _is_module_test(item: pytest.Item) -> bool:
    return isinstance(item, pytest.Function) and item.function is test_module


def _param(case: Case) -> object:
    expected = EXPECTED.get(case.name)
    marks = [pytest.mark.xfail(strict=True, reason=str(expected))] if expected is not None and not expected.ok else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in MODULE_CASES])
def test_module(case: Case, module_outcomes: dict[str, Outcome]) -> None:
    outcome = module_outcomes[case.name]
    assert outcome.status == PASS, str(outcome)


def test_record_lists_every_case_on_both_paths() -> None:
    names = [case.name for case in MODULE_CASES]
    assert len(set(names)) == len(names), "case names must be unique"
    assert {case.op for case in MODULE_CASES} <= set(TOPICS)
    missing = sorted(name for name in names if set(TABLE.get(name, {})) != {"llvm-cpu", PLAIN + "llvm-cpu"})
    stale = sorted(set(TABLE) - set(names))
    assert not missing and not stale, (
        f"the recorded outcomes are out of date (run `kiln ops --suite modules --plain`): missing {missing[:5]}, stale {stale[:5]}"
    )


def test_kiln_fails_no_case_the_plain_stack_passes() -> None:
    assert kiln_only_failures(MODULE_CASES, TABLE) == []
