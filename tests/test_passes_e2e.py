"""kiln's passes end to end: each one fires in the default pipeline and the artifact matches eager.

For every pass, a small model that gives it something to do is compiled with the default pipeline
and `print_after_all`; the test checks that the module changed across that pass (so the pass is
in the pipeline and fired) and compares the artifact with eager PyTorch on fresh inputs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from testkit import ROOT, as_tuple, example_spec
from torch import nn

from kiln.compiler import CompileOptions, load_model_file, run_pipeline, run_until, spec_from_module
from kiln.compiler.dispatches import count_dispatches
from kiln.errors import KilnError
from kiln.passes import DEFAULT_PIPELINE, TORCH_MLIR_PIPELINE, PassGroup, with_placements
from kiln.targets.resolve import resolve


class Function(nn.Module):
    def __init__(self, function: Callable[..., object]) -> None:
        super().__init__()
        self.function = function

    def forward(self, *args: torch.Tensor) -> object:
        return self.function(*args)


def floats(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def ints(*shape: int) -> torch.Tensor:
    return torch.randint(-50, 50, shape)


# pass -> (what gives it work, the inputs' makers)
CASES: dict[str, tuple[Callable[..., object], tuple[Callable[[], torch.Tensor], ...]]] = {
    "accumulate-in-f32": (  # bf16 integers: sums exact in f32, rounded once (a bf16 accumulator was off by 12 on sum(1))
        lambda x: (x.sum(1), x.mean((1, 2)), x.sum(-1), x.sum(), x.cumsum(1)),
        (lambda: ints(2, 64, 24, 16).to(torch.bfloat16),),
    ),
    "decompose-gelu": (lambda x: F.gelu(x) * F.gelu(x, approximate="tanh"), (lambda: floats(4, 8),)),
    "decompose-sigmoid": (lambda x: torch.sigmoid(x) + F.silu(x), (lambda: floats(4, 8),)),
    "fold-empty-tensors": (lambda x: (x.repeat(0, 2), x[:, 2:2] + 1, x * 2), (lambda: floats(3, 5),)),
    "fold-truncf-constants": (lambda x: x * torch.arange(0.0, 1.0, 0.2), (lambda: floats(3, 5),)),
    "int-to-bf16-via-f32": (lambda x: (x.to(torch.bfloat16), (x > 0).to(torch.bfloat16)), (lambda: ints(4, 8),)),
    "promote-uint8-arithmetic": (lambda x: (x * 3 + 1, x // 3, 200 - x), (lambda: torch.randint(0, 256, (4, 8)).to(torch.uint8),)),
    "fold-sin-cos": (lambda x: torch.sin(x) ** 2 + torch.cos(x) ** 2 + x, (lambda: floats(4, 8) * 10,)),
    "fold-mul-one": (lambda x, y: (x * 1) * torch.ones(4, 8) + y, (lambda: floats(4, 8), lambda: floats(4, 8))),
    "fold-add-zero": (lambda x, y: (x + 0) * y - torch.zeros(4, 8), (lambda: floats(4, 8), lambda: floats(4, 8))),
    "fold-sub-self": (lambda n, m: (n - n) + m * 2, (lambda: ints(4, 8), lambda: ints(4, 8))),
    "fold-neg-neg": (lambda x, y: torch.neg(-x) * y, (lambda: floats(4, 8), lambda: floats(4, 8))),
    "fold-relu-relu": (lambda x, y: torch.relu(torch.relu(x - y)) * y, (lambda: floats(4, 8), lambda: floats(4, 8))),
    "fold-transpose-chain": (
        lambda x, z: (x.t().t() * 2, z.permute(2, 0, 1).transpose(1, 2) + 1),
        (lambda: floats(4, 8), lambda: floats(2, 3, 4)),
    ),
    "fold-reshape-chain": (lambda x: x.reshape(32).view(8, 4).unsqueeze(0).squeeze(0) + 1, (lambda: floats(4, 8),)),
    "rotary-as-gather": (  # Phi's rotary over the first 4 of each head's 10 dims, as transformers writes it
        lambda q, cos, sin: partial_rotary(q, cos, sin) * 2,
        (lambda: floats(2, 3, 5, 10), lambda: floats(1, 1, 5, 4), lambda: floats(1, 1, 5, 4)),
    ),
    "expand-pow-small": (lambda x, y: x**2 + y.pow(2) * y.pow(3.0), (lambda: floats(4, 8), lambda: floats(4, 8))),
    "slice-strided-pointwise-conv": (  # a downsampling shortcut of odd size, as in ResNet, fed by another op
        lambda x, w: (F.conv2d(torch.relu(x + 1), w, stride=(2, 3)), F.conv3d(x.unsqueeze(2), w.unsqueeze(2), stride=2)),
        (lambda: floats(2, 8, 7, 9), lambda: floats(16, 8, 1, 1)),
    ),
    "fold-splat-operand": (  # BEiT's bias plus transformers' mask of a batch without padding, broadcast to it
        lambda bias: (bias + (torch.arange(8).view(1, 1, 8) >= 0).expand(4, 2, 8)) * 3,
        (lambda: floats(1, 2, 8),),
    ),
    "fold-pad-into-conv": (  # MobileNet's TensorFlow padding: (1, 1) at stride 1, (1, 2) at stride 2 (extra never read), (0, 1) kept
        lambda x, w: (
            F.conv2d(F.pad(torch.relu(x), (1, 1, 1, 1)), w, groups=8),
            F.conv2d(F.pad(x, (1, 2, 1, 2)), w, stride=2, groups=8),
            F.conv2d(F.pad(x, (0, 1, 0, 1)), w, stride=2, groups=8),
        ),
        (lambda: floats(2, 8, 7, 7), lambda: floats(8, 1, 3, 3)),
    ),
    "split-spatial-sum": (  # squeeze-excitation's average over 32 x 40 pixels, which another op reads too; a 4 x 4 pooling kept
        lambda x: (x.mean((2, 3), keepdim=True) * torch.sigmoid(x), x.sum((-1, -2)), x[:, :, :4, :4].mean((2, 3))),
        (lambda: floats(2, 8, 32, 40),),
    ),
    "depthwise-to-nhwc": (  # MobileNet's padded 3x3 (strided here) after an op, and an unpadded dilated one
        lambda x, w: (F.conv2d(torch.relu(x), w, stride=(2, 1), padding=1, groups=8), F.conv2d(x, w, dilation=2, groups=8)),
        (lambda: floats(2, 8, 9, 7), lambda: floats(8, 1, 3, 3)),
    ),
    "fuse-elementwise": (
        lambda x, b: torch.exp(x + b) * (x + b) - torch.tanh(x) / 2,
        (lambda: floats(4, 8), lambda: floats(8)),
    ),
}


def partial_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    def rotate_half(y: torch.Tensor) -> torch.Tensor:
        return torch.cat((-y[..., y.shape[-1] // 2 :], y[..., : y.shape[-1] // 2]), dim=-1)

    rotated, passed = x[..., : cos.shape[-1]], x[..., cos.shape[-1] :]
    return torch.cat((rotated * cos + rotate_half(rotated) * sin, passed), dim=-1)


def inputs_for(makers: tuple[Callable[[], torch.Tensor], ...], seed: int) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(seed)
    return tuple(make() for make in makers)


def pipeline_for(options: CompileOptions) -> tuple[PassGroup, ...]:
    """The default pipeline with the target's own passes placed in it, as a compile with `options` runs it."""
    return with_placements(DEFAULT_PIPELINE, resolve(options).passes)


# Passes the GPU rooms place and llvm-cpu does not: each fires for cuda, and the CPU compiles on from there.
CPU_OFF = {name for group in pipeline_for(CompileOptions(target="cuda")) for name in group.passes} - {
    name for group in pipeline_for(CompileOptions()) for name in group.passes
}


@pytest.mark.parametrize("pass_name", sorted(CASES))
def test_pass_fires_in_the_default_pipeline_and_matches_eager(pass_name, tmp_path):
    function, makers = CASES[pass_name]
    model = Function(function)
    spec = spec_from_module(model, inputs_for(makers, seed=0))
    if pass_name in CPU_OFF:
        options = CompileOptions(target="cuda", dump_dir=tmp_path, print_after_all=True, stop_after="simplified")
        run_until(spec, options)
        cpu = tmp_path / "cpu"
        run_until(spec, CompileOptions(dump_dir=cpu, print_after_all=True, stop_after="simplified"))
        assert not list(cpu.glob(f"*.after-{pass_name}.mlir")), f"llvm-cpu ran {pass_name}"
        compilation = run_pipeline(None, CompileOptions(start_from=tmp_path / "03-simplified.mlir"))
    else:
        options = CompileOptions(dump_dir=tmp_path, print_after_all=True)
        compilation = run_pipeline(spec, options)
    before, after = module_around(pass_name, pipeline_for(options), tmp_path)
    assert before.read_text() != after.read_text(), f"{pass_name} left the module unchanged"
    fresh = inputs_for(makers, seed=1)
    with torch.no_grad():
        expected = as_tuple(model(*fresh))
    actual = as_tuple(compilation.compiled(*fresh))
    for want, got in zip(expected, actual, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def module_around(pass_name: str, pipeline: tuple[PassGroup, ...], dump_dir: Path) -> tuple[Path, Path]:
    """The dumps of the module just before and just after `pass_name`, from `print_after_all`."""
    ran = [(index, group.name, name) for index, group in enumerate(pipeline, start=2) for name in group.passes]
    position = next(i for i, (_, _, name) in enumerate(ran) if name == pass_name)
    index, stage, _ = ran[position]
    after = dump_dir / f"{index:02d}-{stage}.after-{pass_name}.mlir"
    if position == 0:
        return dump_dir / "01-aten.mlir", after
    index, stage, previous = ran[position - 1]
    return dump_dir / f"{index:02d}-{stage}.after-{previous}.mlir", after


def test_low_precision_decompositions_match_eager():
    torch.manual_seed(0)
    model = Function(lambda x: F.gelu(x) + torch.sigmoid(x))
    x = torch.randn(4, 8).bfloat16()
    compiled = run_pipeline(spec_from_module(model, (x,)), CompileOptions()).compiled
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=2e-2, atol=2e-2)


def test_strict_primitives_names_an_op_outside_the_set_with_a_reproducer(tmp_path):
    spec = spec_from_module(Function(lambda x: F.gelu(x) + 1), (torch.randn(4, 8),))
    options = CompileOptions(dump_dir=tmp_path, disable_passes=("decompose-gelu",), strict_primitives=True)
    with pytest.raises(KilnError) as raised:
        run_pipeline(spec, options)
    message = str(raised.value)
    assert message.startswith("[prims] op torch.aten.gelu")
    assert "failed in pass 'require-primitives': 'torch.aten.gelu' op is outside kiln's primitive set" in message
    assert "without --strict-primitives" in message
    assert f"reproduce with: kiln opt {tmp_path / '01-aten.mlir'} --pass " in message


def test_an_op_outside_the_set_that_torch_mlir_lowers_compiles_matches_and_is_reported(tmp_path):
    model = Function(lambda x: F.gelu(x) + 1)
    x = torch.randn(4, 8)
    options = CompileOptions(dump_dir=tmp_path, disable_passes=("decompose-gelu",))
    compiled = run_pipeline(spec_from_module(model, (x,)), options).compiled
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    report = (tmp_path / "02-prims.outside-primitives.txt").read_text().splitlines()
    assert report[1:] == ["torch.aten.gelu  1  lowered by torch-to-linalg"]


def test_ops_nothing_lowers_are_named_all_at_once(tmp_path):
    spec = spec_from_module(Function(lambda x: torch.special.erfinv(x * 0.5) + torch.special.erfinv(x * 0.25)), (torch.rand(4, 8),))
    with pytest.raises(KilnError) as raised:
        run_pipeline(spec, CompileOptions(dump_dir=tmp_path))
    message = str(raised.value)
    assert message.startswith("[prims] op torch.aten.erfinv")
    assert "ops outside kiln's primitive set that nothing lowers: torch.aten.erfinv (2)" in message


def test_sincos_has_no_transcendental_math_and_returns_ones(tmp_path):
    spec = example_spec("sincos")
    compiled = run_pipeline(spec, CompileOptions(dump_dir=tmp_path)).compiled
    x = torch.randn(1024, 1024) * 100
    torch.testing.assert_close(compiled(x), torch.ones_like(x), rtol=0, atol=0)
    math_ops = re.compile(r"\bmath\.\w+|\bllvm\.intr\.(sin|cos|exp|log|pow)|@(sinf|cosf|expf|logf|powf)\b")
    for phase in sorted(tmp_path.glob("*-vmfb-*.mlir")):
        assert not math_ops.search(phase.read_text()), f"transcendental math left in {phase.name}"
    assert count_dispatches(tmp_path) == 0


def test_gelu_layernorm_needs_no_more_dispatches_with_our_passes(tmp_path):
    spec = load_model_file(ROOT / "benchmarks" / "models" / "gelu_layernorm.py")
    on, off = tmp_path / "on", tmp_path / "off"
    # The passes' effect alone: kiln's CPU kernels, after them, split the layer norm's row moments
    # into a dispatch of their own on purpose (faster; benchmarks/NOTES.md).
    compiled = run_pipeline(spec, CompileOptions(dump_dir=on, kernels="off")).compiled
    run_pipeline(spec, CompileOptions(dump_dir=off, pipeline=TORCH_MLIR_PIPELINE, kernels="off"))
    assert count_dispatches(on) <= count_dispatches(off)
    torch.manual_seed(1)
    inputs = tuple(torch.randn_like(x) for x in spec.example_inputs)
    with torch.no_grad():
        torch.testing.assert_close(compiled(*inputs), spec.module(*inputs), rtol=1e-4, atol=1e-4)


def test_fusion_report_and_graphs(tmp_path):
    model = Function(lambda x, b: torch.exp(x + b) * (x + b) - torch.tanh(x) / 2)
    spec = spec_from_module(model, (torch.randn(4, 8), torch.randn(8)))
    run_until(spec, CompileOptions(dump_dir=tmp_path, stop_after="fused"))
    report = (tmp_path / "05-fused.fusion-report.md").read_text()
    before, after = map(int, re.search(r"linalg ops: (\d+) before fusion, (\d+) after", report).groups())
    assert after < before
    chains = re.findall(r"^\| \d+ \| (.*) \|$", report, re.MULTILINE)
    assert chains and all(re.fullmatch(r"(#\d+ [\w/]+)(, #\d+ [\w/]+)+", chain) for chain in chains)
    for name in ("before", "after"):
        dot = (tmp_path / f"05-fused.fusion-{name}.dot").read_text()
        assert dot.startswith("digraph") and "->" in dot


def test_a_stopped_run_returns_its_stages_value_and_a_whole_run_the_artifact(tmp_path):
    """`run_until` (--stop-after) gives the value of the stage it stopped after; `run_pipeline` always
    gives the artifact, and is not the function for a stop; nor is `kiln.compile`."""
    from kiln import compile as kiln_compile
    from kiln.compiler.pipeline import Program

    model, x = Function(lambda x: torch.exp(x) + 1), torch.randn(4, 8)
    stopped = run_until(spec_from_module(model, (x,)), CompileOptions(dump_dir=tmp_path, stop_after="simplified"))
    assert stopped.stage == "simplified" and isinstance(stopped.value, Program)
    assert [report.name for report in stopped.stages] == ["exported", "aten", "prims", "simplified"]
    assert "torch.aten.exp" in str(stopped.value) and (tmp_path / "03-simplified.mlir").is_file()
    with pytest.raises(ValueError, match="run_until"):
        run_pipeline(spec_from_module(model, (x,)), CompileOptions(stop_after="simplified"))
    with pytest.raises(ValueError, match="stop_after"):
        run_until(spec_from_module(model, (x,)), CompileOptions())
    with pytest.raises(ValueError, match="run_until"):
        kiln_compile(model, (x,), stop_after="aten")
