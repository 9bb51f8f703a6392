"""The backend's half of kiln's kernels: generate a kernel for each outlined contraction, splice it in.

outline-contractions leaves each contraction it takes in a private function with a `kiln.contraction`
description and a torch-op body (IREE's own code, should nothing replace it). Here, just before
iree-compile, each such function whose contraction gets a kernel (tiles.choose) is compiled with
Triton (through the cache) and its text replaced by the kernel's executable and a body that
dispatches it. Whatever cannot get a kernel keeps its body, with a reason: a note for the user when
something failed, a line of the report when IREE's code was chosen on purpose.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch_mlir import ir

from .build import Kernel, Unsupported
from .cache import cached_kernel, warm
from .contract import ATTRIBUTE  # what outline-contractions puts on each function
from .contraction import (
    Attention,
    CacheWrite,
    Contraction,
    Conv2d,
    Matmul,
    MaxPool2d,
    RotaryCacheWrite,
    RowProgram,
    from_description,
)
from .embed import Signature, executable, function
from .tiles import Choice, Tiles, choose


@dataclass(frozen=True)
class Outlined:
    """A function outline-contractions made: its name, contraction (as it receives it), types, call count."""

    name: str
    contraction: Contraction
    signature: Signature
    calls: int


@dataclass(frozen=True)
class Decision:
    """What computes one outlined contraction: a kiln kernel, or IREE's code and why."""

    outlined: Outlined
    kernel: Kernel | None
    why: str
    failed: bool = False  # IREE's code because a kernel could not be made (the user gets a note)

    def record(self) -> dict[str, Any]:
        """The manifest's entry for it."""
        record: dict[str, Any] = {
            "function": self.outlined.name,
            "contraction": self.outlined.contraction.label,
            "calls": self.outlined.calls,
            "code": "kiln" if self.kernel is not None else "iree",
            "why": self.why,
        }
        if self.kernel is not None:
            record.update(
                kernel=self.kernel.entry,
                tiles=self.kernel.tiles.label,
                layout=_layout(self.kernel.contraction),
                precision=_precision(self.kernel.contraction),
                shared_bytes=self.kernel.shared_bytes,
                grid=list(self.kernel.grid),
            )
        return record


def _layout(contraction: Contraction) -> str:
    if isinstance(contraction, RowProgram):
        return "rows"
    if isinstance(contraction, CacheWrite | RotaryCacheWrite):
        return "bhsd"
    return contraction.b_layout if isinstance(contraction, Matmul) else contraction.layout


def _precision(contraction: Contraction) -> str:
    if contraction.precision:
        return contraction.precision
    if isinstance(contraction, MaxPool2d | CacheWrite):
        return "exact"
    if isinstance(contraction, RowProgram | RotaryCacheWrite):
        return "f32 arithmetic, each step rounded to its dtype"
    return f"{contraction.dtype}, f32 accumulation"


@dataclass(frozen=True)
class Substitution:
    """What computes each outlined contraction of a module, and how to put the kernels into its text."""

    decisions: tuple[Decision, ...]
    lever = None  # spliced in always (KernelPlan, targets/target.py)
    features = ()  # a GPU artifact needs no particular CPU

    @property
    def splices(self) -> bool:
        return bool(self.decisions)

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        return tuple(decision.kernel for decision in self.decisions if decision.kernel is not None)

    def splice(self, text: str) -> str:
        """`text` (the printed module) with each function that has a kernel replaced by the kernel's
        executable and a body that dispatches it. The text is built once: with its weights inline it
        is hundreds of MB (BERT-base's 426), and a copy per kernel took 8 s of a 38 s compile."""
        spans = sorted(
            ((*_function_span(text, decision.outlined.name), decision) for decision in self.decisions if decision.kernel is not None),
            key=lambda span: span[0],
        )
        pieces, at = [], 0
        for start, end, decision in spans:
            pieces += [text[at:start], _definition(decision)]
            at = end
        pieces.append(text[at:])
        return "".join(pieces)

    def notes(self) -> tuple[str, ...]:
        """One `note:` per reason a kernel could not be made, naming the contractions it applies to."""
        by_reason: dict[str, list[str]] = {}
        for decision in self.decisions:
            if decision.failed:
                by_reason.setdefault(decision.why, []).append(decision.outlined.contraction.label)
        return tuple(
            f"note: IREE's own code computes {len(labels)} contraction(s) kiln has kernels for "
            f"({', '.join(labels[:4])}{', ...' if len(labels) > 4 else ''}): {why}"
            for why, labels in by_reason.items()
        )

    def records(self) -> tuple[dict[str, Any], ...]:
        return tuple(decision.record() for decision in self.decisions)

    def write(self, stem: Path) -> None:
        """The stage dump's side files: `<stem>.kernels.md`, a table of every outlined contraction and
        what computes it, and each kernel's PTX in `<stem>.kernels/`."""
        lines = [
            "| function | contraction | calls | code | kernel | tiles | layout | shared memory | grid | why |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for record in self.records():
            lines.append(
                f"| {record['function']} | {record['contraction']} | {record['calls']} | {record['code']} | "
                f"{record.get('kernel', '')} | {record.get('tiles', '')} | {record.get('layout', '')} | "
                f"{record.get('shared_bytes', '')} | {record.get('grid', '')} | {record['why']} |"
            )
        stem.with_name(f"{stem.name}.kernels.md").write_text("\n".join(lines) + "\n")
        folder = stem.with_name(f"{stem.name}.kernels")
        folder.mkdir(exist_ok=True)
        for kernel in self.kernels:
            (folder / f"{kernel.entry}.ptx").write_text(kernel.ptx)


def plan(
    module: ir.Module,
    chooser: Callable[[Contraction], Choice] = choose,
    make: Callable[[Contraction, Tiles], Kernel] = cached_kernel,
) -> Substitution:
    """Decide, for each function of `module` that outline-contractions made, a kernel (compiled now, or
    found in the cache) or IREE's code; `chooser` picks the configuration and `make` compiles it (both
    replaceable, for tests). The cache's kernels are compiled in parallel first (cache.warm)."""
    chosen = [(item, chooser(item.contraction)) for item in outlined_functions(module)]
    if make is cached_kernel:
        warm([(_target(item.contraction, choice), choice.tiles) for item, choice in chosen if choice.tiles is not None])
    return Substitution(tuple(_decide(item, choice, make) for item, choice in chosen))


def outlined_functions(module: ir.Module) -> list[Outlined]:
    """The functions of `module` that outline-contractions made, in module order."""
    calls: dict[str, int] = {}

    def count(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call":
            callee = op.attributes["callee"].value
            calls[callee] = calls.get(callee, 0) + 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(count)
    found = []
    for op in module.body.operations:
        if op.operation.name != "func.func" or ATTRIBUTE not in op.attributes:
            continue
        name = op.attributes["sym_name"].value
        signature = op.attributes["function_type"].value
        types = Signature(tuple(str(t) for t in signature.inputs), tuple(str(t) for t in signature.results))
        description = _python(op.attributes[ATTRIBUTE])
        found.append(Outlined(name, from_description(description), types, calls.get(name, 0)))
    return found


def _decide(item: Outlined, choice: Choice, make: Callable[[Contraction, Tiles], Kernel]) -> Decision:
    if choice.tiles is None:
        return Decision(item, None, choice.why)
    try:
        kernel = make(_target(item.contraction, choice), choice.tiles)
    except Unsupported as why:
        return Decision(item, None, str(why), failed=True)
    return Decision(item, kernel, choice.why)


def _target(contraction: Contraction, choice: Choice) -> Contraction:
    """The contraction in the layout the kernel reads."""
    if isinstance(contraction, Conv2d):  # a bias is the epilogue's first shift, or added outside
        bias = contraction.bias and contraction.fused
        return replace(contraction, layout=choice.layout, bias=bias, out_layout="nhwc" if choice.layout == "nchw" else "")
    if isinstance(contraction, MaxPool2d):
        return replace(contraction, layout=choice.layout)
    if isinstance(contraction, Attention | RowProgram | CacheWrite | RotaryCacheWrite):
        return contraction  # read as the outlined function receives it
    return replace(contraction, b_layout="nk")  # B[K, N] is transposed first: see embed.function


def _definition(decision: Decision) -> str:
    """What replaces the outlined function: the kernel's executable and a function dispatching it."""
    kernel, item = decision.kernel, decision.outlined
    assert kernel is not None
    return executable(kernel, f"{item.name}_exe") + function(kernel, item.name, f"{item.name}_exe", item.signature, item.contraction)


def _function_span(text: str, name: str) -> tuple[int, int]:
    """Where the function `name` is in a printed module: from its `func.func` line to the line after its
    closing brace (module-level ops are indented by two spaces, everything inside them by more)."""
    header = re.search(rf"^  func\.func private @{re.escape(name)}\(.*$", text, re.MULTILINE)
    if header is None:
        raise ValueError(f"function @{name} not found in the module text")
    closing = re.compile(r"^  \}( loc\(.*\))?$", re.MULTILINE).search(text, header.end())
    if closing is None:
        raise ValueError(f"the end of function @{name} not found in the module text")
    return header.start(), closing.end() + 1


def _python(attribute: ir.Attribute) -> Any:
    """A `kiln.contraction` attribute's value as plain Python (dicts, lists, ints, bools, strings)."""
    if isinstance(attribute, ir.DictAttr):
        return {named.name: _python(named.attr) for named in attribute}
    if isinstance(attribute, ir.ArrayAttr):
        return [_python(item) for item in attribute]
    if isinstance(attribute, (ir.BoolAttr, ir.IntegerAttr, ir.FloatAttr, ir.StringAttr)):
        return attribute.value
    raise ValueError(f"unexpected attribute in {ATTRIBUTE}: {attribute}")
