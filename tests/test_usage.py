"""kiln.compiler.usage: a stage's CPU time and peak memory, its child processes' included."""

from __future__ import annotations

import sys

import pytest

from kiln.compiler.usage import measured, run_child

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

MiB = 2**20


def test_peak_is_this_blocks_own_high_water_mark():
    with measured() as before:
        pass
    with measured() as usage:
        block = bytearray(b"x" * (300 * MiB))  # touched, so resident
        del block
    assert before.peak is not None and usage.peak is not None
    assert usage.peak >= before.peak + 250 * MiB
    with measured() as after:  # the mark was reset: the freed block no longer counts
        pass
    assert after.peak is not None and after.peak < usage.peak - 250 * MiB


def test_a_childs_peak_and_cpu_time_are_its_own():
    big = bytearray(b"x" * (400 * MiB))  # this process is large; its child must not look as large
    program = "import time; b = bytearray(b'x' * (150 << 20)); start = time.process_time()\nwhile time.process_time() - start < 0.4: pass"
    with measured() as usage:
        result = run_child([sys.executable, "-c", program])
    del big
    assert result.returncode == 0, result.stderr
    assert 150 * MiB < usage.child_peak < 350 * MiB
    assert usage.cpu_seconds >= 0.4


def test_run_child_returns_the_output_and_exit_status():
    result = run_child([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"])
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_measurements_do_not_nest():
    with measured(), pytest.raises(RuntimeError, match="cannot nest"), measured():
        pass
