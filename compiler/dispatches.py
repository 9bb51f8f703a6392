"""How many kernels a compiled artifact launches per call, counted in IREE's dumps of a compile.

IREE's `flow` phase holds one `flow.dispatch` op per kernel launch of the entry function. The
phase dump is found by its phase name (`NN-vmfb-KK-flow.mlir`): stage indices move when stages
are added.
"""

from __future__ import annotations

import re
from pathlib import Path

_DISPATCH = re.compile(r"\bflow\.dispatch @")


def count_dispatches(dump_dir: Path) -> int:
    """`flow.dispatch` ops in the flow phase dumped in `dump_dir`."""
    phases = sorted(dump_dir.glob("*-vmfb-*-flow.mlir"))
    if len(phases) != 1:
        raise FileNotFoundError(f"expected one IREE flow-phase dump in {dump_dir}, found {len(phases)}")
    return len(_DISPATCH.findall(phases[0].read_text()))
