"""A child process that saves an artifact with a fault injected, for test_faults.py.

    python save_child.py SOURCE_VMFB OUTPUT_VMFB FAULT [COUNT]

SOURCE_VMFB (with its .json and .irpa) is re-saved to OUTPUT_VMFB through Compiled.save, so the
child needs no compiler run. FAULT is one of:
  kill-after-renames N       SIGKILL itself once N (1 to 3) of the save's renames are done
  interrupt-after-renames N  SIGINT itself (Ctrl-C) once N (1 to 3) renames are done
  kill-while-writing         SIGKILL itself while the .vmfb's temporary file is being written
  file-size-limit BYTES      RLIMIT_FSIZE: a file may grow to BYTES, no further (a full disk)
  loop N                     save N times (two of these at once race for the same path)
It prints "saved" after each save that returned, and exits 3 with the KilnError on the last line.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
from pathlib import Path

import iree.runtime as rt
import torch

from kiln.compiler import Compiled
from kiln.compiler.weights import Parameters
from kiln.errors import KilnError
from kiln.runtime.manifest import Manifest


def compiled_from(vmfb: Path) -> Compiled:
    manifest = Manifest.from_json(vmfb.with_suffix(".json").read_text())
    parameters = None
    if vmfb.with_suffix(".irpa").exists():
        index = rt.ParameterIndex()
        index.load(str(vmfb.with_suffix(".irpa")))
        tensors = {
            name: torch.from_numpy(rt.parameter_index_entry_as_numpy_flat_ndarray(entry).copy())
            for name, entry in index.items()
        }
        parameters = Parameters(tensors)
    return Compiled(vmfb.read_bytes(), manifest, parameters)


def after_renames(count: int, signal_number: int) -> None:
    real_replace = os.replace
    done = 0

    def replace(source, target):  # type: ignore[no-untyped-def]
        nonlocal done
        real_replace(source, target)
        done += 1
        if done == count:
            os.kill(os.getpid(), signal_number)

    os.replace = replace  # type: ignore[assignment]


def main() -> None:
    source, output, fault = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    compiled = compiled_from(source)
    if fault == "kill-while-writing":
        real_write = Path.write_bytes

        def write_bytes(self: Path, data: bytes) -> int:
            if self.name.endswith(".tmp") and ".vmfb." in self.name:
                with open(self, "wb") as file:
                    file.write(data[: len(data) // 2])
                    file.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return real_write(self, data)

        Path.write_bytes = write_bytes  # type: ignore[method-assign]
    elif fault == "file-size-limit":
        resource.setrlimit(resource.RLIMIT_FSIZE, (count, count))
    try:
        for _ in range(count if fault == "loop" else 1):
            if fault in ("kill-after-renames", "interrupt-after-renames") and _ == 0:
                number = signal.SIGKILL if fault.startswith("kill") else signal.SIGINT
                after_renames(count, number)
            compiled.save(output)
            print("saved", flush=True)
    except KilnError as error:
        print(str(error).splitlines()[0], flush=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
