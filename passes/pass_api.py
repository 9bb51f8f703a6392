"""The one place kiln touches MLIR's pass-manager and rewrite APIs.

Those Python bindings have changed shape between releases; everything else in kiln talks to
`Pass`, `pattern_pass`, `PassRun`, `Rewriter`, `run_pass`, `apply_patterns` and `parse_module`, so
an upgrade touches this file alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from torch_mlir import ir
from torch_mlir.dialects import torch as torch_dialect
from torch_mlir.passmanager import PassManager

Level = Literal["torch", "linalg", "any"]


@dataclass(frozen=True)
class Pass:
    """A named transformation of a module: ours (`run`) or upstream MLIR's (`pipeline`).

    `run(op, pass_run)` is called with the module's op and a `PassRun`.
    """

    name: str
    summary: str
    level: Level  # the dialect level the pass expects its input at
    run: Callable[[ir.Operation, PassRun], None] | None = None
    pipeline: str | None = None  # textual pipeline element, for upstream passes
    lowers_to: Level | None = None  # the level of its output, for a pass that lowers
    hint: str | None = None  # what a user can do when this pass rejects their model

    @property
    def upstream(self) -> bool:
        return self.pipeline is not None


@dataclass(frozen=True)
class PassRun:
    """What a Python pass may use besides the op: failing with a message, and writing side files."""

    name: str
    side_files: Path | None  # <dump_dir>/<index>-<stage>: side files are named `<that>.<suffix>`
    _external: Any  # the binding's ExternalPass

    def fail(self, op: ir.Operation, message: str) -> None:
        """Report `message` at `op` and make the pass fail (the compile stops after this pass)."""
        op.location.emit_error(message)
        self._external.signal_pass_failure()

    def write(self, suffix: str, text: str) -> Path | None:
        """Write a side file (a report, a graph) beside the stage's dump; None when not dumping."""
        if self.side_files is None:
            return None
        path = self.side_files.with_name(f"{self.side_files.name}.{suffix}")
        path.write_text(text)
        return path


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


def ops_named(root: ir.Operation, names: Collection[str]) -> list[ir.Operation]:
    """The ops under `root` named one of `names`, in walk order: collected first, so a pass can
    rewrite them without walking what it changes."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in names:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def parse_module(text: str) -> ir.Module:
    """Parse MLIR text (torch, torch_c, linalg or any upstream dialect) into a module with its own context."""
    context = ir.Context()
    torch_dialect.register_dialect(context)
    load_torch_conversion_dialect(context)  # a dump of a model with external weights loads them through torch_c
    context.allow_unregistered_dialects = True  # IREE's, e.g. #stream.parameter.named for external weights
    with context:
        try:
            return ir.Module.parse(text)
        except ir.MLIRError as exc:
            raise PassFailure("parse", _diagnostics(exc)) from exc


def load_torch_conversion_dialect(context: ir.Context) -> None:
    """`torch_c` is only loaded as a dependency of the lowering passes; running them on an empty
    module loads it, so that it can be parsed and built (`torch_c.from_builtin_tensor`)."""
    with context:
        PassManager.parse("builtin.module(torch-backend-to-linalg-on-tensors-backend-pipeline)").run(
            ir.Module.parse("module {}").operation
        )


def run_pass(module: ir.Module, pass_: Pass, side_files: Path | None = None) -> None:
    """Run one pass on `module` in place; raise PassFailure with MLIR's diagnostics if it fails."""
    with module.context:
        manager = PassManager("builtin.module")
        if pass_.pipeline is not None:
            manager.add(pass_.pipeline)
        else:
            assert pass_.run is not None
            run = pass_.run

            def run_python_pass(op: ir.Operation, external: Any) -> None:
                with op.location:  # the default location of what the pass builds
                    run(op, PassRun(pass_.name, side_files, external))

            manager.add(run_python_pass, name=pass_.name, argument=pass_.name, description=pass_.summary)
        try:
            manager.run(module.operation)
        except ir.MLIRError as exc:
            raise PassFailure(pass_.name, _diagnostics(exc)) from exc
        except PatternCrash as crash:  # a bug in one of kiln's patterns, at the op it was rewriting
            message = f"'{crash.op_name}' op: kiln's pass crashed on it: {crash.describe()}"
            raise PassFailure(pass_.name, [Diagnostic(crash.location, message)]) from crash.error
        except Exception as exc:  # a bug in a Python pass's own code
            raise PassFailure(pass_.name, [Diagnostic("unknown", f"kiln's pass crashed: {_describe(exc)}")]) from exc


class PatternCrash(Exception):
    """A rewrite pattern raised: carries the op it was matching, so the error can name it."""

    def __init__(self, op: ir.Operation, error: Exception) -> None:
        super().__init__(str(error))
        self.op_name = op.name
        self.location = str(op.location)
        self.error = error

    def describe(self) -> str:
        return _describe(self.error)


def _describe(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


class Rewriter:
    """What a rewrite pattern may do: create ops before the matched op, and replace it.

    Wraps the binding's PatternRewriter, which every rewrite must go through so that the greedy
    driver sees it. `has_done_action` records whether the pattern changed the IR: a pattern that
    returns without doing so did not match.
    """

    def __init__(self, rewriter: Any, op: ir.Operation) -> None:
        self._rewriter = rewriter
        self._op = op
        self.has_done_action = False

    def create(
        self,
        name: str,
        operands: Sequence[ir.Value],
        result_type: ir.Type,
        attributes: dict[str, ir.Attribute] | None = None,
    ) -> ir.Value:
        """Create op `name` just before the matched op, at its location; return its one result."""
        self.has_done_action = True
        with self._rewriter.ip:
            op = ir.Operation.create(name, results=[result_type], operands=list(operands), attributes=attributes)
        return op.result

    def replace(self, value: ir.Value) -> None:
        """Replace the matched op's one result with `value`, then erase the torch ops left unused.

        torch ops are not "trivially dead" to MLIR, so the greedy driver would keep, say, the `sin`
        and `cos` of a folded `sin(x)^2 + cos(x)^2`; this erases them.
        """
        self.has_done_action = True
        producers = _producers(self._op)
        self._rewriter.replace_op(self._op, [value])
        self._erase_unused(producers)

    def _erase_unused(self, ops: list[ir.Operation]) -> None:
        dead: list[ir.Operation] = []  # every op after all of its users: the order to erase them in
        worklist = list(ops)
        while worklist:
            op = worklist.pop(0)
            if op not in dead and _unused_value_op(op, dead):
                dead.append(op)
                worklist.extend(_producers(op))
        for op in dead:
            self._rewriter.erase_op(op)


def _producers(op: ir.Operation) -> list[ir.Operation]:
    owners = [operand.owner for operand in op.operands]
    return [owner.operation for owner in owners if isinstance(owner, (ir.Operation, ir.OpView))]


def _unused_value_op(op: ir.Operation, dead: list[ir.Operation]) -> bool:
    """A torch op on value tensors that only `dead` ops read: erasing it with them changes nothing."""
    if not op.name.startswith("torch.") or op.regions or not op.results:
        return False
    if any(str(value.type).startswith("!torch.tensor") for value in [*op.operands, *op.results]):
        return False  # a non-value tensor may be mutated through
    return all(use.owner.operation in dead for result in op.results for use in result.uses)


Pattern = Callable[[Any, Rewriter], None]  # (the matched op, a Rewriter): rewrites it, or returns


def pattern_pass(
    name: str, summary: str, patterns: Mapping[str, Pattern], *, level: Level = "torch", hint: str | None = None
) -> Pass:
    """A pass whose whole work is applying `patterns` (op name -> pattern function) greedily.

    Most of kiln's passes are one: their file holds the pattern functions and this one call.
    """

    def run(module: ir.Operation, pass_run: PassRun) -> None:
        apply_patterns(module, patterns)

    return Pass(name=name, summary=summary, level=level, run=run, hint=hint)


def apply_patterns(op: ir.Operation, patterns: Mapping[str, Pattern]) -> None:
    """Apply rewrite patterns (op name -> function(op, rewriter)) greedily until a fixpoint.

    A pattern function rewrites the op through the Rewriter, or returns without a rewrite when
    the op does not match.
    """
    from torch_mlir.rewrite import RewritePatternSet, apply_patterns_and_fold_greedily

    def adapt(function: Pattern) -> Callable[[Any, Any], bool]:
        def pattern(matched: Any, rewriter: Any) -> bool:
            ours = Rewriter(rewriter, matched.operation)
            try:
                with matched.location:  # what the pattern builds is located at the op it rewrites
                    function(matched, ours)
            except Exception as error:
                raise PatternCrash(matched.operation, error) from error
            return not ours.has_done_action  # the binding reads a truthy result as "no match"

        return pattern

    pattern_set = RewritePatternSet(op.context)
    for op_name, function in patterns.items():
        pattern_set.add(op_name, adapt(function))
    apply_patterns_and_fold_greedily(op, pattern_set.freeze())


def _diagnostics(exc: ir.MLIRError) -> list[Diagnostic]:
    found = []
    for info in exc.error_diagnostics:
        found.append(Diagnostic(str(info.location), info.message))
        found.extend(Diagnostic(str(note.location), note.message) for note in info.notes)
    return found
