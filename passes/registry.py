"""Every pass kiln knows, by name, imported on first use.

kiln's own passes are modules, one pass each, declared as the module's `PASS`
(`passes/fold_sin_cos.py` holds `fold-sin-cos`): this package's, the target-neutral ones, and
those of each target room's `passes/` folder (`targets/cuda/passes/outline_contractions.py`), which
the room places into the pipeline. Upstream passes are declared in upstream.py. The rooms' folders
are found by that convention, not imported by name: nothing of them is imported until `PASSES` is
first read, so importing kiln.passes and its pipelines stays free of torch_mlir and of the rooms,
and `kiln --help` fast.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
from collections.abc import Iterator, Mapping
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING

from kiln.errors import KilnError

if TYPE_CHECKING:
    from .pass_api import Pass

STAGE = "pipeline"  # the stage that errors about passes and pipelines name

# This package's modules that are not passes: the pass API, IR helpers, upstream's passes, and these.
NOT_PASSES = frozenset(
    {
        "pass_api", "torch_ir", "torch_build", "primitives", "fusion_report", "upstream", "registry", "pipelines",
        "strided_views", "row_steps", "matmul_epilogue", "quantized_weights",
    }
)


class _Registry(Mapping[str, "Pass"]):
    """Pass name -> Pass: upstream passes in the order upstream.py declares them, then kiln's by file name."""

    @cached_property
    def _passes(self) -> dict[str, Pass]:
        from .upstream import UPSTREAM_PASSES

        return {pass_.name: pass_ for pass_ in (*UPSTREAM_PASSES, *(module.PASS for module in self._modules.values()))}

    @cached_property
    def _modules(self) -> dict[str, ModuleType]:
        """kiln's pass modules by module name: this package's, then each room's."""
        names = [
            f"{package}.{name}"
            for package in (__package__, *_room_pass_packages())
            for name in sorted(module.name for module in pkgutil.iter_modules(_path(package)) if module.name not in NOT_PASSES)
        ]
        return {name: importlib.import_module(name) for name in names}

    def module_of(self, name: str) -> str | None:
        """The module that declares kiln's pass `name` (kiln.passes.x, kiln.targets.<room>.passes.x);
        None for an upstream pass."""
        return next((module for module, found in self._modules.items() if found.PASS.name == name), None)

    def __getitem__(self, name: str) -> Pass:
        return self._passes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._passes)

    def __len__(self) -> int:
        return len(self._passes)


def _path(package: str) -> list[str]:
    return list(importlib.import_module(package).__path__)


def _room_pass_packages() -> list[str]:
    """`kiln.targets.<room>.passes` for each target room that has passes, in room order."""
    spec = importlib.util.find_spec(ROOMS)
    folders = spec.submodule_search_locations if spec is not None else None
    rooms = sorted(module.name for module in pkgutil.iter_modules(folders or []) if module.ispkg)
    return [f"{ROOMS}.{room}.passes" for room in rooms if importlib.util.find_spec(f"{ROOMS}.{room}.passes") is not None]


ROOMS = "kiln.targets"  # each room's passes live in `<room>/passes/`
PASSES = _Registry()


def find_pass(name: str) -> Pass:
    """The pass called `name`; an error naming the closest ones when there is none."""
    if name in PASSES:
        return PASSES[name]
    close = difflib.get_close_matches(name, PASSES, n=3)
    raise KilnError(
        f"unknown pass '{name}'" + (f"; did you mean {', '.join(close)}?" if close else ""),
        stage=STAGE,
        hint="`kiln passes` lists every pass",
    )
