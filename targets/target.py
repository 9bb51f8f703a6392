"""What the driver asks of a target: the interface every room implements, and nothing else.

A room (`targets/<name>/`) holds one target's whole story: its `Target` (IREE device, flags,
defaults), the passes only it wants, and its kernels. The driver reads a `Target` and the
`ResolvedTarget` made from it once per compile; it never names a target and never imports a room.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kiln.passes import PassPlacement

from .levers import Lever

if TYPE_CHECKING:
    from kiln.compiler.options import CompileOptions

    from .gpu import ArchChoice, GpuArchs


class KernelPlan(Protocol):
    """What a target's kernels compute in one hand-off to iree-compile, and how they enter it."""

    @property
    def lever(self) -> Lever | None:
        """The kernels as a lever (levers.py), left out should iree-compile fail with them; None where
        `splice` is the whole change, or nothing changes."""
        ...

    @property
    def splices(self) -> bool:
        """Whether `splice` changes the text, so that iree-compile's input needs a dump of its own."""
        ...

    @property
    def features(self) -> tuple[str, ...]:
        """The CPU features an artifact built with the kernels needs (the manifest's `cpu_features`)."""
        ...

    def splice(self, text: str) -> str:
        """The printed module with the kernels put in."""
        ...

    def notes(self) -> tuple[str, ...]:
        """One `note:` line per thing the user should know (a kernel that could not be made)."""
        ...

    def records(self) -> tuple[dict[str, Any], ...]:
        """The manifest's `kernels`: what computes each contraction the kernels were offered."""
        ...

    def write(self, stem: Path) -> None:
        """The vmfb stage's side dumps (`<stem>.kernels.md`, and what else the kernels keep)."""
        ...


class KernelProvider(Protocol):
    """A target's kernels for one compile, with its choices made (precision, ISA)."""

    def plan(self, module: Any, text: str) -> KernelPlan:
        """What the kernels take in the hand-off: `module` (the torch-mlir module) and `text`, its print."""
        ...

    def takes_attention(self, query: tuple[int, ...], key: tuple[int, ...], value: tuple[int, ...],
                        dtype: str, plain: bool, mask: tuple[tuple[int, ...], str] | None) -> bool:  # fmt: skip
        """Whether a kernel computes this scaled_dot_product_attention whole (the importer then keeps it
        whole, in any dtype)."""
        ...


@dataclass(frozen=True)
class Choices:
    """What a room decides for one compile, beside the generic choices of resolve.py."""

    details: dict[str, str] = field(default_factory=dict)  # added to the manifest's target details
    attributes: dict[str, str] = field(default_factory=dict)  # string attributes on the module
    kernels: KernelProvider | None = None
    passes: tuple[PassPlacement, ...] = ()
    driver: str | None = None  # the runtime driver, where not the target's own


@dataclass(frozen=True)
class Target:
    name: str
    summary: str
    driver: str  # IREE runtime driver that loads artifacts for this target
    flags: Callable[[CompileOptions, ArchChoice | None], list[str]]
    details: Callable[[CompileOptions, ArchChoice | None], dict[str, str]]  # recorded in the manifest
    # The room's own choices for a compile (kernels, passes, their details), from the options, the
    # architecture and the hand-off; called once, by resolve().
    choose: Callable[[CompileOptions, ArchChoice | None, str], Choices]
    archs: GpuArchs | None = None  # GPU targets only
    # The default hand-off point (HANDOFFS in resolve.py).
    handoff: str = "linalg"
    # At the torch hand-off: the query dtypes whose scaled_dot_product_attention stays whole for IREE's
    # fused attention; attention of other dtypes is decomposed (matmuls and a softmax). None: every dtype.
    fused_attention_dtypes: tuple[str, ...] | None = None
    # Dtypes the compiled functions take and return as another one, converted by the runtime at the
    # boundary and recorded in the manifest (`carried_as`). IREE demotes float64 to float32 unless told
    # otherwise; llvm-cpu keeps float64, the GPU targets take IREE's default.
    carried_dtypes: dict[str, str] = field(default_factory=lambda: {"float64": "float32"})
    # Defaults beyond IREE's own that the backend drops where IREE fails with them (levers.py).
    levers: tuple[Lever, ...] = ()
    # Entry functions whose largest intermediate tensor has at least this many bytes get a variant
    # whose intermediates live in storage the runtime maps once (compiler/transients.py; None: none
    # do); left out, like a lever, should iree-compile fail with them. Each variant is the body
    # compiled once more by iree-compile.
    transient_variants: int | None = None
    # Whether entry functions get `<name>$out` variants that write results into tensors the caller
    # allocates (compiler/out_variants.py): only where the runtime's boundary has the caller allocate
    # results (runtime/boundary.py: CUDA). IREE inlines every variant's call, so each one compiles the
    # whole body again: tiny MobileNetV2 on llvm-cpu took 10 s of iree-compile CPU with `main` alone,
    # 20 s with the transient variant beside it, 25 s with an out variant too (issue 33).
    out_variants: bool = False


@dataclass(frozen=True)
class ResolvedTarget:
    """A compile's target with every choice made once, before any stage runs; later code reads these
    values and never derives them again. The manifest records `details`."""

    target: Target
    arch: ArchChoice | None  # GPU targets: the architecture compiled for, and why that one
    handoff: str  # HANDOFFS
    params: str  # WEIGHT_POLICIES: inline in the .vmfb, external in an .irpa beside it, or auto (by size, at import)
    iree_flags: tuple[str, ...]  # everything iree-compile is given, but for the levers' flags
    details: dict[str, str]
    # String attributes set on the module before kiln's passes run (`kiln.target`, `kiln.handoff`, and a
    # room's, e.g. cuda's contraction precisions): a record in every dump of what the compile chose.
    module_attributes: dict[str, str]
    device_targets: str | None  # the module's `hal.device.targets` for iree-compile, where a flag cannot say it
    driver: str  # the runtime driver the manifest names
    kernels: KernelProvider | None = None  # the target's kernels, where they apply to this compile
    passes: tuple[PassPlacement, ...] = ()  # the target's passes, placed in the pipeline
    levers: tuple[Lever, ...] = ()  # the target's levers (those the module has ops for apply)
    user_flags: int = 0  # how many of `iree_flags` (the last ones) the user gave: levers go before them

    def flags_with(self, lever_flags: tuple[str, ...]) -> tuple[str, ...]:
        """Every flag for iree-compile: kiln's, then the levers', then the user's (which override both)."""
        split = len(self.iree_flags) - self.user_flags
        return (*self.iree_flags[:split], *lever_flags, *self.iree_flags[split:])

    def external_weights(self, weight_bytes: int) -> bool:
        """Whether a model with `weight_bytes` of weights keeps them in an .irpa."""
        return self.params == "external" or (self.params == "auto" and weight_bytes > AUTO_EXTERNAL_BYTES)

    @property
    def note(self) -> str | None:
        """One line for the user when the architecture is not simply what they asked for."""
        return self.arch.note if self.arch is not None else None


WEIGHT_POLICIES = ("auto", "inline", "external")
AUTO_EXTERNAL_BYTES = 256 * 1024 * 1024  # `auto` keeps weights external above this
