"""Compiled kernels kept on disk, so that a model compiled again (or another model with the same
contraction) does not wait for Triton: about 1.6 s per kernel on a small machine.

One JSON file per kernel in `~/.cache/kiln/kernels/` (`$KILN_CACHE_DIR/kernels/` when set), named by a
SHA-256 over what decides the PTX: the kernels' source and the compile step (triton_source.py,
row_source.py and build.py as text), the installed Triton version, the contraction in the layout the kernel reads, and
the tiles. A failed compile is not cached: it is retried next time (and falls back again).

`warm` compiles the kernels a module needs and the cache lacks in worker processes, one per core, before
they are asked for one at a time: Triton compiles in the calling process, serially (a cold ResNet-50
in bf16: 25 kernels, 32 s on 2 cores).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from . import build
from .build import Kernel, Unsupported, compile_kernel, triton_version
from .contraction import Contraction
from .tiles import Tiles

SCHEMA = "kiln-kernel/1"
_SOURCES = ("triton_source.py", "row_source.py", "build.py")


def cache_dir() -> Path:
    return Path(os.environ.get("KILN_CACHE_DIR") or Path.home() / ".cache" / "kiln") / "kernels"


def cached_kernel(contraction: Contraction, tiles: Tiles) -> Kernel:
    """The kernel for `contraction` with `tiles`, from the cache or compiled now (and then cached).

    Raises build.Unsupported like compile_kernel."""
    path = cache_dir() / f"{_key(contraction, tiles)}.json"
    if path.is_file():
        data = json.loads(path.read_text())
        if data.get("schema") == SCHEMA:
            return Kernel(data["entry"], data["ptx"], data["num_warps"], data["shared_bytes"], tuple(data["grid"]), contraction, tiles)
    kernel = compile_kernel(contraction, tiles)
    record = {
        "schema": SCHEMA,
        "label": contraction.label,
        "tiles": tiles.label,
        **{name: value for name, value in asdict(kernel).items() if name not in ("contraction", "tiles")},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(descriptor, "w") as file:
        json.dump(record, file)
    os.replace(temporary, path)  # concurrent compiles write the same content: the last rename wins
    return kernel


def warm(wanted: Sequence[tuple[Contraction, Tiles]], workers: int | None = None) -> int:
    """Compile, in `workers` processes (default: one per core), the kernels of `wanted` the cache lacks,
    into the cache; returns how many were missing. Fewer than two missing, or one worker: nothing is
    done here (cached_kernel compiles them when asked). What build.check refuses is not sent, and a
    kernel a worker could not compile is left out: each fails again, with its reason, where it is
    asked for (so does everything, if a worker fails).

    The workers are plain `python -c` processes fed pickles on stdin, not multiprocessing's: its spawned
    children import the caller's `__main__` again, which a script calling kiln.compile at its top level
    would run again."""
    missing = list(dict.fromkeys(pair for pair in wanted if not (cache_dir() / f"{_key(*pair)}.json").is_file() and _buildable(pair[0])))
    workers = min(len(missing), workers or os.cpu_count() or 1)
    if len(missing) < 2 or workers < 2:
        return len(missing)
    command = [sys.executable, "-c", f"from {__name__} import build_from_stdin; build_from_stdin()"]
    children = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
    for index, child in enumerate(children):
        assert child.stdin is not None
        with child.stdin:
            child.stdin.write(pickle.dumps(missing[index::workers]))
    for child in children:
        child.wait()
    return len(missing)


def _buildable(contraction: Contraction) -> bool:
    """Whether build.check lets a kernel be generated for `contraction` here (Triton installed, its
    version, the kernel checked on a GPU): what it refuses falls back where it is asked for."""
    try:
        build.check(contraction)
    except Unsupported:
        return False
    return True


def build_from_stdin() -> None:
    """A warm worker: build the pickled (contraction, tiles) pairs on stdin into the cache."""
    for pair in pickle.loads(sys.stdin.buffer.read()):
        try:
            cached_kernel(*pair)
        except Unsupported:
            pass


def _key(contraction: Contraction, tiles: Tiles) -> str:
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update(Path(__file__).with_name(name).read_bytes())
    digest.update(f"{triton_version()}|{contraction!r}|{tiles!r}".encode())
    return digest.hexdigest()
