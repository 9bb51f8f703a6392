"""`--quantize int8|int4`: weight-only quantization of the Linear layers (compiler/quantize.py).

The tiny Llama is compiled for generation from a checkpoint with its weights quantized as they are
written (a slice of rows at a time); its greedy ids equal the same quantized model's in eager f32, and
its logits are compared with the unquantized model's (the accuracy docs/generation.md states).
"""

from __future__ import annotations

import copy
import json

import iree.runtime as rt
import pytest
import torch
from click.testing import CliRunner
from testkit import tiny_causal_lm_checkpoint
from torch import nn

import kiln
from kiln.cli.main import kiln as kiln_cli
from kiln.compiler import checkpoint
from kiln.compiler.driver import compile_file
from kiln.compiler.model_file import GenerationOptions, ModelSource, spec_from_module
from kiln.compiler.options import CompileOptions
from kiln.compiler.quantize import QuantizedLinear, Scheme, quantize_model, quantize_module, quantize_rows
from kiln.errors import KilnError
from kiln.runtime.generation import prefill
from kiln.runtime.manifest import Manifest, ManifestError

safetensors_torch = pytest.importorskip("safetensors.torch")
VOCAB = 256
MAX_SEQ_LEN = 40


def test_int4_packs_input_j_and_j_plus_half_in_one_byte() -> None:
    weight = torch.tensor([[7.0, -7.0, 0.0, 3.0, -1.0, 1.0, 7.0, -3.0]])  # one group of 8: scale 1
    values, scales = quantize_rows(weight, Scheme(4, 8))
    assert scales.tolist() == [[1.0]] and values.dtype == torch.int8 and values.shape == (1, 4)
    packed = values.view(torch.uint8)[0].tolist()
    assert [byte & 15 for byte in packed] == [15, 1, 8, 11]  # inputs 0-3, plus 8
    assert [byte >> 4 for byte in packed] == [7, 9, 15, 5]  # inputs 4-7, plus 8


@pytest.mark.parametrize(("scheme", "worst"), [("int8", 0.5 / 127), ("int4-g32", 0.5 / 7)])
def test_dequantized_weights_are_within_half_a_step(scheme: str, worst: float) -> None:
    torch.manual_seed(0)
    linear = nn.Linear(128, 48)
    quantized = nn.Sequential(linear)
    quantize_module(quantized, Scheme.parse(scheme))
    layer = quantized[0]
    assert isinstance(layer, QuantizedLinear)
    weight = linear.weight.detach()
    groups = weight.view(48, -1, 128 if scheme == "int8" else 32).abs().amax(-1, keepdim=True)
    error = (layer.dequantized(torch.float32) - weight).view_as(groups.expand(-1, -1, 128 if scheme == "int8" else 32))
    assert (error.abs() <= groups * worst + 1e-7).all()


def test_a_linear_the_scheme_cannot_take_keeps_its_weight() -> None:
    model = nn.Sequential(nn.Linear(96, 64), nn.Linear(64, 8))  # int4-g32: 96 inputs are not a multiple of 64
    spec = quantize_model(spec_from_module(model, (torch.randn(1, 96),)), "int4-g32")
    assert type(spec.module[0]) is nn.Linear and isinstance(spec.module[1], QuantizedLinear)
    assert spec.quantized == "int4-g32"


def test_a_model_without_linear_layers_is_refused() -> None:
    with pytest.raises(KilnError, match=r"--quantize int8: the model has no nn.Linear layer"):
        quantize_model(spec_from_module(nn.ReLU(), (torch.randn(4),)), "int8")


def test_an_unknown_scheme_names_the_known_ones() -> None:
    with pytest.raises(KilnError, match=r"unknown --quantize 'int3'; known: int8, int4, int4-g32"):
        Scheme.parse("int3")


@pytest.fixture(scope="module")
def quantized_llama(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """The tiny Llama's checkpoint and model file, an int4 artifact compiled from them for generation
    (read a few rows at a time), and the float model in eager."""
    folder = tmp_path_factory.mktemp("quantize")
    path, reference = tiny_causal_lm_checkpoint(folder, VOCAB)
    chunk = checkpoint.READ_CHUNK_BYTES
    checkpoint.READ_CHUNK_BYTES = 1024  # a 128 x 64 f32 weight: 4 rows a read, 32 reads
    try:
        source = ModelSource(path, generation=GenerationOptions(MAX_SEQ_LEN), quantize="int4-g32")
        result = compile_file(source, CompileOptions(), folder / "tiny-int4.vmfb")
    finally:
        checkpoint.READ_CHUNK_BYTES = chunk
    return path, result.path, reference


def _quantized(model: nn.Module, scheme: str) -> nn.Module:
    copied = copy.deepcopy(model)
    quantize_module(copied, Scheme.parse(scheme))
    return copied


def test_quantized_greedy_ids_are_the_quantized_models(quantized_llama: tuple) -> None:
    _, artifact, reference = quantized_llama
    expected_model = _quantized(reference, "int4-g32")
    module = kiln.load(artifact)
    for tokens, new in ((9, 24), (3, 12)):
        ids = torch.randint(0, VOCAB, (1, tokens), generator=torch.Generator().manual_seed(tokens))
        assert torch.equal(module.generate(ids, max_new_tokens=new), expected_model.generate(ids, max_new_tokens=new, do_sample=False))


def test_the_archive_holds_the_quantized_bytes_made_a_slice_at_a_time(quantized_llama: tuple) -> None:
    _, artifact, reference = quantized_llama
    stored = _archive(artifact.with_suffix(".irpa"))
    expected = dict(_quantized(reference, "int4-g32").named_parameters())
    assert "model.layers.0.mlp.down_proj.weight_q" in stored and "model.layers.0.mlp.down_proj.weight" not in stored
    for name, tensor in expected.items():
        data = tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
        assert stored[name] == data, name
    manifest = json.loads(artifact.with_suffix(".json").read_text())
    assert manifest["quantized"] == "int4-g32"


def test_quantized_logits_are_the_quantized_models_not_the_float_ones(quantized_llama: tuple) -> None:
    """kiln's logits are eager's with the same quantized weights; how far both are from the float
    model's is the scheme's error, not kiln's (the accuracy on real sizes: docs/generation.md)."""
    _, artifact, reference = quantized_llama
    ids = torch.randint(0, VOCAB, (1, 16), generator=torch.Generator().manual_seed(5))
    _, logits, _ = prefill(kiln.load(artifact), ids)
    with torch.no_grad():
        floats, quantized = (model(ids).logits[:, -1] for model in (reference, _quantized(reference, "int4-g32")))
    torch.testing.assert_close(logits, quantized, rtol=1e-4, atol=1e-4)
    assert ((quantized - floats).norm() / floats.norm()).item() > 1e-3


def test_kiln_compile_quantize_is_in_the_manifest(quantized_llama: tuple, tmp_path) -> None:
    path, _, _ = quantized_llama
    result = CliRunner().invoke(kiln_cli, ["compile", str(path), "--generate", "--max-seq-len", "16", "--quantize", "int8", "-o", str(tmp_path / "m.vmfb"), "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "m.json").read_text())["quantized"] == "int8"
    result = CliRunner().invoke(kiln_cli, ["compile", str(path), "--quantize", "int2"])
    assert result.exit_code != 0 and "'int2' is not one of 'int8', 'int4'" in result.output


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("quantized", 4, r"quantized: expected"),
        ("cpu_features", True, r"cpu_features: expected a list, got True"),  # the reliability fuzz's find
        ("cpu_features", ["avx512bf16", 7], r"cpu_features\[1\]: expected"),
        ("kernels", [3], r"kernels\[0\]: expected an object, got 3"),
    ],
)
def test_a_damaged_manifest_field_is_a_manifest_error(quantized_llama: tuple, field: str, value: object, message: str) -> None:
    _, artifact, _ = quantized_llama
    data = json.loads(artifact.with_suffix(".json").read_text())
    data[field] = value
    with pytest.raises(ManifestError, match=message):
        Manifest.from_json(json.dumps(data))


def _archive(path) -> dict[str, bytes]:
    """An .irpa's entries by name, as bytes."""
    index = rt.ParameterIndex()
    index.load(str(path))
    return {name: rt.parameter_index_entry_as_numpy_flat_ndarray(entry).tobytes() for name, entry in index.items()}
