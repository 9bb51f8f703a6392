"""The one place kiln touches MLIR's pass-manager and rewrite APIs.

Those Python bindings have changed shape between releases; everything else in kiln talks to
`Pass`, `run_pass` and `apply_patterns`, so an upgrade touches this file alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

Level = Literal["torch", "linalg"]

# A rewrite-pattern function returns a truthy value to say "this op does not match".
NO_MATCH = True


@dataclass(frozen=True)
class Pass:
    """A named transformation of a module: ours (`run`) or upstream MLIR's (`pipeline`)."""

    name: str
    summary: str
    level: Level  # the dialect level the pass expects its input at
    run: Callable[[ir.Operation, Any], None] | None = None
    pipeline: str | None = None  # textual pipeline element, for upstream passes

    @property
    def upstream(self) -> bool:
        return self.pipeline is not None


@dataclass(frozen=True)
class Diagnostic:
    location: str
    message: str


class PassFailure(Exception):
    """A pass rejected the module; carries MLIR's diagnostics and the op they name."""

    def __init__(self, pass_name: str, diagnostics: list[Diagnostic]) -> None:
        self.pass_name = pass_name
        self.diagnostics = diagnostics
        super().__init__(diagnostics[0].message if diagnostics else f"pass {pass_name} failed")

    @property
    def op_name(self) -> str | None:
        """The op the diagnostics name, e.g. `torch.aten.median`."""
        for pattern in _OP_NAMES:
            for diagnostic in self.diagnostics:
                match = pattern.search(diagnostic.message)
                if match:
                    return match.group(1)
        return None


# Most specific first: `torch.operator` wrapping an op torch-mlir has no definition of names the
# real op in its `name` attribute; otherwise MLIR's "operation 'x'" / "'x' op" forms.
_OP_NAMES = (
    re.compile(r'name = "([\w.]+)"'),
    re.compile(r"operation '([\w.]+)'"),
    re.compile(r"'([\w.]+)' op"),
)


def run_pass(module: ir.Module, pass_: Pass) -> None:
    """Run one pass on `module` in place; raise PassFailure with MLIR's diagnostics if it fails."""
    with module.context:
        manager = PassManager("builtin.module")
        if pass_.pipeline is not None:
            manager.add(pass_.pipeline)
        else:
            assert pass_.run is not None
            manager.add(pass_.run, name=pass_.name, argument=pass_.name, description=pass_.summary)
        try:
            manager.run(module.operation)
        except ir.MLIRError as exc:
            raise PassFailure(pass_.name, _diagnostics(exc)) from exc


def apply_patterns(op: ir.Operation, patterns: dict[str, Callable[..., Any]]) -> None:
    """Apply rewrite patterns (op name -> function(op, rewriter)) greedily until a fixpoint."""
    from torch_mlir.rewrite import RewritePatternSet, apply_patterns_and_fold_greedily

    pattern_set = RewritePatternSet(op.context)
    for op_name, function in patterns.items():
        pattern_set.add(op_name, function)
    apply_patterns_and_fold_greedily(op, pattern_set.freeze())


def _diagnostics(exc: ir.MLIRError) -> list[Diagnostic]:
    found = []
    for info in exc.error_diagnostics:
        found.append(Diagnostic(str(info.location), info.message))
        found.extend(Diagnostic(str(note.location), note.message) for note in info.notes)
    return found
