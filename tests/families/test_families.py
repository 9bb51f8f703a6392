"""The model-family suite under pytest: the fast subset (families marked `ci`) on every run, the
whole table with `-m models` (or `make models`, which also rewrites FAMILIES.md).

Each family is compiled by kiln for llvm-cpu in a worker process and compared with eager PyTorch.
A family that conformance/families.json records as failing is xfail(strict=True) with the
recorded reason, so a change that makes it pass fails here until `kiln families` has recorded it.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kiln.cli.main import kiln
from kiln.conformance.families import FAMILIES, Family
from kiln.conformance.family_runner import read_status, render_families, run_families, write_status
from kiln.conformance.runner import FAILS, PASS, Outcome

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded; a builder that tried would fail here
ROOT = Path(__file__).resolve().parents[2]
RECORDED = {name: row["llvm-cpu"] for name, row in read_status().items() if "llvm-cpu" in row}
JOBS = min(2, os.cpu_count() or 1)


@pytest.fixture(scope="session")
def outcomes(request: pytest.FixtureRequest) -> dict[str, Outcome]:
    """The outcome of every family this session selected, checked up front in worker processes."""
    selected = {item.callspec.params["family"].name for item in request.session.items if _is_family_test(item)}
    return run_families([family for family in FAMILIES if family.name in selected], "llvm-cpu", JOBS)


def _is_family_test(item: pytest.Item) -> bool:
    return isinstance(item, pytest.Function) and item.function is test_family


def _param(family: Family) -> object:
    marks = [] if family.ci else [pytest.mark.models]
    if importlib.util.find_spec(family.library) is None:  # timm: `pip install '.[families]'` (make models)
        marks.append(pytest.mark.skip(reason=f"{family.library} is not installed"))
    recorded = RECORDED.get(family.name)
    if recorded is not None and not recorded.ok:
        marks.append(pytest.mark.xfail(strict=True, reason=str(recorded)))
    return pytest.param(family, id=family.name, marks=marks)


@pytest.mark.parametrize("family", [_param(family) for family in FAMILIES])
def test_family(family: Family, outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes[family.name]
    assert outcome.status == PASS, str(outcome)
    assert outcome.rel_l2 is not None and outcome.rel_l2 < 1e-3


def test_the_table_has_forty_families_and_a_record_of_each() -> None:
    names = [family.name for family in FAMILIES]
    assert len(set(names)) == len(names) >= 40
    assert set(RECORDED) == set(names), "conformance/families.json is out of date: run `kiln families`"
    assert {family.library for family in FAMILIES} == {"transformers", "timm"}


def test_families_md_is_up_to_date() -> None:
    """FAMILIES.md at the checkout's root is what the record renders to (apart from its date line)."""
    undated = lambda text: re.sub(r"Last written \S+\.", "", text)  # noqa: E731
    rendered = render_families(FAMILIES, read_status())
    assert undated((ROOT / "FAMILIES.md").read_text()) == undated(rendered), "FAMILIES.md is stale: run `kiln families`"


def test_record_round_trips_and_renders(tmp_path: Path) -> None:
    status = {
        "gpt2": {"llvm-cpu": Outcome(PASS, seconds=9.5, rel_l2=3.1e-7), "cuda": Outcome("compiles", seconds=12.0)},
        "fnet": {"llvm-cpu": Outcome(FAILS, "prims", "op torch.aten.fft_fftn at transformers/x.py:3 | y")},
    }
    write_status(status, tmp_path / "families.json")
    assert read_status(tmp_path / "families.json") == status
    gpt2, fnet = (next(family for family in FAMILIES if family.name == name) for name in ("gpt2", "fnet"))
    text = render_families([gpt2, fnet], status)
    assert "| llvm-cpu | 2 | 1 pass | 50% |" in text and "| cuda | 1 | 1 compile | 100% |" in text
    assert "| `gpt2` (CI) | transformers | pass | 10 | 3.1e-07 | compiles | 12 |  |" in text
    assert "fails at prims: op torch.aten.fft_fftn at transformers/x.py:3 \\| y |  |  | not run |" in text


def test_kiln_families_lists_the_fast_subset() -> None:
    result = CliRunner().invoke(kiln, ["families", "--list", "--ci"])
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()] == [family.name for family in FAMILIES if family.ci]


def test_kiln_families_merges_into_the_record(tmp_path: Path) -> None:
    status, table = tmp_path / "families.json", tmp_path / "FAMILIES.md"
    write_status({"bert": {"llvm-cpu": Outcome(PASS, seconds=1.0, rel_l2=1e-7)}}, status)
    result = CliRunner().invoke(kiln, ["families", "--only", "distilbert", "-o", str(table), "--status", str(status)])
    assert result.exit_code == 0, result.output
    assert "llvm-cpu: 1 of 1 families pass" in result.output
    recorded = read_status(status)
    assert recorded["distilbert"]["llvm-cpu"].status == PASS
    assert recorded["bert"]["llvm-cpu"] == Outcome(PASS, seconds=1.0, rel_l2=1e-7)  # kept: not run this time
    assert "| `distilbert` | transformers | pass |" in table.read_text()
