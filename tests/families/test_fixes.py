"""The fixes the model families needed, each on the smallest module that needs it, compiled for
llvm-cpu and compared with eager PyTorch (integer results exactly)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import kiln
from kiln.compiler import importer
from kiln.compiler.decompositions import _grouped_mm, _histc, _viewable
from kiln.errors import KilnError


def _matches_eager(module: nn.Module, *inputs: torch.Tensor) -> None:
    module = module.eval()
    compiled = kiln.compile(module, inputs, target="llvm-cpu")
    want, got = module(*inputs), compiled(*inputs)
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for w, g in zip(want, got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


class Histogram(nn.Module):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.histc(ids.float(), bins=8, min=0, max=7)


def test_histc_counts_expert_ids_exactly() -> None:
    ids = torch.randint(0, 8, (64,), generator=torch.Generator().manual_seed(0))
    _matches_eager(Histogram(), ids)


@pytest.mark.parametrize("bins, low, high", [(8, 0, 7), (10, -2, 2), (5, 0, 8)])
def test_histc_decomposition_bins_as_pytorch_does(bins: int, low: float, high: float) -> None:
    """Values on bin edges, at max, outside the range and NaN, against PyTorch's CPU kernel."""
    values = torch.cat([torch.randn(500) * 3, torch.arange(-3, 9, 0.5), torch.tensor([float("nan"), 7.0001])])
    assert torch.equal(_histc(values, bins, low, high), torch.histc(values, bins, low, high))


class GroupedExperts(nn.Module):
    """Rows sorted by expert, offsets from histc and cumsum, one grouped product: transformers' MoE
    under torch.export (its own grouped_mm_fallback op; aten._grouped_mm traces for bf16 only)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 16, 8))

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        sorted_ids, order = torch.sort(ids)
        counts = torch.histc(sorted_ids.float(), bins=4, min=0, max=3)
        offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)
        return torch.ops.transformers.grouped_mm_fallback(x[order], self.weight, offs=offsets)


def test_grouped_matmul_by_expert_matches_eager() -> None:
    pytest.importorskip("transformers.integrations.moe")  # registers the op
    generator = torch.Generator().manual_seed(1)
    _matches_eager(GroupedExperts(), torch.randn(12, 16, generator=generator), torch.randint(0, 4, (12,), generator=generator))


def test_grouped_mm_decomposition_matches_pytorch() -> None:
    """Groups of 2, 0 and 6 rows; the last 2 rows belong to no group and are zero."""
    generator = torch.Generator().manual_seed(5)
    x, weight = torch.randn(10, 8, generator=generator), torch.randn(3, 8, 4, generator=generator)
    offsets = torch.tensor([2, 2, 8], dtype=torch.int32)
    expected = torch.cat([x[:2] @ weight[0], x[2:8] @ weight[2], torch.zeros(2, 4)])
    torch.testing.assert_close(_grouped_mm(x, weight, offsets), expected)
    torch.testing.assert_close(_grouped_mm(x, weight, offsets)[:8], torch._grouped_mm(x, weight, offs=offsets)[:8])


class TopUnsorted(nn.Module):
    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        values, indices = torch.topk(scores, k=2, dim=-1, sorted=False)
        return (values * indices).sum(-1)  # independent of the order of the k values


def test_topk_unsorted_compiles() -> None:
    _matches_eager(TopUnsorted(), torch.randn(6, 5, generator=torch.Generator().manual_seed(2)))


class AttentionThenView(nn.Module):
    """GPT-2's attention output path: SDPA, transpose, reshape, then `view(-1, hidden)`."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        attended = nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        merged = attended.transpose(1, 2).reshape(q.shape[0], q.shape[2], 64)
        return self.proj(merged.view(-1, merged.size(-1)))


def test_a_view_after_attention_at_batch_two() -> None:
    """PyTorch's own run_decompositions fails here ("Cannot view a tensor with shape [2, 16, 64] and
    strides (64, 128, 1)"): CPU flash attention lays its output out sequence-major."""
    _matches_eager(AttentionThenView(), torch.randn(2, 4, 16, 16, generator=torch.Generator().manual_seed(3)))


def test_viewable_follows_aten() -> None:
    x = torch.empty(2, 16, 64).transpose(0, 1).contiguous().transpose(0, 1)  # strides (64, 128, 1)
    assert not _viewable(list(x.shape), list(x.stride()), [32, 64])
    assert _viewable(list(x.shape), list(x.stride()), [2, 16, 8, 8])
    assert _viewable([4, 6], [6, 1], [-1])


class TableLookup(nn.Module):
    """Swin's relative position bias: a parameter indexed by a constant index buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(9, 2))
        self.register_buffer("index", torch.randint(0, 9, (4, 4), generator=torch.Generator().manual_seed(4)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[self.index].permute(2, 0, 1)


def test_a_weight_indexed_by_a_constant_buffer() -> None:
    _matches_eager(TableLookup(), torch.randn(2, 4, 4))


def test_an_importer_assertion_is_a_kiln_error_naming_op_and_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the clone, torch-mlir's importer asserts; the user sees a KilnError with the op and
    the model's line, not the AssertionError."""
    monkeypatch.setattr(importer, "_weights_out_of_lists", lambda program: None)
    with pytest.raises(KilnError) as caught:
        kiln.compile(TableLookup(), (torch.randn(2, 4, 4),), target="llvm-cpu")
    message = str(caught.value)
    assert caught.value.stage == "aten"
    assert "op aten.index.Tensor at " in message and "test_fixes.py:" in message
    assert "AssertionError: Heterogeneous lists are not supported" in message


class FourierMix(nn.Module):
    """FNet's token mixing: the real part of a 2-D FFT over sequence and hidden dimensions."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.fftn(x, dim=(1, 2)).real + torch.fft.fftn(x, dim=(2,), norm="ortho").imag


def test_the_real_part_of_an_fft_is_a_matmul() -> None:
    x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(6))
    module = FourierMix()
    compiled = kiln.compile(module, (x,), target="llvm-cpu")
    torch.testing.assert_close(compiled(x), module(x), rtol=1e-4, atol=1e-4)  # 16x32 sums of f32 products


class CeilPooling(nn.Module):
    """Funnel's pooling: a (2, 1) window, ceil_mode, over a hidden state of odd length."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.avg_pool2d(x, (2, 1), stride=(2, 1), ceil_mode=True) + nn.functional.avg_pool2d(
            x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False
        ).sum()


def test_ceil_mode_pooling_of_an_odd_length() -> None:
    _matches_eager(CeilPooling(), torch.randn(2, 1, 15, 64))


def test_a_convolution_with_one_output_row_and_overhang() -> None:
    """SelecSLS's last stage: 3x3, stride 2, padding 1 on a 2x2 input."""
    _matches_eager(nn.Conv2d(8, 4, 3, stride=2, padding=1), torch.randn(2, 8, 2, 2))


class BranchOnValue(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (x > 0).any().item():  # data-dependent: Longformer's `if is_global_attn:`
            return x * 2
        return x


def test_a_data_dependent_branch_names_the_models_line() -> None:
    with pytest.raises(KilnError) as caught:
        kiln.compile(BranchOnValue(), (torch.randn(3),), target="llvm-cpu")
    assert caught.value.stage == "exported"
    assert "test_fixes.py:" in caught.value.message and "(`if (x > 0).any().item():" in caught.value.message
    assert caught.value.hint is not None and "torch.cond" in caught.value.hint


def test_a_cuda_distribution_failure_is_retried_with_the_other_reduction_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whisper's encoder layer norm fails in IREE's reduction vector distribution on cuda ("'func.func'
    op failed to distribute"); the retry adds the flag, and only for that failure on that target."""
    from kiln.compiler import iree_backend

    calls: list[list[str]] = []

    def fake_compile(text: str, flags: list[str], dump: object, reproducer: object) -> bytes:
        calls.append(flags)
        if "--iree-codegen-llvmgpu-use-reduction-vector-distribution=false" not in flags:
            raise KilnError("iree-compile failed: x.py:1:0: error: 'func.func' op failed to distribute", stage="vmfb")
        return b"vmfb"

    monkeypatch.setattr(iree_backend, "iree_compile", fake_compile)
    cuda = ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"]
    vmfb, flags = iree_backend.iree_compile_with_workarounds("module", cuda, None, None)
    assert vmfb == b"vmfb" and flags == [*cuda, "--iree-codegen-llvmgpu-use-reduction-vector-distribution=false"]
    assert calls == [cuda, flags]
    with pytest.raises(KilnError, match="failed to distribute"):  # another target: no retry
        iree_backend.iree_compile_with_workarounds("module", ["--iree-hal-target-device=local"], None, None)


def test_no_exception_from_inside_kiln_reaches_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a stage raises, the caller gets one KilnError naming the stage."""
    from kiln.compiler.stages import aten

    def broken_import(*args: object, **kwargs: object) -> None:
        raise ValueError("a library's own error\nwith a second line")

    monkeypatch.setattr(aten, "import_program", broken_import)
    with pytest.raises(KilnError) as caught:
        kiln.compile(nn.Linear(4, 4), (torch.randn(2, 4),), target="llvm-cpu")
    assert caught.value.stage == "aten"
    assert caught.value.message == "internal error: ValueError: a library's own error"


class WindowAttention(nn.Module):
    """TinyViT's attention: a per-head bias, broadcast over the batch of windows."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(4, 8, 8))

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=self.bias)


def test_an_attention_mask_broadcast_over_the_batch_at_the_torch_hand_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """IREE's fused attention needs the mask at the query's batch; without the expand it fails."""
    q = torch.randn(3, 4, 8, 16, generator=torch.Generator().manual_seed(7))
    module = WindowAttention().eval()
    compiled = kiln.compile(module, (q,), target="llvm-cpu", handoff="torch")
    torch.testing.assert_close(compiled(q), module(q), rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(importer, "attention_masks_at_full_batch", lambda program: None)
    with pytest.raises(KilnError, match="query and mask batch dimension mismatch"):
        kiln.compile(module, (q,), target="llvm-cpu", handoff="torch")
