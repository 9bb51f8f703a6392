"""The calling convention of a captured program: what the artifact's function takes and returns, and
how that maps onto the Python call of `forward`.

Read off the functionalized ExportedProgram (after run_decompositions) once, before import;
boundary.py then makes the imported function's arguments and results exactly these, and the manifest
carries them to the runtime (kiln.runtime.convention), which applies them around every call:

- Arguments. Each tensor leaf of forward's arguments is an input of the function. A Python scalar that
  torch.export specialized is a constant: the manifest records its value, and a call with another
  value is an error. A scalar torch.export keeps symbolic (an int marked dynamic) is an input as a
  0-d int64 tensor.
- Results. forward's tensor leaves, in order (a symbolic int as a 0-d int64 tensor), then the new
  value of each input forward mutates, which the runtime copies into the caller's tensor. Constant
  leaves (a Python scalar, None, a size) are recorded, not computed. The nesting of both (tuples,
  lists, dicts, named tuples) is recorded as a tree whose leaves say where each value comes from.
- State. A buffer or parameter that forward mutates becomes a mutable global of the artifact, loaded
  at the start of each call and stored at its end: the artifact keeps it across calls, as the
  module does. It is lifted into an input here, before import, so that boundary.py finds it as an
  argument of the imported function rather than as a literal.

A dynamic dimension is recorded as its symbol's name ("s0"); the symbol's bounds come from
torch.export's range constraints, and two inputs that share a symbol must agree on its size.
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import (
    ConstantArgument,
    InputKind,
    InputSpec,
    OutputKind,
    SymIntArgument,
    TensorArgument,
)
from torch.utils._pytree import TreeSpec

from kiln.errors import KilnError
from kiln.runtime.manifest import Dim, TensorSpec
from kiln.runtime.tensors import dtype_name

STAGE = "aten"

Tree = Any  # the JSON form of a pytree: see tree_of


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorSpec, ...]  # what the function takes, in order
    outputs: tuple[TensorSpec, ...]  # forward's tensor results, in order (the function returns these first)
    symbols: dict[str, tuple[int, int | None]] = field(default_factory=dict)  # name -> (min, max or None)
    arguments: Tree = None  # forward's arguments: leaves {"input": i} or {"constant": v}
    results: Tree = None  # forward's result: leaves {"output": i} or {"constant": v}
    writes_back: tuple[int, ...] = ()  # the function's results after `outputs`: the input each is copied into
    state: tuple[str, ...] = ()  # buffers and parameters the artifact keeps across calls


@dataclass(frozen=True)
class Role:
    """What one argument or result of the function as imported becomes.

    kind: "tensor" (stays, as `index` of the inputs or outputs), "scalar" (a symbolic int, which
    becomes a 0-d int64 tensor at `index`), "constant" (a specialized scalar: dropped), "state"
    (the mutable global `name`), "write_back" (the `index`-th value copied back into an input).
    """

    kind: str
    index: int = 0
    name: str = ""
    value: Any = None  # "constant": the value


@dataclass(frozen=True)
class Plan:
    """The convention of one function, and how boundary.py rewrites the imported function into it."""

    signature: Signature
    arguments: tuple[Role, ...]  # one per argument of the function as imported
    results: tuple[Role, ...]  # one per value it returns as imported
    state_values: dict[str, torch.Tensor] = field(default_factory=dict)  # each global's initial value


def plan_convention(
    program: ExportedProgram, shared_state: frozenset[str] = frozenset(), captured: ExportedProgram | None = None
) -> Plan:
    """Read the convention of `program` (functionalized), and lift its state into inputs.

    Call it before the program is imported: afterwards the importer sees each buffer or parameter
    the program mutates, or that another function of the model mutates (`shared_state`), as an
    argument (boundary.py makes it a global again) instead of a frozen literal. Outputs are named
    as in `captured`, the program as torch.export captured it (before decompositions renamed them).
    """
    arguments = _Arguments.read(program, mutated_state_of(program) | shared_state)
    results = _Results.read(program, arguments.roles, iter(_output_names(captured or program)))
    in_spec, out_spec = program.call_spec.in_spec, program.call_spec.out_spec
    used = {dim for spec in arguments.inputs for dim in spec.shape if isinstance(dim, str)}
    signature = Signature(
        inputs=tuple(arguments.inputs),
        outputs=tuple(results.outputs),
        symbols={str(symbol): _bounds(bounds) for symbol, bounds in program.range_constraints.items() if str(symbol) in used},
        arguments=tree_of(in_spec.children()[0], iter(arguments.leaves)) if in_spec is not None else {"tuple": arguments.leaves},
        results=tree_of(out_spec, iter(results.leaves)) if out_spec is not None else {"tuple": results.leaves},
        writes_back=tuple(results.writes_back),
        state=tuple(arguments.state_values),
    )
    # The imported function takes the placeholders that the frozen import keeps, in graph order.
    placeholders = [node.name for node in program.graph.nodes if node.op == "placeholder"]
    argument_roles = tuple(arguments.roles[name] for name in placeholders if name in arguments.roles)
    return Plan(signature, argument_roles, tuple(results.roles), arguments.state_values)


@dataclass
class _Arguments:
    """forward's arguments as leaves (USER_INPUT specs, in order), and the state lifted into inputs."""

    inputs: list[TensorSpec] = field(default_factory=list)
    leaves: list[Tree] = field(default_factory=list)
    roles: dict[str, Role] = field(default_factory=dict)  # placeholder name -> its role
    state_values: dict[str, torch.Tensor] = field(default_factory=dict)

    @staticmethod
    def read(program: ExportedProgram, mutated_state: frozenset[str]) -> _Arguments:
        found = _Arguments()
        nodes = {node.name: node for node in program.graph.nodes}
        specs = program.graph_signature.input_specs
        for position, spec in enumerate(specs):
            arg = spec.arg
            if spec.kind in (InputKind.BUFFER, InputKind.PARAMETER) and spec.target in mutated_state:
                found.state_values[spec.target] = _state_value(program, spec)
                found.roles[arg.name] = Role("state", name=spec.target)
                specs[position] = InputSpec(InputKind.USER_INPUT, arg, target=None)  # imported as an argument
            elif spec.kind != InputKind.USER_INPUT:
                continue
            elif isinstance(arg, TensorArgument):
                found.roles[arg.name] = Role("tensor", len(found.inputs))
                found.leaves.append({"input": len(found.inputs)})
                found.inputs.append(_spec(arg.name, nodes[arg.name].meta["val"]))
            elif isinstance(arg, SymIntArgument):
                found.roles[arg.name] = Role("scalar", len(found.inputs))
                found.leaves.append({"input": len(found.inputs), "scalar": "int"})
                found.inputs.append(TensorSpec(arg.name, (), "int64"))
            elif isinstance(arg, ConstantArgument):
                found.roles[arg.name] = Role("constant", value=arg.value)
                found.leaves.append(_constant(arg.value))
            else:
                raise KilnError(f"forward's argument '{arg.name}' is a {type(arg).__name__}, which kiln cannot pass", stage=STAGE)
        return found


@dataclass
class _Results:
    """What the graph returns, in its order (state, then mutated inputs, then forward's leaves)."""

    outputs: list[TensorSpec] = field(default_factory=list)
    leaves: list[Tree] = field(default_factory=list)
    roles: list[Role] = field(default_factory=list)
    writes_back: list[int] = field(default_factory=list)

    @staticmethod
    def read(program: ExportedProgram, argument_roles: dict[str, Role], names: Iterator[str]) -> _Results:
        found = _Results()
        output_node = next(node for node in program.graph.nodes if node.op == "output")
        for spec, value in zip(program.graph_signature.output_specs, output_node.args[0], strict=True):
            arg = spec.arg
            if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
                found.roles.append(Role("state", name=spec.target))
            elif spec.kind == OutputKind.USER_INPUT_MUTATION:
                found.roles.append(Role("write_back", len(found.writes_back)))
                found.writes_back.append(argument_roles[spec.target].index)  # the mutated input's placeholder
            elif spec.kind == OutputKind.TOKEN:  # torch.export's effect tokens: the importer says what it makes of them
                found.roles.append(Role("constant"))
            elif spec.kind != OutputKind.USER_OUTPUT:
                raise KilnError(f"forward returns a {spec.kind.name.lower()}, which kiln cannot return", stage=STAGE)
            elif isinstance(arg, (TensorArgument, SymIntArgument)):
                name = next(names) or arg.name or f"output{len(found.outputs)}"
                scalar = isinstance(arg, SymIntArgument)
                found.roles.append(Role("scalar" if scalar else "tensor", len(found.outputs)))
                found.leaves.append({"output": len(found.outputs), "scalar": "int"} if scalar else {"output": len(found.outputs)})
                found.outputs.append(TensorSpec(name, (), "int64") if scalar else _spec(name, value.meta["val"]))
            elif isinstance(arg, ConstantArgument):
                next(names)
                found.roles.append(Role("constant", value=arg.value))
                found.leaves.append(_constant(arg.value))
            else:
                raise KilnError(f"forward returns a {type(arg).__name__}, which kiln cannot return", stage=STAGE)
        return found


def _output_names(program: ExportedProgram) -> list[str]:
    """The name of each of forward's outputs in `program` ("" for a constant)."""
    return [
        getattr(spec.arg, "name", "") or ""
        for spec in program.graph_signature.output_specs
        if spec.kind == OutputKind.USER_OUTPUT
    ]


def mutated_state_of(program: ExportedProgram) -> frozenset[str]:
    """The buffers and parameters a functionalized program mutates, by their names in the module."""
    return frozenset(
        spec.target
        for spec in program.graph_signature.output_specs
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION) and spec.target is not None
    )


def shared_state(programs: dict[str, ExportedProgram]) -> frozenset[str]:
    """The state any of a model's functions mutates, which all of them must then read from the artifact.

    `programs` are functional (decomposed, as the importer decomposes them before any is imported:
    importer.import_program's `on_decomposed`); torch.export's own are not functionalized yet, and
    functionalizing each once more for this alone doubled the import of a model with several functions.
    """
    if len(programs) < 2:
        return frozenset()
    return frozenset().union(*(mutated_state_of(program) for program in programs.values()))


def _state_value(program: ExportedProgram, spec: InputSpec) -> torch.Tensor:
    target = spec.target
    value = program.state_dict.get(target)
    if value is None:
        value = program.constants.get(target)
    if value is None:
        raise KilnError(f"the module's state '{target}' has no value to start from", stage=STAGE)
    return value.detach().clone()


def tree_of(spec: TreeSpec, leaves: Iterator[Tree]) -> Tree:
    """The JSON form of a pytree spec, with the next of `leaves` at each leaf.

    {"tuple": [...]}, {"list": [...]}, {"dict": [[key, node], ...]} (keys as given: str or int),
    {"namedtuple": "module.Name", "fields": [...], "items": [...]}, and for another registered
    container (an OrderedDict, a torch.Size, a torch.return_types struct, a model's output class)
    {"node": "module.Name", "context": <JSON or null>, "items": [...]}, which the runtime rebuilds
    through PyTorch's pytree registry when it can import the class.
    """
    if spec.is_leaf():
        return next(leaves)
    items = [tree_of(child, leaves) for child in spec.children()]
    if spec.type is tuple:
        return {"tuple": items}
    if spec.type is list:
        return {"list": items}
    if spec.type is dict:
        return {"dict": [[key, item] for key, item in zip(spec.context, items, strict=True)]}
    if spec.type is collections.namedtuple:
        cls = spec.context
        return {"namedtuple": _qualified(cls), "fields": list(cls._fields), "items": items}
    return {"node": _qualified(spec.type), "context": _json_or_none(spec.context), "items": items}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _json_or_none(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value


def _constant(value: Any) -> Tree:
    """A constant leaf: its value where JSON holds it (None, bool, int, float, str), else its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"constant": value}
    return {"constant": repr(value), "repr": True}


def _spec(name: str, value: torch.Tensor) -> TensorSpec:
    return TensorSpec(name=name, shape=tuple(_dim(d) for d in value.shape), dtype=dtype_name(value.dtype))


def _dim(size: int | torch.SymInt) -> Dim:
    if isinstance(size, torch.SymInt):
        expression = size.node.expr
        return int(expression) if expression.is_number else str(expression)
    return int(size)


def _bounds(ranges: object) -> tuple[int, int | None]:
    lower, upper = ranges.lower, ranges.upper  # type: ignore[attr-defined]
    return int(lower), (int(upper) if math.isfinite(float(upper)) else None)
