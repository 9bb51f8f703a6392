"""Everything a compile can be asked to do differently, in one frozen value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kiln.passes import DEFAULT_PIPELINE, PassGroup


@dataclass(frozen=True)
class CompileOptions:
    target: str = "llvm-cpu"
    cpu: str = "host"  # llvm-cpu: LLVM CPU name to compile for ("host" = this machine)
    opt_level: str = "O3"  # IREE's own default is O0
    extra_iree_flags: tuple[str, ...] = ()
    pipeline: tuple[PassGroup, ...] = DEFAULT_PIPELINE
    dump_dir: Path | None = None  # None: no stage dumps
    stop_after: str | None = None  # a stage name; stop there and keep the dumps
