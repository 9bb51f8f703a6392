"""Every pass kiln knows, by name, imported on first use.

kiln's own passes are this package's modules, one pass each, declared as the module's `PASS`
(`passes/fold_sin_cos.py` holds `fold-sin-cos`); upstream passes are declared in upstream.py.
Nothing of them is imported until `PASSES` is first read, so importing kiln.passes and its
pipelines stays free of torch_mlir, and `kiln --help` fast.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING

from kiln.errors import KilnError

if TYPE_CHECKING:
    from .pass_api import Pass

STAGE = "pipeline"  # the stage that errors about passes and pipelines name

# This package's modules that are not passes: the pass API, IR helpers, upstream's passes, and these.
NOT_PASSES = frozenset(
    {
        "pass_api", "torch_ir", "torch_build", "primitives", "fusion_report", "upstream", "registry", "pipelines",
        "strided_views",
    }
)


class _Registry(Mapping[str, "Pass"]):
    """Pass name -> Pass: upstream passes in the order upstream.py declares them, then kiln's by file name."""

    @cached_property
    def _passes(self) -> dict[str, Pass]:
        from .upstream import UPSTREAM_PASSES

        package = importlib.import_module(__package__)
        modules = sorted(module.name for module in pkgutil.iter_modules(package.__path__) if module.name not in NOT_PASSES)
        ours = [importlib.import_module(f"{__package__}.{name}").PASS for name in modules]
        return {pass_.name: pass_ for pass_ in (*UPSTREAM_PASSES, *ours)}

    def __getitem__(self, name: str) -> Pass:
        return self._passes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._passes)

    def __len__(self) -> int:
        return len(self._passes)


PASSES: Mapping[str, Pass] = _Registry()


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
