"""Capture: `torch.export` turns the user's module into an ExportedProgram.

This is where most user-facing failures happen (Python control flow on tensor values, unsupported
Python), so export errors are boiled down to one line and a pointer to the usual fix.
"""

from __future__ import annotations

import io
import logging
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from kiln.errors import KilnError

from .model_file import EntryPoint, ModelSpec

STAGE = "exported"

# Substrings of torch.export's messages, and the fix each one usually needs.
_KNOWN_FAILURES: tuple[tuple[str, str], ...] = (
    (
        "data-dependent",
        "the model branches on a tensor's value (data-dependent control flow); "
        "use torch.where or torch.cond instead of a Python `if` on a tensor",
    ),
    (
        "Dynamic control flow is not supported",
        "the model branches on a tensor's value; use torch.where or torch.cond instead of a Python `if`",
    ),
    ("Constraints violated", "a dimension marked dynamic is specialized by the model; fix dynamic_shapes"),
)


@dataclass(frozen=True)
class Exported:
    """One ExportedProgram per entry point, in the model's order."""

    programs: dict[str, ExportedProgram]

    def __str__(self) -> str:
        return "\n".join(f"# entry point {name}\n{program}" for name, program in self.programs.items())


def capture(spec: ModelSpec) -> Exported:
    return Exported({entry.name: _export(entry, spec.source) for entry in spec.entries})


def _export(entry: EntryPoint, source: Path | None) -> ExportedProgram:
    try:
        with torch.no_grad(), _quiet_torch_logs(), _forward_is(entry.module, entry.method):
            try:
                return torch.export.export(entry.module, entry.example_inputs, dynamic_shapes=entry.dynamic_shapes)
            except GuardOnDataDependentSymNode:
                # A guard on a value known only at run time; where it is an assertion rather than a
                # branch, export can defer it to a runtime assert instead of failing.
                return torch.export.export(
                    entry.module,
                    entry.example_inputs,
                    dynamic_shapes=entry.dynamic_shapes,
                    prefer_deferred_runtime_asserts_over_guards=True,
                )
    except Exception as exc:
        message = str(exc).strip()
        first_line = message.splitlines()[0] if message else type(exc).__name__
        hint = next((fix for marker, fix in _KNOWN_FAILURES if marker in message), None)
        where = f"{source}: " if source else ""
        which = f"entry point '{entry.name}': " if entry.name != "main" else ""
        line = _model_line(exc)
        raise KilnError(
            f"{where}{which}torch.export failed{line}: {type(exc).__name__}: {first_line}",
            stage=STAGE,
            hint=hint or "see https://pytorch.org/docs/stable/export.html; --debug shows the full trace",
        ) from exc


def _model_line(exc: BaseException) -> str:
    """ " at file:line (`code`)": the innermost frame of the failure outside torch, i.e. the model's
    line that export could not trace (a branch on a tensor's value, say); "" if there is none."""
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not _is_torch(frame.filename)]
    if not frames or frames[-1].filename == __file__:
        return ""
    frame = frames[-1]
    code = f" (`{frame.line.strip()}`)" if frame.line else ""
    return f" at {frame.filename}:{frame.lineno}{code}"


def _is_torch(filename: str) -> bool:
    return f"{os.sep}torch{os.sep}" in filename or f"{os.sep}kiln{os.sep}" in filename


@contextmanager
def _forward_is(module: torch.nn.Module, method: str) -> Iterator[None]:
    """torch.export exports `forward`; for another method, shadow forward with it while exporting."""
    if method == "forward":
        yield
        return
    module.forward = getattr(module, method)  # an instance attribute wins over the class's forward
    try:
        yield
    finally:
        del module.forward


@contextmanager
def _quiet_torch_logs() -> Iterator[None]:
    """On failure torch.export logs warnings and prints the partial graph to stderr; the error we
    raise says what matters (--debug shows the full trace)."""
    loggers = [logging.getLogger(name) for name in ("torch", *logging.root.manager.loggerDict) if name.startswith("torch")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with redirect_stderr(io.StringIO()):
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
