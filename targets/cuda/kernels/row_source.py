"""A row program (contraction.RowProgram) as the source of a Triton kernel.

Unlike the contraction kernels (triton_source.py), whose arithmetic is fixed, a row program's steps
are the model's own ops, so its kernel is written out as Python text: one program holds BLOCK_R
whole rows (BLOCK_H >= width columns, masked) in registers, loads each input once, computes every
step in f32 in order (each rounded to its dtype, as PyTorch rounds each op), sums and takes maxima
along the rows with the padding masked out, and stores the last step. Triton compiles a function
from its source file, so `write_module` writes one.

A matmul's epilogue (contraction.Matmul.epilogue: a GELU, SwiGLU's SiLU-times-up) is elementwise steps
of the same form over the product's tile: `write_epilogue` writes it as a `@triton.jit` function that
the matmul kernels take as a constant and call on their f32 accumulators.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from .contraction import Matmul, Operand, RowProgram

ENTRY = "kiln_rows"
EPILOGUE_ENTRY = "kiln_epilogue"
_TRITON_DTYPES = {"f32": "tl.float32", "bf16": "tl.bfloat16", "f16": "tl.float16"}
_UNARY = {
    "neg": "-{0}",
    "reciprocal": "tl.div_rn(1.0, {0})",
    "relu": "tl.maximum({0}, 0.0, propagate_nan=tl.PropagateNan.ALL)",
    "rsqrt": "tl.rsqrt({0})",
    "sqrt": "tl.sqrt_rn({0})",
    "exp": "tl.exp({0})",
    "erf": "tl.erf({0})",
    "tanh": "libdevice.tanh({0})",
    "cast": "{0}",
    # the padding columns hold garbage; PyTorch's max propagates NaN
    "sum": "tl.sum(tl.where(inside, {0}, 0.0), axis=1)[:, None]",
    "amax": "tl.reduce(tl.where(inside, {0}, float('-inf')), 1, _max_of)[:, None]",
}
_BINARY = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "tl.div_rn({0}, {1})"}
_IMPORTS = ("import triton", "import triton.language as tl", "from triton.language.extra.cuda import libdevice", "", "")  # a generated file's head


def source(program: RowProgram) -> str:
    """The Triton source of the kernel computing `program`:
    `kiln_rows(in0, ..., out, also0, ..., R, H, BLOCK_R, BLOCK_H)`, `also<j>` its further outputs."""
    inputs = [f"in{index}" for index in range(len(program.inputs))]
    also = [f"also{index}" for index in range(len(program.outputs))]
    lines = [
        *_IMPORTS,
        "@triton.jit",
        "def _max_of(a, b):",
        "    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)",
        "",
        "",
        "@triton.jit",
        f"def {ENTRY}({', '.join([*inputs, 'out', *also])}, R: tl.constexpr, H: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr):",
        "    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]",
        "    columns = tl.arange(0, BLOCK_H)[None, :]",
        "    row_inside = rows < R",
        "    column_inside = columns < H",
        "    inside = row_inside & column_inside",
    ]
    for index, name in enumerate(inputs):
        offsets, mask = {
            "full": ("rows * H + columns", "inside"),
            "row": ("rows", "row_inside"),
            "column": ("columns", "column_inside"),
        }[program.role(index)]
        lines.append(f"    v{index} = tl.load({name} + {offsets}, mask={mask}, other=0.0).to(tl.float32)")
    lines += _step_lines(program.steps, len(inputs))
    result = len(inputs) + len(program.steps) - 1
    lines.append(f"    tl.store(out + rows * H + columns, v{result}.to({_TRITON_DTYPES[program.out_dtype]}), mask=inside)")
    for name, step in zip(also, program.outputs, strict=True):
        dtype = _TRITON_DTYPES[program.steps[step][1]]
        lines.append(f"    tl.store({name} + rows * H + columns, v{len(inputs) + step}.to({dtype}), mask=inside)")
    return "\n".join(lines) + "\n"


def _step_lines(steps: tuple[tuple[Any, ...], ...], first: int) -> list[str]:
    """`v<first>`, `v<first + 1>`, ...: each step computed in f32 and rounded to its dtype."""
    lines = []
    for number, (op, dtype, *operands) in enumerate(steps, start=first):
        names = [_operand(operand) for operand in operands]
        expression = (_UNARY if len(names) == 1 else _BINARY)[op].format(*names)
        if dtype != "f32":
            expression = f"({expression}).to({_TRITON_DTYPES[dtype]}).to(tl.float32)"
        lines.append(f"    v{number} = {expression}")
    return lines


def epilogue_source(mm: Matmul) -> str:
    """The Triton source of `mm`'s epilogue, `kiln_epilogue(v0, v1)`: the products' f32 tiles (v1 the
    second weight's, unused without one) rounded to the product dtype, as the graph rounds the matmul's
    result, then the steps; it returns the last, in f32."""
    assert not any(step[0] in ("sum", "amax") for step in mm.epilogue), "an epilogue is elementwise"
    rounded = _TRITON_DTYPES[mm.product_dtype]
    lines = [
        *_IMPORTS,
        "@triton.jit",
        f"def {EPILOGUE_ENTRY}(v0, v1):",
        f"    v0 = v0.to({rounded}).to(tl.float32)",
        *([f"    v1 = v1.to({rounded}).to(tl.float32)"] if mm.gated else []),
        *_step_lines(mm.epilogue, 2),
        f"    return v{1 + len(mm.epilogue)}",
    ]
    return "\n".join(lines) + "\n"


def write_epilogue(mm: Matmul, folder: Path) -> Any:
    """`mm`'s epilogue function, its source written to `folder` and imported."""
    return getattr(_imported(epilogue_source(mm), folder / f"{EPILOGUE_ENTRY}_{_file_stem(mm.label)}.py"), EPILOGUE_ENTRY)


def _file_stem(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", label)


def _operand(operand: Operand) -> str:
    return repr(operand) if isinstance(operand, float) else f"v{operand}"  # constants are finite (the pass checks)


def write_module(program: RowProgram, folder: Path) -> ModuleType:
    """The kernel's source written to `folder` and imported (Triton reads a kernel's source from its file)."""
    return _imported(source(program), folder / f"{ENTRY}_{_file_stem(program.shape_key)}.py")


def _imported(text: str, path: Path) -> ModuleType:
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
