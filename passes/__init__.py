"""kiln's pass pipeline: a registry of named passes and the default pipeline as data.

The pipeline is a tuple of pass groups; each group is one compiler stage (its name is the IR it
produces) and writes one dump. To add a pass: write it in its own file, add it to `PASSES`, and
name it in a group.
"""

from __future__ import annotations

from dataclasses import dataclass

from .pass_api import Pass
from .upstream import UPSTREAM_PASSES


@dataclass(frozen=True)
class PassGroup:
    name: str  # the stage name: the IR this group produces
    passes: tuple[str, ...]


PASSES: dict[str, Pass] = {p.name: p for p in UPSTREAM_PASSES}

DEFAULT_PIPELINE: tuple[PassGroup, ...] = (
    PassGroup(
        "prims",
        (
            "torch-match-quantized-custom-ops",
            "torch-backend-contract",
        ),
    ),
    PassGroup("linalg", ("torch-to-linalg",)),
)
