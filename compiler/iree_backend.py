"""The hand-off to IREE: linalg-on-tensors text in, a `.vmfb` out.

iree-compile runs as a child process: torch-mlir and IREE are separate MLIR builds (text is the
only common format), and iree-compile can crash on bad flags; in a child process a crash becomes
an error message instead of taking the CLI down with it. It dies with kiln, and its working
folder is removed even after kiln was killed (by the next compile: kiln.compiler.scratch).
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from iree.compiler.tools.binaries import find_tool

from kiln.errors import KilnError

from .dump_text import left_out_weights
from .scratch import remove_stale, stamped
from .usage import run_child

STAGE = "vmfb"

# Keep IREE's per-phase dumps readable: weights are elided there (they are in our own dumps).
_DUMP_PRINT_FLAGS = ("--mlir-elide-resource-strings-if-larger=256", "--mlir-elide-elementsattrs-if-larger=64")
# LLVM's crash handler prints this, then exits with 256 - signal instead of dying by the signal.
_CRASH_MARKER = "Stack dump:"
_CRASHED_PASS = re.compile(r"::(\w+Pass)::runOnOperation")  # the backtrace's innermost pass
_PHASE_FILE = re.compile(r"\.(\d+)\.([\w-]+)\.mlir$")  # "<module name>.<number>.<phase>.mlir"


@dataclass(frozen=True)
class IreeRun:
    """One iree-compile run, as `--timing` reports it: its flags, whether it made an artifact, its wall
    and CPU seconds and peak resident memory, and what the backend had on for it (`label`: the levers,
    the transient variants; the vmfb stage's words)."""

    flags: tuple[str, ...]
    ok: bool
    seconds: float
    cpu_seconds: float
    peak: int
    label: str = ""


_recorders: list[list[IreeRun]] = []  # the runs of the recordings in progress


@contextmanager
def recorded_runs() -> Iterator[list[IreeRun]]:
    """Every iree-compile run in the block, in order, in the list this yields (the vmfb stage's record
    for --timing: a compile that takes several runs, a lever or the variants dropped, shows as such)."""
    runs: list[IreeRun] = []
    _recorders.append(runs)
    try:
        yield runs
    finally:
        _recorders.remove(runs)


def iree_compile(mlir_text: str, flags: list[str], phase_dump: Path | None, reproducer: Path | None) -> bytes:
    """Compile `mlir_text` with `flags`; with `phase_dump`, save each IREE phase as `<phase_dump>-NN-<phase>.mlir`."""
    tool = find_tool("iree-compile")
    with _working_folder() as tmp:
        # Named relative to the folder iree-compile runs in: IREE keeps the input's file name in the
        # artifact (a GPU executable's source locations), and a random folder in it would make two
        # compiles of one model differ.
        source, output, phases = Path("input.mlir"), Path("output.vmfb"), Path("phases")
        (tmp / source).write_text(mlir_text)
        command = [tool, str(source), *flags, "-o", str(output)]
        if phase_dump is not None:
            command += [f"--dump-compilation-phases-to={phases}", *_DUMP_PRINT_FLAGS]
        start = time.perf_counter()
        result = run_child(command, preexec_fn=_die_with_parent(), cwd=tmp)  # records iree-compile's peak memory too
        run = IreeRun(tuple(flags), result.returncode == 0, time.perf_counter() - start, result.cpu_seconds, result.peak)
        for runs in _recorders:
            runs.append(run)
        source, output, phases = tmp / source, tmp / output, tmp / phases
        if phase_dump is not None and phases.is_dir():
            _save_phases(phases, phase_dump)
        if result.returncode != 0:
            raise _failure(result, flags, reproducer)
        return output.read_bytes()


# IREE 3.13 failures that one flag avoids: (a flag the compile has, a substring of the error, the
# flag to retry with). Tried only after a compile failed with that error, so that models which
# compile keep IREE's defaults (and their speed); the artifact's manifest records the flag.
WORKAROUNDS: tuple[tuple[str, str, str], ...] = (
    # cuda: a layer norm whose input is a transposed elementwise producer (Whisper's encoder: the
    # convolutions' output, transposed, plus positions) fails in the reduction vector-distribution
    # pipeline; the other reduction pipeline compiles it.
    (
        "--iree-hal-target-device=cuda",
        "failed to distribute",
        "--iree-codegen-llvmgpu-use-reduction-vector-distribution=false",
    ),
)


def iree_compile_with_workarounds(
    mlir_text: str, flags: list[str], phase_dump: Path | None, reproducer: Path | None
) -> tuple[bytes, list[str]]:
    """iree_compile, and once more with a WORKAROUNDS flag if the first failure is one it avoids;
    the artifact and the flags it was compiled with."""
    try:
        return iree_compile(mlir_text, flags, phase_dump, reproducer), flags
    except KilnError as error:
        for present, marker, flag in WORKAROUNDS:
            if present in flags and marker in error.message and flag not in flags:
                retried = [*flags, flag]
                return iree_compile(mlir_text, retried, phase_dump, reproducer), retried
        raise


@contextmanager
def _working_folder() -> Iterator[Path]:
    """iree-compile's folder for its input and output; those of killed compiles are removed first."""
    root = Path(tempfile.gettempdir())
    remove_stale(root, _WORKING_PREFIX)
    folder = root / stamped(_WORKING_PREFIX)
    folder.mkdir(mode=0o700)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_WORKING_PREFIX = "kiln-iree-"


def _die_with_parent() -> Callable[[], None] | None:
    """For Linux children: die by SIGKILL when kiln does, even when kiln is killed by SIGKILL itself,
    so that no iree-compile goes on alone for minutes (prctl PR_SET_PDEATHSIG)."""
    if _PRCTL is None:
        return None
    parent = os.getpid()

    def in_child() -> None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # kiln died before the request was made
            os._exit(1)

    return in_child


_PR_SET_PDEATHSIG = 1
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _save_phases(phases: Path, phase_dump: Path) -> None:
    for file in phases.iterdir():
        match = _PHASE_FILE.search(file.name)
        if match:
            number, phase = match.groups()
            target = phase_dump.with_name(f"{phase_dump.name}-{int(number):02d}-{phase}.mlir")
            file.replace(target)


def _failure(result: subprocess.CompletedProcess[str], flags: list[str], reproducer: Path | None) -> KilnError:
    rerun = None
    if reproducer is not None:
        rerun = f"iree-compile {reproducer} {' '.join(flags)} -o out.vmfb"
        if reproducer.is_file() and left_out_weights(reproducer.read_text()):
            rerun += " (after recompiling with --params external: this dump leaves its large weights out)"
    errors = [line.strip() for line in result.stderr.splitlines() if "error:" in line]
    if result.returncode == -signal.SIGXFSZ:
        return KilnError(
            "iree-compile stopped: a file it wrote reached the file-size limit (ulimit -f)",
            stage=STAGE,
            hint="raise the limit (`ulimit -f unlimited`), or write to a disk with room",
        )
    if result.returncode < 0 or _CRASH_MARKER in result.stderr:
        before = f" after: {errors[0]}" if errors else ""
        crashed_pass = _CRASHED_PASS.search(result.stderr)
        where = f" (in IREE's {crashed_pass.group(1)})" if crashed_pass else ""
        return KilnError(
            f"iree-compile crashed ({_signal_name(result.returncode)}){before}{where}",
            stage=STAGE,
            file=reproducer,
            hint="an IREE bug or an unsupported flag combination" + (f"; reproduce with: {rerun}" if rerun else ""),
        )
    first = errors[0] if errors else (result.stderr.strip().splitlines() or ["(no output)"])[-1]
    return KilnError(
        f"iree-compile failed: {first}",
        stage=STAGE,
        file=reproducer,
        hint=f"reproduce with: {rerun}" if rerun else None,
    )


def _signal_name(returncode: int) -> str:
    number = -returncode if returncode < 0 else 256 - returncode
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"exit code {returncode}"
