"""kiln's pipelines as plain data: stages of named passes, and the `--pipeline` text form.

A pipeline is a tuple of pass groups; each group is one compiler stage (its name is the IR it
produces) and writes one dump. Reading these imports no pass: checking a pipeline's names and
levels (check_pipeline, parse_pipeline of a written-out pipeline) loads the registry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kiln.errors import KilnError

from .registry import STAGE, find_pass


@dataclass(frozen=True)
class PassGroup:
    name: str  # the stage name: the IR this group produces
    passes: tuple[str, ...]


@dataclass(frozen=True)
class PassPlacement:
    """Passes a target adds to the pipeline: into stage `stage`, right after its pass `after`. Where a
    pipeline lacks that stage or pass (a user's own `--pipeline`, torch-mlir's), nothing is added."""

    stage: str
    after: str
    passes: tuple[str, ...]


TORCH_BACKEND = (
    "torch-match-quantized-custom-ops",
    "torch-backend-contract",  # torch-mlir's decompositions: most composite ops end here
)

DEFAULT_PIPELINE: tuple[PassGroup, ...] = (
    PassGroup(
        "prims",
        (
            "check-static-shapes",  # before the backend contract, which never returns on x[mask]
            "fmod-scalar-to-tensor",  # before the backend contract, which decomposes fmod.Tensor only
            *TORCH_BACKEND,
            "fold-empty-tensors",  # first after the backend contract: lowerings divide by zero-size shapes
            "decompose-gelu",
            "decompose-sigmoid",
            "decompose-math",
            "decompose-vector-norm",
            "decompose-diagonal",  # before decompose-slice-scatter: diagonal_scatter becomes a slice_scatter
            "decompose-slice-scatter",
            "decompose-scatter-reduce",
            "decompose-unfold",
            "decompose-adaptive-pool",
            "decompose-pool-indices",
            "accumulate-in-f32",  # after the backend contract and the decompositions above, which make sums
            "expand-pow-int",
            "promote-int-clamp",
            "promote-uint8-arithmetic",
            "int-to-bf16-via-f32",  # IREE's llvm-cpu cannot link an int -> bf16 conversion stored as it is
            "split-negative-pad",
            "round-float-scalars",  # after the decompositions above, which make float scalars too
            "check-index-inputs",  # after them too: it checks the gathers and scatters they leave
            "check-primitives",  # last: lists what is left outside the primitive set, fails for what nothing lowers
        ),
    ),
    PassGroup(
        "simplified",
        (
            "fold-sin-cos",  # matches pow(s, 2) and s * s alike, so it could go anywhere here
            "fold-sub-self",
            "canonicalize",  # torch-mlir's folds, e.g. `to.dtype` of a literal made above, for the folds below
            "fold-mul-one",
            "fold-add-zero",
            "fold-neg-neg",
            "fold-relu-relu",
            "fold-transpose-chain",
            "fold-reshape-chain",
            "fold-pad-into-conv",
            "fold-splat-operand",
            "rotary-as-gather",
            "expand-pow-small",
            "cse",  # the target rooms place their passes on the simplified IR after this
        ),
    ),
    PassGroup(
        "linalg",
        (
            "torch-to-linalg",
            "fold-truncf-constants",  # float scalars truncated on the host, which llvm-cpu cannot compile with f64 kept
        ),
    ),
    PassGroup(
        "fused",
        (
            "canonicalize",  # first: duplicate operands and dead ops would otherwise show up as fusions
            "cse",
            "fuse-elementwise",
        ),
    ),
)

# torch-mlir's lowering alone, without kiln's passes: what kiln did before it had its own, and the
# baseline that benchmarks/passes_effect.py measures them against.
TORCH_MLIR_PIPELINE: tuple[PassGroup, ...] = (
    PassGroup("prims", TORCH_BACKEND),
    PassGroup("linalg", ("torch-to-linalg",)),
)

PIPELINES: dict[str, tuple[PassGroup, ...]] = {
    "default": DEFAULT_PIPELINE,
    "torch-mlir": TORCH_MLIR_PIPELINE,
}


def pipeline_text(pipeline: tuple[PassGroup, ...]) -> str:
    """The pipeline as `--pipeline` takes it: `stage(pass,pass),stage(pass)`."""
    return ",".join(f"{group.name}({','.join(group.passes)})" for group in pipeline)


_GROUP = re.compile(r"\s*([\w-]+)\s*\(([^()]*)\)\s*")


def parse_pipeline(text: str) -> tuple[PassGroup, ...]:
    """A named pipeline (`default`, `torch-mlir`) or one written out as `stage(pass,pass),stage(...)`."""
    if text in PIPELINES:
        return PIPELINES[text]
    groups, position = [], 0
    while position < len(text):
        match = _GROUP.match(text, position)
        if match is None:
            raise KilnError(
                f"cannot read --pipeline at character {position + 1}: {text[position:position + 30]!r}",
                stage=STAGE,
                hint=f"write stage(pass,pass),stage(pass), or name one of: {', '.join(PIPELINES)}",
            )
        name, passes = match.groups()
        groups.append(PassGroup(name, tuple(p.strip() for p in passes.split(",") if p.strip())))
        position = match.end()
        if position < len(text) and text[position] == ",":
            position += 1
    pipeline = tuple(groups)
    check_pipeline(pipeline)
    return pipeline


def check_pipeline(pipeline: tuple[PassGroup, ...], level: str | None = "torch") -> None:
    """Every pass is known, and each runs on the level of IR the passes before it leave.

    `level` is the input's (a model starts as torch IR); None: whatever the first pass expects.
    """
    for group in pipeline:
        for name in group.passes:
            pass_ = find_pass(name)
            if level is None and pass_.level != "any":
                level = pass_.level
            if pass_.level not in ("any", level):
                raise KilnError(
                    f"pass '{name}' in stage '{group.name}' works on {pass_.level} IR, but the IR is {level} there",
                    stage=STAGE,
                    hint="`kiln passes` lists each pass's level; torch-to-linalg lowers torch IR to linalg",
                )
            level = pass_.lowers_to or level


def with_strict_primitives(pipeline: tuple[PassGroup, ...]) -> tuple[PassGroup, ...]:
    """`pipeline` with require-primitives in check-primitives' place (`--strict-primitives`): any op
    left outside the primitive set then fails the compile, even one torch-mlir's lowering takes."""
    return tuple(
        PassGroup(group.name, tuple("require-primitives" if p == "check-primitives" else p for p in group.passes))
        for group in pipeline
    )


def with_placements(pipeline: tuple[PassGroup, ...], placements: tuple[PassPlacement, ...]) -> tuple[PassGroup, ...]:
    """`pipeline` with a target's passes placed in it (PassPlacement); a placement whose stage or
    anchor the pipeline lacks adds nothing, and a pass the pipeline names already (a `--pipeline`
    written out with the target's passes) is not added again."""
    groups = list(pipeline)
    for placement in placements:
        listed = {name for group in groups for name in group.passes}
        passes = tuple(name for name in placement.passes if name not in listed)
        for index, group in enumerate(groups):
            if group.name == placement.stage and placement.after in group.passes:
                at = group.passes.index(placement.after) + 1
                groups[index] = PassGroup(group.name, (*group.passes[:at], *passes, *group.passes[at:]))
                break
    return tuple(groups)


def without_passes(pipeline: tuple[PassGroup, ...], names: tuple[str, ...]) -> tuple[PassGroup, ...]:
    """`pipeline` with the passes `names` removed from every group (`--disable-pass`)."""
    present = {name for group in pipeline for name in group.passes}
    for name in names:
        if name not in present:
            find_pass(name)  # an unknown name is the error to give
            raise KilnError(f"pass '{name}' is not in the pipeline, so it cannot be disabled", stage=STAGE)
    return tuple(PassGroup(group.name, tuple(p for p in group.passes if p not in names)) for group in pipeline)

