"""The calling convention at run time: forward's call in, the compiled function's tensors through,
forward's result out, as the manifest describes them (manifest.FunctionSpec).

Around every call of a loaded function (module.Function):

- `arguments`: forward's arguments, checked against the recorded nesting, become the function's
  input tensors. A Python scalar the artifact was specialized on must have the same value (a call
  with another one is an error saying so); a symbolic int becomes a 0-d int64 tensor.
- `to_carried` / `from_carried`: a dtype the target lacks (float64 on a GPU target) crosses as the
  dtype the manifest says it is carried as (signedness is the boundary's: uint8 stays uint8).
- `write_back`: an input forward mutates gets its new value copied into the caller's tensor or
  array, as eager PyTorch mutates it in place.
- `results`: the function's output tensors become forward's result, nested as forward nests it,
  with the Python scalars and constants it returns.

Manifests before format 3 have no nesting: inputs are taken in order, and one output comes back
as a tensor, several as a tuple.
"""

from __future__ import annotations

import collections
import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import SUPPORTED_NODES

from kiln.errors import KilnError

from .manifest import FunctionSpec, TensorSpec, Tree
from .tensors import TORCH_DTYPES

STAGE = "runtime"

Value = torch.Tensor | np.ndarray


def is_plain(spec: FunctionSpec) -> bool:
    """Whether forward takes the function's input tensors as its positional arguments, in order, and
    returns its one output tensor: then `arguments` and `results` have nothing to do but the count
    check, which the call's plan makes too."""
    nodes = spec.arguments["tuple"] if spec.arguments is not None else None
    plain_in = nodes is None or nodes == [{"input": index} for index in range(len(spec.inputs))]
    plain_out = spec.results in (None, {"output": 0}) and len(spec.outputs) == 1
    return plain_in and plain_out


def arguments(spec: FunctionSpec, args: Sequence[Any]) -> list[Any]:
    """The compiled function's inputs, in order, from forward's positional arguments `args`."""
    if spec.arguments is None:
        return list(args)
    slots: list[Any] = [None] * len(spec.inputs)
    items = spec.arguments["tuple"]
    if len(args) != len(items):
        raise KilnError(f"expected {len(items)} input(s) ({describe_arguments(spec)}), got {len(args)}", stage=STAGE)
    for index, (node, value) in enumerate(zip(items, args, strict=True)):
        _take(node, value, f"argument {index}", slots)
    return slots


def _take(node: Tree, value: Any, where: str, slots: list[Any]) -> None:
    """Put the tensors of `value` into their `slots`, checking it against the recorded `node`."""
    if "input" in node:
        if node.get("scalar") == "int":
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise KilnError(f"{where} must be a Python int, got {type(value).__name__}", stage=STAGE)
            slots[node["input"]] = torch.tensor(int(value), dtype=torch.int64)
        else:
            slots[node["input"]] = value  # module.Function checks its type, dtype and shape
        return
    if "constant" in node:
        if not _same_constant(value, node):
            raise KilnError(
                f"{where} is {value!r}, but the artifact was compiled for {_shown(node)}: torch.export fixes "
                "Python scalars as constants",
                stage=STAGE,
                hint="recompile with this value in the example inputs, or pass it as a tensor",
            )
        return
    kind, items = _container(node)
    children = _children(kind, node, value, where)
    for (label, child), item in zip(children, items, strict=True):
        _take(item, child, f"{where}{label}", slots)


def _container(node: Tree) -> tuple[str, list[Tree]]:
    for kind in ("tuple", "list"):
        if kind in node:
            return kind, node[kind]
    if "dict" in node:
        return "dict", [item for _, item in node["dict"]]
    return ("namedtuple" if "namedtuple" in node else "node"), node["items"]


def _children(kind: str, node: Tree, value: Any, where: str) -> list[tuple[str, Any]]:
    """`value`'s children with a label each ("[0]", "['key']"), if it has the recorded shape."""
    if kind == "dict":
        keys = [key for key, _ in node["dict"]]
        if not isinstance(value, Mapping) or sorted(map(repr, value)) != sorted(map(repr, keys)):
            raise KilnError(f"{where} must be a dict with keys {keys}, got {_describe(value)}", stage=STAGE)
        return [(f"[{key!r}]", value[key]) for key in keys]
    items = node[kind] if kind in ("tuple", "list") else node["items"]
    if type(value) in SUPPORTED_NODES and not isinstance(value, (tuple, list)):
        value = SUPPORTED_NODES[type(value)].flatten_fn(value)[0]
    if not isinstance(value, (tuple, list)) or len(value) != len(items):
        raise KilnError(f"{where} must be a {kind} of {len(items)}, got {_describe(value)}", stage=STAGE)
    return [(f"[{index}]", child) for index, child in enumerate(value)]


def _same_constant(value: Any, node: Tree) -> bool:
    recorded = node["constant"]
    if node.get("repr"):
        return repr(value) == recorded
    if isinstance(value, bool) != isinstance(recorded, bool) or isinstance(value, str) != isinstance(recorded, str):
        return False
    if isinstance(recorded, float) and isinstance(value, (int, float)):
        return value == recorded or (recorded != recorded and value != value)  # NaN as NaN
    return value == recorded and (recorded is not None or value is None)


def _shown(node: Tree) -> str:
    return str(node["constant"]) if node.get("repr") else repr(node["constant"])


def _describe(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


def describe_arguments(spec: FunctionSpec) -> str:
    """forward's arguments as the artifact takes them: "x: float32[2, 3], n = 4"."""
    if spec.arguments is None:
        return ", ".join(input_.describe() for input_ in spec.inputs)
    return ", ".join(_describe_node(node, spec.inputs) for node in spec.arguments["tuple"])


def _describe_node(node: Tree, inputs: tuple[TensorSpec, ...]) -> str:
    if "input" in node:
        spec = inputs[node["input"]]
        return f"{spec.name}: int" if node.get("scalar") else spec.describe()
    if "constant" in node:
        return f"= {_shown(node)}"
    kind, items = _container(node)
    return f"{kind}({', '.join(_describe_node(item, inputs) for item in items)})"


def to_carried(value: Value, spec: TensorSpec) -> Value:
    """An input as the compiled function takes it: converted to the dtype it is carried as, if another."""
    if spec.carried_as is None:
        return value
    if isinstance(value, torch.Tensor):
        return value.to(TORCH_DTYPES[spec.carried_as])
    return value.astype(spec.carried_as)


def from_carried(tensor: torch.Tensor, spec: TensorSpec) -> torch.Tensor:
    """A result in the manifest's dtype, converted back from the dtype it was carried as.
    (Signedness is the boundary's: it reinterprets IREE's signless integers.)"""
    return tensor.to(TORCH_DTYPES[spec.dtype]) if spec.carried_as is not None else tensor


def write_back(spec: FunctionSpec, inputs: Sequence[Any], new_values: Sequence[Value]) -> None:
    """Copy each mutated input's new value into the caller's tensor or array, in place."""
    for index, value in zip(spec.writes_back, new_values, strict=True):
        target = inputs[index]
        try:
            if isinstance(target, torch.Tensor):
                with torch.no_grad():
                    target.copy_(value if isinstance(value, torch.Tensor) else torch.from_numpy(np.asarray(value)))
            elif isinstance(target, np.ndarray):
                np.copyto(target, value.numpy() if isinstance(value, torch.Tensor) else value)
        except (RuntimeError, ValueError, TypeError) as exc:  # a read-only array, a tensor that needs grad, ...
            raise KilnError(
                f"input '{spec.inputs[index].name}' could not be updated in place, as forward updates it ({exc})",
                stage=STAGE,
            ) from exc


def results(spec: FunctionSpec, outputs: Sequence[Any]) -> Any:
    """forward's result from the function's output tensors (host arrays or torch tensors)."""
    if spec.results is None:
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
    return _build(spec.results, outputs)


def _build(node: Tree, outputs: Sequence[Any]) -> Any:
    if "output" in node:
        value = outputs[node["output"]]
        return int(value.item()) if node.get("scalar") == "int" else value
    if "constant" in node:
        return node["constant"]
    kind, items = _container(node)
    children = [_build(item, outputs) for item in items]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "dict":
        return {key: child for (key, _), child in zip(node["dict"], children, strict=True)}
    cls = _import(node["namedtuple"] if kind == "namedtuple" else node["node"])
    if kind == "namedtuple":
        if cls is None:
            cls = collections.namedtuple(node["namedtuple"].rpartition(".")[2], node["fields"])  # type: ignore[misc]
        return cls(*children)
    if cls is not None and cls in SUPPORTED_NODES:
        try:
            rebuilt = SUPPORTED_NODES[cls].unflatten_fn(children, node.get("context"))
        except Exception:  # a container whose context the manifest cannot hold: its items, in order
            return tuple(children)
        return rebuilt if isinstance(rebuilt, cls) or not issubclass(cls, tuple) else cls(children)  # torch.Size
    return tuple(children)


def _import(qualified: str) -> Any:
    """The class `module.Name` names, or None where this process cannot import it."""
    module_name, _, name = qualified.rpartition(".")
    while module_name:
        try:
            value: Any = importlib.import_module(module_name)
        except ImportError:
            module_name, _, outer = module_name.rpartition(".")
            name = f"{outer}.{name}"
            continue
        for part in name.split("."):
            value = getattr(value, part, None)
        return value
    return None
