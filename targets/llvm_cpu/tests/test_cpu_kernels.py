"""kiln's llvm-cpu levers and its CPU kernels (targets/llvm_cpu/kernels/, targets/levers.py).

The kernel is checked at three levels: the C code alone against a double reference (the AMX path
under a software model of AMX, the AVX512-BF16 path natively where the CPU has it), the rewrite of
the linalg hand-off (lit, targets/llvm_cpu/tests/kernels/rewrite.mlir), and whole models through IREE against
eager PyTorch (the AVX512-BF16 path, on a CPU that has it; an AMX CPU runs the AMX path instead).
"""

from __future__ import annotations

import platform
import runpy
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

import kiln
from kiln import targets as target_table
from kiln.compiler import CompileOptions, run_pipeline, spec_from_module
from kiln.errors import KilnError
from kiln.runtime.devices import host_cpu_flags
from kiln.runtime.executors import CpuExecutor
from kiln.runtime.numerics import compare_all
from kiln.targets.levers import Lever, compile_with_levers
from kiln.targets.llvm_cpu.kernels import build
from kiln.targets.llvm_cpu.kernels.features import AMX, AVX512_BF16, AVX512F, kernel_isa
from kiln.targets.llvm_cpu.kernels.geometry import row_window_call

HERE = Path(__file__).parent / "kernels"
# The GEMM kernel's sources (its bf16 workgroup function, the AMX, AVX512-BF16 and f32 paths), not the row kernels'.
GEMM_SOURCES = tuple(source for source in build.SOURCES if source.name.startswith("kiln_gemm_"))
LIT = str(Path(sys.executable).parent / "lit")
C_COMPILER = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_c = pytest.mark.skipif(
    C_COMPILER is None or platform.machine() not in ("x86_64", "AMD64"),
    reason="the kernel is x86-64 code built by the host's C compiler: needs both",
)
needs_avx512_bf16 = pytest.mark.skipif(
    "avx512_bf16" not in host_cpu_flags() or C_COMPILER is None,
    reason="the kernel's AVX512-BF16 path needs a CPU with avx512bf16 (and a C compiler to build it)",
)
needs_avx512f = pytest.mark.skipif(
    "avx512f" not in host_cpu_flags() or C_COMPILER is None,
    reason="the kernel's f32 path needs a CPU with avx512f (and a C compiler to build it)",
)
BF16 = torch.bfloat16
# An f32 convolution takes kiln's kernel (its f32 path) wherever the host has AVX-512F.
KERNELS_LEVER = ", kernels" if "avx512f" in host_cpu_flags() and C_COMPILER is not None else ""


def test_rewrite_lit() -> None:
    result = subprocess.run([LIT, "-v", str(HERE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _run_check(tmp_path: Path, objects: list[str], path: str) -> str:
    binary = tmp_path / "check_kernel"
    subprocess.run([C_COMPILER, "-O1", str(HERE / "check_kernel.c"), *objects, "-lm", "-o", str(binary)], check=True)
    result = subprocess.run([str(binary), path], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    return result.stdout


def _gemm_objects() -> list[str]:
    """The GEMM kernel's objects as kiln links them (built and cached by build.py)."""
    return [str(build.kernel_objects() / source.with_suffix(".o").name) for source in GEMM_SOURCES]


@needs_c
def test_the_amx_path_under_a_software_amx_model(tmp_path: Path) -> None:
    emulated = []
    for source in GEMM_SOURCES:
        emulated.append(str(tmp_path / f"{source.stem}_emu.o"))
        subprocess.run(
            [C_COMPILER, "-O1", "-fno-strict-aliasing", "-DKILN_AMX_EMULATE", f"-I{HERE}", "-c", str(source), "-o", emulated[-1]],
            check=True,
        )
    output = _run_check(tmp_path, emulated, "amx")
    assert "row window 7x7 s2" in output and output.rstrip().endswith("all passed")


@needs_avx512_bf16
def test_the_avx512_bf16_path_of_the_objects_kiln_links(tmp_path: Path) -> None:
    output = _run_check(tmp_path, _gemm_objects(), "avx512")
    assert output.rstrip().endswith("all passed")


@needs_avx512f
def test_the_f32_path_of_the_objects_kiln_links(tmp_path: Path) -> None:
    output = _run_check(tmp_path, _gemm_objects(), "f32")
    assert "row window 7x7 s2" in output and output.rstrip().endswith("all passed")


def test_which_cpus_get_which_path() -> None:
    assert kernel_isa("sapphirerapids") is AMX and kernel_isa("emeraldrapids") is AMX
    assert kernel_isa("znver4") is AVX512_BF16 and kernel_isa("cooperlake") is AVX512_BF16
    assert kernel_isa("skylake-avx512") is AVX512F and not AVX512F.bf16 and kernel_isa("haswell") is None
    host = kernel_isa("host")
    flags = host_cpu_flags()
    assert (host is AMX) == ("amx_bf16" in flags and "amx_tile" in flags)
    assert (host is not None and host.bf16) == ("avx512_bf16" in flags)
    assert (host is None) == ("avx512f" not in flags)


# -- whole models through IREE ----------------------------------------------------------------------


class ConvNet(nn.Module):
    """A stem over 3 channels (a row window), max pooling, convolutions with and without bias, batch
    norm, a residual add, average pooling, then Linear layers with a GELU between them."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, stride=2, padding=1)
        self.conv1 = nn.Conv2d(32, 32, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.fc1 = nn.Linear(64, 96)
        self.fc2 = nn.Linear(96, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.max_pool2d(torch.relu(self.stem(x)), 3, stride=1, padding=1)
        y = torch.relu(self.bn1(self.conv1(y)) + y)
        y = torch.relu(self.conv2(y)).mean((2, 3))
        return self.fc2(nn.functional.gelu(self.fc1(y)))


def _bf16_model(module: nn.Module) -> nn.Module:
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.uniform_(-0.2, 0.2)
        for buffer_name, buffer in module.named_buffers():
            if buffer_name.endswith("running_var"):
                buffer.uniform_(0.5, 1.5)
    return module.eval().to(BF16)


def _check(module: nn.Module, inputs: tuple[torch.Tensor, ...], **options: object):
    torch.manual_seed(0)
    compiled = kiln.compile(module, inputs, **options)
    got = compiled(*inputs)
    with torch.no_grad():
        want = module(*inputs)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    for comparison in compare_all(got, want):
        assert comparison.close_in_l2, comparison.describe()
    return compiled


@needs_avx512_bf16
def test_a_bf16_convnet_through_iree_matches_eager() -> None:
    torch.manual_seed(0)
    model = _bf16_model(ConvNet())
    compiled = _check(model, (torch.randn(2, 3, 32, 32).to(BF16),))
    by_op = [(record["contraction"].split()[0], record["code"]) for record in compiled.manifest.kernels]
    assert by_op == [
        ("linalg.conv_2d_nchw_fchw", "kiln"),  # the stem, as a row window
        ("linalg.conv_2d_nchw_fchw", "kiln"),
        ("linalg.conv_2d_nchw_fchw", "kiln"),
        ("linalg.matmul", "kiln"),
        ("linalg.matmul", "kiln"),
    ], compiled.manifest.kernels
    assert compiled.manifest.cpu_features == kernel_isa("host").features
    assert "kernels" in compiled.manifest.target_details["levers"]


@needs_avx512f
def test_an_f32_convnet_through_iree_matches_eager_at_f32_precision() -> None:
    torch.manual_seed(0)
    model = ConvNet().eval()
    x = torch.randn(2, 3, 32, 32)
    compiled = kiln.compile(model, (x,))
    assert [record["code"] for record in compiled.manifest.kernels] == ["kiln"] * 5, compiled.manifest.kernels
    assert all(record["kernel"] == "kiln_cpu_kernels::conv_f32" for record in compiled.manifest.kernels)
    assert compiled.manifest.cpu_features == ("avx512f",)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)  # f32 arithmetic, not TF32 or bf16


class MaskedAttention(nn.Module):
    """Attention with a boolean mask (a row of it all False) and a softmax of 37 columns beside it."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, s: torch.Tensor, bias: torch.Tensor):
        attention = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        causal = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        biased = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return attention, causal, torch.softmax(s * 30.0, dim=-1), biased


@needs_avx512f
def test_softmaxes_on_the_row_kernel_match_eager() -> None:
    """Masks (attention's fully masked row gives zeros, as eager's safe softmax, from the kernel; a
    plain softmax's row of -inf gives NaN, as eager's), tails of 37 columns, large logits."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 40, 32) for _ in range(3))
    mask = torch.rand(40, 40) > 0.3
    mask[5] = False
    s = torch.randn(6, 37)
    s[0, :5] = -torch.inf
    s[1] = -torch.inf
    bias = torch.randn(40, 40)  # an additive mask, its row 7 fully masked
    bias[7] = -torch.inf
    inputs = (q, k, v, mask, s, bias)
    compiled = kiln.compile(MaskedAttention(), inputs)
    softmaxes = sorted((r["contraction"], r["why"]) for r in compiled.manifest.kernels if r["contraction"].startswith("softmax"))
    # The boolean mask comes to linalg already applied to the scores, and the safe softmax's test of
    # its rows computes that again (fused), then compares in f64: the kernel's test still (IREE's
    # select and its pass over the scores took 15% of DeiT-S bf16 at batch 64 on 2 cores). The causal
    # mask comes as a shared [40, 40].
    safe = "row softmax of kiln_rows.c, fully masked rows zeros (safe softmax)"
    assert softmaxes == [
        ("softmax 2x3x40x40", safe),
        ("softmax 2x3x40x40 + mask 40x40", safe),
        ("softmax 2x3x40x40 + mask 40x40", safe),
        ("softmax 6x37", "row softmax of kiln_rows.c"),
    ]
    with torch.no_grad():
        want = MaskedAttention()(*inputs)
    got = compiled(*inputs)
    for masked in (got[0][:, :, 5], got[3][:, :, 7]):  # the kernel's zeros
        assert torch.equal(masked, torch.zeros_like(masked))
    assert torch.isnan(got[2][1]).all() and torch.isnan(want[2][1]).all()
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)


class BiasedAttention(nn.Module):
    """Causal attention and attention with an additive mask (a row of it fully masked), and a Linear
    after the latter (which makes it a bf16 model for the rewrite: one with bf16 contractions)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(32, 32)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
        causal = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        biased = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return causal, biased, self.proj(biased)


@needs_avx512_bf16
def test_bf16_attention_s_softmax_is_rounded_to_bf16_by_the_row_kernel() -> None:
    """In a bf16 model's attention the row softmax writes bf16, which P @ V on kiln's kernel takes as
    it is (the rounding it did after the softmax before), where P @ V is its only reader; outputs
    match eager's bf16 attention, a fully masked row zeros."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 64, 32).to(BF16) for _ in range(3))
    bias = torch.randn(64, 64)
    bias[7] = -torch.inf
    inputs = (q, k, v, bias.to(BF16))
    model = BiasedAttention().to(BF16)
    compiled = kiln.compile(model, inputs)
    softmaxes = sorted((r["contraction"], r["why"]) for r in compiled.manifest.kernels if r["contraction"].startswith("softmax"))
    # Both safe-softmax tests are the kernel's (the causal one computes its mask again inside the
    # test), so both softmaxes feed P @ V alone and round to bf16.
    rounded = "row softmax of kiln_rows.c, fully masked rows zeros (safe softmax), rounded to bf16 for attention's P @ V"
    assert softmaxes == [("softmax 2x3x64x64", rounded), ("softmax 2x3x64x64 + mask 64x64", rounded)], softmaxes
    with torch.no_grad():
        want = model(*inputs)
    got = compiled(*inputs)
    assert torch.equal(got[1][:, :, 7], torch.zeros_like(got[1][:, :, 7]))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a.float(), b.float(), rtol=1.6e-2, atol=2e-2)


class Norms(nn.Module):
    """A GELU times a per-row scale into a layer norm of 1024, and a tanh into another (two row
    programs, the GELU and the tanh each the norm's alone); a residual add into a layer norm of 37 values (tails) without a weight (the C layer norm:
    37 is no multiple of the row program's 16 lanes); one of 48 whose statistics are results too
    (training's native_layer_norm), which keeps IREE's normalization."""

    def __init__(self) -> None:
        super().__init__()
        self.wide, self.second, self.narrow = nn.LayerNorm(1024), nn.LayerNorm(1024), nn.LayerNorm(37, eps=1e-3)
        self.narrow.weight = None
        self.weight, self.bias = nn.Parameter(torch.rand(48) + 0.5), nn.Parameter(torch.rand(48) - 0.5)

    def forward(self, x: torch.Tensor, g: torch.Tensor, y: torch.Tensor, r: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        normed, mean, rstd = torch.ops.aten.native_layer_norm(z, [48], self.weight, self.bias, 1e-5)
        return self.wide(nn.functional.gelu(x) * g), self.second(torch.tanh(x)), self.narrow(y + r), normed, mean, rstd


@needs_avx512f
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norms_on_the_row_kernel_match_eager(dtype: torch.dtype) -> None:
    """Layer norms in f32 and bf16, with their producer (the row program) and without (the C layer
    norm; a bf16 model's statistics are f32 in kiln's linalg, its result is rounded to bf16 by the
    kernel), and the moments alone where the statistics are results."""
    torch.manual_seed(0)
    model = Norms().eval()
    with torch.no_grad():
        model.wide.weight.uniform_(0.5, 1.5)
        model.wide.bias.uniform_(-0.1, 0.1)
        model.narrow.bias.uniform_(-0.1, 0.1)
    model = model.to(dtype)
    # f32: a large offset, which a one-pass variance would lose; bf16 keeps only 8 bits of it.
    scale, offset = (100.0, 1000.0) if dtype == torch.float32 else (2.0, 3.0)
    inputs = tuple(
        x.to(dtype)
        for x in (
            torch.randn(2, 16, 1024), torch.rand(2, 16, 1) + 0.5, torch.randn(5, 37) * scale + offset, torch.randn(5, 37),
            torch.randn(3, 48) + 10.0,
        )
    )  # fmt: skip
    compiled = kiln.compile(model, inputs)
    name = "bf16" if dtype == torch.bfloat16 else "f32"
    rows = sorted((r["contraction"], r["why"].partition(":")[0]) for r in compiled.manifest.kernels if r["code"] == "kiln")
    assert rows == [
        (f"layer norm 2x16x1024 + weight and bias -> {name}", "row program"),
        (f"layer norm 2x16x1024 + weight and bias -> {name}", "row program"),
        (f"layer norm 5x37 + bias -> {name}", "row layer norm of kiln_rows.c"),
        ("layer norm moments 3x48", "row moments of kiln_rows.c"),
    ], compiled.manifest.kernels
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 1e-2}
    with torch.no_grad():
        for got, want in zip(compiled(*inputs), model(*inputs), strict=True):
            torch.testing.assert_close(got, want, **tolerance)


class ResidualStream(nn.Module):
    """A pre-norm block's two layer norms over a residual stream with a broadcast term (Whisper's
    positions): kiln's fusion computes the stream's sum again inside the second norm's x - mean,
    which it then keeps as an op of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.proj = nn.LayerNorm(64), nn.Linear(64, 64)

    def forward(self, a: torch.Tensor, positions: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x = a + positions + b
        return self.norm(x + self.proj(self.norm(x)))


@needs_avx512f
def test_a_layer_norm_whose_centering_is_an_op_of_its_own_is_on_the_row_kernel() -> None:
    """Regression: the second norm took IREE's code, whose tile of the recomputed stream needed
    1.4 MiB of stack for Whisper-small at batch 16, past the limit (iree-compile failed)."""
    torch.manual_seed(0)
    model = ResidualStream().eval()
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)
        model.norm.bias.uniform_(-0.1, 0.1)
    inputs = (torch.randn(4, 24, 64) * 10 + 100, torch.randn(24, 64), torch.randn(4, 24, 64))
    compiled = kiln.compile(model, inputs)
    norms = [r["why"] for r in compiled.manifest.kernels if r["contraction"].startswith("layer norm")]
    assert norms == ["row layer norm of kiln_rows.c"] * 2, compiled.manifest.kernels
    with torch.no_grad():
        torch.testing.assert_close(compiled(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "shape",
    [
        (2, 1, 1, 8, 32, 1, 1, 1),  # squeeze-excitation's expand: 8 channels of 1x1 pixels
        (1, 225, 225, 3, 32, 3, 3, 2),  # a stem: 3 channels, a 3x3 kernel, stride 2
        (4, 7, 5, 12, 16, 3, 3, 1),
        (1, 9, 2, 20, 16, 1, 2, 1),
    ],
)
def test_a_row_window_s_reads_stay_inside_its_image(shape: tuple[int, ...]) -> None:
    """Regression: one zero row below the input was too few for short rows, and the last image's
    result was NaN where the memory after the input held one (EfficientNet-B0 bf16 at batch 32)."""
    nb, hp, wp, cin, cout, kh, kw, stride = shape
    call = row_window_call(nb, hp, wp, cin, cout, kh, kw, stride)
    # The kernel's last read of an image (kiln_gemm.h: a_pixel and kwalk): the last output pixel's
    # window under the last kernel row, 32 values a K step, cin (the window) in all.
    start = (((call.oh - 1) * call.stride + call.kh - 1) * call.wp + (call.ow - 1) * call.stride) * call.xs
    assert start + call.cin <= call.hp * call.wp * call.xs, call


class GroupedConvs(nn.Module):
    """RegNet's grouped 3x3 (groups of 32 channels, stride 2, padded) and ResNeXt's (groups of 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.Conv2d(64, 64, 3, stride=2, padding=1, groups=2, bias=False)
        self.narrow = nn.Conv2d(64, 64, 3, padding=1, groups=16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.narrow(torch.relu(self.wide(x)))


@needs_avx512f
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_convolutions_of_32_channels_a_group_are_on_the_kernel(dtype: torch.dtype) -> None:
    """split-grouped-convs: IREE's code for them ran RegNet-Y-4.0GF bf16 at batch 32 in 16.8 s a call
    on 2 cores, 0.85 s on the kernel. The groups of 4 channels stay IREE's."""
    torch.manual_seed(0)
    model = GroupedConvs().eval().to(dtype)
    inputs = (torch.randn(2, 64, 10, 10).to(dtype),)
    compiled = kiln.compile(model, inputs)
    convs = [r["contraction"] for r in compiled.manifest.kernels if r["code"] == "kiln"]
    assert convs == ["linalg.conv_2d_nchw_fchw 2x32x12x12 * 32x32x3x3 stride 2"] * 2, compiled.manifest.kernels
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 2e-2}
    with torch.no_grad():
        torch.testing.assert_close(compiled(*inputs).float(), model(*inputs).float(), **tolerance)


class AudioStem(nn.Module):
    """Whisper's encoder stem: a 1-D convolution over 80 mel bins (a row window: 80 is no multiple of
    32), GELU, and a strided one."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(80, 64, 3, padding=1)
        self.conv2 = nn.Conv1d(64, 64, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.conv2(nn.functional.gelu(self.conv1(x)))).permute(0, 2, 1)


@needs_avx512f
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_1d_convolutions_are_on_the_kernel_as_2d_ones_of_height_1(dtype: torch.dtype) -> None:
    """conv-1d-as-2d: IREE's code for Whisper-small's two stem convolutions took 111 of its encoder's
    594 ms (f32) and 129 of 393 (bf16) at batch 1 on the 16-core Xeon."""
    if dtype == BF16 and "avx512_bf16" not in host_cpu_flags():
        pytest.skip("the kernel's bf16 path needs avx512bf16")
    torch.manual_seed(0)
    model = AudioStem().eval().to(dtype)
    inputs = (torch.randn(2, 80, 60).to(dtype),)
    compiled = kiln.compile(model, inputs)
    convs = [r["contraction"] for r in compiled.manifest.kernels if r["code"] == "kiln"]
    assert convs == ["linalg.conv_2d_nchw_fchw 2x80x1x62 * 64x80x1x3 stride 1", "linalg.conv_2d_nchw_fchw 2x64x1x62 * 64x64x1x3 stride 2"], (
        compiled.manifest.kernels
    )
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 2e-2}
    with torch.no_grad():
        torch.testing.assert_close(compiled(*inputs).float(), model(*inputs).float(), **tolerance)


class OddDepths(nn.Module):
    """Attention over 197 tokens (P @ V's K, as a ViT's) with heads of 64, and a Linear of 72 input
    features over 2048 rows: each over 1.3e8 multiply-adds once K is padded."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(72, 768)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return nn.functional.scaled_dot_product_attention(q, k, v), self.proj(x)


@needs_avx512f
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_contractions_whose_k_is_no_multiple_of_32_take_the_kernel_with_zeros_in_bf16(dtype: torch.dtype) -> None:
    """K padded with zeros to a multiple of 32 where it pays (gemm.MIN_PADDED_MACS): DeiT-S's P @ V
    (K = 198) was IREE's f32 code, 9.5% of its bf16 time at batch 64 on the 16-core Xeon. f32 keeps
    IREE's code, which was faster there."""
    if dtype == BF16 and "avx512_bf16" not in host_cpu_flags():
        pytest.skip("the kernel's bf16 path needs avx512bf16")
    torch.manual_seed(0)
    model = OddDepths().eval().to(dtype)
    inputs = (*(torch.randn(2, 32, 197, 64).to(dtype) for _ in range(3)), torch.randn(2048, 72).to(dtype))
    compiled = kiln.compile(model, inputs)
    padded = ["linalg.batch_matmul 64x197x197 * 64x197x64", "linalg.matmul 2048x72 * 72x768"]
    decisions = {r["contraction"]: (r["code"], r["why"]) for r in compiled.manifest.kernels}
    if dtype == BF16:
        assert all(decisions[c][0] == "kiln" for c in padded), decisions
    else:
        assert all(decisions[c][0] == "iree" and "in f32, zeros up to one cost more" in decisions[c][1] for c in padded), decisions
    tolerance = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1.6e-2, "atol": 2e-2}
    with torch.no_grad():
        for got, want in zip(compiled(*inputs), model(*inputs), strict=True):
            torch.testing.assert_close(got.float(), want.float(), **tolerance)


@needs_avx512_bf16
def test_attention_on_the_kernel_is_a_choice() -> None:
    torch.manual_seed(0)
    layer = _bf16_model(nn.TransformerEncoderLayer(64, 2, 128, dropout=0.0, batch_first=True))
    x = torch.randn(2, 32, 64).to(BF16)
    precise = _check(layer, (x,), cpu_attention="f32")
    rounded = _check(layer, (x,))
    kiln_code = [[r["contraction"] for r in c.manifest.kernels if r["code"] == "kiln"] for c in (precise, rounded)]
    attention = [c for c in kiln_code[1] if c not in kiln_code[0]]
    assert len(attention) == 2 and all(c.startswith("linalg.batch_matmul") for c in attention), kiln_code
    assert rounded.manifest.target_details["cpu_attention"] == "bf16"
    assert precise.manifest.target_details["cpu_attention"] == "f32"


def test_kernels_off_leaves_every_contraction_to_iree() -> None:
    torch.manual_seed(0)
    model = _bf16_model(ConvNet())
    compiled = _check(model, (torch.randn(1, 3, 16, 16).to(BF16),), kernels="off")
    assert compiled.manifest.kernels == () and compiled.manifest.cpu_features == ()
    assert compiled.manifest.target_details["kernels"] == "off"


@needs_c
def test_an_amx_artifact_is_refused_clearly_by_a_cpu_without_amx(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = _bf16_model(nn.Sequential(nn.Linear(64, 64)))
    compiled = kiln.compile(model, (torch.randn(4, 64).to(BF16),), cpu="sapphirerapids")
    assert compiled.manifest.cpu_features == ("amx-tile", "amx-bf16", "avx512bf16")
    assert [record["code"] for record in compiled.manifest.kernels] == ["kiln"]
    if "amx_bf16" in host_cpu_flags():
        pytest.skip("this CPU has AMX: the artifact loads")
    path = compiled.save(tmp_path / "amx.vmfb")
    with pytest.raises(KilnError, match="needs CPU features this CPU lacks: amx-tile, amx-bf16"):
        kiln.load(path)


def test_without_a_c_compiler_iree_computes_everything_and_says_so(tmp_path, monkeypatch) -> None:
    if kernel_isa("host") is None or not kernel_isa("host").bf16:
        pytest.skip("this CPU has neither AMX nor AVX512-BF16: the kernel's bf16 paths never apply")
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    build.kernel_objects.cache_clear()
    try:
        torch.manual_seed(0)
        model = _bf16_model(nn.Sequential(nn.Linear(64, 64)))
        x = torch.randn(4, 64).to(BF16)
        notes: list[str] = []
        compiled = run_pipeline(spec_from_module(model, (x,)), CompileOptions(), say=notes.append).compiled
    finally:
        build.kernel_objects.cache_clear()
    assert compiled.manifest.kernels == () and compiled.manifest.cpu_features == ()
    assert notes == [
        "note: kiln's CPU kernel is left out (no C compiler found (set CC, or install gcc or clang) to build "
        "kiln's CPU kernel); IREE's code computes all 1 contractions it matched"
    ]
    for comparison in compare_all((compiled(x),), (model(x),)):
        assert comparison.close_in_l2, comparison.describe()


# -- levers -----------------------------------------------------------------------------------------


def test_levers_fall_back_one_at_a_time_and_iree_s_own_failure_wins() -> None:
    tiling = Lever("tiling", (("--a",), ("--a2",)))
    layout = Lever("layout", (("--b",),))
    attempts: list[tuple[str, ...]] = []

    def fails_with(*bad: str):
        def compile_one(text: str, flags: tuple[str, ...]) -> bytes:
            attempts.append(flags)
            if any(flag in bad for flag in flags) or "--never" in bad:
                raise KilnError(f"iree-compile failed: {' '.join(flags)}", stage="vmfb")
            return " ".join(flags).encode()

        return compile_one

    outcome = compile_with_levers("m", (tiling, layout), fails_with("--a"))
    assert outcome.vmfb == b"--a2 --b" and attempts == [("--a", "--b"), (), ("--a2", "--b")]
    assert outcome.notes == ("note: iree-compile failed with kiln's tiling default (iree-compile failed: --a --b); compiled with --a2 instead",)

    attempts.clear()
    outcome = compile_with_levers("m", (tiling, layout), fails_with("--b"))
    assert outcome.vmfb == b"--a" and outcome.used((tiling, layout)) == ((tiling, 0),)
    assert outcome.notes[0].endswith("; compiled without it")

    attempts.clear()
    with pytest.raises(KilnError, match=r"iree-compile failed: $"):  # the compile without levers
        compile_with_levers("m", (tiling, layout), fails_with("--never"))
    assert attempts == [("--a", "--b"), ()]


def test_a_lever_iree_fails_with_is_dropped_and_the_others_kept(monkeypatch) -> None:
    cpu = target_table.TARGETS["llvm-cpu"]
    bogus = Lever("bogus", (("--iree-no-such-flag=1",),))
    monkeypatch.setitem(target_table.TARGETS, "llvm-cpu", replace(cpu, levers=(*cpu.levers, bogus)))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3), nn.ReLU()).eval()
    x = torch.randn(1, 4, 10, 10)
    notes: list[str] = []
    compiled = run_pipeline(spec_from_module(model, (x,)), CompileOptions(), say=notes.append).compiled
    assert len(notes) == 1 and notes[0].startswith("note: iree-compile failed with kiln's bogus default (iree-compile failed: ")
    assert notes[0].endswith("); compiled without it")
    assert compiled.manifest.target_details["levers"] == "no-const-eval, data-tiling, channels-last" + KERNELS_LEVER
    assert "--iree-no-such-flag=1" not in compiled.manifest.iree_flags
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


def test_channels_last_applies_where_there_are_convolutions_and_user_flags_come_last() -> None:
    torch.manual_seed(0)
    conv = kiln.compile(nn.Conv2d(4, 8, 3).eval(), (torch.randn(1, 4, 8, 8),))
    mlp = kiln.compile(nn.Linear(8, 8).eval(), (torch.randn(2, 8),), extra_iree_flags=("--iree-opt-data-tiling=false",))
    channels_last = [flag for flag in conv.manifest.iree_flags if "convert-conv-to-channels-last" in flag]
    assert len(channels_last) == 1 and conv.manifest.target_details["levers"] == "no-const-eval, data-tiling, channels-last" + KERNELS_LEVER
    assert not any("channels-last" in flag for flag in mlp.manifest.iree_flags)
    flags = mlp.manifest.iree_flags
    assert flags.index("--iree-opt-data-tiling") < flags.index("--iree-opt-data-tiling=false") == len(flags) - 1


class HeadsAttention(nn.Module):
    """Attention over [batch, seq, heads, dim] tensors, permuted around the batch matmuls as models do."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        weights = torch.softmax(q @ k.transpose(-1, -2) * 0.125, dim=-1)
        return (weights @ v).transpose(1, 2).flatten(2)


def test_f32_batch_matmuls_keep_their_transposes_out_and_match_eager() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 16, 4, 8) for _ in range(3))
    model = HeadsAttention().eval()
    f32 = kiln.compile(model, (q, k, v))
    assert "--iree-global-opt-propagate-transposes=false" in f32.manifest.iree_flags
    assert "batch-matmul-transposes" in f32.manifest.target_details["levers"]
    torch.testing.assert_close(f32(q, k, v), model(q, k, v), rtol=1e-5, atol=1e-5)
    bf16 = kiln.compile(model, tuple(t.bfloat16() for t in (q, k, v)), kernels="off")
    assert "batch-matmul-transposes" not in bf16.manifest.target_details["levers"]


# -- the runtime driver -----------------------------------------------------------------------------


class AddOne(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def test_cpu_driver_auto_times_both_and_a_fixed_one_is_kept() -> None:
    x = torch.randn(64)
    auto = kiln.compile(AddOne(), (x,))
    assert auto.manifest.driver == "local-task" and auto.manifest.target_details["cpu_driver"] == "auto"
    forced = kiln.compile(AddOne(), (x,), cpu_driver="local-sync")
    assert forced.manifest.driver == "local-sync"
    torch.testing.assert_close(forced(x), x + 1)
    assert not isinstance(forced.load().executor, CpuExecutor) and forced.load().executor.context.name == "local-sync"
    for _ in range(8):
        torch.testing.assert_close(auto(x), x + 1)
    assert isinstance(auto.load().executor, CpuExecutor) and auto.load().executor.chosen()


SUITE = Path(__file__).resolve().parents[3] / "benchmarks" / "models"


@needs_avx512_bf16
@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("mlp", {}),
        ("convnet_bn", {}),
        ("transformer_encoder", {}),
        pytest.param("resnet18", {}, marks=pytest.mark.slow),
    ],
)
def test_the_suite_s_bf16_models_match_eager(name: str, options: dict) -> None:
    namespace = runpy.run_path(str(SUITE / f"{name}.py"))
    model = namespace["get_model"](dtype="bf16")
    inputs = tuple(namespace["get_example_inputs"](batch="small", dtype="bf16"))
    compiled = _check(model, inputs, **options)
    assert sum(record["code"] == "kiln" for record in compiled.manifest.kernels) >= 2, compiled.manifest.kernels
