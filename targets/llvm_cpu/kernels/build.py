"""The kernels' object files: the C sources (the implicit-GEMM kernel's kiln_gemm_*.c, the row
kernels' kiln_rows.c) built by this machine's C compiler at first use, then cached.

IREE links the objects into the artifact's own code (an embedded ELF), so it is needed only where
kiln compiles, never where the artifact runs. Building it here instead of shipping a binary keeps
the package pure Python and the objects tied to their sources: the cache key is a SHA-256 over the
sources and the header they share, the compile flags and the compiler's version line. The code is freestanding (no libc, no
globals), position-independent and plain x86-64 outside the functions marked for AMX or
AVX512-BF16, so any gcc >= 11 or clang >= 12 builds it on an x86-64 host whatever the target CPU.
No compiler, or one that fails, is `Unavailable`: IREE's own code computes those contractions.

The objects live in `~/.cache/kiln/cpu-kernels/<key>/` (`$KILN_CACHE_DIR` when set, as for kiln's
GPU kernels); that folder is what iree-compile's object search path gets.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

# The implicit-GEMM kernel: its bf16 workgroup function, which calls the AMX or the AVX512-BF16 path,
# each path, and the f32 path with its workgroup function; then the row kernels. One object each.
SOURCES = tuple(
    Path(__file__).with_name(name)
    for name in ("kiln_gemm_bf16.c", "kiln_gemm_amx.c", "kiln_gemm_avx512bf16.c", "kiln_gemm_avx512f.c", "kiln_rows.c")
)
HEADERS = (Path(__file__).with_name("kiln_gemm.h"),)  # what the sources include: in the cache key too
OBJECT_NAMES = tuple(source.with_suffix(".o").name for source in SOURCES)  # what the executable's objects name
FLAGS = (
    "-O3", "-std=c17", "-ffreestanding", "-fno-builtin", "-fno-strict-aliasing", "-fPIC", "-fvisibility=hidden",
    "-fno-stack-protector", "-fno-asynchronous-unwind-tables", "-fno-plt", "-ffunction-sections", "-fdata-sections",
)  # fmt: skip
_TIMEOUT_S = 120


class Unavailable(Exception):
    """The kernel object cannot be built here; the message says why (for the user's note)."""


def cache_dir() -> Path:
    return Path(os.environ.get("KILN_CACHE_DIR") or Path.home() / ".cache" / "kiln") / "cpu-kernels"


@functools.cache
def kernel_objects() -> Path:
    """The folder of the built objects (from the cache, or compiled now and cached); Unavailable if
    they cannot be built."""
    if platform.machine() not in ("x86_64", "AMD64"):
        raise Unavailable(f"kiln's CPU kernels are built by the host's C compiler for x86-64; this host is {platform.machine()}")
    compiler = c_compiler()
    version = _version_line(compiler)
    digest = hashlib.sha256()
    for source in (*SOURCES, *HEADERS):
        digest.update(source.read_bytes())
    digest.update("\0".join((*FLAGS, version)).encode())
    folder = cache_dir() / digest.hexdigest()[:32]
    for source in SOURCES:
        _build(compiler, source, folder / source.with_suffix(".o").name)
    return folder


def _build(compiler: str, source: Path, target: Path) -> None:
    if target.is_file():
        return
    folder = target.parent
    folder.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=folder, suffix=".o.tmp")
    os.close(descriptor)
    try:
        result = subprocess.run(
            [compiler, *FLAGS, "-c", str(source), "-o", temporary], capture_output=True, text=True, timeout=_TIMEOUT_S
        )
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if "error" in line] or result.stderr.splitlines()
            raise Unavailable(f"{compiler} could not build {source.name}: {(errors or ['no output'])[0].strip()}")
        os.replace(temporary, target)  # concurrent builds write the same object: the last rename wins
    except subprocess.TimeoutExpired as exc:
        raise Unavailable(f"{compiler} took over {_TIMEOUT_S} s to build {source.name}") from exc
    finally:
        Path(temporary).unlink(missing_ok=True)


def c_compiler() -> str:
    """$CC, else the first of cc, gcc, clang on the PATH."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    raise Unavailable("no C compiler found (set CC, or install gcc or clang) to build kiln's CPU kernel")


def _version_line(compiler: str) -> str:
    try:
        result = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"{compiler} --version failed: {exc}") from exc
    return (result.stdout.splitlines() or [compiler])[0]
