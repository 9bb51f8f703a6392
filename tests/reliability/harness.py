"""Running untrusted-artifact cases where a crash or a hang is an outcome to count, not the suite's end.

Cases run in a worker process (worker.py) that is restarted whenever it dies (a crash: the signal
is recorded) or goes silent past the case's time limit (a hang: it is killed). Each case gets a
folder of its own inside a sandbox; the worker's working directory, HOME and TMPDIR are sandbox
folders too, and after every case the whole sandbox is compared with what it held before, so a
load that writes or changes any file is counted ("touched"), wherever it writes within reach.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("worker.py")
START_SECONDS = 180.0  # importing torch and kiln on a busy 2-core machine
CASE_SECONDS = 60.0  # loading and calling a small artifact takes well under a second

# The outcomes. "same": loaded, and the results equal the reference bit for bit; "error": one
# KilnError; the rest are failures of kiln's promise.
GOOD = ("same", "error")
BAD = ("wrong", "other", "crash", "hang", "unclear", "touched")


@dataclass(frozen=True)
class Mutant:
    """One damaged artifact: its class ("vmfb", "manifest", ...), what was done, and its files."""

    kind: str
    name: str
    files: dict[str, bytes | str | None]  # file name -> contents; None: absent; a str: SPECIAL
    options: dict[str, Any] = field(default_factory=dict)  # kiln.load keywords


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    kind: str  # one of GOOD or BAD
    detail: str


@dataclass
class Tally:
    """Outcomes by class and kind, with the failures kept for the report."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    failures: list[Outcome] = field(default_factory=list)
    harmless: list[Outcome] = field(default_factory=list)  # loaded and ran as the original did

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome.mutant.kind, outcome.kind] += 1
        if outcome.kind in BAD:
            self.failures.append(outcome)
        if outcome.kind == "same":
            self.harmless.append(outcome)

    def table(self) -> str:
        """A markdown table: one row per class, one column per outcome."""
        kinds = sorted({kind for kind, _ in self.counts})
        outcomes = [name for name in (*GOOD, *BAD)]
        rows = ["| class | cases | " + " | ".join(outcomes) + " |", "|---" * (len(outcomes) + 2) + "|"]
        for kind in kinds:
            counts = [self.counts[kind, outcome] for outcome in outcomes]
            rows.append(f"| {kind} | {sum(counts)} | " + " | ".join(map(str, counts)) + " |")
        return "\n".join(rows)

    def describe_failures(self, limit: int = 20) -> str:
        lines = [f"{o.mutant.kind} / {o.mutant.name}: {o.kind}: {o.detail[:300]}" for o in self.failures[:limit]]
        return "\n".join(lines)


# What a file of the artifact may be instead of a file: each can hang or mislead a careless reader.
SPECIAL = {
    "fifo": os.mkfifo,  # opening it for reading waits for a writer, forever
    "directory": lambda path: path.mkdir(),
    "link to /dev/zero": lambda path: path.symlink_to("/dev/zero"),  # endless zeros
    "link to /dev/urandom": lambda path: path.symlink_to("/dev/urandom"),
    "dangling link": lambda path: path.symlink_to(path.with_name("nowhere")),
}


class Sandbox:
    """A folder holding each case's files, the worker's home, and nothing else that may change."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name in ("cases", "work", "home", "tmp"):
            (root / name).mkdir(parents=True, exist_ok=True)
        (root / "canary.txt").write_text("kiln must never write here\n")
        self.log = root.parent / f"{root.name}.worker.log"  # outside: the worker's stderr may grow
        self._count = 0

    def place(self, mutant: Mutant, stem: str = "m") -> Path:
        """Write the mutant's files into a fresh case folder; returns the .vmfb path to load."""
        self._count += 1
        folder = self.root / "cases" / f"{self._count:05d}"
        folder.mkdir()
        for name, contents in mutant.files.items():
            if isinstance(contents, str):
                SPECIAL[contents](folder / name)
            elif contents is not None:
                (folder / name).write_bytes(contents)
        (folder / "neighbour.txt").write_text("another file beside the artifact\n")
        return folder / f"{stem}.vmfb"

    def snapshot(self) -> dict[str, tuple[int, int, int]]:
        entries = {}
        for path in self.root.rglob("*"):
            info = path.lstat()  # links and FIFOs as themselves
            entries[str(path.relative_to(self.root))] = (info.st_mode, info.st_size, info.st_mtime_ns)
        return entries

    def clear(self, vmfb: Path) -> None:
        shutil.rmtree(vmfb.parent)


class Worker:
    """A worker.py process, started on first use and again after each crash or hang."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.process: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self.restarts = 0

    def run(self, case: dict[str, Any], seconds: float = CASE_SECONDS) -> tuple[str, str]:
        """(kind, detail) for one case; crashes and hangs are kinds too."""
        process = self._started()
        assert process.stdin is not None
        try:
            process.stdin.write((json.dumps(case) + "\n").encode())
            process.stdin.flush()
        except BrokenPipeError:
            return self._died()
        line = self._read_line(seconds)
        if line is None:
            if process.poll() is not None:
                return self._died()
            self._stop()
            return "hang", f"no answer in {seconds:.0f}s"
        reply = json.loads(line)
        return reply["kind"], reply["detail"]

    def close(self) -> None:
        if self.process is not None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._stop()
            self.process = None

    def _started(self) -> subprocess.Popen[bytes]:
        if self.process is not None:
            return self.process
        root = self.sandbox.root
        environment = {**os.environ, "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"), "PYTHONDONTWRITEBYTECODE": "1"}
        with open(self.sandbox.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(WORKER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=root / "work",
                env=environment,
            )
        self._buffer = b""
        ready = self._read_line(START_SECONDS)
        if ready is None:
            raise RuntimeError(f"the reliability worker did not start; see {self.sandbox.log}")
        return self.process

    def _read_line(self, seconds: float) -> str | None:
        assert self.process is not None and self.process.stdout is not None
        stream = self.process.stdout.fileno()
        deadline = time.monotonic() + seconds
        with selectors.DefaultSelector() as selector:
            selector.register(stream, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(stream, 1 << 16)
                if not chunk:
                    return None
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def _died(self) -> tuple[str, str]:
        assert self.process is not None
        code = self.process.wait()
        self.process = None
        self.restarts += 1
        reason = signal.Signals(-code).name if code < 0 else f"exit code {code}"
        return "crash", reason

    def _stop(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.process = None
        self.restarts += 1


def run_mutants(
    mutants: list[Mutant], worker: Worker, inputs: list[str], reference: list[str], tally: Tally | None = None
) -> Tally:
    """Load and call each mutant in `worker`; every outcome classified, the sandbox checked after each."""
    tally = tally or Tally()
    sandbox = worker.sandbox
    for mutant in mutants:
        vmfb = sandbox.place(mutant)
        before = sandbox.snapshot()
        case = {"vmfb": str(vmfb), "inputs": inputs, "reference": reference, "options": mutant.options}
        kind, detail = worker.run(case)
        after = sandbox.snapshot()
        if kind == "error" and not _names_a_file(detail, vmfb):
            kind, detail = "unclear", f"the error names no file of the artifact: {detail}"
        if before != after:
            changed = sorted(set(before.items()) ^ set(after.items()))
            kind, detail = "touched", f"files changed: {changed[:4]}"
        tally.add(Outcome(mutant, kind, detail))
        sandbox.clear(vmfb)
    return tally


def _names_a_file(message: str, vmfb: Path) -> bool:
    files = (vmfb, vmfb.with_suffix(".json"), vmfb.with_suffix(".irpa"))
    return any(str(file) in message or file.name in message for file in files)
