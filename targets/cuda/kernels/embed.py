"""A compiled kernel inside an IREE module: an `hal.executable.source` and the function that dispatches it.

IREE 3.13 takes PTX it did not generate as an external executable: a `hal.executable.source` whose
`objects` property holds the PTX inline (bytes, NUL-terminated: no file to ship or find), one export
named as the PTX `.entry`, a pipeline layout with one storage-buffer binding per pointer, and the
launch's block size and dynamic shared memory on the export. A `flow.dispatch` of that export is an
ordinary op on tensors: IREE allocates, orders and launches it like its own dispatches.

The dispatching function replaces the body of the function outline-contractions made, keeping its
name and `!torch.vtensor` signature, so the call sites do not change. Around the dispatch it holds the
layout changes the kernel wants (NCHW -> NHWC activations, KCRS -> KRSC weights, a B[K, N] turned
into W[N, K]) and a convolution's bias, as torch ops: IREE computes those on weights once, when
the artifact is loaded, and fuses the others into the neighbouring dispatches. Text in IREE's custom
syntax, properties in `<{...}>` (3.13 rejects the `attributes {...}` spelling of older samples).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .build import Kernel
from .contraction import Attention, Contraction, Conv2d, Matmul, MaxPool2d, results, tied

# The target of the PTX object; IREE matches objects to the module's executable variants by it.
EXECUTABLE_TARGET = '#hal.executable.target<"cuda", "cuda-nvptx-fb">'


@dataclass(frozen=True)
class Signature:
    """The outlined function's operand and result types, as printed (`!torch.vtensor<[8,64],f32>`):
    one result, or a row program's or stacked weights' several."""

    operands: tuple[str, ...]
    results: tuple[str, ...]


def executable(kernel: Kernel, name: str) -> str:
    """The `hal.executable.source` op named `name` holding `kernel`."""
    ptx = kernel.ptx.encode() + b"\0"  # the driver loads PTX as a NUL-terminated string
    operands = len(kernel.contraction.operand_shapes())
    read_only = operands - tied(kernel.contraction)  # the operands it updates in place are last
    bindings = ",\n      ".join(
        ['#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">'] * read_only
        + ["#hal.pipeline.binding<storage_buffer, Indirect>"] * (operands - read_only + len(results(kernel.contraction)))
    )
    x, y, z = kernel.grid
    return f"""  hal.executable.source private @{name} <{{objects = #hal.executable.objects<{{
    {EXECUTABLE_TARGET} = [#hal.executable.object<{{data = dense<"0x{ptx.hex().upper()}"> : vector<{len(ptx)}xi8>}}>]
  }}>}}> {{
    hal.executable.export public @{kernel.entry} ordinal(0) layout(#hal.pipeline.layout<bindings = [
      {bindings}
    ], flags = Indirect>) count(%device: !hal.device) -> (index, index, index) {{
      %x = arith.constant {x} : index
      %y = arith.constant {y} : index
      %z = arith.constant {z} : index
      hal.return %x, %y, %z : index, index, index
    }} <workgroup_size = [{32 * kernel.num_warps} : index, 1 : index, 1 : index], workgroup_local_memory = {kernel.shared_bytes}>
  }}
"""


def function(kernel: Kernel, name: str, executable_name: str, signature: Signature, described: Contraction) -> str:
    """`func.func private @name` with `signature`, computing `described` (the contraction as the
    function receives it: NCHW, B as W[N, K] or B[K, N]; attention in the layouts the kernel reads) by
    dispatching `kernel`."""
    if tied(kernel.contraction):
        return _in_place(kernel, name, executable_name, signature)
    body = _Body()
    args = [f"%arg{index}" for index in range(len(signature.operands))]
    contraction = kernel.contraction
    shapes = contraction.operand_shapes()
    operands = args[: len(shapes)]
    if isinstance(contraction, (Conv2d, MaxPool2d)):
        operands = args[: 1 if isinstance(contraction, MaxPool2d) else 2]
        if contraction.layout == "nhwc":
            operands = [body.permute(value, type_, [0, 2, 3, 1]) for value, type_ in zip(operands, signature.operands, strict=False)]
        if isinstance(contraction, Conv2d) and contraction.fused:
            assert isinstance(described, Conv2d)
            operands += body.scale_and_shift(described, args[2:], signature.operands[2:])
    elif isinstance(described, Matmul) and described.b_layout != contraction.b_layout:
        for index in (1, *([len(operands) - 1] if described.gated else [])):  # B[K, N] (and B2): the kernel reads W[N, K]
            operands[index] = body.permute(operands[index], signature.operands[index], [1, 0])
    if isinstance(contraction, Attention) and contraction.mask == "bool":  # the kernel reads bytes
        operands[3] = body.to_int8(operands[3], signature.operands[3])
    written = results(contraction)
    dtypes = contraction.operand_dtypes()
    types = [_tensor(shape, dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
    torch_types = [_vtensor(shape, "si8" if dtype == "i8" else dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
    built = [body.to_builtin(value, torch_type, type_) for value, torch_type, type_ in zip(operands, torch_types, types, strict=True)]
    result_types = [_tensor(shape, dtype) for shape, dtype in written]
    dispatched = body.line(
        f"flow.dispatch @{executable_name}::@{kernel.entry}({', '.join(built)}) : "
        f"({', '.join(types)}) -> {result_types[0] if len(written) == 1 else '(' + ', '.join(result_types) + ')'}",
        count=len(written),
    )
    returned = [
        body.line(f"torch_c.from_builtin_tensor {dispatched}{f'#{index}' if len(written) > 1 else ''} : {type_} -> {_vtensor(shape, dtype)}")
        for index, (type_, (shape, dtype)) in enumerate(zip(result_types, written, strict=True))
    ]
    (result, *others), (result_shape, out_dtype) = returned, written[0]
    result_type = _vtensor(result_shape, out_dtype)
    if isinstance(described, Conv2d) and described.bias and not described.fused:  # added after the kernel
        result = body.add_bias(result, result_type, args[2], signature.operands[2], contraction)
    if isinstance(contraction, (Conv2d, MaxPool2d)) and contraction.result_layout == "nhwc":
        result = body.permute(result, result_type, [0, 3, 1, 2])
    if isinstance(contraction, Matmul) and contraction.stacked:  # each weight's product, a view of C
        edges = [sum(contraction.stacked[:index]) for index in range(len(contraction.stacked) + 1)]
        result, *others = (
            body.slice_columns(result, result_type, start, end, signature.results[index])
            for index, (start, end) in enumerate(itertools.pairwise(edges))
        )
    header = ", ".join(f"{arg}: {type_}" for arg, type_ in zip(args, signature.operands, strict=True))
    listed = ", ".join(signature.results)
    return (
        f"  func.func private @{name}({header}) -> {listed if len(signature.results) == 1 else '(' + listed + ')'} {{\n"
        + "".join(f"    {line}\n" for line in body.lines)
        + f"    return {', '.join([result, *others])} : {listed}\n  }}\n"
    )


def _in_place(kernel: Kernel, name: str, executable_name: str, signature: Signature) -> str:
    """The function of a kernel that updates its last operands in place: the dispatch's results tied to
    them (`-> %operand`), so IREE passes the operands' buffers to be written, after the results of
    its own (a RotaryCacheWrite's queries), as the function returns them."""
    body = _Body()
    dtypes = ["i64" if dtype == "si64" else dtype for dtype in (_dtype(type_) for type_ in signature.operands)]
    types = [_tensor(_shape(type_), dtype) for type_, dtype in zip(signature.operands, dtypes, strict=True)]
    built = [body.to_builtin(f"%arg{index}", type_, builtin) for index, (type_, builtin) in enumerate(zip(signature.operands, types, strict=True))]
    updated = len(built) - tied(kernel.contraction)
    own = [_tensor(shape, dtype) for shape, dtype in results(kernel.contraction)]
    listed = [*own, *built[updated:]]
    dispatched = body.line(
        f"flow.dispatch @{executable_name}::@{kernel.entry}({', '.join(built)}) : ({', '.join(types)}) -> "
        + (listed[0] if len(listed) == 1 else f"({', '.join(listed)})"),
        count=len(listed),
    )
    returned = [
        body.line(f"torch_c.from_builtin_tensor {dispatched}{f'#{index}' if len(listed) > 1 else ''} : {type_} -> {result_type}")
        for index, (type_, result_type) in enumerate(zip([*own, *types[updated:]], signature.results, strict=True))
    ]
    header = ", ".join(f"%arg{index}: {type_}" for index, type_ in enumerate(signature.operands))
    results_text = ", ".join(signature.results)
    return (
        f"  func.func private @{name}({header}) -> {results_text if len(returned) == 1 else '(' + results_text + ')'} {{\n"
        + "".join(f"    {line}\n" for line in body.lines)
        + f"    return {', '.join(returned)} : {results_text}\n  }}\n"
    )


class _Body:
    """The lines of a function body, each defining the next SSA value."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._ints: dict[int, str] = {}

    def line(self, text: str, count: int = 1) -> str:
        """`text` as the next line; its value, or with `count` results the name of all (`%3:2`)."""
        value = f"%{len(self.lines)}"
        self.lines.append(f"{value}{f':{count}' if count > 1 else ''} = {text}")
        return value

    def int_(self, value: int) -> str:
        if value not in self._ints:
            self._ints[value] = self.line(f"torch.constant.int {value}")
        return self._ints[value]

    def int_list(self, values: list[int]) -> str:
        items = [self.int_(value) for value in values]
        return self.line(f"torch.prim.ListConstruct {', '.join(items)} : ({', '.join(['!torch.int'] * len(items))}) -> !torch.list<int>")

    def permute(self, value: str, type_: str, order: list[int]) -> str:
        shape, dtype = _shape(type_), _dtype(type_)
        permuted = _vtensor(tuple(shape[axis] for axis in order), dtype)
        listed = self.int_list(order)
        return self.line(f"torch.aten.permute {value}, {listed} : {type_}, !torch.list<int> -> {permuted}")

    def slice_columns(self, value: str, type_: str, start: int, end: int, result_type: str) -> str:
        """Columns [start, end) of a 2-D `value`."""
        operands = f"{value}, {self.int_(1)}, {self.int_(start)}, {self.int_(end)}, {self.int_(1)}"
        return self.line(f"torch.aten.slice.Tensor {operands} : {type_}, !torch.int, !torch.int, !torch.int, !torch.int -> {result_type}")

    def to_builtin(self, value: str, type_: str, builtin: str) -> str:
        return self.line(f"torch_c.to_builtin_tensor {value} : {type_} -> {builtin}")

    def to_int8(self, value: str, type_: str) -> str:
        """A bool tensor as int8 (1 keeps, 0 masks), the bytes the attention kernel reads."""
        return self.to_dtype(value, type_, 1, _vtensor(_shape(type_), "si8"))

    def constant(self, kind: str, value: str = "") -> str:
        return self.line(f"torch.constant.{kind} {value}".rstrip())

    def scale_and_shift(self, conv: Conv2d, vectors: list[str], types: list[str]) -> list[str]:
        """The epilogue's per-channel scale and shift, [k_out] f32 each, as the kernel reads them: the
        steps of `conv.epilogue` (after its bias, if any) folded together, from the outlined function's
        vector arguments (bias, then one per step; IREE folds all this on constant weights)."""
        channels, f32 = conv.k_out, _vtensor((conv.k_out,), "f32")
        flat = []
        for value, type_ in zip(vectors, types, strict=True):
            value = self.line(f"torch.aten.view {value}, {self.int_list([channels])} : {type_}, !torch.list<int> -> {_vtensor((channels,), _dtype(type_))}")
            if _dtype(type_) != "f32":
                value = self.to_dtype(value, _vtensor((channels,), _dtype(type_)), 6, f32)  # 6: torch.float32
            flat.append(value)
        scale, shift = None, flat.pop(0) if conv.bias else None
        binary = lambda op, a, b: self.line(f"torch.aten.{op} {a}, {b} : {f32}, {f32} -> {f32}")  # noqa: E731
        with_alpha = lambda op, a, b: self.line(f"torch.aten.{op} {a}, {b}, {self.int_(1)} : {f32}, {f32}, !torch.int -> {f32}")  # noqa: E731
        for step, vector in zip(conv.epilogue, flat, strict=True):
            if step in ("add", "sub"):
                if shift is None:
                    shift = vector if step == "add" else self.line(f"torch.aten.neg {vector} : {f32} -> {f32}")
                else:
                    shift = with_alpha(f"{step}.Tensor", shift, vector)
            else:
                if scale is None:
                    scale = vector if step == "mul" else self.line(f"torch.aten.reciprocal {vector} : {f32} -> {f32}")
                else:
                    scale = binary(f"{step}.Tensor", scale, vector)
                if shift is not None:
                    shift = binary(f"{step}.Tensor", shift, vector)
        return [value for value in (scale, shift) if value is not None]

    def to_dtype(self, value: str, type_: str, code: int, result_type: str) -> str:
        operands = f"{value}, {self.int_(code)}, {self.constant('bool', 'false')}, {self.constant('bool', 'false')}, {self.constant('none')}"
        return self.line(f"torch.aten.to.dtype {operands} : {type_}, !torch.int, !torch.bool, !torch.bool, !torch.none -> {result_type}")

    def add_bias(self, value: str, type_: str, bias: str, bias_type: str, conv: Conv2d) -> str:
        """`value + bias`, the bias along the channel axis of the kernel's result layout."""
        if conv.result_layout == "nchw":
            bias = self.line(
                f"torch.aten.view {bias}, {self.int_list([1, conv.k_out, 1, 1])} : {bias_type}, !torch.list<int> -> "
                f"{_vtensor((1, conv.k_out, 1, 1), _dtype(bias_type))}"
            )
            bias_type = _vtensor((1, conv.k_out, 1, 1), _dtype(bias_type))
        return self.line(f"torch.aten.add.Tensor {value}, {bias}, {self.int_(1)} : {type_}, {bias_type}, !torch.int -> {type_}")


def _vtensor(shape: tuple[int, ...], dtype: str) -> str:
    return f"!torch.vtensor<[{','.join(str(size) for size in shape)}],{dtype}>"


def _tensor(shape: tuple[int, ...], dtype: str) -> str:
    return f"tensor<{'x'.join(str(size) for size in shape)}x{dtype}>"


def _shape(vtensor: str) -> tuple[int, ...]:
    sizes = vtensor[len("!torch.vtensor<[") : vtensor.index("]")]
    return tuple(int(size) for size in sizes.split(",") if size)


def _dtype(vtensor: str) -> str:
    return vtensor[vtensor.index("],") + 2 : -1]
