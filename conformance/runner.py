"""The op conformance suite: small modules over the ATen operator set, each compiled by kiln and
compared with eager PyTorch on the same inputs.

It says exactly which ops kiln supports (`kiln ops` writes SUPPORT.md from it; tests/ops runs it
under pytest). A `Case` is data: the ATen op it exercises (as torch.export names it), a tiny
module, input shapes with a seed of their own, a dtype, and optionally a tolerance. Reference
outputs always come from eager PyTorch on the same inputs; nothing is hard-coded.

Compiling is the cost (torch.export, import, iree-compile's process start), so cases are compiled
in groups, one artifact with one function per case. A group that fails to compile is compiled
again case by case, so that every failure is attributed to one op; cases known to fail (from the
last SUPPORT.md) are compiled alone from the start, so that they never cost a group that.

The case table is cases.py; this is the runner (Case, Outcome, check_group, Checker, compare).
"""

from __future__ import annotations

import collections
import copy
import importlib
import math
import multiprocessing
import os
import re
import time
import warnings
import zlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from kiln.compiler.model_file import EntryPoint, ModelSpec
from kiln.compiler.options import CompileOptions
from kiln.compiler.pipeline import run_pipeline
from kiln.errors import KilnError
from kiln.runtime.numerics import Tolerance, compare_all
from kiln.runtime.tensors import short_dtype

GROUP_SIZE = 24  # cases per artifact: the compile's fixed cost is shared, a failed group is redone alone


@dataclass(frozen=True)
class Arg:
    """One input: a shape and the kind of values it holds.

    A float kind takes the case's dtype (an integer case gets integers in the same role); `index`
    and `mask` inputs keep their own dtype (int64, bool) whatever the case's dtype.
    """

    shape: tuple[int, ...]
    kind: str = "normal"  # normal, positive, unit (in (-0.9, 0.9)), index (in [0, high)), mask
    high: int = 4  # index: values below it; int-typed normal/positive values: magnitudes below it
    dtype: torch.dtype | None = None  # a fixed dtype; None: the case's (or int64 / bool by kind)

    def make(self, generator: torch.Generator, case_dtype: torch.dtype) -> torch.Tensor:
        if self.kind == "index":
            return torch.randint(0, self.high, self.shape, generator=generator).to(self.dtype or torch.int64)
        if self.kind == "mask":
            return torch.randint(0, 2, self.shape, generator=generator).bool()
        dtype = self.dtype or case_dtype
        if dtype == torch.bool:
            return torch.randint(0, 2, self.shape, generator=generator).bool()
        if not dtype.is_floating_point:
            low = 1 if self.kind == "positive" else (0 if dtype == torch.uint8 else -self.high)
            return torch.randint(low, self.high, self.shape, generator=generator).to(dtype)
        if self.kind == "positive":
            values = torch.rand(self.shape, generator=generator) * 2 + 0.1
        elif self.kind == "unit":
            values = torch.rand(self.shape, generator=generator) * 1.8 - 0.9
        else:
            values = torch.randn(self.shape, generator=generator)
        return values.to(dtype)


# An input is an Arg, a function of (generator, case dtype) for values an Arg cannot describe, or a
# plain Python value (a scalar, or a tuple, list or dict of them), passed as is.
Input = Arg | Callable[[torch.Generator, torch.dtype], Any] | bool | int | float | str | None | tuple | list | dict


@dataclass(frozen=True)
class Case:
    """One module called with its inputs and compared with eager PyTorch.

    In the op suite (cases.py) each case is one op variant in one dtype: `name` is `<variant>[<dtype>]`,
    e.g. `conv2d.groups2[f16]`, and `op` the ATen overload it exercises, as in torch.export's graph
    ("aten.conv2d.default"). In the module suite (modules.py) `op` is the part of the calling
    convention or the failure class it exercises ("mutation", "dtypes", ...), `dtype` is None (the
    module keeps its own dtypes), and `calls` > 1 checks state the module keeps between calls.
    """

    name: str
    op: str
    build: Callable[[], nn.Module]
    args: tuple[Input, ...]
    dtype: torch.dtype | None
    tolerance: tuple[float, float] | None = None  # (rtol, atol); None: by output dtype
    calls: int = 1  # calls compared in a row, each with the same inputs, on one module and one artifact

    @property
    def variant(self) -> str:
        return self.name.partition("[")[0]

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())

    def module(self) -> nn.Module:
        """The module, its weights drawn from the case's own seed, in the case's dtype if float."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            module = self.build().eval()
        return module.to(self.dtype) if self.dtype is not None and self.dtype.is_floating_point else module

    def inputs(self) -> tuple[Any, ...]:
        """Fresh inputs, the same on every call (a module may mutate them)."""
        generator = torch.Generator().manual_seed(self.seed)
        dtype = self.dtype or torch.float32
        return tuple(
            arg.make(generator, dtype) if isinstance(arg, Arg) else arg(generator, dtype) if callable(arg) else copy.deepcopy(arg)
            for arg in self.args
        )

    def input_dtypes(self) -> str:
        """The dtypes of the inputs, short and deduplicated ("f32, i64"); a Python value by its type."""
        leaves, _ = tree_flatten(self.inputs())
        return ", ".join(dict.fromkeys(short_dtype(x.dtype) if isinstance(x, torch.Tensor) else type(x).__name__ for x in leaves))


@dataclass(frozen=True)
class Outcome:
    """What happened to one case on one target."""

    status: str  # PASS, MISMATCH, FAILS, or COMPILES (a target this machine cannot run)
    stage: str | None = None  # FAILS: the stage that failed
    detail: str = ""  # MISMATCH: the largest error; FAILS: the error's first line
    seconds: float | None = None  # the compile's time, where the suite records it (model families)
    rel_l2: float | None = None  # the largest relative L2 error of an output, where recorded

    def __str__(self) -> str:
        if self.status == MISMATCH:
            return f"numerics mismatch: {self.detail}"
        if self.status == FAILS:
            return f"fails at {self.stage}: {self.detail}"
        return self.status

    @property
    def ok(self) -> bool:
        return self.status in (PASS, COMPILES)


PASS, MISMATCH, FAILS, COMPILES = "pass", "mismatch", "fails", "compiles"
RUNNABLE_TARGETS = ("llvm-cpu",)  # targets whose artifacts this machine runs; others are compile-only

def plan_groups(
    cases: Sequence[Case], likely_failures: Collection[str] = (), group_size: int = GROUP_SIZE
) -> list[tuple[Case, ...]]:
    """Cases in compile groups: the ones expected to pass `group_size` at a time, the others alone."""
    hopeful = [case for case in cases if case.name not in likely_failures]
    groups = [tuple(hopeful[start : start + group_size]) for start in range(0, len(hopeful), group_size)]
    return groups + [(case,) for case in cases if case.name in likely_failures]


def check_group(
    group: Sequence[Case], target: str = "llvm-cpu", on_stage: Callable[[str], None] = lambda stage: None
) -> dict[str, Outcome]:
    """Compile `group` as one artifact and check every case; if the compile fails, each case alone.

    In this process: a compile that hangs or crashes takes the caller with it (`Checker` does not).
    """
    prepared = [(case, case.module(), case.inputs()) for case in group]
    entries = tuple(EntryPoint(f"case{index}", module, inputs) for index, (_, module, inputs) in enumerate(prepared))
    compiled, failure = _compile(ModelSpec(entries, source=None, source_sha256=None), target, on_stage)
    if compiled is None:
        if len(group) > 1:
            return {name: outcome for case in group for name, outcome in check_group((case,), target, on_stage).items()}
        return {group[0].name: failure}
    if target not in RUNNABLE_TARGETS:
        return {case.name: Outcome(COMPILES) for case in group}
    on_stage("runtime")
    functions = compiled.load().functions
    return {case.name: check_calls(case, functions[entry.name]) for entry, (case, _, _) in zip(entries, prepared, strict=True)}


def check_calls(case: Case, function: Callable[..., Any]) -> Outcome:
    """Call `function` `case.calls` times beside a fresh eager module, comparing results and inputs.

    Each call gets fresh inputs for both; after it, the inputs themselves must agree too (a module
    may mutate them in place). The eager module is built anew: its state starts where the
    compiled artifact's does.
    """
    eager = case.module()
    for call in range(case.calls):
        eager_inputs, inputs = case.inputs(), case.inputs()
        with torch.no_grad():
            expected = eager(*eager_inputs)
        try:
            actual = function(*inputs)
        except KilnError as error:
            return Outcome(FAILS, error.stage, first_line(error.message))
        except Exception as error:  # not turned into a KilnError: a kiln bug, and said so
            return Outcome(FAILS, "runtime", f"internal error: {type(error).__name__}: {first_line(str(error))}")
        outcome = compare(expected, actual, case.tolerance)
        if outcome.ok:
            outcome = compare(eager_inputs, inputs, case.tolerance, what="inputs after the call")
        if not outcome.ok:
            return replace(outcome, detail=f"call {call + 1}: {outcome.detail}") if case.calls > 1 else outcome
    return Outcome(PASS)


class Checker:
    """check_group in worker processes: a compile that hangs or crashes costs its case, not the run.

    torch-mlir's passes run in the compiling process, and a few ops make one loop forever while its
    memory grows by ~100 MB/s. A worker past its time (GROUP_SECONDS) or memory (MEMORY_LIMIT) is
    killed and replaced; a group it was compiling is redone case by case, so the failure is still
    attributed to one case, at the stage the worker had reached. Workers are spawned (not forked:
    MLIR and IREE hold threads) and run `check` on the names they are sent: by default
    check_named_cases, which looks cases up in CASES; the model-family suite passes its own (a
    module-level function, which the spawned worker imports) and its own time limits.
    """

    def __init__(
        self,
        target: str = "llvm-cpu",
        jobs: int = 1,
        check: NamedCheck | None = None,
        seconds: tuple[float, float] | None = None,
    ) -> None:
        self.target = target
        self.workers = [_Worker(check or check_named_cases, seconds or GROUP_SECONDS) for _ in range(jobs)]

    def check(
        self, groups: Sequence[Sequence[Case]], progress: Callable[[dict[str, Outcome]], None] = lambda found: None
    ) -> dict[str, Outcome]:
        pending = [tuple(group) for group in groups]
        outcomes: dict[str, Outcome] = {}
        while pending or any(worker.group for worker in self.workers):
            for worker in self.workers:
                if worker.group is None and pending:
                    worker.start(pending.pop(0), self.target)
            wait([worker.connection for worker in self.workers if worker.group], timeout=1.0)
            for worker in self.workers:
                if worker.group is None:
                    continue
                group, found = worker.group, worker.poll()
                if found is None and worker.group is None and len(group) > 1:
                    pending[:0] = [(case,) for case in group]  # lost: redo case by case
                elif found is not None:
                    outcomes.update(found)
                    progress(found)
        return outcomes

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()

    def __enter__(self) -> Checker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


GROUP_SECONDS = (45.0, 4.0)  # a worker's time for a group: the first plus the second per case (on a busy machine)
MEMORY_LIMIT = 4 << 30  # bytes of resident memory a worker may reach


class _Worker:
    """One child process serving check_group, and the group it is on (None when idle)."""

    def __init__(self, check: NamedCheck, seconds: tuple[float, float]) -> None:
        self.group: tuple[Case, ...] | None = None
        self.check, self.seconds = check, seconds
        self._spawn()

    def _spawn(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, self.check), daemon=True)
        self.process.start()
        child.close()

    def start(self, group: tuple[Case, ...], target: str) -> None:
        self.group, self.stage, self.started = group, "exported", time.monotonic()
        self.deadline = self.started + self.seconds[0] + self.seconds[1] * len(group)
        self.connection.send(([case.name for case in group], target))

    def poll(self) -> dict[str, Outcome] | None:
        """The group's outcomes once done. If the worker is lost, it is replaced and `group` cleared;
        a single case then gets its failure, a larger group None (to be redone case by case)."""
        assert self.group is not None
        try:
            while self.connection.poll():
                kind, value = self.connection.recv()
                if kind == "stage":
                    self.stage = value
                else:
                    self.group = None
                    return value
        except (EOFError, OSError):
            self.process.join(timeout=10)
            return self._lost(f"the worker crashed (exit code {self.process.exitcode})")
        if time.monotonic() > self.deadline:
            return self._lost(f"no result after {time.monotonic() - self.started:.0f}s (a hang?)")
        if _resident_bytes(self.process.pid) > MEMORY_LIMIT:
            return self._lost(f"used more than {MEMORY_LIMIT >> 30} GiB of memory")
        return None

    def _lost(self, why: str) -> dict[str, Outcome] | None:
        assert self.group is not None
        group, stage = self.group, self.stage
        self.stop()
        self._spawn()
        self.group = None
        return {group[0].name: Outcome(FAILS, stage, why)} if len(group) == 1 else None

    def stop(self) -> None:
        """Close the pipe (an idle worker then returns), and kill a worker that does not stop."""
        self.connection.close()
        self.process.join(timeout=0 if self.group is not None else 10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


# What a worker runs: (names, target, on_stage) -> each name's outcome.
NamedCheck = Callable[[Sequence[str], str, Callable[[str], None]], dict[str, Outcome]]


def check_named_cases(names: Sequence[str], target: str, on_stage: Callable[[str], None]) -> dict[str, Outcome]:
    """check_group on the conformance cases of these names."""
    from .cases import CASES  # the table imports this module

    by_name = {case.name: case for case in CASES}
    return check_group([by_name[name] for name in names], target, on_stage)


# The case tables, by suite name: module and attribute (each table imports this module).
SUITES = {"ops": ("kiln.conformance.cases", "CASES"), "modules": ("kiln.conformance.modules", "MODULE_CASES")}


def suite_cases(suite: str) -> tuple[Case, ...]:
    module, name = SUITES[suite]
    return getattr(importlib.import_module(module), name)


def check_suite(suite: str, path: str, names: Sequence[str], target: str, on_stage: Callable[[str], None]) -> dict[str, Outcome]:
    """The cases of these names in `suite`, through kiln (`path` "kiln": check_group) or through the
    plain stack beneath it ("plain": plain.check_plain, case by case). A Checker's `check` as
    `functools.partial(check_suite, suite, path)`."""
    by_name = {case.name: case for case in suite_cases(suite)}
    group = [by_name[name] for name in names]
    if path == "plain":
        from .plain import check_plain

        return {case.name: check_plain(case, target, on_stage) for case in group}
    return check_group(group, target, on_stage)


def _serve(connection: Connection, check: NamedCheck) -> None:
    """A worker's loop: check the named groups it is sent, reporting each stage as it starts."""
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's, on every export
    warnings.filterwarnings("ignore", category=UserWarning)  # PyTorch's deprecation notes on cases
    while True:
        try:
            names, target = connection.recv()
        except EOFError:
            return
        report = lambda stage: connection.send(("stage", stage))  # noqa: E731
        connection.send(("done", check(names, target, report)))


def _resident_bytes(pid: int) -> int:
    """A process's resident memory (Linux /proc); 0 where that cannot be read."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def compare(expected: Any, actual: Any, tolerance: tuple[float, float] | None = None, what: str = "") -> Outcome:
    """PASS when `actual` nests as `expected` does and every leaf agrees: a tensor has eager's dtype,
    shape and values (floats within tolerance), anything else eager's type and value."""
    want, want_spec = tree_flatten(expected)
    got, got_spec = tree_flatten(actual)
    prefix = f"{what}: " if what else ""
    noun = "value" if what else "output"
    if len(got) != len(want):
        return Outcome(MISMATCH, detail=f"{prefix}{len(got)} {noun}s, eager has {len(want)}")
    if got_spec != want_spec:
        return Outcome(MISMATCH, detail=f"{prefix}nested as {_nesting(got_spec)}, eager {_nesting(want_spec)}")
    override = Tolerance(tolerance[0], tolerance[1], math.inf) if tolerance else None
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        where = prefix + (f"{noun} {index}: " if len(want) > 1 else "")
        if not isinstance(w, torch.Tensor) or not isinstance(g, torch.Tensor):
            if type(g) is not type(w) or not (g == w or (g != g and w != w)):
                return Outcome(MISMATCH, detail=f"{where}{_short(g)}, eager {_short(w)}")
            continue
        comparison = compare_all([g], [w], override)[0]
        if comparison.problem is not None:
            return Outcome(MISMATCH, detail=f"{where}{comparison.problem}")
        if comparison.close:
            continue
        if not (w.is_floating_point() or w.is_complex()):
            return Outcome(MISMATCH, detail=f"{where}{comparison.differing} of {w.numel()} elements differ")
        rtol, atol = comparison.tolerance.rtol, comparison.tolerance.atol
        return Outcome(MISMATCH, detail=f"{where}max abs error {comparison.max_abs:.2g} (rtol {rtol:g}, atol {atol:g})")
    return Outcome(PASS)


def _nesting(spec: Any) -> str:
    """A pytree spec in one short line: "tuple(*, list(*, *))"."""
    if spec.is_leaf():
        return "*"
    name = getattr(spec.type, "__name__", str(spec.type))
    if spec.type is collections.namedtuple:
        name = spec.context.__name__
    return f"{name}({', '.join(_nesting(child) for child in spec.children())})"


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {short_dtype(value.dtype)} tensor"
    return repr(value) if len(repr(value)) < 40 else type(value).__name__


class StageTracker:
    """The stage a compile is in, read off run_pipeline's progress lines ("[3/7] prims ..."), each new
    one reported to `on_stage`: where a failure that names no stage happened."""

    def __init__(self, first: str, on_stage: Callable[[str], None]) -> None:
        self.stage = first
        self._on_stage = on_stage

    def __call__(self, line: str) -> None:
        match = re.search(r"\] (\S+) \.\.\.$", line)
        if match:
            self.stage = match.group(1)
            self._on_stage(self.stage)


def _compile(spec: ModelSpec, target: str, on_stage: Callable[[str], None]) -> tuple[Any, Outcome]:
    """The artifact, or None and the failure: the stage and the first line of kiln's error."""
    tracker = StageTracker("options", on_stage)
    try:
        return run_pipeline(spec, CompileOptions(target=target), progress=tracker).compiled, Outcome(PASS)
    except KilnError as error:
        return None, Outcome(FAILS, error.stage or tracker.stage, error_line(error.message))
    except Exception as error:  # a failure kiln does not turn into a KilnError: say so, it is a kiln bug
        return None, Outcome(FAILS, tracker.stage, f"internal error: {type(error).__name__}: {first_line(str(error))}")


# Where in the source an error points: " at /path/file.py:12", "/path/file.py:12:0: ", "<unknown>:0: " or
# 'loc("/path/file.py":12:0): '.
# Every case's source line is a line of this file or of torch, which says nothing about the op and
# changes with edits.
_SOURCE_LINE = re.compile(r' at /\S+:\d+(?= )|/\S+:\d+:\d+: |<unknown>:0: |loc\("[^"]*":\d+:\d+\): ')


def error_line(text: str) -> str:
    """An error's first line without the source location in it: what a table of outcomes records."""
    return first_line(_SOURCE_LINE.sub("", text))


def first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no message)"
    return line if len(line) <= limit else line[: limit - 3] + "..."
