"""The folders are the architecture: each package imports only what its docstring allows.

Every `import kiln.X` and `from kiln.X import ...` in a package's files (at module level or inside
functions) is read with `ast`, so a tool that reaches into the core, or a runtime that reaches into
the compiler, fails here and not on a GPU machine without the compiler.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

# package -> the kiln packages it may import (besides itself); "kiln" is the top package (kiln.errors).
ALLOWED: dict[str, set[str]] = {
    "runtime": {"kiln"},
    "passes": {"kiln"},
    "compiler": {"kiln", "passes", "runtime"},
    "measure": {"kiln", "runtime"},
    "tune": {"kiln", "compiler", "passes", "runtime", "measure"},
    "conformance": {"kiln", "compiler", "passes", "runtime"},
    "cli": {"kiln", "compiler", "passes", "runtime", "measure", "tune", "conformance"},
}


def imported_packages(path: Path) -> set[str]:
    """The kiln packages `path` imports, e.g. {"runtime", "kiln"} for kiln.runtime.x and kiln.errors."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names if node.module == "kiln"]
        for name in names:
            parts = name.split(".")
            if parts[0] != "kiln":
                continue
            found.add(parts[1] if len(parts) > 1 and parts[1] in ALLOWED else "kiln")
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_follow_its_rule(package: str) -> None:
    broken = []
    for path in sorted((ROOT / package).rglob("*.py")):
        wrong = imported_packages(path) - ALLOWED[package] - {package}
        if wrong:
            broken.append(f"{path.relative_to(ROOT)} imports kiln.{', kiln.'.join(sorted(wrong))}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_states_its_import_rule(package: str) -> None:
    docstring = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text())) or ""
    assert "Import rule" in docstring, f"{package}/__init__.py must say what it may import"


def test_the_tune_measuring_half_runs_without_the_compiler() -> None:
    """`kiln tune measure` runs on a GPU host that has no compiler: its module imports none."""
    assert "compiler" not in imported_packages(ROOT / "tune" / "measure.py")


def test_every_code_folder_is_a_package_of_the_distribution() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    for package in ALLOWED:
        assert f'"kiln.{package}" = "{package}"' in pyproject
