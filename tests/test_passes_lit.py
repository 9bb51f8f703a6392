"""Each pass's lit test, run by lit from pytest (`make test` runs all): tests/passes/<pass-name>.mlir
for the target-neutral passes, targets/<room>/tests/passes/<pass-name>.mlir for a room's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIT_TESTS = sorted([*(ROOT / "tests" / "passes").glob("*.mlir"), *(ROOT / "targets").glob("*/tests/passes/*.mlir")])
LIT = str(Path(sys.executable).parent / "lit")  # the console script of this environment (lit has no __main__)


@pytest.mark.parametrize("lit_test", LIT_TESTS, ids=lambda path: path.stem)
def test_lit(lit_test: Path) -> None:
    result = subprocess.run([LIT, "-v", str(lit_test)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
