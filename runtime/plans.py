"""Checking a call against the manifest, once per input signature.

A call's inputs are checked for count, dtype, shape and the bounds of dynamic sizes before IREE
sees them. What a check establishes depends only on the inputs' types, dtypes and shapes, so it is
kept as a `Plan` under that signature (`signature_of`), and a later call with the same signature
costs a dictionary lookup. The plan also holds the result shapes (dynamic ones computed from the
manifest's expressions), for boundaries where the caller allocates the results.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from kiln.errors import KilnError

from .manifest import FunctionSpec, TensorSpec
from .tensors import TORCH_DTYPES, dtype_name

STAGE = "runtime"


@dataclass(frozen=True)
class Plan:
    """A checked input signature: the torch dtypes of what the function returns (as carried), and
    their shapes where known before the call."""

    result_dtypes: tuple[torch.dtype, ...]
    result_shapes: tuple[tuple[int, ...], ...] | None  # None: a result size the manifest cannot say ahead


def signature_of(args: Sequence[Any]) -> Hashable:
    """What a plan depends on: each input's kind, dtype and shape (torch and numpy dtypes never compare equal)."""
    try:
        return tuple((value.dtype, value.shape) for value in args)
    except AttributeError:
        return None  # not all arrays: `plan` says which input is wrong


def plan(spec: FunctionSpec, args: Sequence[Any]) -> Plan:
    """Check `args` against `spec` (KilnError naming the input otherwise), and plan the results."""
    inputs = spec.inputs
    if len(args) != len(inputs):
        expected = ", ".join(tensor.describe() for tensor in inputs)
        raise KilnError(f"expected {len(inputs)} input(s) ({expected}), got {len(args)}", stage=STAGE)
    sizes: dict[str, tuple[int, str]] = {}  # dynamic size symbol -> (size, the input that set it)
    for tensor, value in zip(inputs, args, strict=True):
        _check(spec, tensor, value, sizes)
    bound = {symbol: size for symbol, (size, _) in sizes.items()}
    shapes = tuple(_result_shape(output, bound) for output in spec.returns)
    return Plan(
        result_dtypes=tuple(TORCH_DTYPES[output.carried_as or output.dtype] for output in spec.returns),
        result_shapes=None if any(shape is None for shape in shapes) else shapes,  # type: ignore[arg-type]
    )


def _check(spec: FunctionSpec, tensor: TensorSpec, value: Any, sizes: dict[str, tuple[int, str]]) -> None:
    if not isinstance(value, (torch.Tensor, np.ndarray)):
        raise KilnError(
            f"input '{tensor.name}' must be a torch.Tensor or numpy array, got {type(value).__name__}",
            stage=STAGE,
        )
    got_dtype = dtype_name(value.dtype)
    if got_dtype != tensor.dtype:
        raise KilnError(f"input '{tensor.name}' has dtype {got_dtype}; expected {tensor.dtype}", stage=STAGE)
    shape = tuple(value.shape)
    if len(shape) != len(tensor.shape) or any(
        isinstance(want, int) and got != want for got, want in zip(shape, tensor.shape, strict=False)
    ):
        raise KilnError(
            f"input '{tensor.name}' has shape {list(shape)}; expected {list(tensor.shape)}", stage=STAGE
        )
    for axis, (got, symbol) in enumerate(zip(shape, tensor.shape, strict=True)):
        if isinstance(symbol, str):
            _check_dynamic(spec, tensor.name, axis, got, symbol, sizes)


def _check_dynamic(
    spec: FunctionSpec, name: str, axis: int, size: int, symbol: str, sizes: dict[str, tuple[int, str]]
) -> None:
    low, high = spec.symbols.get(symbol, [0, None])
    if size < (low or 0) or (high is not None and size > high):
        accepted = f"{low}..{high}" if high is not None else f">= {low}"
        raise KilnError(
            f"input '{name}' dimension {axis} is {size}; the artifact accepts {accepted} (dynamic size {symbol})",
            stage=STAGE,
        )
    bound, by = sizes.setdefault(symbol, (size, name))
    if bound != size:
        raise KilnError(
            f"input '{name}' dimension {axis} is {size}, but input '{by}' set dynamic size {symbol} to {bound}",
            stage=STAGE,
        )


def _result_shape(output: TensorSpec, sizes: dict[str, int]) -> tuple[int, ...] | None:
    dims = [dim if isinstance(dim, int) else evaluate(dim, sizes) for dim in output.shape]
    return None if any(dim is None for dim in dims) else tuple(dims)  # type: ignore[misc]


def evaluate(expression: str, sizes: dict[str, int]) -> int | None:
    """A result dimension from the manifest ("s0", "2*s0 + 1", "(s0 - 1)//2", "Max(1, s0)") at `sizes`.

    torch.export writes them in sympy's syntax; this reads the integer arithmetic part of it. None
    for anything else (a function it does not know, a symbol no input set): the caller then lets
    IREE size the result.
    """
    try:
        value = _evaluate(ast.parse(expression, mode="eval").body, sizes)
    except (SyntaxError, KeyError, ValueError, ZeroDivisionError, RecursionError):
        return None
    return value if isinstance(value, int) and value >= 0 else None


_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}  # fmt: skip
_CALLS = {
    "Max": max, "Min": min, "FloorDiv": operator.floordiv, "Mod": operator.mod,
    "CeilDiv": lambda a, b: -(-a // b), "floor": lambda a: a, "ceiling": lambda a: a,
}  # fmt: skip


def _evaluate(node: ast.expr, sizes: dict[str, int]) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return sizes[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, sizes)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_evaluate(node.left, sizes), _evaluate(node.right, sizes))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _CALLS
        and not node.keywords
    ):
        return _CALLS[node.func.id](*(_evaluate(argument, sizes) for argument in node.args))
    raise ValueError(f"not integer arithmetic: {ast.dump(node)}")
