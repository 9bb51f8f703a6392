"""Helpers shared by kiln's tests (tests/) and the target rooms' tests (targets/<room>/tests/): load
example model files, compile them, compare with eager, and say which devices are visible.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import torch
from visible_devices import device_visible, gpu, vulkan  # noqa: F401  (re-exported: the tests' one place for them)

from kiln.compiler import Compiled, CompileOptions, ModelSpec, load_model_file, run_pipeline

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
LLAMA = EXAMPLES / "llama"


def llama() -> ModuleType:
    """examples/llama/llama.py, imported as the model files beside it import it."""
    pytest.importorskip("transformers")
    sys.path.insert(0, str(LLAMA))
    try:
        import llama as module
    finally:
        sys.path.remove(str(LLAMA))
    return module


def write_llama_model_file(directory: Path, body: str) -> Path:
    """`directory`/model.py: `body` (dedented), able to import examples/llama's llama.py."""
    path = directory / "model.py"
    path.write_text(f"import sys\nsys.path.insert(0, {str(LLAMA)!r})\n" + textwrap.dedent(body))
    return path


def tiny_causal_lm_checkpoint(directory: Path, vocab: int, extra: str = "") -> tuple[Path, torch.nn.Module]:
    """The tiny Llama causal LM's checkpoint, written in `directory`, and a model file there that builds
    the model without weights and names the checkpoint (`extra`: more lines of it); and the same model
    built in eager with those weights."""
    module = llama()
    with torch.device("meta"):
        shapes = module.build_causal_lm("tiny", vocab)
    files = module.write_checkpoint(shapes, directory / "checkpoint")
    body = f"""
        from llama import build_causal_lm, prompt
        weights = "checkpoint/*.safetensors"
        {extra}
        def get_model():
            return build_causal_lm("tiny", {vocab})
        def get_example_inputs():
            return prompt("tiny", {vocab})
        """
    reference = module.build_causal_lm("tiny", vocab)
    safetensors_torch = pytest.importorskip("safetensors.torch")
    reference.load_state_dict({name: tensor for file in files for name, tensor in safetensors_torch.load_file(file).items()})
    return write_llama_model_file(directory, body), reference.eval()


def example_spec(name: str) -> ModelSpec:
    return load_model_file(EXAMPLES / f"{name}.py")


def compile_spec(spec: ModelSpec, **options: object) -> Compiled:
    return run_pipeline(spec, CompileOptions(**options)).compiled  # type: ignore[arg-type]


def eager(spec: ModelSpec, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Eager PyTorch's result for the first entry point (what calling the artifact runs)."""
    entry = spec.entries[0]
    result = entry(*(inputs or entry.example_inputs))
    return result if isinstance(result, tuple) else (result,)


def as_tuple(value: object) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)  # type: ignore[return-value]


def recorded_per_call(hal: str) -> list[str]:
    """The command buffers IREE records again on every call, from an artifact's HAL dump: the
    `memoize_apply` functions called with arguments (the call's buffers); one recorded once at load is
    called from an initializer with none."""
    return sorted(set(re.findall(r"util\.call @(\S+_memoize_apply)\((?!\))", hal)))
