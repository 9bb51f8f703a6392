"""The model zoo: real architectures compile for llvm-cpu and match eager PyTorch."""

from __future__ import annotations

import pytest
import torch
from testkit import EXAMPLES, as_tuple, compile_spec, eager

from kiln.compiler import load_model_file

ZOO = EXAMPLES / "zoo"
NEEDS_TRANSFORMERS = ("gpt2", "bert", "mixtral", "whisper")
AUTO_EXTERNAL = ("gpt2", "bert", "vit")  # over 256 MiB of weights: `--params auto` keeps them in an .irpa


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "resnet50", "bert", "vit", "mixtral", "whisper"])
def test_zoo_model_matches_eager(name):
    if name in NEEDS_TRANSFORMERS:
        pytest.importorskip("transformers")
    spec = load_model_file(ZOO / f"{name}.py")
    compiled = compile_spec(spec)
    assert (compiled.manifest.parameters is not None) == (name in AUTO_EXTERNAL)
    if compiled.parameters is not None:
        assert len(compiled.vmfb) < 2 * 2**20  # the weights are not in the .vmfb
    actual = as_tuple(compiled(*spec.example_inputs))
    for want, got in zip(eager(spec), actual, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
