"""Out variants: each entry function also exported as `<name>$out`, which writes its results into
tensors the caller allocated (PyTorch's `out=` convention, one trailing argument per result).

Why: IREE's CUDA results live in its stream-ordered pool and cannot be handed to torch (3.13 cannot
export them), so on a GPU torch allocates each result and IREE writes into it; the tensor the user
gets is torch's own, on torch's device, with no copy. The original function stays as it was: the
CPU runtime exports IREE's results directly, and tools call it with inputs alone.

IREE's two front doors spell "write result N here" differently, so the wrapper does too:
- linalg hand-off: a tensor argument carrying `{iree.abi.output = N : index}` (IREE's native ABI);
- torch hand-off: a mutable `!torch.tensor` argument that `torch.overwrite.tensor.contents` fills
  (the form IREE's torch input conversion aliases to the caller's buffer).
Either way IREE writes into the caller's storage, also when a result is an input returned as is.
"""

from __future__ import annotations

from torch_mlir import ir

from .functions import functions_by_name

OUT_SUFFIX = "$out"


def add_out_variants(module: ir.Module, names: tuple[str, ...]) -> dict[str, str]:
    """Add `<name>$out` beside each public function `name` in `names`; returns name -> variant name.

    A function whose results are not all tensors (or that has none) gets no variant: the runtime
    then calls the function itself.
    """
    functions = functions_by_name(module)
    variants: dict[str, str] = {}
    with module.context, ir.Location.unknown():
        for name in names:
            op = functions.get(name)
            if op is None:
                continue
            signature = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            text = _wrapper(name, [str(t) for t in signature.inputs], [str(t) for t in signature.results])
            if text is None:
                continue
            parsed = ir.Module.parse(
                text
            )  # [0] declares the callee, so that the call parses; [1] is the variant
            module.body.append(parsed.body.operations[1].clone())
            variants[name] = name + OUT_SUFFIX
    return variants


def _wrapper(name: str, inputs: list[str], results: list[str]) -> str | None:
    """The out variant's text (after a declaration of `name`), or None where results are not all tensors."""
    if not results:
        return None
    if all(t.startswith("tensor<") for t in results):
        return _linalg_wrapper(name, inputs, results)
    if all(t.startswith("!torch.vtensor<") for t in results):
        return _torch_wrapper(name, inputs, results)
    return None


def _linalg_wrapper(name: str, inputs: list[str], results: list[str]) -> str:
    arguments = [f"%a{i}: {t}" for i, t in enumerate(inputs)]
    storage = [f"%out{i}: {t} {{iree.abi.output = {i} : index}}" for i, t in enumerate(results)]
    values = ", ".join(f"%a{i}" for i in range(len(inputs)))
    call_type = f"({', '.join(inputs)}) -> ({', '.join(results)})"
    returned = ", ".join(f"%r#{i}" for i in range(len(results)))
    return f"""
func.func private @{_quoted(name)}{_signature(inputs, results)}
func.func @{_quoted(name + OUT_SUFFIX)}({", ".join(arguments + storage)}) -> ({", ".join(results)}) {{
  %r:{len(results)} = func.call @{_quoted(name)}({values}) : {call_type}
  func.return {returned} : {", ".join(results)}
}}
"""


def _torch_wrapper(name: str, inputs: list[str], results: list[str]) -> str:
    mutable = [t.replace("!torch.vtensor<", "!torch.tensor<", 1) for t in results]
    arguments = [f"%a{i}: {t}" for i, t in enumerate(inputs)]
    storage = [f"%out{i}: {t}" for i, t in enumerate(mutable)]
    values = ", ".join(f"%a{i}" for i in range(len(inputs)))
    call_type = f"({', '.join(inputs)}) -> ({', '.join(results)})"
    overwrites = "\n".join(
        f"  torch.overwrite.tensor.contents %r#{i} overwrites %out{i} : {value}, {storage}"
        for i, (value, storage) in enumerate(zip(results, mutable, strict=True))
    )
    return f"""
func.func private @{_quoted(name)}{_signature(inputs, results)}
func.func @{_quoted(name + OUT_SUFFIX)}({", ".join(arguments + storage)}) {{
  %r:{len(results)} = func.call @{_quoted(name)}({values}) : {call_type}
{overwrites}
  func.return
}}
"""


def _signature(inputs: list[str], results: list[str]) -> str:
    return f"({', '.join(inputs)}) -> ({', '.join(results)})"


def _quoted(symbol: str) -> str:
    return f'"{symbol}"'
