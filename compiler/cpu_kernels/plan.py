"""The backend's use of the kernel: rewrite the hand-off, build the object, make it a lever.

The rewritten text is a lever (compiler/levers.py) like IREE's flags: should iree-compile fail with
it, the backend compiles the hand-off as it was. Where no bf16 contraction matched, or the object
cannot be built here, there is no lever; a failed build is a note for the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..levers import Lever
from .build import Unavailable, kernel_objects
from .features import KernelIsa
from .mlir import object_search_flag
from .rewrite import Substitution, substitute

LEVER = "kernels"


@dataclass(frozen=True)
class Plan:
    substitution: Substitution | None  # None: the kernel does not apply to this compile
    lever: Lever | None  # the rewritten text and the object's flag; None where nothing is rewritten
    isa: KernelIsa | None
    note: str | None = None  # why kiln's kernel is left out although contractions matched

    @property
    def features(self) -> tuple[str, ...]:
        """The CPU features an artifact with the rewritten text needs."""
        if self.substitution is None or self.isa is None:
            return ()
        return self.substitution.features(self.isa)

    def write(self, stem: Path) -> None:
        """The backend stage's side dumps: `<stem>.kernels.md`, what computes each contraction, and
        `<stem>.iree-input.mlir`, the text iree-compile gets with the kernel."""
        if self.substitution is None or not self.substitution.decisions:
            return
        stem.with_name(f"{stem.name}.kernels.md").write_text(self.substitution.report())
        if self.lever is not None:
            stem.with_name(f"{stem.name}.iree-input.mlir").write_text(self.substitution.text)


def plan(text: str, isa: KernelIsa | None, attention: bool) -> Plan:
    """What kiln's CPU kernel takes in `text` (kiln's linalg hand-off) for a CPU with `isa`."""
    if isa is None:
        return Plan(None, None, None)
    substitution = substitute(text, isa, attention)
    if not substitution.taken:
        return Plan(substitution, None, isa)
    try:
        folder = kernel_objects()
    except Unavailable as why:
        note = f"note: kiln's CPU kernel is left out ({why}); IREE's code computes all {substitution.taken} contractions it matched"
        return Plan(substitution, None, isa, note)
    return Plan(substitution, Lever(LEVER, ((object_search_flag(str(folder)),),), text=substitution.text), isa)
