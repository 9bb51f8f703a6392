"""Temporary files a killed compile cannot remove, named so that the next compile can.

A process killed outright (SIGKILL, the OOM killer, a lost machine) runs no cleanup, so the
temporary files of a save, or iree-compile's working folder, would stay forever. Every such
temporary carries its owner in its name, `<prefix><host>-<pid>-<random><suffix>`; before making
new ones in a folder, kiln removes those of processes on this host that are no longer running.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
from pathlib import Path

HOST = re.sub(r"[^\w.]", "_", socket.gethostname())
_OWNER = re.compile(r"(?P<host>[\w.]+)-(?P<pid>\d+)-[0-9a-f]{8}")


def stamped(prefix: str, suffix: str = "") -> str:
    """A fresh name that says which process made it."""
    return f"{prefix}{HOST}-{os.getpid()}-{secrets.token_hex(4)}{suffix}"


def remove_stale(folder: Path, prefix: str, suffix: str = "") -> None:
    """Remove `folder`'s entries named by `stamped(prefix, suffix)` whose process has ended."""
    for entry in folder.glob(f"{_escaped(prefix)}*{_escaped(suffix)}"):
        owner = _OWNER.fullmatch(entry.name[len(prefix) : len(entry.name) - len(suffix)])
        if owner is None or owner["host"] != HOST or _running(int(owner["pid"])):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _escaped(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
