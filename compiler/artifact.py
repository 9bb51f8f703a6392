"""A compiled artifact in memory: the `.vmfb` bytes and their manifest.

`save` writes the artifact's files as one set, so that whatever stops it (an error, a full disk,
Ctrl-C, a kill) a later load finds the old artifact or the new one, never a mixture it cannot tell:

1. each file is written to a hidden temporary file beside its final name and flushed to disk;
   the manifest, written last, records the size and sha256 of the `.vmfb` and `.irpa` (external
   weights are written one at a time, from a checkpoint in slices, never all in memory at once);
2. then, holding the folder's lock (kiln.runtime.integrity.artifact_lock: a load waits, and so
   does another save) and with Ctrl-C held back until it is done, each is renamed into place:
   the `.irpa`, the `.vmfb`, and the `.json` last.

A failure before the renames leaves the old artifact as it was. Only a process killed between two
renames (microseconds) can leave a new file beside an old manifest, and `load` reports that file
as not matching. Temporary files a killed save leaves behind are removed by the next save to the
same path (kiln.compiler.scratch).
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kiln.errors import KilnError
from kiln.runtime.devices import iree_reason
from kiln.runtime.integrity import artifact_lock
from kiln.runtime.manifest import FileDigest, Manifest, manifest_path, package_versions, parameters_path
from kiln.runtime.module import LoadedModule

from .scratch import remove_stale, stamped
from .weights import Parameters

STAGE = "save"
# A full disk, a quota, a file size limit: the errors a retry elsewhere (or with room) fixes.
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


@dataclass(frozen=True)
class Compiled:
    """A compiled model: callable like the original (on the manifest's device), and saveable."""

    vmfb: bytes
    manifest: Manifest
    parameters: Parameters | None = None  # external weights, saved as <stem>.irpa
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def save(self, path: str | Path) -> Path:
        """Write `path` (.vmfb), its `.json` manifest and any `.irpa` weights beside it; returns the .vmfb path."""
        path = Path(path)
        check_output(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _remove_stale_temporaries(path)
            with ExitStack() as stack:
                staged: list[tuple[Path, Path]] = []  # (temporary, final), in the order they are renamed

                def stage(final: Path) -> Path:
                    temporary = stack.enter_context(_temporary(final))
                    staged.append((temporary, final))
                    return temporary

                files: dict[str, FileDigest] = {}
                if self.parameters is not None:
                    irpa = stage(parameters_path(path))
                    _write_archive(self.parameters, irpa)
                    files["irpa"] = _sealed(irpa)
                vmfb = stage(path)
                vmfb.write_bytes(self.vmfb)
                files["vmfb"] = _sealed(vmfb)
                manifest = stage(manifest_path(path))
                manifest.write_text(replace(self.manifest, files=files).to_json())
                _sealed(manifest)
                _commit(staged, path.parent)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if exc.errno in _NO_SPACE:
                reason = f"out of disk space ({reason})"
            where = f" ({exc.filename})" if exc.filename else ""
            raise KilnError(f"cannot write the artifact {path}: {reason}{where}; nothing was replaced", stage=STAGE) from exc
        return path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the artifact's first function, as `kiln.load(saved)(*args)` would."""
        return self.load()(*args, **kwargs)

    def load(self) -> LoadedModule:
        """The artifact loaded onto its manifest's device (once), e.g. for `.functions["decode"]`."""
        if "module" not in self._loaded:
            parameters = self.parameters.arrays() if self.parameters is not None else None
            self._loaded["module"] = LoadedModule(self.vmfb, self.manifest, parameters=parameters)
        return self._loaded["module"]


def versions() -> dict[str, str]:
    return package_versions(("torchkiln", "torch", "torch-mlir", "iree-base-compiler", "iree-base-runtime"))


def check_output(path: Path) -> None:
    """A KilnError now, before a compile, if an artifact could not be saved at `path`."""
    if path.suffix in (".json", ".irpa"):
        raise KilnError(
            f"cannot write the artifact to {path}: its manifest and weights take the .json and .irpa names",
            stage=STAGE,
            hint="name the artifact <name>.vmfb",
        )
    for file in (path, manifest_path(path), parameters_path(path)):
        if file.is_dir():
            raise KilnError(f"cannot write the artifact to {path}: {file} is a directory", stage=STAGE)
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # save creates the missing folders
    if not folder.is_dir():
        raise KilnError(f"cannot write the artifact to {path}: {folder} is not a directory", stage=STAGE)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise KilnError(f"cannot write the artifact to {path}: {folder} is not writable", stage=STAGE)


def _write_archive(parameters: Parameters, path: Path) -> None:
    try:
        parameters.save(path)
    except OSError:
        raise
    except Exception as exc:  # IREE reports a failed write (a full disk: OUT_OF_RANGE) as its own status
        raise OSError(errno.EIO, f"cannot write the parameter archive ({iree_reason(exc)})", str(path)) from exc


def _sealed(path: Path) -> FileDigest:
    """Flush a written file to disk and return its digest, read back from the file itself."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
        os.fsync(file.fileno())
    return FileDigest(bytes=path.stat().st_size, sha256=digest.hexdigest())


def _commit(staged: list[tuple[Path, Path]], folder: Path) -> None:
    """Rename every staged file into place, as one step for other kiln processes and for Ctrl-C."""
    with artifact_lock(folder, exclusive=True), _interrupts_held():
        for temporary, final in staged:
            os.replace(temporary, final)
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(descriptor)  # the renames themselves reach the disk
        finally:
            os.close(descriptor)


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive inside are delivered when it ends, to the handlers they had."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread can set handlers, and only it runs Python's
        return
    received: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, lambda number, frame: received.append(number)) for number in held}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in received:
            signal.raise_signal(number)


@contextmanager
def _temporary(final: Path) -> Iterator[Path]:
    """A new hidden file beside `final` (made with the usual permissions), removed on exit unless renamed."""
    temporary = final.with_name(stamped(f".{final.name}.", ".tmp"))
    os.close(os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        yield temporary
    finally:
        temporary.unlink(missing_ok=True)


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the temporary files that killed saves to `path` left (kiln.compiler.scratch)."""
    for file in (path, manifest_path(path), parameters_path(path)):
        remove_stale(path.parent, f".{file.name}.", ".tmp")
