"""Inline vs external weights (`--params`) for one model: compile time, peak memory, artifact size.

    python benchmarks/weights_effect.py examples/zoo/gpt2.py

Each compile runs as its own `kiln compile` process, so peak memory (max RSS) is that compile's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KILN = str(Path(sys.executable).parent / "kiln")


def measure(model_file: str, params: str, directory: Path) -> dict[str, float]:
    output = directory / f"{params}.vmfb"
    start = time.perf_counter()
    command = [KILN, "compile", model_file, "-o", str(output), "--params", params, "-q"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)  # this child's own peak memory
    seconds = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"kiln compile --params {params} failed")
    archive = output.with_suffix(".irpa")
    return {
        "seconds": seconds,
        "peak_mib": usage.ru_maxrss / 1024,
        "vmfb_mib": output.stat().st_size / 2**20,
        "irpa_mib": archive.stat().st_size / 2**20 if archive.exists() else 0.0,
        "dumps_mib": sum(f.stat().st_size for f in (directory / f"{params}.stages").iterdir()) / 2**20,
    }


def main() -> None:
    model_file = sys.argv[1]
    print(f"| {model_file} | compile time | peak memory | .vmfb | .irpa | stage dumps |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for params in ("external", "inline"):
            r = measure(model_file, params, Path(tmp))
            print(
                f"| --params {params} | {r['seconds']:.1f} s | {r['peak_mib']:.0f} MiB | {r['vmfb_mib']:.1f} MiB "
                f"| {r['irpa_mib']:.1f} MiB | {r['dumps_mib']:.1f} MiB |"
            )


if __name__ == "__main__":
    main()
