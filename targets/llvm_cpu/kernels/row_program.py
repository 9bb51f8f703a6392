"""MLIR text of a row program: a layer norm together with the elementwise op that produces its input,
in one dispatch that IREE compiles from kiln's vector code.

The C layer norm (kiln_rows.c) reads its input from memory, so the op producing it (a GELU and a
residual add, say) is a dispatch of its own before it: on a small tensor the two dispatches, each
waking the CPU's workers and each ending in a barrier, cost more than the arithmetic. A row program
computes the producer's body on 16-wide vectors inside the layer norm's row loop instead: each row's
values are computed once into a row buffer on the stack (L1), then reduced twice and normalized from
there. The body is the producer's own arith and math ops, so IREE lowers them (its erf, its bf16
rounding) exactly as in the elementwise dispatch it replaces.

Each program is its own `stream.executable` whose one export has the executable's name (IREE links
every executable of a module into one, where export names must differ); the layer norm rewrite
(layer_norm.py) decides which producers qualify and translates their bodies.
"""

from __future__ import annotations

from dataclasses import dataclass

from .mlir import Namer, dims, f32_bits, rows_per_workgroup

WIDTH = 16  # f32 lanes of an AVX-512 register
# The row buffer is on the worker's stack: 16 KiB at most, an eighth of what kiln lets a dispatch
# take there (runtime/devices.py), and a row that stays in L1.
MAX_COLS = 4096


@dataclass(frozen=True)
class Input:
    """One input of the producer, of `element`: `reads` "element" (its value per element, [rows][cols]),
    "column" (per column, broadcast over the rows: [cols]) or "row" (per row: [rows])."""

    reads: str
    element: str


@dataclass(frozen=True)
class LayerNormProgram:
    """y = layer_norm(x) over rows of x = the producer's body on `inputs`, then * weight and + bias
    (f32 [cols], each optional), stored in `out` (f32 or bf16).

    `body` computes x on vectors: lines reading `%in<i>` (vector<WIDTH x element> of input i) and
    defining `value` (vector<WIDTH x f32>)."""

    inputs: tuple[Input, ...]
    body: tuple[str, ...]
    value: str
    rows: int
    cols: int
    eps: float
    weight: bool
    bias: bool
    out: str

    def shape(self, index: int) -> list[int]:
        """The shape input `index` is passed in."""
        return {"element": [self.rows, self.cols], "column": [self.cols], "row": [self.rows]}[self.inputs[index].reads]


def vector(element: str) -> str:
    return f"vector<{WIDTH}x{element}>"


def _memref(shape: list[int], element: str) -> str:
    return f"memref<{dims(shape)}x{element}>"


def _tensor(shape: list[int], element: str) -> str:
    return f"tensor<{dims(shape)}x{element}>"


def _bindings(program: LayerNormProgram) -> list[tuple[str, list[int], str]]:
    """(name, shape, element) of each binding the program's function takes, in order: inputs, the
    weight and the bias (where there are), the result."""
    bindings = [(f"a{i}", program.shape(i), put.element) for i, put in enumerate(program.inputs)]
    bindings += [(role, [program.cols], "f32") for role, present in (("w", program.weight), ("b", program.bias)) if present]
    return [*bindings, ("y", [program.rows, program.cols], program.out)]


def executable(name: str, program: LayerNormProgram) -> str:
    """The stream.executable `name` with one export, also `name`, computing `program`, one workgroup per
    `rows_per_workgroup` rows."""
    p, f32, v = program, "f32", vector("f32")
    bindings = _bindings(p)
    views = "".join(
        f"\n        %m_{b} = stream.binding.subspan %{b}[%c0] : !stream.binding -> {_memref(shape, element)}"
        for b, shape, element in bindings
    )
    per_row = "".join(
        f"\n          %s{i} = memref.load %m_a{i}[%r] : {_memref([p.rows], put.element)}"
        f"\n          %in{i} = vector.broadcast %s{i} : {put.element} to {vector(put.element)}"
        for i, put in enumerate(p.inputs)
        if put.reads == "row"
    )
    loads = "".join(
        f"\n            %in{i} = vector.load %m_a{i}[{'%r, %c' if put.reads == 'element' else '%c'}] : "
        f"{_memref(p.shape(i), put.element)}, {vector(put.element)}"
        for i, put in enumerate(p.inputs)
        if put.reads != "row"
    )
    body = "".join(f"\n            {line}" for line in p.body)
    affine = ""
    y = "%n0"
    if p.weight:
        affine += f"\n            %wv = vector.load %m_w[%c] : {_memref([p.cols], f32)}, {v}\n            %n1 = arith.mulf {y}, %wv : {v}"
        y = "%n1"
    if p.bias:
        affine += f"\n            %bv = vector.load %m_b[%c] : {_memref([p.cols], f32)}, {v}\n            %n2 = arith.addf {y}, %bv : {v}"
        y = "%n2"
    if p.out != f32:
        affine += f"\n            %n3 = arith.truncf {y} : {v} to {vector(p.out)}"
        y = "%n3"
    per = rows_per_workgroup(p.rows, p.cols)
    arguments = ", ".join(f"%{b}: !stream.binding" for b, _, _ in bindings)
    return f"""
  stream.executable private @{name} {{
    stream.executable.export public @{name} workgroups(%gx: index) -> (index, index, index) {{
      %c1 = arith.constant 1 : index
      stream.return %gx, %c1, %c1 : index, index, index
    }}
    builtin.module {{
      func.func @{name}({arguments}) {{
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %step = arith.constant {WIDTH} : index
        %cols = arith.constant {p.cols} : index
        %rows = arith.constant {p.rows} : index
        %per = arith.constant {per} : index
        %n = arith.constant {float(p.cols)!r} : f32
        %eps = arith.constant {f32_bits(p.eps):#010x} : f32
        %zero = arith.constant dense<0.0> : {v}
        %wx = stream.dispatch.workgroup.id[0] : index{views}
        %row = memref.alloca() : {_memref([p.cols], f32)}
        %begin = arith.muli %wx, %per : index
        %stop = arith.addi %begin, %per : index
        %end = arith.minui %stop, %rows : index
        scf.for %r = %begin to %end step %c1 {{{per_row}
          %sum = scf.for %c = %c0 to %cols step %step iter_args(%acc = %zero) -> ({v}) {{{loads}{body}
            vector.store {p.value}, %row[%c] : {_memref([p.cols], f32)}, {v}
            %acc1 = arith.addf %acc, {p.value} : {v}
            scf.yield %acc1 : {v}
          }}
          %total = vector.reduction <add>, %sum : {v} into f32
          %mean = arith.divf %total, %n : f32
          %meanv = vector.broadcast %mean : f32 to {v}
          %squares = scf.for %c = %c0 to %cols step %step iter_args(%acc = %zero) -> ({v}) {{
            %x = vector.load %row[%c] : {_memref([p.cols], f32)}, {v}
            %d = arith.subf %x, %meanv : {v}
            %acc1 = vector.fma %d, %d, %acc : {v}
            scf.yield %acc1 : {v}
          }}
          %square_total = vector.reduction <add>, %squares : {v} into f32
          %variance = arith.divf %square_total, %n : f32
          %shifted = arith.addf %variance, %eps : f32
          %rstd = math.rsqrt %shifted : f32
          %rstdv = vector.broadcast %rstd : f32 to {v}
          scf.for %c = %c0 to %cols step %step {{
            %x = vector.load %row[%c] : {_memref([p.cols], f32)}, {v}
            %d = arith.subf %x, %meanv : {v}
            %n0 = arith.mulf %d, %rstdv : {v}{affine}
            vector.store {y}, %m_y[%r, %c] : {_memref([p.rows, p.cols], p.out)}, {vector(p.out)}
          }}
        }}
        return
      }}
    }}
  }}
"""


def dispatch(name: str, operands: list[str], program: LayerNormProgram, fresh: Namer) -> tuple[list[str], str]:
    """Lines dispatching executable `name` on `operands` (the inputs in the shapes `program.shape`
    gives, then the weight and bias where there are); returns (lines, the [rows][cols] result)."""
    per = rows_per_workgroup(program.rows, program.cols)
    gx, y = fresh("gx"), fresh("rowprogram")
    types = ", ".join(_tensor(shape, element) for _, shape, element in _bindings(program)[:-1])
    result = _tensor([program.rows, program.cols], program.out)
    return [
        f"{gx} = arith.constant {-(-program.rows // per)} : index",
        f"{y} = flow.dispatch @{name}::@{name}[{gx}]({', '.join(operands)}) : ({types}) -> {result}",
    ], y
