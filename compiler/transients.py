"""Transient variants: each entry function of a CPU artifact also exported as `<name>$transients`,
which keeps its intermediate tensors in one buffer the caller passes (IREE's external transients).

Why: IREE allocates a call's transients (every intermediate tensor, padded copies included) from
the heap and frees them when the call ends. On the CPU that is the C heap: a large model's slab is
mapped fresh each call, so every 4 KiB page of it is faulted in and zeroed during the call, then
unmapped after it (one shoot-down of 16 threads' TLBs). On the 16-core host that was a third of
MobileNet's and GPT-2's call time (benchmarks/NOTES.md). With the storage the runtime's own, it is
mapped once per loaded module, its pages stay in (as transparent huge pages where the system
allows them), and a call only computes.

IREE writes "the transients of these results live in this buffer" as `hal.tensor.transients` on
the results, with the buffer an extra `!hal.buffer` argument; the artifact then reports the size
the buffer must have (`iree.abi.transients.size.constant` in the function's reflection, or a
`<name>$transients_size` function taking the same arguments). The original function stays as it
was, so tools (iree-run-module, `kiln run --driver`) call it with inputs alone.
"""

from __future__ import annotations

import math
import re

from torch_mlir import ir

from .functions import functions_by_name

TRANSIENTS_SUFFIX = "$transients"

_BUILTIN_TENSOR = re.compile(r"^tensor<((?:\d+x)*)([a-z]+\d*)")  # tensor<2x3xf32>
_TORCH_TENSOR = re.compile(r"^!torch\.vtensor<\[([\d,]*)\],([a-z]+\d*)")  # !torch.vtensor<[2,3],f32>
_BYTES = {"f64": 8, "i64": 8, "si64": 8, "ui64": 8, "f32": 4, "i32": 4, "si32": 4, "bf16": 2, "f16": 2, "i16": 2, "si16": 2}
_CONSTANTS = ("arith.constant", "torch.vtensor.literal")


def add_transient_variants(module: ir.Module, names: tuple[str, ...], smallest: int = 0) -> dict[str, str]:
    """Add `<name>$transients` beside each public function `name` in `names` whose inputs and results
    are all statically shaped tensors and whose largest intermediate tensor has at least `smallest`
    bytes; returns name -> variant name."""
    functions = functions_by_name(module)
    variants: dict[str, str] = {}
    with module.context, ir.Location.unknown():
        for name in names:
            op = functions.get(name)
            if op is None or largest_intermediate(op) < smallest:
                continue
            signature = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            inputs, results = [str(t) for t in signature.inputs], [str(t) for t in signature.results]
            if not results or not all(_static_tensor(t) for t in (*inputs, *results)):
                continue
            parsed = ir.Module.parse(_wrapper(name, inputs, results))  # [0] declares the callee
            module.body.append(parsed.body.operations[1].clone())
            variants[name] = name + TRANSIENTS_SUFFIX
    return variants


def remove_transient_variants(module: ir.Module, variants: dict[str, str]) -> None:
    """Take out of `module` the variants `add_transient_variants` added (name -> variant name)."""
    functions = functions_by_name(module)
    for variant in variants.values():
        functions[variant].erase()


def _static_tensor(type_text: str) -> bool:
    return type_text.startswith("tensor<") and "?" not in type_text


def _wrapper(name: str, inputs: list[str], results: list[str]) -> str:
    arguments = [f"%a{i}: {t}" for i, t in enumerate(inputs)]
    values = ", ".join(f"%a{i}" for i in range(len(inputs)))
    signature = f"({', '.join(inputs)}) -> ({', '.join(results)})"
    marked = "\n".join(
        f'  %t{i} = "hal.tensor.transients"(%r#{i}, %storage) : ({t}, !hal.buffer) -> {t}' for i, t in enumerate(results)
    )
    returned = ", ".join(f"%t{i}" for i in range(len(results)))
    return f"""
func.func private @"{name}"{signature}
func.func @"{name}{TRANSIENTS_SUFFIX}"({", ".join([*arguments, "%storage: !hal.buffer"])}) -> ({", ".join(results)}) {{
  %r:{len(results)} = func.call @"{name}"({values}) : {signature}
{marked}
  func.return {returned} : {", ".join(results)}
}}
"""


def largest_intermediate(function: ir.Operation) -> int:
    """The bytes of the largest statically shaped tensor an op of `function`'s body makes (constants
    aside: they are the artifact's, not a call's)."""
    largest = 0
    for block in function.regions[0].blocks:
        for op in block.operations:
            if op.operation.name in _CONSTANTS:
                continue
            for result in op.operation.results:
                largest = max(largest, _tensor_bytes(str(result.type)))
    return largest


def _tensor_bytes(type_text: str) -> int:
    builtin, torch = _BUILTIN_TENSOR.match(type_text), _TORCH_TENSOR.match(type_text)
    if builtin is not None:
        dims, dtype = [int(d) for d in builtin.group(1).split("x") if d], builtin.group(2)
    elif torch is not None:
        dims, dtype = [int(d) for d in torch.group(1).split(",") if d], torch.group(2)
    else:
        return 0
    return math.prod(dims) * _BYTES.get(dtype, 1)
