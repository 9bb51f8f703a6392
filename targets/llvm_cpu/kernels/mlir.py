"""MLIR text for the kernel inside an IREE module: the executable, the weight packing, the dispatch.

The executable is a `stream.executable` whose exports, `conv_bf16` and `conv_f32` (one per element
type the module uses) and the row kernels `softmax_<out>`, `moments_f32` and `layer_norm_<out>` (where taken), call the kernels' workgroup
functions from the linked objects (`hal.executable.objects`; IREE links them into the artifact's own
code). Everything else is plain tensor/linalg/flow text that iree-compile 3.13 reads as input, next
to kiln's linalg: the packing of a weight into the kernel's tile layout is linalg on the weight's
value, which IREE hoists into an initializer (it runs once, at load time), and the call is a
`flow.dispatch` of the export, which IREE schedules like its own dispatches.

Two IREE 3.13 bugs shape the executable: an object given inline (`data = dense<...>`) is written to
an empty file before linking, so the object goes by path (iree-compile gets its folder as the object
search path); and a `hal.import.fields` import of a function returning nothing is lowered to a call
that "must not produce values", so the kernel returns an int that is ignored.
"""

from __future__ import annotations

import struct

from .build import OBJECT_NAMES
from .geometry import Call

EXECUTABLE = "kiln_cpu_kernels"
# How the packed weights hold one K step of 32 values for 16 output channels: bf16 as 16 rows of
# (16 channels x 2 values), AMX's pairs; f32 as 32 rows of 16 channels. The step's K split into (rows[, pair]).
_K_STEP = {"bf16": (16, 2), "f32": (32,)}
# Matches any x86-64 llvm-cpu target, whatever its CPU and features.
_GENERIC_X86 = '#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">'
# The kernel's scalar arguments after the three buffers, in order (kiln_gemm.h's conv_geom_t).
SCALARS = ("nb", "hp", "wp", "cin", "oh", "ow", "cout", "kh", "kw", "stride", "rows", "nbw", "kc", "p_bstride", "xs")


def object_search_flag(folder: str) -> str:
    return f"--iree-hal-executable-object-search-path={folder}"


def export(element: str) -> str:
    return f"conv_{element}"


def executable(elements: tuple[str, ...], rows: tuple[str, ...] = ()) -> str:
    """The stream.executable holding the workgroup functions for `elements` and for the row kernels
    named in `rows` (the keys of _ROW_KERNELS); one executable per module."""
    objects = ", ".join(f'#hal.executable.object<{{path = "{name}"}}>' for name in OBJECT_NAMES)
    parts = [_export(element) for element in elements] + [_ROW_KERNELS[name] for name in rows]
    exports = "".join(export for export, _ in parts)
    functions = "".join(functions for _, functions in parts)
    return f"""
  stream.executable private @{EXECUTABLE} attributes {{
    hal.executable.objects = #hal.executable.objects<{{{_GENERIC_X86} = [{objects}]}}>
  }} {{{exports}
    builtin.module {{{functions}
    }}
  }}
"""


def _row_kernel(name: str, bindings: tuple[tuple[str, str, str], ...], scalars: tuple[str, ...], sizes: tuple[str, ...] = ()) -> tuple[str, str]:
    """The export `name` of a row kernel of kiln_rows.c and its function, which calls the workgroup
    function `kiln_<name>_workgroup(base, offset of each binding..., scalars..., workgroup x)`.
    `bindings` are (name, element type, element count: `%n` = rows * cols, `%rows`, or one of
    `sizes`, scalars the export takes after `scalars` and the kernel does not); every row kernel
    has the scalars `rows` and `cols`, and one workgroup per `gx`."""
    symbol = f"kiln_{name}_workgroup"
    declared = [f"%{b}b: memref<{element}>, %{b}o: index" for b, element, _ in bindings]
    declared += [f"%{scalar}_: index" for scalar in scalars] + ["%wx_: index"]
    types = [f"memref<{element}>, index" for _, element, _ in bindings] + ["index"] * (len(scalars) + 1)
    arguments = [f"%{b}: !stream.binding" for b, _, _ in bindings] + [f"%{scalar}: index" for scalar in (*scalars, *sizes)]
    views = "".join(
        f"""
        %{b}m = stream.binding.subspan %{b}[%c0] : !stream.binding -> memref<?x{element}>{{{size}}}
        %{b}base, %{b}off, %{b}s, %{b}st = iree_codegen.extract_strided_metadata %{b}m : memref<?x{element}> -> memref<{element}>, index, index, index"""
        for b, element, size in bindings
    )
    passed = [f"%{b}base, %{b}off" for b, _, _ in bindings] + [f"%{scalar}" for scalar in scalars] + ["%wx"]
    export = f"""
    stream.executable.export public @{name} workgroups(%gx: index) -> (index, index, index) {{
      %c1 = arith.constant 1 : index
      stream.return %gx, %c1, %c1 : index, index, index
    }}"""
    function = f"""
      func.func private @{symbol}({", ".join(declared)}) -> i32 attributes {{
        hal.import.bitcode, hal.import.fields = ["processor_data"], llvm.bareptr = true
      }}
      func.func @{name}({", ".join(arguments)}) {{
        %c0 = arith.constant 0 : index
        %wx = stream.dispatch.workgroup.id[0] : index
        %n = arith.muli %rows, %cols : index{views}
        %status = func.call @{symbol}({", ".join(passed)}) : ({", ".join(types)}) -> i32
        return
      }}"""
    return export, function


_ROW_KERNELS = {
    # scores [rows][cols], an additive bias [bias_rows][cols] for rows r % bias_rows (bias_rows 0: none;
    # the binding then holds one unused element), result [rows][cols] in f32 or bf16 (rows of at most
    # SOFTMAX_BF16_MAX_COLS); safe 1: fully masked rows give zeros
    **{
        f"softmax_{out}": _row_kernel(
            f"softmax_{out}", (("x", "f32", "%n"), ("b", "f32", "%bsize"), ("y", out, "%n")),
            ("rows", "cols", "brows", "safe", "per"), ("bsize",),
        )
        for out in ("f32", "bf16")
    },
    # a layer norm's statistics: x [rows][cols] -> mean [rows], rstd [rows]; eps as f32 bits
    "moments": _row_kernel(
        "moments_f32", (("x", "f32", "%n"), ("m", "f32", "%rows"), ("r", "f32", "%rows")), ("rows", "cols", "eps", "per")
    ),
    # the layer norm whose result y [rows][cols] is f32 or bf16: x f32, w and b [cols] f32 (or one
    # unused element each, as flags say); eps as f32 bits
    **{
        f"layer_norm_{out}": _row_kernel(
            f"layer_norm_{out}", (("x", "f32", "%n"), ("w", "f32", "%wsize"), ("b", "f32", "%bsize"), ("y", out, "%n")),
            ("rows", "cols", "eps", "flags", "per"), ("wsize", "bsize"),
        )
        for out in ("f32", "bf16")
    },
}  # fmt: skip
# The longest row the bf16 softmax takes (kiln_rows.c: its scratch row on the stack).
SOFTMAX_BF16_MAX_COLS = 8192
# The layer norm's flags (kiln_rows.c): which affine parameters it has.
LAYER_NORM_WEIGHT, LAYER_NORM_BIAS = 1, 2
# Rows a row kernel's workgroup takes: about this many bytes of input, and at least 16 workgroups.
ROW_WORKGROUP_BYTES = 64 << 10


def rows_per_workgroup(rows: int, cols: int) -> int:
    return max(1, min(ROW_WORKGROUP_BYTES // (4 * cols), -(-rows // 16)))


def f32_bits(value: float) -> int:
    """`value` as an f32's bits: the kernels take every scalar as an index."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _row_dispatch(
    export: str, tensors: list[tuple[str, str]], values: dict[str, int], results: tuple[str, ...], fresh: Namer
) -> tuple[list[str], str]:
    """Lines dispatching row kernel `export` on `tensors` ((value, type) each) with the index scalars
    `values` (`gx` the workgroup count, the rest in the export's order), giving `results` (types);
    returns (lines, the result: `%name`, its values `%name#i` where there are several)."""
    lines, names = [], {}
    for scalar, value in values.items():
        names[scalar] = fresh(f"{scalar}_")
        lines.append(f"{names[scalar]} = arith.constant {value} : index")
    scalars = [names[scalar] for scalar in values if scalar != "gx"]
    result = fresh("rows")
    operands = ", ".join([value for value, _ in tensors] + scalars)
    types = ", ".join([type_ for _, type_ in tensors] + ["index"] * len(scalars))
    named, typed = (result, results[0]) if len(results) == 1 else (f"{result}:{len(results)}", f"({', '.join(results)})")
    lines.append(f"{named} = flow.dispatch @{EXECUTABLE}::@{export}[{names['gx']}]({operands}) : ({types}) -> {typed}")
    return lines, result


def _unused(fresh: Namer, lines: list[str]) -> tuple[str, str]:
    """A one-element f32 tensor for a binding the kernel does not read."""
    value = fresh("none")
    lines.append(f"{value} = arith.constant dense<0.0> : tensor<1xf32>")
    return value, "tensor<1xf32>"


def layer_norm_dispatch(
    x: str, weight: str | None, bias: str | None, rows: int, cols: int, eps: float, out: str, fresh: Namer
) -> tuple[list[str], str]:
    """Lines dispatching the layer norm on `x` [rows][cols] (f32) with `weight` and `bias` [cols] (f32)
    or none; returns (lines, the [rows][cols] result in `out`, f32 or bf16)."""
    per = rows_per_workgroup(rows, cols)
    lines: list[str] = []
    tensors, flags = [(x, f"tensor<{rows}x{cols}xf32>")], 0
    for value, flag in ((weight, LAYER_NORM_WEIGHT), (bias, LAYER_NORM_BIAS)):
        if value is None:
            tensors.append(_unused(fresh, lines))
        else:
            flags |= flag
            tensors.append((value, f"tensor<{cols}xf32>"))
    values = {
        "gx": -(-rows // per), "rows": rows, "cols": cols, "eps": f32_bits(eps), "flags": flags, "per": per,
        "wsize": cols if weight is not None else 1, "bsize": cols if bias is not None else 1,
    }  # fmt: skip
    dispatch, y = _row_dispatch(f"layer_norm_{out}", tensors, values, (f"tensor<{rows}x{cols}x{out}>",), fresh)
    return lines + dispatch, y


def moments_dispatch(x: str, rows: int, cols: int, eps: float, fresh: Namer) -> tuple[list[str], str, str]:
    """Lines dispatching the row moments on `x` [rows][cols] (f32); returns (lines, mean, rstd), each [rows]."""
    per = rows_per_workgroup(rows, cols)
    values = {"gx": -(-rows // per), "rows": rows, "cols": cols, "eps": f32_bits(eps), "per": per}
    results = (f"tensor<{rows}xf32>", f"tensor<{rows}xf32>")
    lines, result = _row_dispatch("moments_f32", [(x, f"tensor<{rows}x{cols}xf32>")], values, results, fresh)
    return lines, f"{result}#0", f"{result}#1"


def softmax_dispatch(
    x: str, bias: str | None, rows: int, cols: int, bias_rows: int, safe: bool, out: str, fresh: Namer
) -> tuple[list[str], str]:
    """Lines dispatching the row softmax on `x` [rows][cols] (f32) with `bias` [bias_rows][cols] or
    none, fully masked rows giving zeros where `safe`; returns (lines, the [rows][cols] result in
    `out`, f32 or bf16)."""
    per = rows_per_workgroup(rows, cols)
    lines: list[str] = []
    scores = (x, f"tensor<{rows}x{cols}xf32>")
    mask = (bias, f"tensor<{bias_rows}x{cols}xf32>") if bias is not None else _unused(fresh, lines)
    values = {
        "gx": -(-rows // per), "rows": rows, "cols": cols, "brows": bias_rows, "safe": int(safe), "per": per,
        "bsize": bias_rows * cols or 1,
    }  # fmt: skip
    dispatch, y = _row_dispatch(f"softmax_{out}", [scores, mask], values, (f"tensor<{rows}x{cols}x{out}>",), fresh)
    return lines + dispatch, y


def _export(element: str) -> tuple[str, str]:
    """The conv export for `element`, and its functions for the executable's inner module."""
    scalars = ", ".join(f"%{s}: index" for s in SCALARS)
    declared = ", ".join(
        [
            f"%xb: memref<{element}>, %xo: index, %pb: memref<{element}>, %po: index, %yb: memref<f32>, %yo: index",
            *(f"%{s}_: index" for s in SCALARS),
            "%wx_: index, %wy_: index",
        ]
    )
    arguments = ", ".join(["%xbase, %xoff, %pbase, %poff, %ybase, %yoff", *(f"%{s}" for s in SCALARS), "%wx, %wy"])
    types = ", ".join(
        [f"memref<{element}>, index, memref<{element}>, index, memref<f32>, index", *("index" for _ in SCALARS), "index, index"]
    )
    name = export(element)
    return f"""
    stream.executable.export public @{name} workgroups(%gx: index, %gy: index) -> (index, index, index) {{
      %c1 = arith.constant 1 : index
      stream.return %gx, %gy, %c1 : index, index, index
    }}""", f"""
      func.func private @kiln_conv_{element}_workgroup({declared}) -> i32 attributes {{
        hal.import.bitcode, hal.import.fields = ["processor_data"], llvm.bareptr = true
      }}
      func.func @{name}(%x: !stream.binding, %p: !stream.binding, %y: !stream.binding, {scalars}, %psize: index) {{
        %c0 = arith.constant 0 : index
        %wx = stream.dispatch.workgroup.id[0] : index
        %wy = stream.dispatch.workgroup.id[1] : index
        %xn0 = arith.muli %nb, %hp : index
        %xn1 = arith.muli %xn0, %wp : index
        %xn = arith.muli %xn1, %xs : index
        %yn0 = arith.muli %nb, %oh : index
        %yn1 = arith.muli %yn0, %ow : index
        %yn = arith.muli %yn1, %cout : index
        %xm = stream.binding.subspan %x[%c0] : !stream.binding -> memref<?x{element}>{{%xn}}
        %pm = stream.binding.subspan %p[%c0] : !stream.binding -> memref<?x{element}>{{%psize}}
        %ym = stream.binding.subspan %y[%c0] : !stream.binding -> memref<?xf32>{{%yn}}
        %xbase, %xoff, %xsize, %xstrd = iree_codegen.extract_strided_metadata %xm : memref<?x{element}> -> memref<{element}>, index, index, index
        %pbase, %poff, %ps, %pst = iree_codegen.extract_strided_metadata %pm : memref<?x{element}> -> memref<{element}>, index, index, index
        %ybase, %yoff, %ys, %yst = iree_codegen.extract_strided_metadata %ym : memref<?xf32> -> memref<f32>, index, index, index
        %status = func.call @kiln_conv_{element}_workgroup({arguments}) : ({types}) -> i32
        return
      }}"""


class Namer:
    """Fresh SSA names inside one generated function."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"


def dims(shape: list[int] | tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def packed_type(call: Call, element: str = "bf16") -> str:
    """The packed weights: [n16][t][r][j][p] for bf16 (AMX's pairs), [n16][t][r][j] for f32."""
    rows, *pair = _K_STEP[element]
    lead = [call.nb] if call.batched else []
    return f"tensor<{dims([*lead, call.n16, call.ksteps, rows, 16, *pair])}x{element}>"


def _tiled(value: str, outer: list[int], call: Call, element: str, fresh: Namer) -> tuple[list[str], str]:
    """Lines taking `value` [*outer, n16 * 16, K] (cout padded) to the packed layout: K into steps
    of 32 as `_K_STEP` splits them, each step's channels inside its rows. One expand, one transpose."""
    c, lead = call, len(outer)
    split = _K_STEP[element]
    expanded = [*outer, c.n16, 16, c.ksteps, *split]
    groups = [[axis] for axis in range(lead)] + [[lead, lead + 1], list(range(lead + 2, len(expanded)))]
    permutation = [*range(lead), lead, lead + 2, lead + 3, lead + 1, *range(lead + 4, len(expanded))]
    x, p = fresh("w"), fresh("w")
    expanded_type = f"tensor<{dims(expanded)}x{element}>"
    return [
        f"{x} = tensor.expand_shape {value} {groups} output_shape {expanded} : "
        f"tensor<{dims([*outer, c.n16 * 16, c.ksteps * 32])}x{element}> into {expanded_type}",
        f"{p}e = tensor.empty() : {packed_type(c, element)}",
        f"{p} = linalg.transpose ins({x} : {expanded_type}) outs({p}e : {packed_type(c, element)}) permutation = {permutation}",
    ], p


def pack_weights(
    weight: str,
    call: Call,
    layout: str,
    fresh: Namer,
    conv: tuple[int, int, int] | None = None,
    element: str = "bf16",
    depth: int | None = None,
) -> tuple[list[str], str]:
    """Lines packing `weight` (of `element`) into the kernel's layout; returns (lines, packed value).

    layout "oihw": a torch conv weight [cout][cin][kh][kw], whose (cin, kh, kw) are `conv` (the call
    may walk them as a row window); "nk": a Linear weight [N][K]; "kn": a matmul's right-hand side
    [K][N], K being `depth` (the call's K when None). The packed tensor is P[n16][t][r][j][p] =
    W[co = 16*n16 + j][k = 32*t + 2*r + p] (bf16) or P[n16][t][r][j] = W[co = 16*n16 + j][k = 32*t + r]
    (f32), k over the call's K walk, cout padded to 16 and a matmul's K to the call's with zeros.
    """
    c, k, e = call, call.ksteps * 32, element
    depth = k if depth is None else depth
    lines = []
    if layout == "oihw":  # -> [cout][kh][kw][cin] -> [cout][kh][kw * cin] (padded to the window) -> [cout][K]
        assert conv is not None
        cin, kh, kw = conv
        t, f = fresh("w"), fresh("w")
        lines += [
            f"{t}e = tensor.empty() : tensor<{c.cout}x{kh}x{kw}x{cin}x{e}>",
            f"{t} = linalg.transpose ins({weight} : tensor<{c.cout}x{cin}x{kh}x{kw}x{e}>) "
            f"outs({t}e : tensor<{c.cout}x{kh}x{kw}x{cin}x{e}>) permutation = [0, 2, 3, 1]",
            f"{f} = tensor.collapse_shape {t} [[0], [1], [2, 3]] : "
            f"tensor<{c.cout}x{kh}x{kw}x{cin}x{e}> into tensor<{c.cout}x{kh}x{kw * cin}x{e}>",
        ]
        weight, row = f, k // kh
        if row != kw * cin:
            padded = fresh("w")
            lines += [
                f"{padded}z = arith.constant 0.0 : {e}",
                f"{padded} = tensor.pad {weight} low[0, 0, 0] high[0, 0, {row - kw * cin}] {{\n"
                f"    ^bb0(%i: index, %j: index, %l: index):\n      tensor.yield {padded}z : {e}\n    }} : "
                f"tensor<{c.cout}x{kh}x{kw * cin}x{e}> to tensor<{c.cout}x{kh}x{row}x{e}>",
            ]
            weight = padded
        g = fresh("w")
        lines.append(f"{g} = tensor.collapse_shape {weight} [[0], [1, 2]] : tensor<{c.cout}x{kh}x{row}x{e}> into tensor<{c.cout}x{k}x{e}>")
        weight = g
        depth = k
    elif layout == "kn":
        t = fresh("w")
        lines += [
            f"{t}e = tensor.empty() : tensor<{c.cout}x{depth}x{e}>",
            f"{t} = linalg.transpose ins({weight} : tensor<{depth}x{c.cout}x{e}>) "
            f"outs({t}e : tensor<{c.cout}x{depth}x{e}>) permutation = [1, 0]",
        ]
        weight = t
    if c.n16 * 16 != c.cout or depth != k:
        padded = fresh("w")
        lines += [
            f"{padded}z = arith.constant 0.0 : {e}",
            f"{padded} = tensor.pad {weight} low[0, 0] high[{c.n16 * 16 - c.cout}, {k - depth}] {{\n"
            f"    ^bb0(%i: index, %j: index):\n      tensor.yield {padded}z : {e}\n    }} : "
            f"tensor<{c.cout}x{depth}x{e}> to tensor<{c.n16 * 16}x{k}x{e}>",
        ]
        weight = padded
    tiled, packed = _tiled(weight, [], c, e, fresh)
    return lines + tiled, packed


def pack_batched(value: str, call: Call, fresh: Namer, element: str = "bf16", depth: int | None = None) -> tuple[list[str], str]:
    """Lines packing a per-image right-hand side [nb][K][N] on every call: attention's K^T and V. K is
    `depth` (the call's K when None), padded to the call's with zeros."""
    c, e = call, element
    k, n, b = c.ksteps * 32, c.cout, c.nb
    depth = k if depth is None else depth
    t = fresh("b")
    lines = [
        f"{t}e = tensor.empty() : tensor<{b}x{n}x{depth}x{e}>",
        f"{t} = linalg.transpose ins({value} : tensor<{b}x{depth}x{n}x{e}>) outs({t}e : tensor<{b}x{n}x{depth}x{e}>) "
        "permutation = [0, 2, 1]",
    ]
    source = t
    if c.n16 * 16 != n or depth != k:
        padded = fresh("b")
        lines += [
            f"{padded}z = arith.constant 0.0 : {e}",
            f"{padded} = tensor.pad {source} low[0, 0, 0] high[0, {c.n16 * 16 - n}, {k - depth}] {{\n"
            f"    ^bb0(%i: index, %j: index, %l: index):\n      tensor.yield {padded}z : {e}\n    }} : "
            f"tensor<{b}x{n}x{depth}x{e}> to tensor<{b}x{c.n16 * 16}x{k}x{e}>",
        ]
        source = padded
    tiled, packed = _tiled(source, [b], c, e, fresh)
    return lines + tiled, packed


def row_padding(k: int, element: str = "bf16") -> int:
    """Extra elements for activation rows of K values: rows a multiple of 4 KiB apart put all the rows
    of a block in one L1 set, so such rows get 64 bytes more (the kernel never reads them)."""
    size = 2 if element == "bf16" else 4
    return 64 // size if (size * k) % 4096 == 0 else 0


def pad_last(value: str, shape: list[int], extra: int, fresh: Namer, element: str = "bf16") -> tuple[list[str], str]:
    """Lines padding the last dimension of `value` by `extra` zeros (none when `extra` is 0)."""
    if not extra:
        return [], value
    rank = len(shape)
    padded = [*shape[:-1], shape[-1] + extra]
    name = fresh("pad")
    indices = ", ".join(f"%i{i}: index" for i in range(rank))
    return [
        f"{name}z = arith.constant 0.0 : {element}",
        f"{name} = tensor.pad {value} low[{', '.join(['0'] * rank)}] high[{', '.join(['0'] * (rank - 1) + [str(extra)])}] {{\n"
        f"    ^bb0({indices}):\n      tensor.yield {name}z : {element}\n"
        f"    }} : tensor<{dims(shape)}x{element}> to tensor<{dims(padded)}x{element}>",
    ], name


def converted(value: str, name: str, shape: list[int], source: str, target: str) -> list[str]:
    """Lines making `name`, `value` (a tensor of `shape` and `source`) converted element by element
    to `target`: widened (arith.extf) or rounded to nearest even (arith.truncf)."""
    rank = len(shape)
    identity = f"affine_map<({', '.join(f'd{i}' for i in range(rank))}) -> ({', '.join(f'd{i}' for i in range(rank))})>"
    parallel = ", ".join(['"parallel"'] * rank)
    convert = "arith.extf" if target == "f32" else "arith.truncf"
    return [
        f"{name}e = tensor.empty() : tensor<{dims(shape)}x{target}>",
        f"{name} = linalg.generic {{indexing_maps = [{identity}, {identity}], iterator_types = [{parallel}]}} "
        f"ins({value} : tensor<{dims(shape)}x{source}>) outs({name}e : tensor<{dims(shape)}x{target}>) {{\n"
        f"    ^bb0(%in: {source}, %out: {target}):\n      %c = {convert} %in : {source} to {target}\n      linalg.yield %c : {target}\n"
        f"    }} -> tensor<{dims(shape)}x{target}>",
    ]


def truncate(value: str, shape: list[int], fresh: Namer) -> tuple[list[str], str]:
    """Lines rounding f32 `value` to bf16 (exact where its values are bf16 values)."""
    name = fresh("t")
    return converted(value, name, shape, "f32", "bf16"), name


def dispatch(x: str, packed: str, call: Call, fresh: Namer, element: str = "bf16") -> tuple[list[str], str]:
    """Lines dispatching the kernel on padded NHWC `x` (of `element`); returns (lines, the NHWC f32 result)."""
    c = call
    values = {
        **{s: getattr(c, s) for s in SCALARS},
        "psize": c.packed_elements,
        "gx": c.grid[0],
        "gy": c.grid[1],
    }
    lines, names = [], {}
    for scalar, value in values.items():
        names[scalar] = fresh(f"c_{scalar}_")
        lines.append(f"{names[scalar]} = arith.constant {value} : index")
    y = fresh("y")
    x_type = f"tensor<{c.nb}x{c.hp}x{c.wp}x{c.xs}x{element}>"
    y_type = f"tensor<{c.nb}x{c.oh}x{c.ow}x{c.cout}xf32>"
    operands = ", ".join([x, packed, *(names[s] for s in SCALARS), names["psize"]])
    types = ", ".join([x_type, packed_type(c, element), *("index" for _ in SCALARS), "index"])
    lines.append(
        f"{y} = flow.dispatch @{EXECUTABLE}::@{export(element)}[{names['gx']}, {names['gy']}]({operands}) : ({types}) -> {y_type}"
    )
    return lines, y
