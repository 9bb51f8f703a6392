"""pytest's fixtures and hooks for tests/; the helpers themselves are in testkit.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit import EXAMPLES, compile_spec

from kiln.compiler import Compiled, ModelSpec, load_model_file


@pytest.fixture(scope="session")
def compiled_examples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[ModelSpec, Compiled, Path]]:
    """Every example compiled once for llvm-cpu, with dumps: name -> (spec, artifact, dump dir)."""
    results = {}
    for path in sorted(EXAMPLES.glob("*.py")):
        if path.stem == "demo":
            continue
        dump_dir = tmp_path_factory.mktemp(path.stem)
        spec = load_model_file(path)
        results[path.stem] = (spec, compile_spec(spec, dump_dir=dump_dir), dump_dir)
    return results


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long reliability runs (marked fuzz) run only when `-m` names them: `make fuzz`."""
    if "fuzz" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="the long part: run with `make fuzz` (pytest -m fuzz)")
    for item in items:
        if item.get_closest_marker("fuzz"):
            item.add_marker(skip)
