"""What `kiln tune` may change, per target, as data: knobs, each a few ways to compile.

A knob's first choice changes nothing (kiln's default for that target); each other choice sets
CompileOptions fields and/or adds iree-compile flags. A candidate is one choice per knob, written
as the knobs it moves away from their default (`{"ukernels": "all"}`; `{}` is kiln's default).

Only choices that keep what the model computes (up to rounding) belong here. A candidate is checked
against eager PyTorch on the example inputs alone, so a flag that changes results only on other
inputs (fast min/max that drop NaNs, matmul inputs narrowed to bf16) would pass the check; such
flags are left out. Every flag was checked against `iree-compile --help-list-hidden` of IREE 3.13
(tests/test_tune.py checks it again), and its default read off by compiling with it on and off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kiln.compiler.options import CompileOptions
from kiln.errors import KilnError
from kiln.passes import PIPELINES, parse_pipeline
from kiln.targets import TARGETS, get_target
from kiln.targets.llvm_cpu.target import DATA_TILING
from kiln.targets.resolve import HANDOFFS

STAGE = "tune"

# The CompileOptions fields a choice may set, each from its text form (what the cache stores).
OPTION_FIELDS = ("handoff", "opt_level", "pipeline", "kernels", "cpu_attention", "cpu_driver")


@dataclass(frozen=True)
class Choice:
    label: str  # e.g. "on", "all", "O2", "torch"
    options: tuple[tuple[str, str], ...] = ()  # (CompileOptions field in OPTION_FIELDS, value as text)
    iree_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Knob:
    name: str
    summary: str
    choices: tuple[Choice, ...]  # the first is the default and changes nothing

    def choice(self, label: str) -> Choice:
        for choice in self.choices:
            if choice.label == label:
                return choice
        known = ", ".join(choice.label for choice in self.choices)
        raise KilnError(f"knob '{self.name}' has no choice '{label}'; choices: {known}", stage=STAGE)

    @property
    def default(self) -> str:
        return self.choices[0].label


Space = tuple[Knob, ...]
Assignment = Mapping[str, str]  # knob name -> choice label, for the knobs away from their default


@dataclass(frozen=True)
class TunedSettings:
    """A candidate made concrete: what it changes in CompileOptions, as stored in the tuning cache.

    Stored as option values and flags (not knob names alone) so that a cached entry means the same
    compile even if the search space is edited later.
    """

    choices: dict[str, str] = field(default_factory=dict)  # knob -> label, non-default knobs only
    options: dict[str, str] = field(default_factory=dict)  # CompileOptions field -> value as text
    iree_flags: tuple[str, ...] = ()

    def describe(self) -> str:
        return describe(self.choices)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> TunedSettings:
        return TunedSettings(dict(data["choices"]), dict(data["options"]), tuple(data["iree_flags"]))


def _flag(name: str, summary: str, flag: str, *labels: str) -> Knob:
    """A knob over one iree-compile flag: `labels` is the default, then the other values, each given as
    "label=value" (the flag gets `=value`) or as the bare value."""
    default, *others = labels
    choices = [Choice(default)]
    for text in others:
        label, _, value = text.partition("=")
        choices.append(Choice(label, iree_flags=(f"{flag}={value or label}",)))
    return Knob(name, summary, tuple(choices))


def _handoff(target: str) -> Knob:
    default = get_target(target).handoff
    others = tuple(Choice(h, options=(("handoff", h),)) for h in HANDOFFS if h != default)
    summary = "where IREE takes over: kiln lowers to linalg, or IREE lowers the torch dialect"
    return Knob("handoff", summary, (Choice(default), *others))


def _common(target: str) -> tuple[Knob, ...]:
    return (
        _handoff(target),
        Knob(
            "pipeline",
            "kiln's pass pipeline: its own passes, or torch-mlir's lowering alone",
            (Choice("default"), *(Choice(name, options=(("pipeline", name),)) for name in PIPELINES if name != "default")),
        ),
        _flag(
            "aggressive-fusion",
            "IREE's dispatch formation fuses more (behind a flag: not every backend supports it)",
            "--iree-dispatch-creation-enable-aggressive-fusion",
            "off",
            "on=true",
        ),
        Knob("opt-level", "IREE's optimization level (kiln's default is O3)", (Choice("O3"), Choice("O2", options=(("opt_level", "O2"),)))),
    )


def _llvm_cpu() -> tuple[Knob, ...]:
    """llvm-cpu's knobs, from the 16-core host's measurements (benchmarks/NOTES.md): each default wins on
    most models, and each other choice won on some (inner-tiled on f32 matmuls, the torch hand-off with
    channels-last on ResNet-18 in f32, bf16 attention on the transformer blocks)."""
    return (
        *_common("llvm-cpu"),
        Knob(
            "data-tiling",
            "matmul operands relaid out in tiles that fit the CPU's registers (kiln's default: IREE's "
            "dispatch-creation path; global: its global-optimization path)",
            (
                Choice("on"),
                Choice("global", iree_flags=DATA_TILING.choices[1]),  # the lever's fallback (targets/llvm_cpu/target.py)
                Choice("off", iree_flags=DATA_TILING.choices[1][:1]),
            ),
        ),
        Knob(
            "inner-tiled",
            "data-tiled matmuls lowered to IREE's inner_tiled ops and LLVM microkernels (IREE 3.13 fails on some models)",
            (
                Choice("off"),
                Choice("on", iree_flags=("--iree-llvmcpu-enable-inner-tiled=true", "--iree-llvmcpu-enable-llvm-ukernels=inner_tiled")),
            ),
        ),
        Knob(
            "channels-last",
            "IREE's NCHW convolutions computed as NHWC (kiln's default where there are convolutions)",
            (Choice("on"), Choice("off", iree_flags=("--iree-preprocessing-pass-pipeline=builtin.module()",))),
        ),
        _flag("ukernels", "IREE's hand-written microkernels (mmt4d, ...)", "--iree-llvmcpu-enable-ukernels", "default", "all", "none"),
        _flag(
            "split-for-threads",
            "IREE's own dispatches split for this many runtime threads, into at most twice as many workgroups "
            "(16-core Xeon: 32 took decoders at 512 tokens 0.68-0.73x and ConvNeXt-T at batch 32 0.90x, "
            "BERT-base and EfficientNet-B0 at batch 1 1.28x and 1.18x)",
            "--iree-llvmcpu-number-of-threads",
            "8",
            "32",
        ),
        Knob(
            "pad-fusion",
            "a convolution's zero padding computed in its consumer's (or producer's) dispatch, not in a buffer "
            "zero-filled outside any dispatch (MobileNet's block 74 -> 62 ms on the 16-core host; a ConvNet 25 -> 27)",
            (
                Choice("off"),
                Choice("consumer", iree_flags=("--iree-dispatch-creation-enable-fuse-padding-into-linalg-consumer-ops",)),
                Choice("producer", iree_flags=("--iree-dispatch-creation-enable-fuse-padding-into-linalg-producer-ops",)),
            ),
        ),
        Knob(
            "kernels",
            "kiln's own CPU kernels: convolutions and matmuls (bf16 on AMX or AVX512-BF16, f32 on AVX-512F), "
            "softmax and layer norms (kiln_rows.c, or row programs with the op before them); or IREE's code for all",
            (Choice("on"), Choice("off", options=(("kernels", "off"),))),
        ),
        Knob(
            "cpu-attention",
            "bf16 models: attention's matmuls on kiln's kernel with operands in bf16, as eager PyTorch "
            "computes them, or in f32 (kiln's linalg, IREE's code)",
            (Choice("bf16"), Choice("f32", options=(("cpu_attention", "f32"),))),
        ),
        Knob(
            "driver",
            "IREE's runtime driver: the faster per input signature, timed by the runtime (auto), the thread pool, or the caller's thread",
            (Choice("auto"), Choice("local-task", options=(("cpu_driver", "local-task"),)), Choice("local-sync", options=(("cpu_driver", "local-sync"),))),
        ),
    )


def _llvm_gpu(target: str) -> tuple[Knob, ...]:
    """IREE's LLVMGPU codegen knobs (cuda and rocm). On sm_80 its defaults are all on; where a pipeline
    does not apply (f32 matmuls have no tensor-core path) turning it off changes nothing."""
    prefix = "--iree-codegen-llvmgpu-use"
    return (
        *_common(target),
        _flag("vector-distribution", "the vector distribution pipeline for matmuls and attention", f"{prefix}-vector-distribution", "on", "off=false"),
        _flag("tile-and-fuse-matmul", "the tile-and-fuse pipeline for matmuls", f"{prefix}-tile-and-fuse-matmul", "on", "off=false"),
        _flag("igemm", "convolutions as implicit GEMMs", f"{prefix}-igemm", "on", "off=false"),
        _flag(
            "reduction-vector-distribution",
            "the vector distribution pipeline for reductions (softmax, norms)",
            f"{prefix}-reduction-vector-distribution",
            "on",
            "off=false",
        ),
        _flag(
            "horizontal-fusion",
            "contractions sharing an operand (q, k, v projections) fused into one dispatch",
            "--iree-dispatch-creation-enable-fuse-horizontal-contractions",
            "off",
            "on=true",
        ),
    )


def _cuda() -> tuple[Knob, ...]:
    kernels = Knob(
        "kernels",
        "kiln's own kernels on Hopper (sm_90a; targets/cuda/kernels/): matmuls, convolutions, depthwise convolutions, "
        "max pooling, attention, and row programs (layer norms and softmax with the ops around them, long "
        "elementwise chains); or IREE's code for all",
        (Choice("on"), Choice("off", options=(("kernels", "off"),))),
    )
    return (*_llvm_gpu("cuda"), kernels)


SPACES: dict[str, Space] = {
    "llvm-cpu": _llvm_cpu(),
    "cuda": _cuda(),
    "rocm": _llvm_gpu("rocm"),
    "vulkan-spirv": _common("vulkan-spirv"),
}
assert set(SPACES) == set(TARGETS), "every target needs a search space"


def space_for(target: str, knobs: tuple[str, ...] = ()) -> Space:
    """The target's space, or only the named knobs of it (in the space's order)."""
    space = SPACES[get_target(target).name]
    unknown = [name for name in knobs if name not in {knob.name for knob in space}]
    if unknown:
        raise KilnError(
            f"unknown knob(s) for {target}: {', '.join(unknown)}; knobs: {', '.join(knob.name for knob in space)}",
            stage=STAGE,
        )
    return tuple(knob for knob in space if not knobs or knob.name in knobs)


def describe(assignment: Assignment) -> str:
    """A candidate's name: "default", or "knob=label, knob=label"."""
    return ", ".join(f"{name}={label}" for name, label in assignment.items()) or "default"


def assign(space: Space, assignment: Assignment, knob: Knob, label: str) -> dict[str, str]:
    """`assignment` with `knob` set to `label` (dropped when that is its default), in the space's order."""
    moved = {**assignment, knob.name: label}
    return {k.name: moved[k.name] for k in space if k.name in moved and moved[k.name] != k.default}


def settings_of(space: Space, assignment: Assignment) -> TunedSettings:
    options: dict[str, str] = {}
    flags: list[str] = []
    for knob in space:
        if knob.name in assignment:
            choice = knob.choice(assignment[knob.name])
            options.update(choice.options)
            flags.extend(choice.iree_flags)
    return TunedSettings(dict(assignment), options, tuple(flags))


def apply_settings(options: CompileOptions, settings: TunedSettings) -> CompileOptions:
    """`options` with the tuned fields set and the tuned flags first (a user's own --iree-flag comes later)."""
    unknown = set(settings.options) - set(OPTION_FIELDS)
    if unknown:
        raise KilnError(f"tuned settings name unknown compile options: {', '.join(sorted(unknown))}", stage=STAGE)
    fields: dict[str, object] = dict(settings.options)
    if "pipeline" in fields:
        fields["pipeline"] = parse_pipeline(settings.options["pipeline"])
    return replace(options, **fields, extra_iree_flags=(*settings.iree_flags, *options.extra_iree_flags))  # type: ignore[arg-type]
