"""--verify: run the artifact on the example inputs and compare with eager PyTorch (kiln.runtime.numerics).

Each of forward's results is compared (a constant by value), and so is each input forward mutates,
after the call. Both sides get copies of the example inputs; a module that keeps state (the manifest
says so) is copied for eager, once: its functions run on one state in order, as the artifact's do,
and verifying leaves the user's module as it was.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from kiln.runtime.manifest import FunctionSpec
from kiln.runtime.numerics import EXACT, Comparison, compare, tolerance_for

from .artifact import Compiled
from .model_file import ModelSpec, with_weights


@dataclass(frozen=True)
class OutputCheck:
    name: str  # "<output>", or "<function>.<output>" for an artifact of several functions
    comparison: Comparison

    @property
    def ok(self) -> bool:
        return self.comparison.close


def verify(
    compiled: Compiled, spec: ModelSpec, rtol: float | None = None, atol: float | None = None
) -> tuple[OutputCheck, ...]:
    loaded = compiled.load()
    spec = with_weights(spec)  # a model built without its weights gets them from its checkpoint here
    checks = []
    copies: dict[int, torch.nn.Module] = {}  # a stateful module's copy, shared by its functions as the artifact's state is
    for entry in spec.entries:
        function = loaded.functions[entry.name]
        eager_inputs, inputs = _copied(entry.example_inputs), _copied(entry.example_inputs)
        eager = entry.module
        if function.spec.state:
            if id(eager) not in copies:
                copies[id(eager)] = copy.deepcopy(eager)
            eager = copies[id(eager)]
        with torch.no_grad():
            expected = getattr(eager, entry.method)(*eager_inputs)
        actual = function(*inputs)
        prefix = f"{entry.name}." if len(spec.entries) > 1 else ""
        wanted, _ = tree_flatten(expected)
        got, _ = tree_flatten(actual)
        names = _result_names(function.spec, len(wanted))
        pairs = list(zip(names, got, wanted, strict=False))
        if len(got) != len(wanted):
            problem = f"{len(got)} results, eager has {len(wanted)}"
            checks.append(OutputCheck(prefix + "results", Comparison(math.inf, math.inf, math.inf, EXACT, problem, False)))
            continue
        mutated, eager_mutated = _inputs_of(function.spec, inputs), _inputs_of(function.spec, eager_inputs)
        for index in function.spec.writes_back:
            pairs.append((f"{function.spec.inputs[index].name} (mutated)", mutated[index], eager_mutated[index]))
        checks.extend(OutputCheck(prefix + name, _compare(g, w, rtol, atol)) for name, g, w in pairs)
    return tuple(checks)


def _copied(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tree_map(lambda value: value.clone() if isinstance(value, torch.Tensor) else value, inputs)


def _leaves(node: Any) -> list[Any]:
    """The leaves of a manifest tree ({"input": i}, {"output": i}, {"constant": v}), in order."""
    if "input" in node or "output" in node or "constant" in node:
        return [node]
    items = node["dict"] if "dict" in node else node.get("tuple", node.get("list", node.get("items")))
    return [leaf for item in items for leaf in _leaves(item[1] if "dict" in node else item)]


def _inputs_of(spec: FunctionSpec, arguments: tuple[Any, ...]) -> list[Any]:
    """The values of forward's arguments that are the function's inputs, in the manifest's order."""
    values, _ = tree_flatten(arguments)
    if spec.arguments is None:
        return values
    found: list[Any] = [None] * len(spec.inputs)
    for leaf, value in zip(_leaves(spec.arguments), values, strict=True):
        if "input" in leaf:
            found[leaf["input"]] = value
    return found


def _result_names(spec: FunctionSpec, count: int) -> list[str]:
    """A name per leaf of forward's result: the output's, or the constant's value."""
    if spec.results is None:
        return [output.name for output in spec.outputs]
    names = [spec.outputs[leaf["output"]].name if "output" in leaf else f"constant {leaf['constant']!r}" for leaf in _leaves(spec.results)]
    return names + [f"output{index}" for index in range(len(names), count)]


def _compare(got: Any, want: Any, rtol: float | None, atol: float | None) -> Comparison:
    if isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor):
        return compare(got, want, tolerance_for(want.dtype, rtol, atol))
    same = type(got) is type(want) and (got == want or (got != got and want != want))
    problem = None if same else f"{got!r}, eager {want!r}"
    return Comparison(0.0 if same else math.inf, 0.0 if same else math.inf, 0.0 if same else math.inf, EXACT, problem, same)
