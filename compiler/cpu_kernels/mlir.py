"""MLIR text for the kernel inside an IREE module: the executable, the weight packing, the dispatch.

The executable is a `stream.executable` whose one export, `conv_bf16`, calls the kernel's workgroup
function from the linked object (`hal.executable.objects`; IREE links it into the artifact's own
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

from .build import OBJECT_NAME
from .geometry import Call

EXECUTABLE = "kiln_cpu_kernels"
EXPORT = "conv_bf16"
# Matches any x86-64 llvm-cpu target, whatever its CPU and features.
_GENERIC_X86 = '#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64">'
# The kernel's scalar arguments after the three buffers, in order (kiln_amx.c's conv_geom_t).
SCALARS = ("nb", "hp", "wp", "cin", "oh", "ow", "cout", "kh", "kw", "stride", "rows", "nbw", "kc", "p_bstride", "xs")


def object_search_flag(folder: str) -> str:
    return f"--iree-hal-executable-object-search-path={folder}"


def executable() -> str:
    """The stream.executable holding the workgroup function (one per module)."""
    obj = f'#hal.executable.object<{{path = "{OBJECT_NAME}"}}>'
    scalars = ", ".join(f"%{s}: index" for s in SCALARS)
    declared = ", ".join(
        [
            "%xb: memref<bf16>, %xo: index, %pb: memref<bf16>, %po: index, %yb: memref<f32>, %yo: index",
            *(f"%{s}_: index" for s in SCALARS),
            "%wx_: index, %wy_: index",
        ]
    )
    arguments = ", ".join(["%xbase, %xoff, %pbase, %poff, %ybase, %yoff", *(f"%{s}" for s in SCALARS), "%wx, %wy"])
    types = ", ".join(
        ["memref<bf16>, index, memref<bf16>, index, memref<f32>, index", *("index" for _ in SCALARS), "index, index"]
    )
    return f"""
  stream.executable private @{EXECUTABLE} attributes {{
    hal.executable.objects = #hal.executable.objects<{{{_GENERIC_X86} = [{obj}]}}>
  }} {{
    stream.executable.export public @{EXPORT} workgroups(%gx: index, %gy: index) -> (index, index, index) {{
      %c1 = arith.constant 1 : index
      stream.return %gx, %gy, %c1 : index, index, index
    }}
    builtin.module {{
      func.func private @kiln_conv_bf16_workgroup({declared}) -> i32 attributes {{
        hal.import.bitcode, hal.import.fields = ["processor_data"], llvm.bareptr = true
      }}
      func.func @{EXPORT}(%x: !stream.binding, %p: !stream.binding, %y: !stream.binding, {scalars}, %psize: index) {{
        %c0 = arith.constant 0 : index
        %wx = stream.dispatch.workgroup.id[0] : index
        %wy = stream.dispatch.workgroup.id[1] : index
        %xn0 = arith.muli %nb, %hp : index
        %xn1 = arith.muli %xn0, %wp : index
        %xn = arith.muli %xn1, %xs : index
        %yn0 = arith.muli %nb, %oh : index
        %yn1 = arith.muli %yn0, %ow : index
        %yn = arith.muli %yn1, %cout : index
        %xm = stream.binding.subspan %x[%c0] : !stream.binding -> memref<?xbf16>{{%xn}}
        %pm = stream.binding.subspan %p[%c0] : !stream.binding -> memref<?xbf16>{{%psize}}
        %ym = stream.binding.subspan %y[%c0] : !stream.binding -> memref<?xf32>{{%yn}}
        %xbase, %xoff, %xsize, %xstrd = iree_codegen.extract_strided_metadata %xm : memref<?xbf16> -> memref<bf16>, index, index, index
        %pbase, %poff, %ps, %pst = iree_codegen.extract_strided_metadata %pm : memref<?xbf16> -> memref<bf16>, index, index, index
        %ybase, %yoff, %ys, %yst = iree_codegen.extract_strided_metadata %ym : memref<?xf32> -> memref<f32>, index, index, index
        %status = func.call @kiln_conv_bf16_workgroup({arguments}) : ({types}) -> i32
        return
      }}
    }}
  }}
"""


class Namer:
    """Fresh SSA names inside one generated function."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"


def dims(shape: list[int] | tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def packed_type(call: Call) -> str:
    lead = f"{call.nb}x" if call.batched else ""
    return f"tensor<{lead}{call.n16}x{call.ksteps}x16x16x2xbf16>"


def pack_weights(weight: str, call: Call, layout: str, fresh: Namer, conv: tuple[int, int, int] | None = None) -> tuple[list[str], str]:
    """Lines packing bf16 `weight` into the tile layout; returns (lines, packed value).

    layout "oihw": a torch conv weight [cout][cin][kh][kw], whose (cin, kh, kw) are `conv` (the call
    may walk them as a row window); "nk": a Linear weight [N][K]; "kn": a matmul's right-hand side
    [K][N]. The packed tensor is P[n16][t][r][j][p] = W[co = 16*n16 + j][k = 32*t + 2*r + p], k over
    the call's K walk, cout padded to 16 with zeros.
    """
    c, k = call, call.ksteps * 32
    lines = []
    if layout == "oihw":  # -> [cout][kh][kw][cin] -> [cout][kh][kw * cin] (padded to the window) -> [cout][K]
        assert conv is not None
        cin, kh, kw = conv
        t, f = fresh("w"), fresh("w")
        lines += [
            f"{t}e = tensor.empty() : tensor<{c.cout}x{kh}x{kw}x{cin}xbf16>",
            f"{t} = linalg.transpose ins({weight} : tensor<{c.cout}x{cin}x{kh}x{kw}xbf16>) "
            f"outs({t}e : tensor<{c.cout}x{kh}x{kw}x{cin}xbf16>) permutation = [0, 2, 3, 1]",
            f"{f} = tensor.collapse_shape {t} [[0], [1], [2, 3]] : "
            f"tensor<{c.cout}x{kh}x{kw}x{cin}xbf16> into tensor<{c.cout}x{kh}x{kw * cin}xbf16>",
        ]
        weight, row = f, k // kh
        if row != kw * cin:
            padded = fresh("w")
            lines += [
                f"{padded}z = arith.constant 0.0 : bf16",
                f"{padded} = tensor.pad {weight} low[0, 0, 0] high[0, 0, {row - kw * cin}] {{\n"
                f"    ^bb0(%i: index, %j: index, %l: index):\n      tensor.yield {padded}z : bf16\n    }} : "
                f"tensor<{c.cout}x{kh}x{kw * cin}xbf16> to tensor<{c.cout}x{kh}x{row}xbf16>",
            ]
            weight = padded
        g = fresh("w")
        lines.append(f"{g} = tensor.collapse_shape {weight} [[0], [1, 2]] : tensor<{c.cout}x{kh}x{row}xbf16> into tensor<{c.cout}x{k}xbf16>")
        weight = g
    elif layout == "kn":
        t = fresh("w")
        lines += [
            f"{t}e = tensor.empty() : tensor<{c.cout}x{k}xbf16>",
            f"{t} = linalg.transpose ins({weight} : tensor<{k}x{c.cout}xbf16>) "
            f"outs({t}e : tensor<{c.cout}x{k}xbf16>) permutation = [1, 0]",
        ]
        weight = t
    if c.n16 * 16 != c.cout:
        padded = fresh("w")
        lines += [
            f"{padded}z = arith.constant 0.0 : bf16",
            f"{padded} = tensor.pad {weight} low[0, 0] high[{c.n16 * 16 - c.cout}, 0] {{\n"
            f"    ^bb0(%i: index, %j: index):\n      tensor.yield {padded}z : bf16\n    }} : "
            f"tensor<{c.cout}x{k}xbf16> to tensor<{c.n16 * 16}x{k}xbf16>",
        ]
        weight = padded
    e, p = fresh("w"), fresh("w")
    lines += [
        f"{e} = tensor.expand_shape {weight} [[0, 1], [2, 3, 4]] output_shape [{c.n16}, 16, {c.ksteps}, 16, 2] : "
        f"tensor<{c.n16 * 16}x{k}xbf16> into tensor<{c.n16}x16x{c.ksteps}x16x2xbf16>",
        f"{p}e = tensor.empty() : {packed_type(c)}",
        f"{p} = linalg.transpose ins({e} : tensor<{c.n16}x16x{c.ksteps}x16x2xbf16>) outs({p}e : {packed_type(c)}) "
        "permutation = [0, 2, 3, 1, 4]",
    ]
    return lines, p


def pack_batched(value: str, call: Call, fresh: Namer) -> tuple[list[str], str]:
    """Lines packing a per-image right-hand side [nb][K][N] (bf16) on every call: attention's K^T and V."""
    c = call
    k, n, b = c.ksteps * 32, c.cout, c.nb
    t = fresh("b")
    lines = [
        f"{t}e = tensor.empty() : tensor<{b}x{n}x{k}xbf16>",
        f"{t} = linalg.transpose ins({value} : tensor<{b}x{k}x{n}xbf16>) outs({t}e : tensor<{b}x{n}x{k}xbf16>) "
        "permutation = [0, 2, 1]",
    ]
    source = t
    if c.n16 * 16 != n:
        padded = fresh("b")
        lines += [
            f"{padded}z = arith.constant 0.0 : bf16",
            f"{padded} = tensor.pad {source} low[0, 0, 0] high[0, {c.n16 * 16 - n}, 0] {{\n"
            f"    ^bb0(%i: index, %j: index, %l: index):\n      tensor.yield {padded}z : bf16\n    }} : "
            f"tensor<{b}x{n}x{k}xbf16> to tensor<{b}x{c.n16 * 16}x{k}xbf16>",
        ]
        source = padded
    e, p = fresh("b"), fresh("b")
    lines += [
        f"{e} = tensor.expand_shape {source} [[0], [1, 2], [3, 4, 5]] output_shape [{b}, {c.n16}, 16, {c.ksteps}, 16, 2] : "
        f"tensor<{b}x{c.n16 * 16}x{k}xbf16> into tensor<{b}x{c.n16}x16x{c.ksteps}x16x2xbf16>",
        f"{p}e = tensor.empty() : {packed_type(c)}",
        f"{p} = linalg.transpose ins({e} : tensor<{b}x{c.n16}x16x{c.ksteps}x16x2xbf16>) outs({p}e : {packed_type(c)}) "
        "permutation = [0, 1, 3, 4, 2, 5]",
    ]
    return lines, p


def row_padding(k: int) -> int:
    """Extra elements for activation rows of K bf16 values: rows a multiple of 4 KiB apart put all 16
    rows of a tile in one L1 set, so such rows get 32 more (the kernel never reads them)."""
    return 32 if (2 * k) % 4096 == 0 else 0


def pad_last(value: str, shape: list[int], extra: int, fresh: Namer) -> tuple[list[str], str]:
    """Lines padding the last dimension of bf16 `value` by `extra` zeros (none when `extra` is 0)."""
    if not extra:
        return [], value
    rank = len(shape)
    padded = [*shape[:-1], shape[-1] + extra]
    name = fresh("pad")
    indices = ", ".join(f"%i{i}: index" for i in range(rank))
    return [
        f"{name}z = arith.constant 0.0 : bf16",
        f"{name} = tensor.pad {value} low[{', '.join(['0'] * rank)}] high[{', '.join(['0'] * (rank - 1) + [str(extra)])}] {{\n"
        f"    ^bb0({indices}):\n      tensor.yield {name}z : bf16\n"
        f"    }} : tensor<{dims(shape)}xbf16> to tensor<{dims(padded)}xbf16>",
    ], name


def truncate(value: str, shape: list[int], fresh: Namer) -> tuple[list[str], str]:
    """Lines rounding f32 `value` to bf16 (exact where its values are bf16 values)."""
    rank = len(shape)
    name = fresh("t")
    identity = f"affine_map<({', '.join(f'd{i}' for i in range(rank))}) -> ({', '.join(f'd{i}' for i in range(rank))})>"
    parallel = ", ".join(['"parallel"'] * rank)
    return [
        f"{name}e = tensor.empty() : tensor<{dims(shape)}xbf16>",
        f"{name} = linalg.generic {{indexing_maps = [{identity}, {identity}], iterator_types = [{parallel}]}} "
        f"ins({value} : tensor<{dims(shape)}xf32>) outs({name}e : tensor<{dims(shape)}xbf16>) {{\n"
        f"    ^bb0(%in: f32, %out: bf16):\n      %tr = arith.truncf %in : f32 to bf16\n      linalg.yield %tr : bf16\n"
        f"    }} -> tensor<{dims(shape)}xbf16>",
    ], name


def dispatch(x: str, packed: str, call: Call, fresh: Namer) -> tuple[list[str], str]:
    """Lines dispatching the kernel on padded NHWC `x`; returns (lines, the NHWC f32 result)."""
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
    x_type = f"tensor<{c.nb}x{c.hp}x{c.wp}x{c.xs}xbf16>"
    y_type = f"tensor<{c.nb}x{c.oh}x{c.ow}x{c.cout}xf32>"
    operands = ", ".join([x, packed, *(names[s] for s in SCALARS), names["psize"]])
    types = ", ".join([x_type, packed_type(c), *("index" for _ in SCALARS), "index"])
    lines.append(
        f"{y} = flow.dispatch @{EXECUTABLE}::@{EXPORT}[{names['gx']}, {names['gy']}]({operands}) : ({types}) -> {y_type}"
    )
    return lines, y
