"""The folders are the architecture: each package imports only what its docstring allows.

Every `import kiln.X` and `from kiln.X import ...` in a package's files (at module level or inside
functions) is read with `ast`, so a tool that reaches into the core, or a runtime that reaches into
the compiler, fails here and not on a GPU machine without the compiler.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest
from testkit import ROOT

# package -> the kiln packages it may import (besides itself); "kiln" is the top package (kiln.errors).
ALLOWED: dict[str, set[str]] = {
    "runtime": {"kiln"},
    "passes": {"kiln"},
    "targets": {"kiln", "passes", "runtime", "compiler"},  # the compiler: its options, for types (below)
    "compiler": {"kiln", "passes", "runtime", "targets"},  # targets: the interface, never a room (below)
    "measure": {"kiln", "runtime"},
    "tune": {"kiln", "compiler", "passes", "runtime", "measure", "targets"},
    "conformance": {"kiln", "compiler", "passes", "runtime", "targets"},
    "cli": {"kiln", "compiler", "passes", "runtime", "measure", "tune", "conformance", "targets"},
}
ROOMS = sorted(path.parent.name for path in (ROOT / "targets").glob("*/__init__.py"))


def imported_modules(path: Path) -> set[str]:
    """The kiln modules `path` imports by absolute name, e.g. {"kiln.runtime.x", "kiln.errors"}."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names if node.module in ("kiln", "kiln.targets"))
    return {name for name in found if name.split(".")[0] == "kiln"}


def imported_packages(path: Path) -> set[str]:
    """The kiln packages `path` imports, e.g. {"runtime", "kiln"} for kiln.runtime.x and kiln.errors."""
    found = set()
    for name in imported_modules(path):
        parts = name.split(".")
        found.add(parts[1] if len(parts) > 1 and parts[1] in ALLOWED else "kiln")
    return found


def imported_rooms(path: Path) -> set[str]:
    """The target rooms `path` imports (kiln.targets.cuda, kiln.targets.llvm_cpu.kernels.x, ...)."""
    return {name.split(".")[2] for name in imported_modules(path) if name.split(".")[1:2] == ["targets"] and len(name.split(".")) > 2 and name.split(".")[2] in ROOMS}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_follow_its_rule(package: str) -> None:
    broken = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if package == "targets" and "tests" in path.relative_to(ROOT / package).parts:
            continue  # a room's tests use the whole compiler, as any test does
        wrong = imported_packages(path) - ALLOWED[package] - {package}
        if wrong:
            broken.append(f"{path.relative_to(ROOT)} imports kiln.{', kiln.'.join(sorted(wrong))}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("package", ["compiler", "passes", "runtime", "measure"])
def test_the_core_and_the_neutral_passes_never_import_a_target_room(package: str) -> None:
    """The driver reads a target through kiln.targets' interface (target.py, resolve.py); a room's code
    stays in its room, so that the core never names a target."""
    broken = [f"{path.relative_to(ROOT)} imports kiln.targets.{room}" for path in sorted((ROOT / package).rglob("*.py")) for room in imported_rooms(path)]
    assert not broken, "\n".join(broken)


def test_the_rooms_take_only_the_compilers_options_and_never_each_other() -> None:
    broken = []
    for room in ROOMS:
        for path in sorted((ROOT / "targets" / room).rglob("*.py")):
            if "tests" in path.relative_to(ROOT / "targets" / room).parts:
                continue  # a room's tests use the whole compiler, as any test does
            compiler = {name for name in imported_modules(path) if name.startswith("kiln.compiler")} - {"kiln.compiler.options"}
            others = imported_rooms(path) - {room}
            broken += [f"{path.relative_to(ROOT)} imports {name}" for name in sorted(compiler)]
            broken += [f"{path.relative_to(ROOT)} imports kiln.targets.{other}" for other in sorted(others)]
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


def test_every_data_file_a_package_reads_is_package_data() -> None:
    """A kernel source or table beside the code (.c, .h, .json) ships in the wheel: an installed kiln
    that lacks one fails at its first compile, where an editable install does not (a regression:
    kiln_gemm.h was left out)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11's; kiln itself runs on 3.10

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {package: ROOT / folder for package, folder in config["package-dir"].items()}
    missing = []
    for package in config["packages"]:
        top, _, rest = package.partition(".")
        base = ".".join(package.split(".")[:2])
        folder = folders[base] / Path(*package.split(".")[2:]) if base in folders else ROOT / top / rest
        patterns = config.get("package-data", {}).get(package, [])
        for path in sorted(folder.glob("*")):
            if path.suffix in (".c", ".h", ".json") and not any(fnmatch.fnmatch(path.name, p) for p in patterns):
                missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"not package data in pyproject.toml: {', '.join(missing)}"
