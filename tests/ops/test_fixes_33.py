"""Issue 33: convolution padding forms and embedding_bag's four results, compiled for llvm-cpu and
compared with eager PyTorch (every result: nesting, dtype, shape and values, integers exactly).

- Convolutions given one value for every spatial dimension (`padding="valid"` on 2-D and 3-D,
  `padding=(1,)`, `F.conv2d(..., stride=[2], padding=[1])`) crashed kiln's convolution
  decomposition (IndexError), and the error blamed torch; `padding="same"` with even kernels and
  dilations (asymmetric) is here beside them. transformers' EfficientNet and SigLIP's vision tower
  failed that way.
- embedding_bag's offset2bag, bag_size and max_indices came back in shapes (and values) eager does
  not return; max bags did not compile.

Cases are compiled by worker processes (conformance.Checker), as tests/ops does: a compile that
crashes costs its case (torch-mlir's lowering of a transposed convolution given one-element stride
and padding lists crashes the process: kiln's did before the fix, the plain stack's still does).
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
import torch
from torch import nn

from kiln.conformance.cases import Fn
from kiln.conformance.runner import PASS, Arg, Case, Checker, Outcome, check_group
from kiln.errors import KilnError

F = nn.functional
F32 = torch.float32
JOBS = min(2, os.cpu_count() or 1)

_CASES: list[Case] = []


def mod(name: str, build: Any, *args: Any) -> None:
    _CASES.append(Case(name, "issue 33", build, tuple(args), F32))


def fn(name: str, function: Any, *args: Any) -> None:
    mod(name, lambda: Fn(function), *args)


def x(*shape: int) -> Arg:
    return Arg(shape)


def ints(*items: int, dtype: torch.dtype = torch.int64) -> Any:
    return lambda generator, dtype_of_case: torch.tensor(items, dtype=dtype)


# Convolutions: one value for every spatial dimension, "valid", and "same" where it is asymmetric.
mod("conv1d.valid", lambda: nn.Conv1d(3, 4, 3, padding="valid"), x(2, 3, 9))
mod("conv2d.valid", lambda: nn.Conv2d(3, 4, 3, padding="valid"), x(2, 3, 6, 7))
mod("conv3d.valid", lambda: nn.Conv3d(2, 3, 3, padding="valid"), x(1, 2, 5, 5, 6))
mod("conv2d.valid_strided", lambda: nn.Conv2d(3, 8, 4, stride=4, padding="valid"), x(1, 3, 8, 8))  # SigLIP's patches
mod("conv2d.padding_1tuple", lambda: nn.Conv2d(3, 4, 3, padding=(1,)), x(1, 3, 6, 6))
mod("conv2d.all_1tuples", lambda: nn.Conv2d(3, 4, 3, stride=(2,), padding=(1,), dilation=(2,)), x(1, 3, 9, 9))
mod("conv3d.1tuples", lambda: nn.Conv3d(2, 3, 3, stride=(2,), padding=(1,)), x(1, 2, 5, 5, 5))
fn("conv2d.functional_lists", lambda a, w, b: F.conv2d(a, w, b, stride=[2], padding=[1]), x(1, 3, 7, 7), x(4, 3, 3, 3), x(4))
mod("conv1d.same_even", lambda: nn.Conv1d(3, 4, 4, padding="same"), x(2, 3, 9))
mod("conv2d.same_even", lambda: nn.Conv2d(3, 4, (4, 3), padding="same"), x(1, 3, 6, 7))
mod("conv2d.same_dilation", lambda: nn.Conv2d(3, 4, 2, padding="same", dilation=(3, 2)), x(1, 3, 7, 7))
fn("conv2d.same_groups", lambda a, w: F.conv2d(a, w, padding="same", groups=2), x(1, 4, 6, 6), x(4, 2, 2, 2))
mod("conv3d.same_even", lambda: nn.Conv3d(2, 3, (2, 3, 4), padding="same"), x(1, 2, 5, 5, 5))
mod("conv2d.one_output_1tuples", lambda: nn.Conv2d(3, 4, 3, stride=(2,), padding=(1,)), x(1, 3, 2, 2))  # SelecSLS's overhang
mod("conv_transpose2d.1tuples", lambda: nn.ConvTranspose2d(3, 4, 3, stride=(2,), padding=(1,)), x(1, 3, 5, 5))  # crashed
CONV_CASES = tuple(_CASES)
_CASES.clear()

# embedding_bag: bags [1 2 4] [] [5 4 3] [2 9] [2 2]; with padding_idx 2 the last bag is empty too.
WEIGHT = x(10, 3)
INDICES = ints(1, 2, 4, 5, 4, 3, 2, 9, 2, 2)
OFFSETS = {False: ints(0, 3, 3, 6, 8), True: ints(0, 3, 3, 6, 8, 10)}  # include_last_offset: the end too
MODES = ("sum", "mean", "max")


def _internal(mode: int, last: bool, padding: int) -> Any:
    return lambda w, i, o: torch.ops.aten._embedding_bag(w, i, o, False, mode, False, None, last, padding)


def _public(mode: int, last: bool, padding: int | None) -> Any:
    return lambda w, i, o: torch.embedding_bag(w, i, o, False, mode, False, None, last, padding)


# What the held-out suite calls: the internal op, all four results.
for _mode, _name in enumerate(MODES):
    fn(f"_embedding_bag.{_name}", _internal(_mode, False, -1), WEIGHT, INDICES, OFFSETS[False])
    fn(f"_embedding_bag.{_name}.padding_idx.include_last_offset", _internal(_mode, True, 2), WEIGHT, INDICES, OFFSETS[True])
fn("_embedding_bag.sum.per_sample_weights",
   lambda w, i, o, s: torch.ops.aten._embedding_bag(w, i, o, False, 0, False, s, False, -1), WEIGHT, INDICES, OFFSETS[False], x(10))  # fmt: skip
# torch.embedding_bag: a weight without gradient takes _embedding_bag_forward_only, whose bag_size
# for sums has one element per offset.
fn("embedding_bag.sum.include_last_offset", _public(0, True, None), WEIGHT, INDICES, OFFSETS[True])
fn("embedding_bag.sum.padding_idx", _public(0, False, 2), WEIGHT, INDICES, OFFSETS[False])
fn("embedding_bag.mean.include_last_offset", _public(1, True, None), WEIGHT, INDICES, OFFSETS[True])
fn("embedding_bag.max.padding_idx.include_last_offset", _public(2, True, 2), WEIGHT, INDICES, OFFSETS[True])
fn("embedding_bag.sum.per_sample_weights.padding_idx.include_last_offset",
   lambda w, i, o, s: torch.embedding_bag(w, i, o, False, 0, False, s, True, 2), WEIGHT, INDICES, OFFSETS[True], x(10))  # fmt: skip
fn("embedding_bag.mean.padding_idx_negative", _public(1, False, -1), WEIGHT, INDICES, OFFSETS[False])  # row 9
fn("embedding_bag.mean.int32", _public(1, False, 2), WEIGHT, ints(1, 2, 4, 5, 4, 3, 2, 9, 2, 2, dtype=torch.int32),
   ints(0, 3, 3, 6, 8, dtype=torch.int32))  # fmt: skip
fn("embedding_bag.max.int32_offsets", _public(2, True, None), WEIGHT, INDICES, ints(0, 3, 3, 6, 8, 10, dtype=torch.int32))
fn("F.embedding_bag.max", lambda i, w, o: F.embedding_bag(i, w, o, mode="max", padding_idx=2), INDICES, WEIGHT, OFFSETS[False])
# nn.EmbeddingBag's weight needs a gradient: eager calls _embedding_bag, not the forward-only op.
mod("nn.EmbeddingBag.sum.include_last_offset", lambda: nn.EmbeddingBag(10, 3, mode="sum", include_last_offset=True), INDICES, OFFSETS[True])
mod("nn.EmbeddingBag.max.2d", lambda: nn.EmbeddingBag(10, 3, mode="max"), lambda generator, dtype: torch.tensor([[1, 2, 4], [5, 4, 3]]))
EMBEDDING_BAG_CASES = tuple(_CASES)

CASES = {case.name: case for case in (*CONV_CASES, *EMBEDDING_BAG_CASES)}


def check_cases(names: list[str], target: str, on_stage: Any) -> dict[str, Outcome]:
    """A Checker's check: these cases of this module, through kiln (the worker imports this module)."""
    return check_group([CASES[name] for name in names], target, on_stage)


def check_plain_cases(names: list[str], target: str, on_stage: Any) -> dict[str, Outcome]:
    """The same cases through the plain stack beneath kiln (torch-mlir and IREE alone)."""
    from kiln.conformance.plain import check_plain

    return {name: check_plain(CASES[name], target, on_stage) for name in names}


def _outcomes(check: Any, groups: list[tuple[Case, ...]]) -> dict[str, Outcome]:
    """Each group compiled as one artifact by a worker process (a crash costs its case, not the run),
    with a generous time limit: the machine that runs the tests is shared."""
    with Checker("llvm-cpu", JOBS, check=check, seconds=(180.0, 10.0)) as checker:
        return checker.check(groups)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    """Every case: the convolutions as one artifact, the bags as another."""
    return _outcomes(check_cases, [CONV_CASES, EMBEDDING_BAG_CASES])


@pytest.mark.slow  # the fixture compiles two artifacts: about a minute on an idle machine
@pytest.mark.parametrize("name", [case.name for case in CONV_CASES])
def test_convolution_padding_forms_match_eager(name: str, outcomes: dict[str, Outcome]) -> None:
    assert outcomes[name].status == PASS, str(outcomes[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", [case.name for case in EMBEDDING_BAG_CASES])
def test_embedding_bag_results_match_eager(name: str, outcomes: dict[str, Outcome]) -> None:
    assert outcomes[name].status == PASS, str(outcomes[name])


@pytest.mark.slow
def test_kiln_passes_wherever_the_plain_stack_does() -> None:
    """Kiln passes where the plain stack beneath it (torch-mlir and IREE alone) does: four forms the
    plain stack passed and kiln failed before these fixes (the IndexError)."""
    names = ["conv2d.valid", "conv3d.valid", "conv2d.padding_1tuple", "conv2d.functional_lists"]
    plain = _outcomes(check_plain_cases, [(CASES[name],) for name in names])
    kiln = _outcomes(check_cases, [tuple(CASES[name] for name in names)])
    assert any(plain[name].ok for name in names), plain  # else this test says nothing
    assert [name for name in names if plain[name].ok and not kiln[name].ok] == []


def test_a_crash_in_kilns_decomposition_is_reported_as_kilns_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not as a limit of torch or torch-mlir: the op, kiln's decomposition and its line, the stage.
    (Before the fix, padding="valid" crashed kiln's convolution decomposition just so, and the hint
    said "a limit of torch's decompositions or of torch-mlir's importer".)"""
    from kiln.compiler import CompileOptions, decompositions, run_pipeline, spec_from_module

    def broken(x: torch.Tensor, weight: torch.Tensor, bias: object, stride: list[int], padding: list[int], *rest: object) -> object:
        return padding[1]  # IndexError on padding=[0], as the convolution decomposition raised

    monkeypatch.setitem(decompositions.KILN_DECOMPOSITIONS, torch.ops.aten.convolution.default, broken)
    with pytest.raises(KilnError) as raised:
        run_pipeline(spec_from_module(nn.Conv2d(3, 4, 3, padding="valid"), (torch.randn(1, 3, 6, 6),)), CompileOptions())
    error = raised.value
    assert error.stage == "aten"
    assert error.message.startswith("op aten.conv2d.padding at "), error.message
    assert re.search(
        r"failed to import: kiln's decomposition of aten\.convolution\.default \(ops/test_fixes_33\.py:\d+, in broken\) "
        r"raised IndexError: list index out of range$",
        error.message,
    ), error.message
    hint = error.hint or ""
    assert "a kiln bug" in hint and "limit of torch" not in hint, hint


def _rel_l2(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.double() - want.double()).norm() / want.double().norm())


def _reinitialized(model: nn.Module, seed: int) -> nn.Module:
    """Weights scaled by fan-in, norms near one, batch statistics not the identity: transformers'
    own initialization (std 0.02, norm weights included) makes a tiny EfficientNet's output 0."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if parameter.dim() >= 2:
                parameter.copy_(noise / parameter[0].numel() ** 0.5)
            else:
                parameter.copy_(1 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)
        for name, buffer in model.named_buffers():
            if name.endswith("running_mean"):
                buffer.copy_(0.1 * torch.randn(buffer.shape, generator=generator))
            elif name.endswith("running_var"):
                buffer.copy_(0.5 + torch.rand(buffer.shape, generator=generator))
    return model.eval()


def _matches_eager(model: nn.Module, pixels: torch.Tensor) -> None:
    import kiln

    compiled = kiln.compile(model, (pixels,), target="llvm-cpu")
    with torch.no_grad():
        want = model(pixels)
    got = compiled(pixels)
    for key in ("last_hidden_state", "pooler_output"):
        assert got[key].shape == want[key].shape and got[key].dtype == want[key].dtype
        assert want[key].abs().max() > 1e-3, f"eager's {key} is all but zero: the test would prove nothing"
        assert _rel_l2(got[key], want[key]) < 1e-4, key


@pytest.mark.slow
def test_tiny_efficientnet_matches_eager() -> None:
    """transformers' EfficientNet, three stages of B0's blocks at width 0.25: depthwise convolutions
    with padding="same" (stride 1, 1x1 projections) and "valid" (stride 2, after explicit padding)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.EfficientNetConfig(
        image_size=32, width_coefficient=0.25, depth_coefficient=0.1, hidden_dim=320, kernel_sizes=[3, 5, 3],
        in_channels=[32, 16, 24], out_channels=[16, 24, 40], strides=[1, 2, 2], num_block_repeats=[1, 1, 1],
        expand_ratios=[1, 6, 6],
    )  # fmt: skip
    model = _reinitialized(transformers.EfficientNetModel(config), seed=0)
    _matches_eager(model, torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1)))


@pytest.mark.slow
def test_tiny_siglip_vision_matches_eager() -> None:
    """SigLIP's vision tower: patches by a strided convolution with padding="valid"."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.SiglipVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32, patch_size=8
    )
    model = _reinitialized(transformers.SiglipVisionModel(config), seed=0)
    _matches_eager(model, torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1)))
