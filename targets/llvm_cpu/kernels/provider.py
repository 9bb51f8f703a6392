"""The backend's use of kiln's CPU kernels: rewrite the hand-off, build the objects, make it a lever.

The rewritten text is a lever (targets/levers.py) like IREE's flags: should iree-compile fail with
it, the backend compiles the hand-off as it was. Where no contraction matched, or the objects
cannot be built here, there is no lever; a failed build is a note for the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...levers import Lever
from .build import Unavailable, kernel_objects
from .features import KernelIsa
from .mlir import object_search_flag

if TYPE_CHECKING:
    from .handoff import Substitution

LEVER = "kernels"


@dataclass(frozen=True)
class Plan:
    """One hand-off's KernelPlan (targets/target.py): the rewritten text as a lever, not a splice."""

    substitution: Substitution
    lever: Lever | None  # the rewritten text and the objects' flag; None where nothing is rewritten
    isa: KernelIsa
    note: str | None = None  # why kiln's kernels are left out although contractions matched
    splices = False

    @property
    def features(self) -> tuple[str, ...]:
        """The CPU features an artifact with the rewritten text needs."""
        return self.substitution.features(self.isa) if self.lever is not None else ()

    def splice(self, text: str) -> str:
        return text  # the rewrite goes in as the lever's text, so that iree-compile can do without it

    def notes(self) -> tuple[str, ...]:
        return (self.note,) if self.note is not None else ()

    def records(self) -> tuple[dict[str, Any], ...]:
        return self.substitution.records() if self.lever is not None else ()

    def write(self, stem: Path) -> None:
        """The backend stage's side dumps: `<stem>.kernels.md`, what computes each contraction, and
        `<stem>.iree-input.mlir`, the text iree-compile gets with the kernels."""
        if not self.substitution.decisions:
            return
        stem.with_name(f"{stem.name}.kernels.md").write_text(self.substitution.report())
        if self.lever is not None:
            stem.with_name(f"{stem.name}.iree-input.mlir").write_text(self.substitution.text)


@dataclass(frozen=True)
class CpuKernels:
    """kiln's CPU kernels for a CPU with `isa`; `attention`: attention's matmuls take them with their
    operands rounded to bf16 (--cpu-attention bf16)."""

    isa: KernelIsa
    attention: bool

    def plan(self, module: Any, text: str) -> Plan:
        """What the kernels take in `text` (kiln's linalg hand-off)."""
        from .rewrite import substitute  # IREE's MLIR bindings: only when a compile gets here

        substitution = substitute(text, self.isa, self.attention)
        if not substitution.taken:
            return Plan(substitution, None, self.isa)
        try:
            folder = kernel_objects()
        except Unavailable as why:
            note = f"note: kiln's CPU kernel is left out ({why}); IREE's code computes all {substitution.taken} contractions it matched"
            return Plan(substitution, None, self.isa, note)
        return Plan(substitution, Lever(LEVER, ((object_search_flag(str(folder)),),), text=substitution.text), self.isa)

    def takes_attention(self, query: tuple[int, ...], key: tuple[int, ...], value: tuple[int, ...],
                        dtype: str, plain: bool, mask: tuple[tuple[int, ...], str] | None) -> bool:  # fmt: skip
        return False  # the CPU kernels work on the linalg hand-off, where attention is decomposed
