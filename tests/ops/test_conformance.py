"""The conformance runner and `kiln ops` themselves: comparison, attribution, the SUPPORT.md format."""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
from click.testing import CliRunner

from kiln.cli.main import kiln
from kiln.cli.ops_command import render_all
from kiln.conformance import runner
from kiln.conformance.cases import CASES, Fn
from kiln.conformance.runner import (
    COMPILES,
    FAILS,
    MISMATCH,
    PASS,
    Arg,
    Case,
    Checker,
    Outcome,
    check_group,
    compare,
    plan_groups,
)
from kiln.conformance.support import (
    PLAIN,
    kiln_only_failures,
    read_status,
    render_modules,
    render_support,
    write_status,
)

ROOT = Path(__file__).resolve().parents[2]


def test_compare_checks_dtype_shape_and_values() -> None:
    x = torch.tensor([1.0, 2.0, math.nan])
    assert compare(x, x.clone()) == Outcome(PASS)  # NaN where eager has NaN is equal
    assert compare(x, x + 1e-6).status == PASS
    assert compare(x, x + 1e-2) == Outcome(MISMATCH, detail="max abs error 0.01 (rtol 0.0001, atol 0.0001)")
    assert compare(x, x.half()) == Outcome(MISMATCH, detail="dtype f16, eager f32")
    assert compare((x, x), (x, x[:2])) == Outcome(MISMATCH, detail="output 1: shape [2], eager [3]")
    ints = torch.arange(4)
    assert compare(ints, ints.flip(0)) == Outcome(MISMATCH, detail="4 of 4 elements differ")
    assert compare((ints,), (ints, ints)) == Outcome(MISMATCH, detail="2 outputs, eager has 1")


def test_outcomes_read_back_from_their_record(tmp_path) -> None:
    status = {
        "a[f32]": {"llvm-cpu": Outcome(PASS), "cuda": Outcome(COMPILES)},
        "b[f32]": {"llvm-cpu": Outcome(MISMATCH, detail="max abs error 0.5 (rtol 0.0001, atol 0.0001)")},
        "c[f32]": {"llvm-cpu": Outcome(FAILS, "prims", "op torch.aten.sort failed in pass 'check-primitives': a | b")},
    }
    write_status(status, tmp_path / "status.json")
    assert read_status(tmp_path / "status.json") == status


def _case(name: str, function: object) -> Case:
    return Case(f"{name}[f32]", "aten.exp.default", lambda: Fn(function), (Arg((3,)),), torch.float32)


def _branchy(a: torch.Tensor) -> torch.Tensor:
    if a.sum() > 0:  # data-dependent control flow: torch.export refuses it
        return a
    return -a


def test_a_failed_group_is_redone_case_by_case() -> None:
    group = (_case("exp", torch.exp), _case("branchy", _branchy), _case("neg", torch.neg))
    outcomes = check_group(group)
    assert outcomes["exp[f32]"] == outcomes["neg[f32]"] == Outcome(PASS)
    assert outcomes["branchy[f32]"].status == FAILS and outcomes["branchy[f32]"].stage == "exported"


def test_known_failures_are_compiled_alone() -> None:
    cases = CASES[:5]
    groups = plan_groups(cases, likely_failures={cases[1].name}, group_size=3)
    assert groups == [(cases[0], cases[2], cases[3]), (cases[4],), (cases[1],)]


def test_checker_runs_groups_in_workers() -> None:
    relu, exp = (next(case for case in CASES if case.name == name) for name in ("relu[f32]", "exp[f32]"))
    with Checker("llvm-cpu", jobs=2) as checker:
        assert checker.check([(relu,), (exp,)]) == {"relu[f32]": Outcome(PASS), "exp[f32]": Outcome(PASS)}


def test_a_worker_past_its_time_costs_its_case(monkeypatch) -> None:
    """No time at all: every case's worker is lost, so the group of two is redone case by case and
    each case gets the failure, at the stage its worker had reached."""
    monkeypatch.setattr(runner, "GROUP_SECONDS", (0.0, 0.0))
    relu, exp = (next(case for case in CASES if case.name == name) for name in ("relu[f32]", "exp[f32]"))
    with Checker("llvm-cpu", jobs=1) as checker:
        outcomes = checker.check([(relu, exp)])
    assert set(outcomes) == {"relu[f32]", "exp[f32]"}
    for outcome in outcomes.values():
        assert outcome.status == FAILS and outcome.detail.startswith("no result after") and outcome.stage


def test_support_table_is_rendered_from_the_record() -> None:
    cases = CASES[:3]
    status = {
        cases[0].name: {"llvm-cpu": Outcome(PASS), "cuda": Outcome(COMPILES)},
        cases[1].name: {"llvm-cpu": Outcome(FAILS, "vmfb", "iree-compile failed: a | b")},
    }
    text = render_support(cases, status, "## Notes\n\nkept")
    assert "| llvm-cpu | 2 | 1 pass | 50.0% |" in text and "| cuda | 1 | 1 compile | 100.0% |" in text
    assert "## Notes\n\nkept" in text
    second, third = (f"| `{case.name}` | {case.op} | {case.input_dtypes()} |" for case in cases[1:])
    assert f"{second} fails at vmfb: iree-compile failed: a \\| b | not run |" in text
    assert f"{third} not run | not run |" in text


def test_kiln_ops_merges_into_the_record(tmp_path) -> None:
    status, support = tmp_path / "status.json", tmp_path / "SUPPORT.md"
    write_status({"exp[f32]": {"llvm-cpu": Outcome(PASS)}}, status)
    args = ["ops", "--only", "relu[f32]", "--target", "vulkan-spirv", "-o", str(support), "--status", str(status)]
    result = CliRunner().invoke(kiln, args)
    assert result.exit_code == 0, result.output
    assert "vulkan-spirv: 1 of 1 cases compile" in result.output
    recorded = read_status(status)
    assert recorded["relu[f32]"] == {"vulkan-spirv": Outcome(COMPILES)}
    assert recorded["exp[f32]"] == {"llvm-cpu": Outcome(PASS)}  # kept: not run this time
    assert "| `relu[f32]` | aten.relu.default | f32 | not run | compiles |" in support.read_text()


def test_support_md_is_up_to_date() -> None:
    """SUPPORT.md at the checkout's root is what both suites' records render to (apart from its date line)."""
    rendered = render_all()
    on_disk = (ROOT / "SUPPORT.md").read_text()
    undated = lambda text: re.sub(r"Last written \S+\.", "", text)  # noqa: E731
    assert undated(on_disk) == undated(rendered), "SUPPORT.md is stale: run `kiln ops` (or re-render it)"


def test_kiln_ops_lists_cases_by_op() -> None:
    result = CliRunner().invoke(kiln, ["ops", "--list", "--only", "aten.conv3d.*"])
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()] == [
        case.name for case in CASES if case.op.startswith("aten.conv3d.")
    ]


def test_compare_checks_nesting_and_python_values() -> None:
    x = torch.tensor([1.0, 2.0])
    assert compare((x, [x], 3), (x.clone(), [x.clone()], 3)) == Outcome(PASS)
    assert compare((x, [x]), (x, (x,))) == Outcome(MISMATCH, detail="nested as tuple(*, tuple(*)), eager tuple(*, list(*))")
    assert compare((x, 3), (x, 4)) == Outcome(MISMATCH, detail="output 1: 4, eager 3")
    assert compare((x, 3), (x, 3.0)) == Outcome(MISMATCH, detail="output 1: 3.0, eager 3")
    assert compare(x, x + 1, what="inputs after the call").detail.startswith("inputs after the call: max abs error 1")


def test_the_plain_stack_is_run_and_judged_leniently() -> None:
    from kiln.conformance.plain import check_plain

    doubled = Case("doubled", "dtypes", lambda: Fn(lambda a: (a.double() * 2, a.sum())), (Arg((3,)),), None)
    assert check_plain(doubled) == Outcome(PASS)  # float64 computed in float32 by IREE's demotion: close enough
    flagged = Case("flagged", "scalars", lambda: Fn(lambda a, negate: -a if negate else a), (Arg((3,)), True), None)
    outcome = check_plain(flagged)
    assert (outcome.status, outcome.stage) == (FAILS, "runtime") and "True" in outcome.detail  # IREE takes no Python bool


def test_the_module_table_puts_kiln_only_failures_first() -> None:
    cases = [
        Case(name, "scalars", lambda: Fn(torch.neg), (Arg((3,)),), None) for name in ("both", "kiln_only", "plain_only")
    ]
    fails = Outcome(FAILS, "prims", "no")
    status = {
        "both": {"llvm-cpu": Outcome(PASS), PLAIN + "llvm-cpu": Outcome(PASS)},
        "kiln_only": {"llvm-cpu": fails, PLAIN + "llvm-cpu": Outcome(PASS)},
        "plain_only": {"llvm-cpu": Outcome(PASS), PLAIN + "llvm-cpu": fails},
    }
    assert kiln_only_failures(cases, status) == ["kiln_only"]
    text = render_modules(cases, status)
    assert "| pass | 2 (66.7%) | 2 (66.7%) |" in text and "| fail where the other passes | 1 | 1 |" in text
    assert "Cases only kiln fails: `kiln_only`." in text
    assert "| `kiln_only` | scalars | f32 | fails at prims: no | pass |" in text
