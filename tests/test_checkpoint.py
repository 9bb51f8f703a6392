"""Models compiled without their weights: built on the meta device, weights from a checkpoint.

The checkpoints are written here, from a seed (safetensors); the reference model is built the
ordinary way and given the same weights with load_state_dict, so the comparison with eager PyTorch
does not go through kiln's own loading.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import iree.runtime as rt
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from testkit import compile_spec, llama, write_llama_model_file

import kiln
from kiln.cli.main import kiln as kiln_cli
from kiln.compiler import checkpoint, load_model_file
from kiln.compiler.driver import compile_file
from kiln.compiler.model_file import ModelSource
from kiln.compiler.options import CompileOptions
from kiln.compiler.parameter_archive import ArchiveEntry, write_parameter_archive
from kiln.errors import KilnError

safetensors_torch = pytest.importorskip("safetensors.torch")
VOCAB = 256


TINY_LLAMA = f"""
    from llama import build, prompt
    weights = "checkpoint/*.safetensors"
    def get_model():
        return build("tiny", {VOCAB})
    def get_example_inputs():
        return prompt("tiny", {VOCAB})
"""


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A tiny Llama's model file and checkpoint (two shards), and the same model built with its weights."""
    directory = tmp_path_factory.mktemp("llama")
    module = llama()
    with torch.device("meta"):
        shapes = module.build("tiny", VOCAB)
    files = module.write_checkpoint(shapes, directory / "checkpoint")
    reference = module.build("tiny", VOCAB)
    state = {}
    for file in files:
        state |= safetensors_torch.load_file(file)
    reference.load_state_dict(state)
    return write_llama_model_file(directory, TINY_LLAMA), files, reference


def test_llama_from_a_checkpoint_matches_eager_and_streams_its_weights(tiny_llama, tmp_path):
    path, _, reference = tiny_llama
    spec = load_model_file(path)
    assert all(p.device.type == "meta" for p in spec.module.parameters())
    assert spec.module.model.rotary_emb.inv_freq.device.type == "cpu"  # a computed buffer stays real
    compiled = compile_spec(spec)
    assert compiled.parameters is not None and compiled.parameters.source is spec.weights
    assert all(t.device.type == "meta" for t in compiled.parameters.tensors.values())  # nothing was read yet
    saved = compiled.save(tmp_path / "llama.vmfb")
    ids = torch.randint(0, VOCAB, (1, 16), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(kiln.load(saved)(ids), reference(ids).detach(), rtol=1e-4, atol=1e-4)
    index = rt.ParameterIndex()
    index.load(str(saved.with_suffix(".irpa")))
    stored = dict(index.items())
    assert set(stored) == set(dict(reference.named_parameters()))  # every parameter, and nothing inline
    values = rt.parameter_index_entry_as_numpy_flat_ndarray(stored["lm_head.weight"]).view(np.float32)
    torch.testing.assert_close(torch.from_numpy(values.copy()), reference.lm_head.weight.detach().flatten())


def test_dtype_bf16_converts_the_weights_as_they_are_written(tiny_llama, tmp_path):
    path, _, reference = tiny_llama
    result = compile_file(ModelSource(path, precision="bf16"), CompileOptions(), tmp_path / "llama.vmfb")
    archive = result.path.with_suffix(".irpa")
    total = sum(p.numel() for p in reference.parameters())
    assert total * 2 <= archive.stat().st_size < total * 2 + 64 * 1024  # 2 bytes a weight, plus the index
    index = rt.ParameterIndex()
    index.load(str(archive))
    bits = rt.parameter_index_entry_as_numpy_flat_ndarray(dict(index.items())["model.embed_tokens.weight"])
    stored = torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)
    assert torch.equal(stored, reference.model.embed_tokens.weight.detach().bfloat16().flatten())
    ids = torch.randint(0, VOCAB, (1, 16))
    expected = copy.deepcopy(reference).bfloat16()(ids).detach().float()
    torch.testing.assert_close(kiln.load(result.path)(ids).float(), expected, rtol=5e-2, atol=5e-2)


def test_verify_loads_the_checkpoint_into_the_eager_model(tiny_llama, tmp_path):
    path, _, _ = tiny_llama
    from kiln.compiler.driver import Verification

    result = compile_file(ModelSource(path), CompileOptions(), tmp_path / "v.vmfb", Verification())
    assert result.checks and all(check.ok for check in result.checks)
    names = [report.name for report in result.reports]
    assert names[0] == "load" and names[-2:] == ["verify", "save"]


def test_load_weights_hook_serves_each_tensor_by_name(tiny_llama, tmp_path):
    _, files, reference = tiny_llama
    path = write_llama_model_file(
        tmp_path,
        f"""
        from safetensors.torch import load_file
        from llama import build, prompt
        STATE = {{}}
        for file in {[str(f) for f in files]!r}:
            STATE.update(load_file(file))
        def load_weights(name):
            with open({str(tmp_path / "calls.txt")!r}, "a") as calls:
                calls.write(name + "\\n")
            return STATE[name]
        def get_model():
            return build("tiny", {VOCAB})
        def get_example_inputs():
            return prompt("tiny", {VOCAB})
        """,
    )
    result = compile_file(ModelSource(path), CompileOptions(), tmp_path / "hook.vmfb")
    calls = (tmp_path / "calls.txt").read_text().split()
    assert sorted(calls) == sorted(dict(reference.named_parameters()))  # each weight asked for once
    ids = torch.randint(0, VOCAB, (1, 16))
    torch.testing.assert_close(kiln.load(result.path)(ids), reference(ids).detach(), rtol=1e-4, atol=1e-4)


def test_hook_tensor_of_the_wrong_shape_names_the_tensor(tmp_path):
    path = write_llama_model_file(
        tmp_path,
        """
        import torch
        def load_weights(name):
            return torch.zeros(3, 3)
        def get_model():
            return torch.nn.Linear(300, 300)
        def get_example_inputs():
            return (torch.randn(2, 300),)
        """,
    )
    with pytest.raises(KilnError, match=r"tensor 'weight' is float32\[3, 3\], the model's is float32\[300, 300\]"):
        compile_file(ModelSource(path), CompileOptions(), tmp_path / "bad.vmfb")
    assert not list(tmp_path.glob("bad.*"))  # no partial artifact


@pytest.fixture()
def linear_checkpoint(tmp_path):
    """A Linear(64, 32)'s model file and a checkpoint the test may edit: (path, tensors, checkpoint file)."""
    tensors = {"weight": torch.randn(32, 64), "bias": torch.randn(32)}
    path = write_llama_model_file(
        tmp_path,
        """
        import torch
        weights = "linear.safetensors"
        def get_model():
            return torch.nn.Linear(64, 32)
        def get_example_inputs():
            return (torch.randn(4, 64),)
        """,
    )
    return path, tensors, tmp_path / "linear.safetensors"


def test_small_model_from_a_checkpoint(linear_checkpoint, tmp_path):
    path, tensors, file = linear_checkpoint
    safetensors_torch.save_file(tensors, file)
    result = compile_file(ModelSource(path), CompileOptions(), tmp_path / "lin.vmfb")
    x = torch.randn(4, 64)
    torch.testing.assert_close(kiln.load(result.path)(x), x @ tensors["weight"].T + tensors["bias"])


def test_timing_reports_each_stages_peak_memory_and_iree_compiles(linear_checkpoint, tmp_path):
    path, tensors, file = linear_checkpoint
    safetensors_torch.save_file(tensors, file)
    result = CliRunner().invoke(kiln_cli, ["compile", str(path), "-o", str(tmp_path / "t.vmfb"), "--timing", "--verify"])
    assert result.exit_code == 0, result.output
    rows = {
        match.group(1): (float(match.group(2)), int(match.group(3)), match.group(4))
        for match in re.finditer(
            r"^  ([\w-]+)\s+\d+\.\d+s\s+(\d+\.\d+)s\s+(\d+) MiB\s*(?:(\d+) MiB)?$", result.output, re.MULTILINE
        )
    }
    assert list(rows) == ["load", "exported", "aten", "prims", "simplified", "linalg", "fused", "vmfb", "verify", "save"]
    assert all(peak > 100 for _, peak, _ in rows.values())  # torch alone is more than that: these are real readings
    assert rows["vmfb"][2] is not None and int(rows["vmfb"][2]) > 20  # iree-compile's own peak
    assert all(child is None for name, (_, _, child) in rows.items() if name != "vmfb")
    assert all(cpu > 0 for cpu, _, _ in rows.values())


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.pop("bias"), r"model.py: the model's tensor 'bias' \(float32\[32\]\) is not in the checkpoint .*linear.safetensors"),
        (lambda t: t.update(scale=torch.ones(1)), r"linear.safetensors: tensor 'scale' is not a parameter or buffer of the model"),
        (lambda t: t.update(weight=torch.ones(64, 32)), r"linear.safetensors: tensor 'weight' has shape \[64, 32\], the model's is \[32, 64\]"),
        (lambda t: t.update(bias=torch.ones(32, dtype=torch.float64)), r"linear.safetensors: tensor 'bias' is float64\[32\], the model's is float32\[32\]"),
    ],
    ids=["missing", "extra", "shape", "dtype"],
)
def test_checkpoint_mismatch_is_one_clear_error(linear_checkpoint, edit, message):
    path, tensors, file = linear_checkpoint
    edit(tensors)
    safetensors_torch.save_file(tensors, file)
    with pytest.raises(KilnError, match=message) as error:
        load_model_file(path)
    assert error.value.stage == "load"


def test_a_bf16_checkpoint_serves_an_f32_model_exactly(linear_checkpoint, tmp_path):
    path, tensors, file = linear_checkpoint
    stored = {name: tensor.bfloat16() for name, tensor in tensors.items()}
    safetensors_torch.save_file(stored, file)
    result = compile_file(ModelSource(path), CompileOptions(), tmp_path / "wide.vmfb")
    x = torch.randn(4, 64)
    expected = x @ stored["weight"].float().T + stored["bias"].float()
    torch.testing.assert_close(kiln.load(result.path)(x), expected)


def test_missing_checkpoint_names_the_path(linear_checkpoint):
    path, _, _ = linear_checkpoint
    with pytest.raises(KilnError, match=r"model.py: `weights` names .*linear.safetensors, which is no file"):
        load_model_file(path)


def test_inline_weights_from_a_checkpoint_are_refused(linear_checkpoint, tmp_path):
    path, tensors, file = linear_checkpoint
    safetensors_torch.save_file(tensors, file)
    with pytest.raises(KilnError, match=r"weight 'weight' comes from a checkpoint and cannot be inlined"):
        compile_file(ModelSource(path), CompileOptions(params="inline"), tmp_path / "x.vmfb")


def test_meta_model_without_a_checkpoint_is_refused():
    with torch.device("meta"):
        model = torch.nn.Linear(8, 8)
    with pytest.raises(KilnError, match=r"tensor 'weight' has no data .* no checkpoint is named"):
        kiln.compile(model, (torch.randn(2, 8),))


def test_safetensors_reader_matches_the_library_in_any_chunk_size(tmp_path, monkeypatch):
    tensors = {
        "a": torch.randn(37, 5),
        "b": torch.randn(1000).bfloat16(),
        "c": torch.arange(7, dtype=torch.int64),
        "empty": torch.zeros(0, 3),
    }
    safetensors_torch.save_file(tensors, tmp_path / "t.safetensors")
    monkeypatch.setattr(checkpoint, "READ_CHUNK_BYTES", 24)  # a's rows and b span several reads
    source = checkpoint.SafetensorsCheckpoint([tmp_path / "t.safetensors"])
    assert {name: (s.dtype, s.shape) for name, s in source.stored().items()} == {
        name: (t.dtype, tuple(t.shape)) for name, t in tensors.items()
    }
    for name, tensor in tensors.items():
        assert torch.equal(source.tensor(name), tensor)
    with open(tmp_path / "out", "wb") as out:
        source.write("a", torch.bfloat16, out)
    written = torch.frombuffer(bytearray((tmp_path / "out").read_bytes()), dtype=torch.bfloat16)
    assert torch.equal(written, tensors["a"].bfloat16().flatten())


@pytest.mark.parametrize("count", [0, 1, 5])
def test_archive_is_byte_for_byte_what_iree_writes(tmp_path, count):
    generator = np.random.default_rng(count)
    arrays = {
        f"layer.{i}.{'w' * i}": generator.standard_normal(int(generator.integers(1, 500))).astype(dtype)
        for i, dtype in zip(range(count), [np.float32, np.float16, np.int8, np.float64, np.int32], strict=False)
    }
    rt.save_archive_file(arrays, tmp_path / "iree.irpa")

    def writer(array: np.ndarray) -> Callable[[BinaryIO], object]:
        return lambda file: [file.write(array[i : i + 7].tobytes()) for i in range(0, len(array), 7)]  # in pieces

    entries = [ArchiveEntry(name, array.nbytes, writer(array)) for name, array in arrays.items()]
    write_parameter_archive(tmp_path / "kiln.irpa", entries)
    assert (tmp_path / "kiln.irpa").read_bytes() == (tmp_path / "iree.irpa").read_bytes()


def test_an_entry_that_writes_the_wrong_size_fails(tmp_path):
    with pytest.raises(ValueError, match=r"parameter 'w' wrote 4 bytes, expected 8"):
        write_parameter_archive(tmp_path / "x.irpa", [ArchiveEntry("w", 8, lambda file: file.write(b"abcd"))])


@pytest.mark.slow
def test_compiling_never_holds_the_weights(tmp_path):
    """2 GiB of f32 weights in a checkpoint; the compile's peak resident memory, in every stage and in
    iree-compile, stays well below that (a compile that loaded them would need at least 2 GiB)."""
    layers, width = 8, 8192  # eight 256 MiB matrices
    for index in range(layers):  # one shard per tensor: this test's own memory stays at one tensor
        tensor = torch.randn(width, width, generator=torch.Generator().manual_seed(index)) * 0.01
        safetensors_torch.save_file({f"{index}.weight": tensor}, tmp_path / f"w{index}.safetensors")
        del tensor
    weight_bytes = layers * width * width * 4
    path = write_llama_model_file(
        tmp_path,
        f"""
        import torch
        weights = "w*.safetensors"
        def get_model():
            return torch.nn.Sequential(*[torch.nn.Linear({width}, {width}, bias=False) for _ in range({layers})])
        def get_example_inputs():
            return (torch.randn(2, {width}),)
        """,
    )
    import subprocess

    kiln_command = str(Path(sys.executable).parent / "kiln")
    result = subprocess.run(
        [kiln_command, "compile", str(path), "-o", str(tmp_path / "big.vmfb"), "--timing", "-q"],
        capture_output=True,
        text=True,
        check=True,
    )
    peaks = {
        match.group(1): (float(match.group(2)), float(match.group(3) or 0))
        for match in re.finditer(r"^  (\w+)\s+[\d.]+s\s+[\d.]+s\s+(\d+) MiB\s*(?:(\d+) MiB)?$", result.stdout, re.MULTILINE)
    }
    assert set(peaks) >= {"load", "exported", "aten", "linalg", "vmfb", "save"}, result.stdout
    highest = max(max(kiln_mib, child_mib) for kiln_mib, child_mib in peaks.values())
    assert highest * 2**20 < weight_bytes / 2, result.stdout
    assert (tmp_path / "big.irpa").stat().st_size >= weight_bytes
