"""Runtime inputs at the edges: each works exactly as eager PyTorch would, or is one clear KilnError.

Through the public API only (`kiln.load(path)(x)`), so the suite holds whatever the call path
becomes. "Exactly": a view, a strided or a read-only array gives bit for bit the result of its
contiguous copy, and that result matches eager within the usual f32 tolerance; NaN and infinity
come out where eager puts them.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from support import DynamicMLP, Lookup, artifact, mlp

import kiln
from kiln.errors import KilnError


@pytest.fixture(scope="module")
def dense():
    return kiln.load(artifact("mlp").vmfb), mlp(0)


@pytest.fixture(scope="module")
def dynamic():
    return kiln.load(artifact("dynamic").vmfb), DynamicMLP()


@pytest.fixture(scope="module")
def lookup():
    return kiln.load(artifact("lookup").vmfb), Lookup()


def eager(model, *inputs):
    with torch.no_grad():
        return model(*inputs)


def same_as_contiguous(module, value, contiguous):
    result = module(value)
    assert torch.equal(result, module(contiguous)), "a view gave another result than its contiguous copy"
    return result


VIEWS = {
    "transposed": lambda: torch.randn(64, 8).t(),
    "every other column": lambda: torch.randn(8, 128)[:, ::2],
    "rows from an offset": lambda: torch.randn(12, 64)[3:11],
    "broadcast (stride 0)": lambda: torch.randn(1, 64).expand(8, 64),
    "overlapping as_strided": lambda: torch.randn(200).as_strided((8, 64), (16, 1)),
    "flipped": lambda: torch.randn(8, 64).flip(0),
}


@pytest.mark.parametrize("make", VIEWS.values(), ids=VIEWS.keys())
def test_tensor_views(dense, make):
    module, model = dense
    torch.manual_seed(1)
    view = make()
    result = same_as_contiguous(module, view, view.contiguous())
    torch.testing.assert_close(result, eager(model, view), rtol=1e-4, atol=1e-5)


ARRAYS = {
    "Fortran order": lambda a: np.asfortranarray(a),
    "negative strides": lambda a: a[::-1],
    "every other column": lambda a: np.repeat(a, 2, axis=1)[:, ::2],
    "read-only": lambda a: _read_only(a),
}


def _read_only(array):
    array = array.copy()
    array.flags.writeable = False
    return array


@pytest.mark.parametrize("make", ARRAYS.values(), ids=ARRAYS.keys())
def test_numpy_layouts(dense, make):
    module, model = dense
    base = np.random.default_rng(2).standard_normal((8, 64), dtype=np.float32)
    array = make(base)
    result = module(array)
    contiguous = torch.from_numpy(np.array(array, order="C"))
    assert torch.equal(result, module(contiguous))
    torch.testing.assert_close(result, eager(model, contiguous), rtol=1e-4, atol=1e-5)


def test_nan_and_infinity_where_eager_puts_them(dense):
    module, model = dense
    x = torch.randn(8, 64)
    x[0, 3], x[1, :], x[2, 7], x[3, :] = float("nan"), float("inf"), -float("inf"), -float("inf")
    result, expected = module(x), eager(model, x)
    assert torch.equal(result.isnan(), expected.isnan())
    assert torch.equal(result.isinf(), expected.isinf())
    finite = expected.isfinite()
    torch.testing.assert_close(result[finite], expected[finite], rtol=1e-4, atol=1e-5)


def test_tensors_requiring_grad(dense):
    module, _ = dense
    x = torch.randn(8, 64)
    plain = module(x)
    assert torch.equal(module(x.clone().requires_grad_()), plain)
    assert torch.equal(module(torch.nn.Parameter(x.clone())), plain)


def test_results_are_the_callers(dense):
    """Changing an input after the call, or calling again, leaves a result as it was."""
    module, _ = dense
    x = torch.randn(8, 64)
    first = module(x)
    kept = first.clone()
    x.fill_(3.0)
    second = module(torch.randn(8, 64))
    assert torch.equal(first, kept)
    assert not torch.equal(first, second)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (torch.empty(8, 64, device="meta"), "meta"),
        (np.zeros((8, 64), np.float64), "dtype float64; expected float32"),
        (np.zeros((8, 64), np.float16), "dtype float16; expected float32"),
        (np.zeros((8, 64), np.int32), "dtype int32; expected float32"),
        (torch.zeros(8, 64, dtype=torch.bfloat16), "dtype bfloat16; expected float32"),
        (torch.zeros(8, 64, dtype=torch.bool), "dtype bool; expected float32"),
        (3.0, "must be a torch.Tensor or numpy array, got float"),
        (3, "must be a torch.Tensor or numpy array, got int"),
        ([[0.0] * 64] * 8, "must be a torch.Tensor or numpy array, got list"),
        (None, "must be a torch.Tensor or numpy array, got NoneType"),
        (torch.zeros(0, 64), r"shape \[0, 64\]; expected \[8, 64\]"),
        (torch.zeros(8, 64, 1), r"shape \[8, 64, 1\]; expected \[8, 64\]"),
        (torch.zeros(()), r"shape \[\]; expected \[8, 64\]"),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, str) else value[:24],
)
def test_wrong_inputs_are_clear_errors(dense, value, message):
    module, _ = dense
    with pytest.raises(KilnError, match=message):
        module(value)


def test_big_endian_array(dense):
    """Another byte order: the same result as the native array's, or a clear error; never the bytes misread."""
    module, _ = dense
    native = np.random.default_rng(3).standard_normal((8, 64), dtype=np.float32)
    try:
        result = module(native.astype(">f4"))
    except KilnError as error:
        assert "dtype" in str(error) or "byte order" in str(error)
        return
    assert torch.equal(result, module(native))


def test_wrong_argument_counts(dense):
    module, _ = dense
    with pytest.raises(KilnError, match=r"expected 1 input\(s\) .*got 0"):
        module()
    with pytest.raises(KilnError, match=r"expected 1 input\(s\) .*got 2"):
        module(torch.zeros(8, 64), torch.zeros(8, 64))


def test_a_huge_input_is_refused_before_it_is_copied(dense):
    """2**36 elements that take no memory (a broadcast view): refused by shape, not materialized."""
    module, _ = dense
    huge = torch.zeros(1, 64).expand(2**30, 64)
    started = time.perf_counter()
    with pytest.raises(KilnError, match=r"shape \[1073741824, 64\]"):
        module(huge)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("batch", [1, 2, 17, 64])
def test_dynamic_sizes_inside_the_bounds(dynamic, batch):
    module, model = dynamic
    x, bias = torch.randn(batch, 32), torch.randn(batch, 8)
    torch.testing.assert_close(module(x, bias), eager(model, x, bias), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ((0, 0), "dimension 0 is 0; the artifact accepts 1..64"),
        ((65, 65), "dimension 0 is 65; the artifact accepts 1..64"),
        ((2**20, 2**20), "dimension 0 is 1048576; the artifact accepts 1..64"),
        ((4, 5), "input 'bias' dimension 0 is 5, but input 'x' set dynamic size"),
    ],
)
def test_dynamic_sizes_outside_the_bounds(dynamic, sizes, message):
    module, _ = dynamic
    with pytest.raises(KilnError, match=message):
        module(torch.randn(sizes[0], 32), torch.randn(sizes[1], 8))


def test_indices_in_range_match_eager(lookup):
    module, model = lookup
    ids = torch.tensor([[0, 49, 7, 7, 1, 2]] * 4)
    torch.testing.assert_close(module(ids), eager(model, ids), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bad", [50, 51, 10**6, 2**40, -1, -50])
def test_indices_out_of_range_are_an_error(lookup, bad):
    """Eager raises IndexError; the artifact reads a safe index and fails the call at its end
    (passes/check_index_inputs.py) instead of reading outside the table (garbage, or a segfault for
    a far index)."""
    module, model = lookup
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]] * 4)
    ids[2, 3] = bad
    with pytest.raises(IndexError):
        eager(model, ids)
    with pytest.raises(KilnError, match=r"input 'ids' holds an index outside \[0, 50\)"):
        module(ids)
    torch.testing.assert_close(module(ids.clamp(0, 49)), eager(model, ids.clamp(0, 49)), rtol=1e-4, atol=1e-5)
