"""Compiled kernels kept on disk, so that a model compiled again (or another model with the same
contraction) does not wait for Triton: about 1.6 s per kernel on a small machine.

One JSON file per kernel in `~/.cache/kiln/kernels/` (`$KILN_CACHE_DIR/kernels/` when set), named by a
SHA-256 over what decides the PTX: the kernels' source and the compile step (triton_source.py,
row_source.py and build.py as text), the installed Triton version, the contraction in the layout the kernel reads, and
the tiles. A failed compile is not cached: it is retried next time (and falls back again).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from .build import Kernel, compile_kernel, triton_version
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


def _key(contraction: Contraction, tiles: Tiles) -> str:
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update(Path(__file__).with_name(name).read_bytes())
    digest.update(f"{triton_version()}|{contraction!r}|{tiles!r}".encode())
    return digest.hexdigest()
