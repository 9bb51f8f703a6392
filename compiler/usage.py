"""What a stage used: the CPU time of this process and its children, and their peak memory.

CPU time is what the stage cost however busy the machine was (wall time on a shared machine is not):
this process's user and system time, all threads, plus that of the children it reaped meanwhile.
Linux keeps each process's peak resident set (VmHWM in /proc/<pid>/status) and resets it when "5"
is written to /proc/self/clear_refs, so a stage's peak is read without sampling. iree-compile runs
as a child process, whose VmHWM `run_child` reads every CHILD_POLL_S until it exits: the mark only
rises, so the last reading misses at most the child's last CHILD_POLL_S. (The child's rusage from
wait4 will not do: Linux folds the memory of the process it was forked from into ru_maxrss at exec,
so every child of a large kiln process would look as large.) Where /proc is not there to read (not
Linux), the peaks are None and 0.
"""

from __future__ import annotations

import resource
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_CLEAR_REFS = Path("/proc/self/clear_refs")
CHILD_POLL_S = 0.02


@dataclass
class Usage:
    """What a block used: CPU seconds (this process and the children it reaped), this process's peak
    resident memory in bytes (None where it cannot be read), and the largest child's peak."""

    cpu_seconds: float = 0.0
    peak: int | None = None
    child_peak: int = 0


_active: list[Usage] = []  # the measurement in progress, if any (one at a time: each resets the mark)


@contextmanager
def measured() -> Iterator[Usage]:
    """Measure the block: on exit, the returned Usage holds what it used. Not nested."""
    if _active:
        raise RuntimeError("measured() cannot nest: each measurement resets the process's high-water mark")
    usage = Usage()
    resettable = _reset_high_water_mark()
    start = _cpu_seconds()
    _active.append(usage)
    try:
        yield usage
    finally:
        _active.clear()
        usage.cpu_seconds = _cpu_seconds() - start
        usage.peak = _high_water_mark(Path("/proc/self/status")) if resettable else None


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime + _children_cpu_seconds()


def _children_cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


class ChildResult(subprocess.CompletedProcess[str]):
    """A finished child: its output and exit status, and what it used: CPU seconds (user and system,
    read as the children's rusage before and after it, so other children reaped meanwhile would count
    too: kiln runs one at a time) and its peak resident memory in bytes (0 where /proc is not there)."""

    cpu_seconds: float = 0.0
    peak: int = 0


def run_child(
    command: Sequence[str], preexec_fn: Callable[[], None] | None = None, cwd: Path | None = None
) -> ChildResult:
    """`subprocess.run(command, capture_output=True, text=True, preexec_fn=preexec_fn, cwd=cwd)`,
    recording the child's peak memory in the measurement in progress; the result says what it used."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        before = _children_cpu_seconds()
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True, preexec_fn=preexec_fn, cwd=cwd)
        status = Path(f"/proc/{process.pid}/status")
        peak = 0
        while True:
            peak = max(peak, _high_water_mark(status) or 0)
            try:
                process.wait(timeout=CHILD_POLL_S)
                break
            except subprocess.TimeoutExpired:
                continue
        out.seek(0)
        err.seek(0)
        result = ChildResult(list(command), process.returncode, out.read(), err.read())
        result.cpu_seconds, result.peak = _children_cpu_seconds() - before, peak
    for usage in _active:
        usage.child_peak = max(usage.child_peak, peak)
    return result


def _reset_high_water_mark() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def _high_water_mark(status: Path) -> int | None:
    """VmHWM, in bytes, from a /proc/<pid>/status file (None once the process has exited)."""
    try:
        lines = status.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None
