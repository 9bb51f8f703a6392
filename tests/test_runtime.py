"""kiln.load / kiln.compile: calling artifacts with torch and numpy, bf16, and checked inputs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

import kiln
from kiln.errors import KilnError
from kiln.runtime.integrity import UncheckedArtifactWarning


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * y + x


@pytest.fixture(scope="module")
def add_mul(tmp_path_factory):
    args = (torch.randn(3, 4), torch.randn(3, 4))
    path = kiln.compile(AddMul(), args).save(tmp_path_factory.mktemp("art") / "add_mul.vmfb")
    return kiln.load(path)


def test_in_memory_artifact_is_callable_and_saves(tmp_path):
    x = torch.randn(2, 5)
    model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Tanh())
    compiled = kiln.compile(model, (x,))
    torch.testing.assert_close(compiled(x), model(x).detach(), rtol=1e-5, atol=1e-5)
    path = compiled.save(tmp_path / "sub" / "m.vmfb")
    assert path.is_file() and path.with_suffix(".json").is_file()
    torch.testing.assert_close(kiln.load(path)(x), model(x).detach(), rtol=1e-5, atol=1e-5)


def test_numpy_in_numpy_out(add_mul):
    x, y = np.random.randn(3, 4).astype(np.float32), np.random.randn(3, 4).astype(np.float32)
    result = add_mul(x, y, as_numpy=True)
    assert isinstance(result, np.ndarray)
    np.testing.assert_allclose(result, x * y + x, rtol=1e-6, atol=1e-6)  # IREE may fuse x * y + x into one FMA


def test_bf16_round_trip(tmp_path):
    model = torch.nn.Linear(16, 8).to(torch.bfloat16)
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    artifact = kiln.load(kiln.compile(model, (x,)).save(tmp_path / "bf16.vmfb"))
    result = artifact(x)
    assert result.dtype == torch.bfloat16
    torch.testing.assert_close(result, model(x).detach(), rtol=4e-2, atol=4e-2)
    as_numpy = artifact(x, as_numpy=True)
    assert as_numpy.dtype.name == "bfloat16"


def test_int_and_bool_values(tmp_path):
    class Masked(torch.nn.Module):
        def forward(self, ids: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.where(keep, ids * 3, ids), ~keep

    ids, keep = torch.arange(6).reshape(2, 3), torch.tensor([[True, False, True], [False, True, False]])
    first, second = kiln.compile(Masked(), (ids, keep))(ids, keep)
    assert first.dtype == torch.int64 and second.dtype == torch.bool
    assert torch.equal(first, torch.where(keep, ids * 3, ids)) and torch.equal(second, ~keep)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.randn(3, 4),), r"expected 2 input\(s\) \(x: float32\[3, 4\], y: float32\[3, 4\]\), got 1"),
        ((torch.randn(3, 4), torch.randn(4, 3)), r"input 'y' has shape \[4, 3\]; expected \[3, 4\]"),
        ((torch.randn(3, 4), torch.ones(3, 4, dtype=torch.int64)), r"input 'y' has dtype int64; expected float32"),
        ((torch.randn(3, 4), [[1.0]]), r"input 'y' must be a torch.Tensor or numpy array, got list"),
    ],
)
def test_bad_inputs_are_named(add_mul, args, message):
    with pytest.raises(KilnError, match=message):
        add_mul(*args)


def test_missing_artifact(tmp_path):
    with pytest.raises(KilnError, match=r"artifact not found: .*nothing\.vmfb"):
        kiln.load(tmp_path / "nothing.vmfb")


def test_corrupt_artifact(add_mul, tmp_path):
    path = tmp_path / "corrupt.vmfb"
    path.write_bytes(b"this is not a flatbuffer" * 10)
    path.with_suffix(".json").write_text(add_mul.manifest.to_json())
    with pytest.raises(KilnError, match=r"corrupt\.vmfb is 240 bytes; its manifest says \d+"):
        kiln.load(path)
    unchecked = replace(add_mul.manifest, files=None, format_version=2)  # before digests: IREE's verifier
    path.with_suffix(".json").write_text(unchecked.to_json())
    with pytest.warns(UncheckedArtifactWarning), pytest.raises(KilnError, match=r"corrupt\.vmfb: not a valid IREE module"):
        kiln.load(path)


def test_missing_manifest(tmp_path):
    path = tmp_path / "lonely.vmfb"
    path.write_bytes(b"\0" * 16)
    with pytest.raises(KilnError, match=r"manifest not found: .*lonely\.json"):
        kiln.load(path)


def test_corrupt_manifest(tmp_path):
    path = tmp_path / "m.vmfb"
    path.write_bytes(b"\0" * 16)
    path.with_suffix(".json").write_text("{ not json")
    with pytest.raises(KilnError, match="corrupt manifest"):
        kiln.load(path)


def test_cpu_artifact_refuses_other_devices(add_mul, tmp_path):
    with pytest.raises(KilnError, match="unknown device 'tpu'; known: cpu, cuda"):
        kiln.load(_saved(add_mul, tmp_path), device="tpu")
    with pytest.raises(KilnError, match="this artifact targets cpu; it cannot run on device 'cuda'"):
        kiln.load(_saved(add_mul, tmp_path), device="cuda")


def _saved(module, tmp_path):
    from kiln.compiler import Compiled

    return Compiled(b"", module.manifest).save(tmp_path / "copy.vmfb")


def test_manifest_vocabulary_matches_the_runtime():
    """The manifest reader's dtypes and drivers are the ones the runtime converts and opens."""
    from kiln.runtime.devices import DRIVERS
    from kiln.runtime.manifest import DRIVERS as MANIFEST_DRIVERS
    from kiln.runtime.manifest import DTYPES
    from kiln.runtime.tensors import TORCH_DTYPES

    assert set(DTYPES) == set(TORCH_DTYPES)
    assert set(DRIVERS.values()) <= set(MANIFEST_DRIVERS)
