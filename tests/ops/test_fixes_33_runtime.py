"""Regression tests for issue 33's runtime and dtype failures: modules the plain stack (torch-mlir
and IREE alone) runs right and kiln did not. Each is compiled for llvm-cpu and compared with eager.

- A complex result (torch.complex, view_as_complex, an rfft) failed on the first call with a raw
  `KeyError: 'complex64'`: the runtime had no torch dtype for it, the manifest reader refused it.
- `all`/`any` over a zero-size dimension failed to import: kiln decomposed them to amin/amax,
  which have no identity for an empty reduction.
- `x.to(torch.uint8)` of a float in 128..255 came back as 127 (a signed conversion to i8).

The module suite has a case for each too (conformance/modules.py: complex.result_*, all.empty_dim,
any.empty_dim, all_any.empty_*, u8.from_float_high).
"""

from __future__ import annotations

import json
import math
import platform
import re

import pytest
import torch
from torch import nn

import kiln
from kiln.runtime.numerics import compare


def _assert_as_eager(got: object, want: object) -> None:
    """Each result has eager's dtype and shape, and its values (complex ones part by part)."""
    got_leaves = got if isinstance(got, (tuple, list)) else (got,)
    want_leaves = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got_leaves) == len(want_leaves)
    for index, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, (
            f"result {index}: {g.dtype}{list(g.shape)}, eager {w.dtype}{list(w.shape)}"
        )
        torch.testing.assert_close(
            g, w, rtol=1e-5, atol=1e-5, msg=lambda text, index=index: f"result {index}: {text}"
        )


class ComplexResults(nn.Module):
    def forward(
        self, a: torch.Tensor, b: torch.Tensor, pairs: torch.Tensor, d: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        return (
            torch.complex(a, b),
            torch.view_as_complex(pairs),
            torch.fft.rfft(a, dim=0),
            torch.complex(d, d * 2) * torch.complex(d, -d),  # complex128
            a + b,  # a real result beside them
        )


def test_complex_results_come_back_as_eager_gives_them(tmp_path):
    generator = torch.Generator().manual_seed(33)
    args = (
        torch.randn(4, 3, generator=generator),
        torch.randn(4, 3, generator=generator),
        torch.randn(2, 5, 2, generator=generator),
        torch.randn(3, dtype=torch.float64, generator=generator),
    )
    module = ComplexResults()
    want = module(*args)
    artifact = kiln.compile(module, args, target="llvm-cpu")
    assert [output.dtype for output in artifact.manifest.functions[0].outputs] == [
        "complex64", "complex64", "complex64", "complex128", "float32",
    ]  # fmt: skip
    _assert_as_eager(artifact(*args), want)
    # Saved and loaded: the manifest reader and the check of the module's declarations take complex too.
    loaded = kiln.load(artifact.save(tmp_path / "complex.vmfb"))
    _assert_as_eager(loaded(*args), want)
    _assert_as_eager(loaded(*args), want)  # the second call reuses the checked plan


def test_a_manifest_that_misstates_a_complex_result_is_refused(tmp_path):
    """The module's declaration of a complex result (tensor<4x3xcomplex<f32>>) is read and compared
    with the manifest's dtype, as for any other dtype."""
    args = (torch.randn(4, 3), torch.randn(4, 3), torch.randn(2, 5, 2), torch.randn(3, dtype=torch.float64))
    path = kiln.compile(ComplexResults(), args, target="llvm-cpu").save(tmp_path / "complex.vmfb")
    manifest = path.with_suffix(".json")
    data = json.loads(manifest.read_text())
    data["functions"][0]["outputs"][0]["dtype"] = "complex128"  # the module returns complex<f32>
    manifest.write_text(json.dumps(data))
    with pytest.raises(
        kiln.KilnError,
        match=r"complex128\[4, 3\]; the module declares tensor<4x3xcomplex<f32>> \(element type\)",
    ):
        kiln.load(path)


def test_comparing_complex_results_reads_both_parts():
    value = torch.complex(torch.randn(3, 4), torch.randn(3, 4))
    assert compare(value.clone(), value).close
    assert compare(value + 1e-6, value).close  # within f32's tolerance, not exact
    off = compare(value + 1e-2j, value)  # the imaginary parts alone differ
    assert not off.close and abs(off.max_abs - 1e-2) < 1e-4


class AllAny(nn.Module):
    def forward(self, empty: torch.Tensor, full: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        positive = empty > 0
        return (
            positive.all(dim=1),  # [3, 0] over dim 1: True x3
            positive.any(dim=1),  # False x3
            empty.all(dim=-1, keepdim=True),
            torch.any(empty, 1, keepdim=True),
            torch.all(empty, dim=(0, 1)),  # over every dimension: True
            positive.any(dim=(0, 1)),  # False
            empty.all(),
            empty.any(),
            ids.all(dim=0),  # an integer [0, 4] over dim 0: True x4
            ids.any(dim=0),
            full.all(dim=1),  # non-empty rows are unchanged
            full.any(dim=0),
        )


def test_all_and_any_over_zero_size_dimensions():
    full = torch.tensor([[1.0, 0.0, 2.0], [3.0, 4.0, -1.0], [0.0, 0.0, 0.0]])
    args = (torch.randn(3, 0), full, torch.zeros(0, 4, dtype=torch.int64))
    module = AllAny()
    want = module(*args)
    assert want[0].all() and not want[1].any()  # eager: all() of nothing is True, any() False
    _assert_as_eager(kiln.compile(module, args, target="llvm-cpu")(*args), want)


class ToUint8(nn.Module):
    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            a.to(torch.uint8),
            a.double().byte(),
            (a * 0.5).half().to(torch.uint8),
            a.to(torch.int32).to(torch.uint8),
        )


def test_float_to_uint8_truncates_toward_zero_over_0_to_255():
    """The range checked is [0, 255], where eager's conversion is defined: truncation toward zero.
    Values 128..255 came back as 127; every f32 step of 1/16 over the range is checked, from f32,
    f64 and f16."""
    values = torch.cat([torch.arange(0, 256 * 16) / 16, torch.tensor([127.5, 128.0, 254.99, 255.0, 255.9])])
    module = ToUint8()
    want = module(values)
    assert want[0].max() == 255
    _assert_as_eager(kiln.compile(module, (values,), target="llvm-cpu")(values), want)


def test_float_to_uint8_wraps_outside_0_to_255_as_eager_on_x86():
    """Outside [0, 255] C leaves the conversion undefined; eager on x86 CPUs wraps modulo 256
    (-1.5 -> 255, 300.5 -> 44), as kiln's conversion through int32 does for |x| < 2**31.
    Checked only where eager runs on x86."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return
    values = torch.tensor([-1.0, -1.5, -200.7, -0.5, 256.0, 300.5, 1000.0, 70000.0])
    module = ToUint8()
    want = module(values)
    _assert_as_eager(kiln.compile(module, (values,), target="llvm-cpu")(values), want)


class PoolWiderThanInput(nn.Module):
    """transformers' EfficientNet head: AvgPool2d(1280, ceil_mode=True) over a 7x7 map (a global
    mean), and the same with padding and a stride, counted with and without the padding."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            nn.functional.avg_pool2d(x, 1280, ceil_mode=True),
            nn.functional.avg_pool2d(x, (9, 4), stride=(9, 3), padding=(1, 2), ceil_mode=True),
            nn.functional.avg_pool2d(x, (9, 4), stride=(9, 3), padding=(1, 2), ceil_mode=True, count_include_pad=False),
        )


def test_a_ceil_mode_pooling_wider_than_its_input_reads_only_the_input() -> None:
    """The ceil-mode decomposition padded the input to the kernel: 7x7 to 1280x1280, 268 GB at
    EfficientNet-B0's batch 32 on the GPU (CUDA out of memory). A window now reads the padded input
    at most, and the values are eager's."""
    from kiln.compiler import CompileOptions, run_until, spec_from_module

    x = torch.randn(2, 8, 7, 7)
    module = PoolWiderThanInput()
    stopped = run_until(spec_from_module(module, (x,)), CompileOptions(stop_after="aten"))
    shapes = re.findall(r"vtensor<\[([\d,]*)\]", str(stopped.value.module))
    assert max(math.prod(int(d) for d in shape.split(",") if d) for shape in shapes) <= x.numel() * 4
    _assert_as_eager(kiln.compile(module, (x,))(x), module(x))
