"""Load: many threads on one module, long runs of calls, loads and unloads, compiles in one process.

Each workload runs in a fresh process (load_child.py) that prints its figures; the test checks
them: no wrong result or error, resident memory flat (beyond a few pages of noise), file
descriptors and threads back where they were. The bounded part runs 5k calls; `make fuzz` the
figures the README reports (100k calls, 1,000 load cycles, 50 compiles).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import artifact

HERE = Path(__file__).parent
MiB = 1 << 20


def run_child(*arguments: object, timeout: float = 1800) -> dict:
    command = [sys.executable, str(HERE / "load_child.py"), *map(str, arguments)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"\n{' '.join(map(str, arguments[1:]))}: {figures}")
    return figures


def scale(bounded: int, long: int):
    return [pytest.param(bounded, id="bounded"), pytest.param(long, id="fuzz", marks=pytest.mark.fuzz)]


@pytest.mark.parametrize("calls", scale(5_000, 100_000))
@pytest.mark.parametrize("name", ["mlp", "dynamic"])
def test_threads_share_one_module(name, calls):
    """8 threads, one module, every result checked bit for bit (several batch sizes for `dynamic`)."""
    figures = run_child(artifact(name).vmfb, "threads", calls, 8)
    assert figures["errors"] == [] and figures["wrong"] == 0
    assert figures["calls"] >= calls - 8


@pytest.mark.parametrize("calls", scale(5_000, 100_000))
def test_sequential_calls_hold_memory_flat(calls):
    figures = run_child(artifact("mlp").vmfb, "sequential", calls)
    assert figures["wrong"] == 0
    assert figures["rss"][-1] - figures["rss"][0] < 4 * MiB
    assert figures["after"] == figures["before"]


@pytest.mark.parametrize("cycles", scale(100, 1_000))
@pytest.mark.parametrize("name", ["mlp", "mlp-external"])
def test_load_and_unload_cycles(name, cycles):
    figures = run_child(artifact(name).vmfb, "cycles", cycles)
    assert figures["wrong"] == 0
    assert figures["rss"][-1] - figures["rss"][0] < 16 * MiB
    assert figures["after"] == figures["before"]  # no descriptor (mmap'd files) or thread left behind


@pytest.mark.parametrize("compiles", scale(3, 50))
def test_compiles_in_one_process(compiles):
    figures = run_child("-", "compiles", compiles)
    assert figures["wrong"] == 0
    assert figures["growth_per_compile"] < 4 * MiB
    assert figures["after"] == figures["before"]
