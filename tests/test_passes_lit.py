"""Each pass's lit test, tests/passes/<pass-name>.mlir, run by lit from pytest: `make test` runs all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LIT_TESTS = sorted((Path(__file__).parent / "passes").glob("*.mlir"))
LIT = str(Path(sys.executable).parent / "lit")  # the console script of this environment (lit has no __main__)


@pytest.mark.parametrize("lit_test", LIT_TESTS, ids=lambda path: path.stem)
def test_lit(lit_test: Path) -> None:
    result = subprocess.run([LIT, "-v", str(lit_test)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
