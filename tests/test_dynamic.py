"""Dynamic shapes: one artifact, many sizes, each checked against eager; sizes outside the bounds rejected."""

from __future__ import annotations

import pytest
import torch
from testkit import compile_spec, eager, example_spec
from torch.export import Dim

import kiln
from kiln.compiler.model_file import mark_dynamic
from kiln.errors import KilnError


@pytest.fixture(scope="module")
def batch_dynamic_mlp():
    spec = example_spec("dynamic_batch")
    return spec, compile_spec(spec)


@pytest.mark.parametrize("batch", [1, 3, 16, 257, 4096])
def test_batch_dynamic_mlp_matches_eager_at_every_size(batch_dynamic_mlp, batch):
    spec, compiled = batch_dynamic_mlp
    x = torch.randn(batch, 32)
    torch.testing.assert_close(compiled(x), eager(spec, x)[0], rtol=1e-4, atol=1e-5)


def test_manifest_records_the_dynamic_size_and_its_bounds(batch_dynamic_mlp):
    _, compiled = batch_dynamic_mlp
    (x,) = compiled.manifest.inputs
    symbol = x.shape[0]
    assert isinstance(symbol, str) and x.shape[1] == 32
    assert compiled.manifest.functions[0].symbols == {symbol: [1, 4096]}
    assert compiled.manifest.outputs[0].shape == (symbol, 8)


def test_sizes_outside_the_bounds_are_rejected(batch_dynamic_mlp):
    _, compiled = batch_dynamic_mlp
    with pytest.raises(KilnError, match=r"input 'x' dimension 0 is 5000; the artifact accepts 1\.\.4096"):
        compiled(torch.randn(5000, 32))
    with pytest.raises(KilnError, match=r"input 'x' has shape \[4, 31\]; expected \['s\d+', 32\]"):
        compiled(torch.randn(4, 31))


def test_sequence_dynamic_encoder_from_the_cli_shorthand():
    spec = mark_dynamic(example_spec("encoder"), ("src:1",))
    compiled = compile_spec(spec)
    for length in (2, 5, 16, 33):
        x = torch.randn(2, length, 64)
        torch.testing.assert_close(compiled(x), eager(spec, x)[0], rtol=1e-4, atol=1e-4)


def test_inputs_sharing_a_dynamic_size_must_agree():
    class Add(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a + b

    batch = Dim("batch", max=64)
    args = (torch.randn(4, 3), torch.randn(4, 3))
    compiled = kiln.compile(Add(), args, dynamic_shapes=({0: batch}, {0: batch}))
    torch.testing.assert_close(compiled(torch.ones(7, 3), torch.ones(7, 3)), torch.full((7, 3), 2.0))
    with pytest.raises(KilnError, match=r"input 'b' dimension 0 is 5, but input 'a' set dynamic size s\d+ to 7"):
        compiled(torch.ones(7, 3), torch.ones(5, 3))


@pytest.mark.parametrize(
    ("mark", "message"),
    [
        ("y:0", r"bad --dynamic-dim 'y:0': expected INPUT:AXIS with INPUT one of src"),
        ("src:x", r"bad --dynamic-dim 'src:x'"),
        ("src:3", r"bad --dynamic-dim 'src:3': input 'src' has 3 dimensions"),
    ],
)
def test_bad_dynamic_dim_marks(mark, message):
    with pytest.raises(KilnError, match=message):
        mark_dynamic(example_spec("encoder"), (mark,))
