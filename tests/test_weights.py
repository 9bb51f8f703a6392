"""--params: weights inline in the .vmfb or external in an .irpa archive, named as in PyTorch."""

from __future__ import annotations

import iree.runtime as rt
import pytest
import torch
from testkit import compile_spec, eager, example_spec

import kiln
from kiln.errors import KilnError


class TiedLM(torch.nn.Module):
    """Embedding and output projection share one weight, as GPT-2's do."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.head = torch.nn.Linear(32, 50, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.embed(ids)))


@pytest.fixture(scope="module")
def mlp_both_ways():
    spec = example_spec("mlp")
    return spec, compile_spec(spec, params="inline"), compile_spec(spec, params="external")


def test_external_weights_match_eager_and_leave_the_vmfb_small(mlp_both_ways, tmp_path):
    spec, inline, external = mlp_both_ways
    assert inline.parameters is None and inline.manifest.parameters is None
    assert external.manifest.parameters == {"count": 3, "bytes": (64 * 128 + 128 * 128 + 128 * 10) * 4}
    assert len(external.vmfb) < len(inline.vmfb) - 60_000
    x = torch.randn(8, 64)
    torch.testing.assert_close(external(x), eager(spec, x)[0], rtol=1e-5, atol=1e-5)
    path = external.save(tmp_path / "mlp.vmfb")
    torch.testing.assert_close(kiln.load(path)(x), eager(spec, x)[0], rtol=1e-5, atol=1e-5)


def test_archive_holds_the_weights_under_their_pytorch_names(mlp_both_ways, tmp_path):
    spec, _, external = mlp_both_ways
    path = external.save(tmp_path / "mlp.vmfb")
    index = rt.ParameterIndex()
    index.load(str(path.with_suffix(".irpa")))
    state = spec.module.state_dict()
    stored = {key: entry for key, entry in index.items()}
    assert set(stored) == {"0.weight", "2.weight", "4.weight"}  # biases are under 1 KiB: inline
    for key, entry in stored.items():
        values = rt.parameter_index_entry_as_numpy_flat_ndarray(entry).view("float32")
        assert torch.equal(torch.from_numpy(values.copy()), state[key].flatten())


def test_replacing_a_weight_in_the_archive_changes_the_result_without_recompiling(mlp_both_ways, tmp_path):
    spec, _, external = mlp_both_ways
    path = external.save(tmp_path / "mlp.vmfb")
    weights = {name: t.detach().numpy() for name, t in external.parameters.tensors.items()}
    weights["4.weight"] = weights["4.weight"] * 0
    rt.save_archive_file(weights, path.with_suffix(".irpa"))
    with pytest.raises(KilnError, match=r"(?s)mlp\.irpa does not match its manifest .*verify_weights=False"):
        kiln.load(path)  # the manifest vouches for the archive it was saved with
    result = kiln.load(path, verify_weights=False)(torch.randn(8, 64))  # a replaced one: said so
    torch.testing.assert_close(result, spec.module[4].bias.detach().expand(8, 10))


def test_tied_weights_are_stored_once_and_bf16_works():
    model, ids = TiedLM().bfloat16(), torch.randint(0, 50, (2, 7))
    compiled = kiln.compile(model, (ids,), params="external")
    assert list(compiled.parameters.tensors) == ["embed.weight"]
    torch.testing.assert_close(compiled(ids), model(ids).detach(), rtol=4e-2, atol=4e-2)


def test_auto_keeps_small_models_inline():
    compiled = kiln.compile(torch.nn.Linear(300, 300), (torch.randn(2, 300),))
    assert compiled.parameters is None


def test_missing_archive_is_a_clear_error(mlp_both_ways, tmp_path):
    _, _, external = mlp_both_ways
    path = external.save(tmp_path / "mlp.vmfb")
    path.with_suffix(".irpa").unlink()
    with pytest.raises(KilnError, match=r"parameter archive not found: .*mlp\.irpa"):
        kiln.load(path)


def test_unknown_policy():
    with pytest.raises(KilnError, match="unknown --params 'cloud'; known: auto, inline, external"):
        kiln.compile(torch.nn.Linear(2, 2), (torch.randn(1, 2),), params="cloud")
