"""Shared test helpers: load example model files and compile them once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kiln.compiler import Compiled, CompileOptions, ModelSpec, load_model_file, run_pipeline

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def example_spec(name: str) -> ModelSpec:
    return load_model_file(EXAMPLES / f"{name}.py")


def compile_spec(spec: ModelSpec, **options: object) -> Compiled:
    compilation = run_pipeline(spec, CompileOptions(**options))  # type: ignore[arg-type]
    assert compilation.compiled is not None
    return compilation.compiled


def eager(spec: ModelSpec, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Eager PyTorch's result for the first entry point (what calling the artifact runs)."""
    entry = spec.entries[0]
    result = entry(*(inputs or entry.example_inputs))
    return result if isinstance(result, tuple) else (result,)


def as_tuple(value: object) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)  # type: ignore[return-value]


def device_visible(driver: str) -> bool:
    """Whether IREE sees a device of `driver` ("cuda", "vulkan") on this machine."""
    try:
        import iree.runtime as rt

        return bool(rt.get_driver(driver).query_available_devices())
    except Exception:
        return False


gpu = pytest.mark.skipif(not device_visible("cuda"), reason="no CUDA device visible to IREE")
vulkan = pytest.mark.skipif(not device_visible("vulkan"), reason="no Vulkan device visible to IREE")


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
