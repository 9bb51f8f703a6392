"""Every example compiles for llvm-cpu and matches eager PyTorch; every stage leaves its dump."""

from __future__ import annotations

import json
import re

import pytest
import torch
from testkit import EXAMPLES, as_tuple, eager

EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.py") if p.stem != "demo")
TOLERANCES = {torch.bfloat16: 4e-2, torch.float16: 1e-2}


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_matches_eager(compiled_examples, name):
    spec, compiled, _ = compiled_examples[name]
    torch.manual_seed(1)
    fresh_inputs = tuple(
        torch.randint_like(x, 0, 100) if not x.is_floating_point() else torch.randn_like(x)
        for x in spec.example_inputs
    )
    if name == "embedding_two_outputs":  # the mask input is 0/1 by construction
        fresh_inputs = (fresh_inputs[0], (torch.rand_like(spec.example_inputs[1]) > 0.5).float())
    expected = eager(spec, *fresh_inputs)
    actual = as_tuple(compiled(*fresh_inputs))
    assert len(actual) == len(expected)
    for want, got in zip(expected, actual, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        tolerance = TOLERANCES.get(want.dtype, 1e-4)
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance)


def test_sincos_is_one(compiled_examples):
    _, compiled, _ = compiled_examples["sincos"]
    x = torch.randn(1024, 1024) * 100
    torch.testing.assert_close(compiled(x), torch.ones_like(x), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_stage_dumps_hold_each_stages_ir(compiled_examples, name):
    _, _, dump_dir = compiled_examples[name]
    files = {p.name for p in dump_dir.iterdir()}
    numbered = sorted(f for f in files if re.match(r"\d\d-", f))
    assert numbered[0] == "00-exported.txt"
    (aten,) = dump_dir.glob("*-aten.mlir")
    (linalg,) = dump_dir.glob("*-linalg.mlir")
    assert "torch.aten." in aten.read_text()
    linalg_ir = linalg.read_text()
    assert "func.func @" in linalg_ir
    assert not re.search(r"\btorch\.(aten|prim|vtensor|constant)", linalg_ir), "torch ops left after lowering"
    phases = sorted(f for f in files if re.search(r"-vmfb-\d\d-", f))
    assert [re.sub(r".*-vmfb-\d\d-", "", p) for p in phases][:2] == ["input.mlir", "abi.mlir"]
    assert any(p.endswith("-vm.mlir") for p in phases)


def test_manifest_describes_the_call(compiled_examples, tmp_path):
    _, compiled, _ = compiled_examples["embedding_two_outputs"]
    path = compiled.save(tmp_path / "tokens.vmfb")
    manifest = json.loads(path.with_suffix(".json").read_text())
    (function,) = manifest["functions"]
    assert function["name"] == "main"
    assert [(t["name"], t["shape"], t["dtype"]) for t in function["inputs"]] == [
        ("ids", [4, 12], "int64"),
        ("mask", [4, 12], "float32"),
    ]
    assert [(t["shape"], t["dtype"]) for t in function["outputs"]] == [([4, 12, 5], "float32"), ([4, 32], "float32")]
    assert manifest["target"] == "llvm-cpu" and manifest["driver"] == "local-task"
    assert manifest["target_details"]["cpu"] == "host"
    assert "--iree-llvmcpu-target-cpu=host" in manifest["iree_flags"]
    assert "--iree-opt-level=O3" in manifest["iree_flags"]
    assert set(manifest["versions"]) >= {"torch", "torch-mlir", "iree-base-compiler", "torchkiln"}
    assert manifest["source"]["path"].endswith("embedding_two_outputs.py")
    assert len(manifest["source"]["sha256"]) == 64
