"""Defaults that make IREE's code faster but that IREE may fail to compile: the backend drops them then.

A lever is one of a target's defaults beyond IREE's own (the llvm-cpu room's: data tiling,
channels-last convolutions, kiln's CPU kernels; benchmarks/NOTES.md says what each gained on the
16-core host), or one every target keeps: kiln's run-time checks, and IREE's constant evaluation
left off (it makes compiles faster, not code). IREE 3.13
fails to compile some models with some of them (data tiling on a GPT-2 block's layer norm, for one),
and kiln is never worse than the stack beneath it: where the compile with every lever fails, the
backend compiles without them, and if that works, tries each lever's fallbacks alone to keep what it
can, and tells the user which lever was dropped and why. Where IREE fails without any lever too,
that error is the one the user sees.

A lever's flags go after kiln's target flags and before the user's own `--iree-flag`s, so a user
(or `kiln tune`) overrides a lever by naming the same IREE option: the last occurrence wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kiln.errors import KilnError


@dataclass(frozen=True)
class Lever:
    """One default: its name, its flag sets (preferred first, each a fallback of the one before), what
    the hand-off must hold for it to apply, and the text iree-compile gets instead of the hand-off's
    while it is on (kiln's kernels), if any."""

    name: str
    choices: tuple[tuple[str, ...], ...]
    needs: str | None = None  # a regular expression the hand-off text must match (e.g. a convolution op)
    text: str | None = None

    def applies_to(self, text: str) -> bool:
        return self.needs is None or re.search(self.needs, _ops_of(text)) is not None

    def describe(self, choice: int) -> str:
        return " ".join(self.choices[choice]) or self.name


def _ops_of(text: str) -> str:
    """A printed module without the resource blobs MLIR prints after its ops (`{-# dialect_resources ...`):
    inline weights, in hex, are most of a large model's text, and searching them for an op took 1 s a
    lever (ViT-B/16 in bf16, 172 MB of weights)."""
    end = text.find("\n{-#")
    return text if end < 0 else text[:end]


# The lever settings of one compile: each lever's choice index, or None where it is left out.
# IREE drops assertions from O1 up; kiln's are the run-time checks of inputs that would otherwise
# read or write out of bounds (passes/check_index_inputs.py). Only where the module has some: kept
# assertions make IREE 3.13's CUDA codegen fail on some depthwise convolutions (EfficientNet,
# MobileViT, CoAtNet), and as a lever they are dropped, with a note, where iree-compile fails.
KEEP_ASSERTIONS = Lever(
    "assertions",
    (("--iree-opt-strip-assertions=false",),),
    needs=r"torch\.runtime\.assert|cf\.assert",
)

# IREE evaluates expressions of constants while compiling (const-eval: it compiles them for the CPU
# and runs them there), which took 50-70% of iree-compile's time on convolutional models (ResNet-50
# bf16 on cuda 28.9 -> 10.7 s, EfficientNet-B0 37.6 -> 12.8 s; benchmarks/NOTES.md, "Compile time")
# and gains nothing per call: the expressions are hoisted into globals either way, and without it
# they run once, when the artifact is loaded. Weights in an .irpa were never evaluated (IREE cannot
# read them while compiling). Every target's first lever (targets/resolve.py), so that where IREE 3.13
# fails with the levers, turning const-eval back on is tried before any lever that makes code faster:
# it crashes without it on a matmul over an empty K (whose zero result const-eval folds), and on
# llvm-cpu with data tiling on SigLIP's pooling head (a constant-only matmul in the load initializer).
NO_CONST_EVAL = Lever("no-const-eval", (("--iree-opt-const-eval=false",),))

Setting = tuple[int | None, ...]
Compile = Callable[[str, tuple[str, ...]], bytes]  # (input text, lever flags) -> .vmfb, or KilnError


@dataclass(frozen=True)
class Outcome:
    vmfb: bytes
    setting: Setting
    notes: tuple[str, ...]

    def used(self, levers: tuple[Lever, ...]) -> tuple[tuple[Lever, int], ...]:
        return tuple((lever, choice) for lever, choice in zip(levers, self.setting, strict=True) if choice is not None)


def compile_with_levers(text: str, levers: tuple[Lever, ...], compile_one: Compile) -> Outcome:
    """Compile `text` with every lever on; where that fails, as described in the module docstring."""
    everything: Setting = tuple(0 for _ in levers)
    try:
        return Outcome(_attempt(text, levers, everything, compile_one), everything, ())
    except KilnError as failure:
        if not levers:
            raise
        first = failure
    nothing: Setting = tuple(None for _ in levers)
    bare = _attempt(text, levers, nothing, compile_one)  # IREE's own failure, if any, is the user's error
    tried = False
    for setting, lever, choice in _one_lever_fallbacks(levers):
        tried = True
        try:
            vmfb = _attempt(text, levers, setting, compile_one)
        except KilnError:
            continue
        instead = f"compiled with {lever.describe(choice)} instead" if choice is not None else "compiled without it"
        return Outcome(vmfb, setting, (f"note: iree-compile failed with kiln's {lever.name} default ({first.message}); {instead}",))
    if tried:
        # Again, so that the stage's dumps are this compile's (the vmfb stage keeps each compile that
        # worked, its artifact and phase dumps, and runs iree-compile only once for it).
        bare = _attempt(text, levers, nothing, compile_one)
    names = ", ".join(lever.name for lever in levers)
    return Outcome(bare, nothing, (f"note: iree-compile failed with kiln's {names} default(s) ({first.message}); compiled without them",))


def _one_lever_fallbacks(levers: tuple[Lever, ...]) -> list[tuple[Setting, Lever, int | None]]:
    """The settings that change one lever from the preferred one (to a fallback, then to off), other than
    every lever off, which has been tried already."""
    settings = []
    for index, lever in enumerate(levers):
        for choice in (*range(1, len(lever.choices)), None):
            setting = tuple(choice if i == index else 0 for i in range(len(levers)))
            if any(c is not None for c in setting):
                settings.append((setting, lever, choice))
    return settings


def _attempt(text: str, levers: tuple[Lever, ...], setting: Setting, compile_one: Compile) -> bytes:
    source, flags = text, []
    for lever, choice in zip(levers, setting, strict=True):
        if choice is None:
            continue
        flags += lever.choices[choice]
        source = lever.text if lever.text is not None else source
    return compile_one(source, tuple(flags))
