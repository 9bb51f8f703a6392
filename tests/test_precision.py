"""--dtype: an f32 model compiled in bf16 / f16 takes, computes and returns that dtype."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from testkit import EXAMPLES, compile_spec, eager, example_spec

from kiln.cli.main import kiln
from kiln.compiler.precision import convert_precision
from kiln.errors import KilnError


@pytest.mark.parametrize(("precision", "dtype", "tolerance"), [("bf16", torch.bfloat16, 5e-2), ("f16", torch.float16, 1e-2)])
def test_converted_encoder_matches_converted_eager(precision, dtype, tolerance):
    spec = convert_precision(example_spec("encoder"), precision)
    compiled = compile_spec(spec)
    assert [t.dtype for t in compiled.manifest.inputs] == [str(dtype).removeprefix("torch.")]
    assert compiled.manifest.precision == precision
    x = torch.randn(2, 16, 64).to(dtype)
    result = compiled(x)
    assert result.dtype == dtype
    torch.testing.assert_close(result, eager(spec, x)[0], rtol=tolerance, atol=tolerance)


def test_conversion_leaves_the_original_model_and_integer_inputs_alone():
    original = example_spec("embedding_two_outputs")
    converted = convert_precision(original, "bf16")
    assert next(original.module.parameters()).dtype == torch.float32
    assert next(converted.module.parameters()).dtype == torch.bfloat16
    assert converted.example_inputs[0].dtype == torch.int64
    assert converted.example_inputs[1].dtype == torch.bfloat16


def test_cli_dtype_with_verify(tmp_path):
    artifact = tmp_path / "mlp.vmfb"
    result = CliRunner().invoke(
        kiln, ["compile", str(EXAMPLES / "mlp.py"), "-o", str(artifact), "--dtype", "bf16", "--verify", "-q"]
    )
    assert result.exit_code == 0, result.output
    assert "verify linear_2" in result.output and "ok" in result.output
    manifest = json.loads(artifact.with_suffix(".json").read_text())
    assert manifest["precision"] == "bf16" and manifest["functions"][0]["inputs"][0]["dtype"] == "bfloat16"


def test_unknown_precision():
    with pytest.raises(KilnError, match="unknown --dtype 'f8'; known: bf16, f16"):
        convert_precision(example_spec("mlp"), "f8")
