"""Route a module's contractions to kiln's CPU kernel: a rewrite of the linalg hand-off text.

The module is parsed in IREE's own MLIR context (`iree.compiler.ir`, which knows the flow and stream
ops the kernel's dispatch is written in). Each contraction that matches becomes a call to a private
function, which IREE inlines, holding the layout changes, the weight packing and the dispatch:

- `linalg.conv_2d_nchw_fchw`, bf16 x bf16 -> f32, dilation 1, one stride, cin % 32 == 0: the padded
  input to NHWC, the implicit-GEMM dispatch, the result back to NCHW plus the op's init (a bias).
- `linalg.matmul` as kiln lowers a bf16 Linear: extf(x) @ extf(transpose(W)), K % 32 == 0. Activations
  kiln computed in f32 but rounded through bf16 (a GELU between two Linears) are truncated to bf16,
  which is exact, and IREE fuses into their producer.
- `linalg.batch_matmul` whose right side is one bf16 weight broadcast over the batch: one GEMM.
- With `attention`, a `linalg.batch_matmul` of two activations in a bf16 model (attention's Q K^T and
  P V, which kiln's linalg computes in f32): both are rounded to bf16, as eager PyTorch's bf16
  attention computes them (its softmax output goes to the second matmul in bf16). kiln's default;
  `--cpu-attention f32` keeps kiln's more precise f32 attention.

In an f32 model (no bf16 contraction), the same contractions in f32 x f32 -> f32, attention's batch
matmuls included, go to the kernel's f32 path (AVX-512F FMAs, f32 arithmetic throughout: the
precision of eager PyTorch's f32; `--cpu-attention` is about bf16 models only).

A softmax over the last dimension in f32 (the max, exp, sum and division generics kiln's linalg
has for it, attention's included), with an additive mask shared by the leading dimensions or none,
becomes a dispatch of the row softmax (kiln_rows.c): one pass over each row instead of IREE's
three. In a bf16 model with bf16 attention, where the probabilities' only reader is P @ V on the
kernel (which rounds them to bf16), the row softmax writes them in bf16, widened back for the
module's f32 type; `_attention` takes operands widened from bf16 as they were, so neither the f32
probabilities nor a rounding pass over them remain. The rest of the chain (its max and sum) is then
dead, and IREE drops it. Likewise a layer
norm over the last dimension (its statistics in f32, the normalization with an optional weight and
bias, the result in f32 or rounded to bf16) becomes one dispatch of the row layer norm: IREE then
computes the normalized value's producer once, instead of again in each of the reductions it fuses
it into, and the row is read from memory once. Where that producer is an elementwise generic serving
the layer norm alone (a GELU, a residual add, a bf16 model's widening), both become one row program
instead (row_program.py): the producer's body on vectors inside the layer norm's row loop, one
dispatch where there were two. Where the statistics are used elsewhere too (returned, as by
training's native_layer_norm), only they go to the kernel (the row moments).

In a module where the kernel takes something, NCHW poolings become NHWC ones between transposes too
(IREE's code): IREE then cancels the transposes of a conv-pool-conv chain, which stays in NHWC.

The weight packing sits on the weight's value (a constant or a parameter global), so IREE hoists it
into an initializer: it runs once, at load time. Everything that does not match stays with IREE,
and each contraction gets a Decision saying what computes it and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from iree.compiler import ir
from iree.compiler.dialects import func

from . import mlir, row_program
from .features import AVX512F, F32_FEATURES, KernelIsa
from .geometry import Call, conv_call, matmul_call, row_window, row_window_call

# A convolution whose input channels are not a multiple of 32 is computed as a row window (geometry.py)
# unless the window's rounding to 32 would make over this many times the multiply-adds.
MAX_WINDOW_WASTE = 4
# Poolings next to the kernel's NHWC convolutions are computed in NHWC too (IREE's code), so that the
# transposes around them cancel against the convolutions' instead of being left in between.
POOLINGS = ("linalg.pooling_nchw_max", "linalg.pooling_nchw_sum")
CONTRACTIONS = ("linalg.conv_2d_nchw_fchw", "linalg.matmul", "linalg.batch_matmul")
# Other contractions kiln's linalg has for bf16 models, listed in the report as IREE's.
OTHERS = {
    "linalg.depthwise_conv_2d_nchw_chw": "a depthwise convolution is not a GEMM",
    "linalg.conv_2d_nhwc_hwcf": "kiln's kernel takes the NCHW convolutions kiln's linalg has",
}


@dataclass(frozen=True)
class Decision:
    """What computes one contraction of the module: kiln's kernel or IREE's code, and why."""

    op: str  # e.g. "linalg.conv_2d_nchw_fchw"
    label: str  # the shapes, e.g. "32x64x58x58 * 64x64x3x3 stride 1"
    code: str  # "kiln" or "iree"
    why: str
    call: Call | None = None  # the kernel's geometry and tiling, for "kiln"
    element: str = "bf16"  # the kernel path's input element type, for "kiln"

    def record(self) -> dict[str, Any]:
        """The manifest's entry for it (the same fields as kiln's GPU kernels', where they apply)."""
        record: dict[str, Any] = {"contraction": f"{self.op} {self.label}", "code": self.code, "why": self.why}
        if self.call is not None:
            record.update(
                kernel=f"{mlir.EXECUTABLE}::{mlir.export(self.element)}",
                tiles=self.call.tiles,
                grid=list(self.call.grid),
                gflop=round(self.call.flops / 1e9, 3),
            )
        return record


@dataclass(frozen=True)
class Substitution:
    """The rewritten module text and a Decision per contraction of the model's element type."""

    text: str
    decisions: tuple[Decision, ...]

    @property
    def taken(self) -> int:
        return sum(decision.code == "kiln" for decision in self.decisions)

    def features(self, isa: KernelIsa) -> tuple[str, ...]:
        """The CPU features the kernel paths taken need, on a CPU with `isa`."""
        elements = {decision.element for decision in self.decisions if decision.code == "kiln"}
        return (*(isa.features if "bf16" in elements else ()), *(F32_FEATURES if "f32" in elements else ()))

    def records(self) -> tuple[dict[str, Any], ...]:
        return tuple(decision.record() for decision in self.decisions)

    def report(self) -> str:
        """A markdown table: every contraction, what computes it, why."""
        lines = ["| contraction | code | tiles | grid | GFLOP | why |", "|---|---|---|---|---|---|"]
        for record in self.records():
            lines.append(
                f"| {record['contraction']} | {record['code']} | {record.get('tiles', '')} | "
                f"{record.get('grid', '')} | {record.get('gflop', '')} | {record['why']} |"
            )
        return "\n".join(lines) + "\n"


def substitute(text: str, isa: KernelIsa, attention: bool = False, locations: bool = True) -> Substitution:
    """`text` (kiln's linalg hand-off) with the contractions and row computations that match routed
    to the kernels; printed with source locations (the model's lines, for IREE's messages) unless
    `locations` is off."""
    with ir.Context():
        module = ir.Module.parse(text)
        rewriter = _Rewriter(module, isa, attention)
        rewriter.run()
        substitution = Substitution(text, tuple(rewriter.decisions))
        if substitution.taken:
            module.operation.verify()
        if substitution.taken or not locations:
            return Substitution(module.operation.get_asm(enable_debug_info=locations), substitution.decisions)
        return substitution


# -- reading the module ---------------------------------------------------------------------------


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _element(value: ir.Value) -> str:
    return str(ir.RankedTensorType(value.type).element_type)


def _static(value: ir.Value) -> bool:
    return isinstance(value.type, ir.RankedTensorType) and value.type.has_static_shape


def _producer(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner if isinstance(owner, ir.Operation) else owner.operation


def _name(op: ir.Operation | None) -> str:
    return op.name if op is not None else ""


def _body(generic: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in generic.regions[0].blocks[0].operations]


def _is_zero_fill(value: ir.Value) -> bool:
    fill = _producer(value)
    if _name(fill) != "linalg.fill":
        return False
    scalar = _producer(fill.operands[0])
    if _name(scalar) != "arith.constant":
        return False
    attribute = scalar.attributes["value"]
    return isinstance(attribute, ir.FloatAttr) and attribute.value == 0.0


def _is_identity(attribute: ir.Attribute) -> bool:
    affine = ir.AffineMapAttr(attribute).value
    return [str(e) for e in affine.results] == [f"d{i}" for i in range(affine.n_dims)]


def _widened_from_bf16(value: ir.Value) -> ir.Value | None:
    """The bf16 tensor that f32 `value` is a plain extf of, else None."""
    generic = _producer(value)
    if _name(generic) != "linalg.generic" or len(generic.operands) != 2:
        return None
    if [op.name for op in _body(generic)] != ["arith.extf", "linalg.yield"]:
        return None
    source = generic.operands[0]
    if _element(source) != "bf16" or _shape(source) != _shape(value):
        return None
    if not all(_is_identity(m) for m in generic.attributes["indexing_maps"]):
        return None
    return source


def _bf16_valued(value: ir.Value) -> bool:
    """Whether f32 `value` is made by a generic that yields extf of a bf16 value: exact in bf16."""
    generic = _producer(value)
    if _name(generic) != "linalg.generic" or len(generic.results) != 1:
        return False
    yielded = _producer(_body(generic)[-1].operands[0])
    return _name(yielded) == "arith.extf" and str(yielded.operands[0].type) == "bf16"


def _involves_bf16(op: ir.Operation) -> bool:
    return any(
        isinstance(v.type, ir.RankedTensorType) and (_element(v) == "bf16" or _widened_from_bf16(v) is not None)
        for v in list(op.operands)[:2]
    )


def _label(op: ir.Operation) -> str:
    shapes = " * ".join("x".join(map(str, _shape(v))) for v in list(op.operands)[:2] if _static(v))
    if op.name.startswith("linalg.conv"):
        strides = list(ir.DenseIntElementsAttr(op.attributes["strides"]))
        shapes += f" stride {strides[0] if len(set(strides)) == 1 else strides}"
    return shapes


# -- rewriting --------------------------------------------------------------------------------------


class _Skip(Exception):
    """The op stays with IREE, for the reason given."""


class _Rewriter:
    def __init__(self, module: ir.Module, isa: KernelIsa, attention: bool) -> None:
        self.module = module
        self.isa = isa
        self.attention = attention
        self.decisions: list[Decision] = []
        self.taken = 0
        self.poolings = 0
        self._row_kernels = 0  # layer norms and moments routed, for their functions' names
        self.element = "bf16"  # the model's: f32 where no contraction involves bf16

    def run(self) -> None:
        ops: list[ir.Operation] = []

        divisions: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name in CONTRACTIONS or op.name in OTHERS or op.name in POOLINGS:
                ops.append(op)
            elif op.name == "linalg.generic" and [o.name for o in _body(op)] == ["arith.divf", "linalg.yield"]:
                divisions.append(op)
            elif op.name == "linalg.generic" and [o.name for o in _body(op)] == _RSTD_BODY:
                deviations.append(op)
            return ir.WalkResult.ADVANCE

        deviations: list[ir.Operation] = []
        self.module.operation.walk(visit)
        # A module with bf16 contractions is a bf16 model: its f32 contractions (attention's, on f32
        # values kiln computed from bf16 ones) are listed too. Other models are f32 models.
        poolings = [op for op in ops if op.name in POOLINGS]
        ops = [op for op in ops if op.name not in POOLINGS]
        self.element = "bf16" if any(_involves_bf16(op) for op in ops) else "f32"
        rows = self._softmaxes(divisions) + self._layer_norms(deviations)
        if not ops or (self.element == "bf16" and not self.isa.bf16):
            if rows:
                self._add(mlir.executable((), rows))
            return
        path = self.isa.name if self.element == "bf16" else AVX512F.name
        for op in ops:
            name, label = op.name, _label(op)  # read before the op is replaced
            if name in OTHERS:
                self.decisions.append(Decision(name, label, "iree", OTHERS[name]))
                continue
            rewrite = {"linalg.conv_2d_nchw_fchw": self._conv, "linalg.matmul": self._matmul}.get(name, self._batch_matmul)
            try:
                call = rewrite(op)
            except _Skip as why:
                self.decisions.append(Decision(name, label, "iree", str(why)))
                continue
            self.taken += 1
            self.decisions.append(Decision(name, label, "kiln", f"{path} path of kiln_amx.c", call, self.element))
        if self.taken:
            for op in poolings:
                self._pooling(op)
        if self.taken or rows:
            self._add(mlir.executable((self.element,) if self.taken else (), rows))

    def _add(self, text: str) -> None:
        """Put the ops of `text` (module-level) at the start of the module."""
        snippet = ir.Module.parse(f"module {{\n{text}\n}}", self.module.context)
        first = self.module.body.operations[0]
        for child in list(snippet.body.operations):
            child.operation.move_before(first)

    def _replace(self, op: ir.Operation, name: str, operands: list[ir.Value], definition: str, narrow: str | None = None) -> None:
        """Define private function `name` and call it with `operands` in place of `op`; where the
        function returns `narrow` (a bf16 type of op's shape), its result widened to op's type."""
        self._add(definition)
        with ir.InsertionPoint(op), op.location:
            call = func.CallOp([ir.Type.parse(narrow) if narrow else op.results[0].type], ir.FlatSymbolRefAttr.get(name), operands)
        value = call.results[0]
        if narrow:
            value = self._widen(value, op)
        op.results[0].replace_all_uses_with(value)
        op.erase()

    def _widen(self, value: ir.Value, before: ir.Operation) -> ir.Value:
        """A generic widening bf16 `value` to f32, put before `before`: a plain extf, which the
        contractions' rewrite sees through (_widened_from_bf16)."""
        shape = _shape(value)
        lines = mlir.converted("%v", "%w", shape, "bf16", "f32")
        snippet = ir.Module.parse(
            f"func.func @widen(%v: {value.type}) -> tensor<{mlir.dims(shape)}xf32> {{\n" + "\n".join(lines) + "\nreturn %w : " + f"tensor<{mlir.dims(shape)}xf32>\n}}",
            self.module.context,
        )
        block = snippet.body.operations[0].regions[0].blocks[0]
        ops = list(block.operations)
        ops[-1].erase()  # the return
        block.arguments[0].replace_all_uses_with(value)
        for op in ops[:-1]:
            op.move_before(before)
        return ops[-2].results[0]

    def _function_name(self, kind: str) -> str:
        return f"kiln_cpu_{kind}_{self.taken}"

    # -- softmax

    def _softmaxes(self, divisions: list[ir.Operation]) -> tuple[str, ...]:
        """Route each division that ends a row softmax to the row softmax kernel; returns the kernels
        used (softmax_f32, softmax_bf16)."""
        used: dict[str, None] = {}
        count = 0
        for division in divisions:
            chain = _softmax_chain(division)
            if chain is None:
                continue
            x, bias = chain
            safe = _safe_select(division.results[0], x, bias)
            flat = _Rows(x)
            # In bf16 attention kiln's kernel rounds the probabilities to bf16 for P @ V, as eager's
            # bf16 attention has them: the softmax rounds them itself, widened back to f32 for the
            # module's f32 uses, which _attention sees through.
            out = "bf16" if self._rounded_by_attention((safe or division).results[0]) else "f32"
            bias_rows = _shape(bias)[0] if bias is not None else 0
            fresh = mlir.Namer()
            body = [flat.collapsed("%x")]
            lines, y = mlir.softmax_dispatch("%x2", "%b" if bias is not None else None, flat.rows, flat.cols, bias_rows, safe is not None, out, fresh)
            body += lines
            result = _retyped(division.results[0].type, out)
            body += [flat.expanded(y, out, result), f"return %r : {result}"]
            name = f"kiln_cpu_softmax_{count}"
            label = mlir.dims(flat.shape) + (f" + mask {bias_rows}x{flat.cols}" if bias is not None else "")
            arguments = f"%x: {x.type}" + (f", %b: {bias.type}" if bias is not None else "")
            definition = _function(name, arguments, result, body)
            self._replace(division, name, [x, bias] if bias is not None else [x], definition, result if out == "bf16" else None)
            if safe is not None:  # the kernel's zeros: the select, and the pass over the scores before it, go
                safe.results[0].replace_all_uses_with(safe.operands[2])
                safe.erase()
            how = "row softmax of kiln_rows.c" + (", fully masked rows zeros (safe softmax)" if safe is not None else "")
            how += ", rounded to bf16 for attention's P @ V" if out == "bf16" else ""
            self.decisions.append(Decision("softmax", label, "kiln", how, element="f32"))
            used[f"softmax_{out}"] = None
            count += 1
        return tuple(used)

    def _rounded_by_attention(self, probabilities: ir.Value) -> bool:
        """Whether every use of `probabilities` (through reshapes) is the left operand of a batch matmul
        of two activations that kiln's kernel takes in a bf16 model with bf16 attention, rounding it
        to bf16 (`_attention`); rows of at most SOFTMAX_BF16_MAX_COLS."""
        if self.element != "bf16" or not self.attention or _shape(probabilities)[-1] > mlir.SOFTMAX_BF16_MAX_COLS:
            return False
        values, uses = [probabilities], 0
        while values:
            value = values.pop()
            for use in value.uses:
                user = _user(use)
                uses += 1
                if user.name in ("tensor.collapse_shape", "tensor.expand_shape"):
                    values.append(user.results[0])
                elif user.name != "linalg.batch_matmul" or use.operand_number != 0 or not _attention_operands(user):
                    return False
        return uses > 0

    def _layer_norms(self, rstds: list[ir.Operation]) -> tuple[str, ...]:
        """Route each layer norm to the row kernels: with its elementwise producer as one row program
        where that producer serves the layer norm alone, else whole (moments, normalization and
        affine) where its mean and rstd serve the normalization alone, else its mean and rstd;
        returns the row kernels of kiln_rows.c used."""
        used: dict[str, None] = {}
        for rstd in rstds:
            chain = _moments_chain(rstd)
            if chain is None:
                continue
            normalization = _normalization(chain, rstd)
            if normalization is None:
                self._moments(chain, rstd)
                used["moments"] = None
                continue
            fused = _fused_producer(chain, normalization)
            if fused is None:
                self._layer_norm(chain, normalization)
                used[f"layer_norm_{normalization.out}"] = None
            else:
                self._row_program(chain, normalization, fused)
        return tuple(used)

    def _layer_norm(self, chain: _Moments, normalization: _Normalization) -> None:
        """The normalization's op replaced by one dispatch of the layer norm; the moments' ops are then dead."""
        x = chain.x
        flat = _Rows(x)
        fresh = mlir.Namer()
        body = [flat.collapsed("%x")]
        arguments, operands, affine = [f"%x: {x.type}"], [x], {}
        body += self._affine(normalization, flat.cols, arguments, operands, affine)
        out = normalization.out
        lines, y = mlir.layer_norm_dispatch("%x2", affine.get("w"), affine.get("b"), flat.rows, flat.cols, chain.eps, out, fresh)
        self._normalized(normalization, flat, arguments, operands, body + lines, y, "row layer norm of kiln_rows.c")

    def _row_program(self, chain: _Moments, normalization: _Normalization, fused: _Fused) -> None:
        """The normalization's op replaced by a row program computing the layer norm's input too;
        the producer and the moments' ops are then dead."""
        flat = _Rows(chain.x)
        fresh = mlir.Namer()
        arguments, operands, body, collapsed = [], [], [], []
        for i, value in enumerate(fused.values):
            arguments.append(f"%a{i}: {value.type}")
            operands.append(value)
            collapsed.append(_collapsed(f"%a{i}", value, fused.program.shape(i), body))
        affine: dict[str, str] = {}
        body += self._affine(normalization, flat.cols, arguments, operands, affine)
        name = f"kiln_row_program_{self._row_kernels}"
        self._add(row_program.executable(name, fused.program))
        lines, y = row_program.dispatch(name, collapsed + [affine[r] for r in ("w", "b") if r in affine], fused.program, fresh)
        how = f"row program: the layer norm and its elementwise producer ({fused.ops} op{'s' if fused.ops != 1 else ''}) in one dispatch"
        self._normalized(normalization, flat, arguments, operands, body + lines, y, how)

    @staticmethod
    def _affine(normalization: _Normalization, cols: int, arguments: list[str], operands: list[ir.Value], affine: dict[str, str]) -> list[str]:
        """Lines making the layer norm's weight and bias f32 [cols] (`affine`: role -> value), which
        are added to the function's `arguments` and `operands`."""
        lines = []
        for role, value in (("w", normalization.weight), ("b", normalization.bias)):
            if value is None:
                continue
            arguments.append(f"%{role}: {value.type}")
            operands.append(value)
            affine[role] = f"%{role}"
            if _element(value) != "f32":
                lines += mlir.converted(f"%{role}", f"%{role}32", [cols], _element(value), "f32")  # a weight's: IREE folds it
                affine[role] = f"%{role}32"
        return lines

    def _normalized(
        self, normalization: _Normalization, flat: _Rows, arguments: list[str], operands: list[ir.Value], body: list[str], y: str, how: str
    ) -> None:
        """The normalization's op replaced by a function of `arguments` whose `body` computes the
        [rows][cols] result `y`; the decision says `how`."""
        out = normalization.out
        result = str(normalization.op.results[0].type)
        body = [*body, flat.expanded(y, out, result), f"return %r : {result}"]
        name = f"kiln_cpu_layer_norm_{self._row_kernels}"
        self._row_kernels += 1
        self._replace(normalization.op, name, operands, _function(name, ", ".join(arguments), result, body))
        parts = [part for part, value in (("weight", normalization.weight), ("bias", normalization.bias)) if value is not None]
        label = mlir.dims(flat.shape) + (f" + {' and '.join(parts)}" if parts else "") + f" -> {out}"
        self.decisions.append(Decision("layer norm", label, "kiln", how, element="f32"))

    def _moments(self, chain: _Moments, rstd: ir.Operation) -> None:
        """The mean's and rstd's ops replaced by one dispatch of the row moments."""
        x, mean = chain.x, chain.mean
        flat = _Rows(x)
        rows = flat.rows
        fresh = mlir.Namer()
        row_type = str(mean.results[0].type)
        row_shape = _shape(mean.results[0])
        body = [flat.collapsed("%x")]
        lines, m, r = mlir.moments_dispatch("%x2", rows, flat.cols, chain.eps, fresh)
        body += lines
        spread = [list(range(len(row_shape)))]
        body += [
            f"%m = tensor.expand_shape {m} {spread} output_shape {row_shape} : tensor<{rows}xf32> into {row_type}",
            f"%r = tensor.expand_shape {r} {spread} output_shape {row_shape} : tensor<{rows}xf32> into {row_type}",
            f"return %m, %r : {row_type}, {row_type}",
        ]
        name = f"kiln_cpu_moments_{self._row_kernels}"
        self._row_kernels += 1
        self._add(_function(name, f"%x: {x.type}", f"({row_type}, {row_type})", body))
        with ir.InsertionPoint(mean), mean.location:
            call = func.CallOp([mean.results[0].type, rstd.results[0].type], ir.FlatSymbolRefAttr.get(name), [x])
        mean.results[0].replace_all_uses_with(call.results[0])
        rstd.results[0].replace_all_uses_with(call.results[1])
        rstd.erase()
        self.decisions.append(Decision("layer norm moments", mlir.dims(flat.shape), "kiln", "row moments of kiln_rows.c", element="f32"))

    # -- convolutions

    def _conv(self, op: ir.Operation) -> Call:
        x, w, init = op.operands[0], op.operands[1], op.operands[2]
        _require_static_and_filled(x, w, init)
        e = self.element
        if (_element(x), _element(w), _element(init)) != (e, e, "f32"):
            raise _Skip(f"{_element(x)} x {_element(w)} -> {_element(init)}, not {e} x {e} -> f32")
        if set(ir.DenseIntElementsAttr(op.attributes["dilations"])) != {1}:
            raise _Skip("dilated")
        strides = set(ir.DenseIntElementsAttr(op.attributes["strides"]))
        if len(strides) != 1:
            raise _Skip("different strides along height and width")
        nb, cin, hp, wp = _shape(x)
        cout, _, kh, kw = _shape(w)
        stride = strides.pop()
        if cin % 32 == 0:
            call = conv_call(nb, hp, wp, cin, cout, kh, kw, stride)
        elif row_window(kw, cin) <= MAX_WINDOW_WASTE * kw * cin:
            call = row_window_call(nb, hp, wp, cin, cout, kh, kw, stride)
        else:
            raise _Skip(f"{cin} input channels x {kw} columns: a row window would be over {MAX_WINDOW_WASTE}x zeros")
        zero = _is_zero_fill(init)
        fresh = mlir.Namer()
        # The input's zero padding is done after the change to NHWC, so that IREE can fold that
        # transpose into the producer (a pad between them keeps it from doing so).
        source, low, high = _unpadded(x)
        _, _, h, w_ = _shape(source)
        if call.hp != hp:  # a row window reads up to a row past the input's end: one more zero row
            high = [high[0] + call.hp - hp, high[1]]
        nhwc = f"tensor<{nb}x{h}x{w_}x{cin}x{e}>"
        out = f"tensor<{nb}x{cout}x{call.oh}x{call.ow}xf32>"
        body = [
            f"%te = tensor.empty() : {nhwc}",
            f"%t = linalg.transpose ins(%x : {source.type}) outs(%te : {nhwc}) permutation = [0, 2, 3, 1]",
        ]
        nhwc_value = "%t"
        if any(low) or any(high):
            body += [
                f"%pz = arith.constant 0.0 : {e}",
                f"%tp = tensor.pad %t low[0, {low[0]}, {low[1]}, 0] high[0, {high[0]}, {high[1]}, 0] {{\n"
                f"    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):\n      tensor.yield %pz : {e}\n"
                f"    }} : {nhwc} to tensor<{nb}x{call.hp}x{wp}x{cin}x{e}>",
            ]
            nhwc_value = "%tp"
        lines, packed = mlir.pack_weights("%w", call, "oihw", fresh, conv=(cin, kh, kw), element=e)
        body += lines
        lines, y = mlir.dispatch(nhwc_value, packed, call, fresh, e)
        body += lines
        body += _nchw_result(y, call, None if zero else "%init")
        name = self._function_name("conv")
        arguments = f"%x: {source.type}, %w: {w.type}" + ("" if zero else f", %init: {out}")
        self._replace(op, name, [source, w] if zero else [source, w, init], _function(name, arguments, out, body))
        return call

    def _pooling(self, op: ir.Operation) -> None:
        """`op` (NCHW) as the same pooling in NHWC between transposes, its padding moved after the first."""
        x, window, init = op.operands[0], op.operands[1], op.operands[2]
        if not all(_static(v) for v in (x, window, init)):
            return
        fill = _producer(init)
        if _name(fill) != "linalg.fill" or _name(_producer(fill.operands[0])) != "arith.constant":
            return
        value = _producer(fill.operands[0]).attributes["value"]
        source, low, high, padding = _padded_by_constant(x)
        nb, c, h, w = _shape(source)
        _, _, oh, ow = _shape(init)
        element = _element(x)
        kind = op.name.removeprefix("linalg.pooling_nchw_")
        nhwc_in, nhwc_out = f"tensor<{nb}x{h}x{w}x{c}x{element}>", f"tensor<{nb}x{oh}x{ow}x{c}x{element}>"
        hp, wp = h + low[0] + high[0], w + low[1] + high[1]
        body = [
            f"%te = tensor.empty() : {nhwc_in}",
            f"%t = linalg.transpose ins(%x : {source.type}) outs(%te : {nhwc_in}) permutation = [0, 2, 3, 1]",
        ]
        pooled_in = "%t"
        if any(low) or any(high):
            body += [
                f"%pv = arith.constant {padding}",
                f"%tp = tensor.pad %t low[0, {low[0]}, {low[1]}, 0] high[0, {high[0]}, {high[1]}, 0] {{\n"
                f"    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):\n      tensor.yield %pv : {element}\n"
                f"    }} : {nhwc_in} to tensor<{nb}x{hp}x{wp}x{c}x{element}>",
            ]
            pooled_in = "%tp"
        strides, dilations = op.attributes["strides"], op.attributes["dilations"]
        body += [
            f"%fv = arith.constant {value}",
            f"%oe = tensor.empty() : {nhwc_out}",
            f"%of = linalg.fill ins(%fv : {element}) outs(%oe : {nhwc_out}) -> {nhwc_out}",
            f"%p = linalg.pooling_nhwc_{kind} {{dilations = {dilations}, strides = {strides}}} "
            f"ins({pooled_in}, %w : tensor<{nb}x{hp}x{wp}x{c}x{element}>, {window.type}) outs(%of : {nhwc_out}) -> {nhwc_out}",
            f"%re = tensor.empty() : {init.type}",
            f"%r = linalg.transpose ins(%p : {nhwc_out}) outs(%re : {init.type}) permutation = [0, 3, 1, 2]",
            f"return %r : {init.type}",
        ]
        name = f"kiln_cpu_pooling_{self.poolings}"
        self.poolings += 1
        self._replace(op, name, [source, window], _function(name, f"%x: {source.type}, %w: {window.type}", str(init.type), body))

    # -- matmuls

    def _matmul(self, op: ir.Operation) -> Call:
        a, b, init = op.operands[0], op.operands[1], op.operands[2]
        _require_static_and_filled(a, b, init)
        if _element(init) != "f32":
            raise _Skip(f"{_element(init)} result, not f32")
        m, k = _shape(a)
        n = _shape(b)[1]
        if k % 32:
            raise _Skip(f"K = {k}, not a multiple of 32")
        if self.element == "f32":
            if (_element(a), _element(b)) != ("f32", "f32"):
                raise _Skip(f"{_element(a)} x {_element(b)}, not f32 x f32")
            weight, layout = _weight_of(b)
            return self._gemm(op, a, False, [m, k], weight, layout, n, init)
        b16 = _widened_from_bf16(b) if _element(b) == "f32" else b if _element(b) == "bf16" else None
        if b16 is None:
            raise _Skip("the right operand is not bf16")
        weight, layout = _weight_of(b16)
        a16, truncate = _activations(a)
        return self._gemm(op, a16, truncate, [m, k], weight, layout, n, init)

    def _batch_matmul(self, op: ir.Operation) -> Call:
        a, b, init = op.operands[0], op.operands[1], op.operands[2]
        _check_batch_matmul(op, self.element)
        batch, m, k = _shape(a)
        n = _shape(b)[2]
        shared = _shared_weight(b, self.element)
        if shared is not None:
            weight, layout = _weight_of(shared)
            a16, truncate = _activations(a) if self.element == "bf16" else (a, False)
            return self._gemm(op, a16, truncate, [batch, m, k], weight, layout, n, init)
        if not self.attention and self.element == "bf16":
            raise _Skip("both operands are activations (attention), kept in f32 (--cpu-attention f32)")
        return self._attention(op, a, b, batch, m, k, n, init)

    def _gemm(
        self,
        op: ir.Operation,
        a16: ir.Value,
        truncate: bool,
        a_shape: list[int],
        weight: ir.Value,
        layout: str,
        n: int,
        init: ir.Value,
    ) -> Call:
        """`op` as one GEMM of the activations [..., M, K] (the model's element type, or bf16-valued f32
        in a bf16 model) by a packed weight."""
        e = self.element
        k = a_shape[-1]
        m = 1
        for size in a_shape[:-1]:
            m *= size
        extra = mlir.row_padding(k, e)
        call = matmul_call(m, k, n, pixel_stride=k + extra)
        fresh = mlir.Namer()
        a_type = f"tensor<{mlir.dims(a_shape)}x{'f32' if truncate else e}>"
        out = f"tensor<{mlir.dims([*a_shape[:-1], n])}xf32>"
        body, x = [], "%a"
        if len(a_shape) == 3:
            body.append(f"%a2 = tensor.collapse_shape %a [[0, 1], [2]] : {a_type} into tensor<{m}x{k}x{'f32' if truncate else e}>")
            x = "%a2"
        if truncate:
            lines, x = mlir.truncate(x, [m, k], fresh)
            body += lines
        lines, packed = mlir.pack_weights("%w", call, layout, fresh, element=e)
        body += lines
        lines, x = mlir.pad_last(x, [m, k], extra, fresh, e)
        body += lines
        rows, strip = call.oh, call.ow
        body.append(
            f"%x = tensor.expand_shape {x} [[0, 1, 2], [3]] output_shape [1, {rows}, {strip}, {k + extra}] : "
            f"tensor<{m}x{k + extra}x{e}> into tensor<1x{rows}x{strip}x{k + extra}x{e}>"
        )
        lines, y = mlir.dispatch("%x", packed, call, fresh, e)
        body += lines
        body.append(f"%r = tensor.collapse_shape {y} [[0, 1, 2], [3]] : tensor<1x{rows}x{strip}x{n}xf32> into tensor<{m}x{n}xf32>")
        result = "%r"
        if len(a_shape) == 3:
            body.append(
                f"%r3 = tensor.expand_shape %r [[0, 1], [2]] output_shape [{a_shape[0]}, {a_shape[1]}, {n}] : "
                f"tensor<{m}x{n}xf32> into {out}"
            )
            result = "%r3"
        zero = _is_zero_fill(init)
        if not zero:
            lines, result = _add_init(result, "%init", [*a_shape[:-1], n], fresh)
            body += lines
        body.append(f"return {result} : {out}")
        name = self._function_name("matmul")
        arguments = f"%a: {a_type}, %w: {weight.type}" + ("" if zero else f", %init: {out}")
        self._replace(op, name, [a16, weight] if zero else [a16, weight, init], _function(name, arguments, out, body))
        return call

    def _attention(
        self, op: ir.Operation, a: ir.Value, b: ir.Value, batch: int, m: int, k: int, n: int, init: ir.Value
    ) -> Call:
        """A batch matmul of two activations, the right one packed on every call: in a bf16 model both
        rounded to bf16, in an f32 model in f32."""
        e = self.element
        extra = mlir.row_padding(k, e)
        call = matmul_call(m, k, n, batch=batch, batched=True, pixel_stride=k + extra)
        strip = call.ow
        fresh = mlir.Namer()
        body, names = [], {}
        operands = {"a": a, "b": b}
        for label, shape in (("a", [batch, m, k]), ("b", [batch, k, n])):
            value, names[label] = operands[label], f"%{label}"
            narrow = _bf16_behind(value) if e == "bf16" and _element(value) != e else None
            if narrow is not None:  # widened from bf16 (a softmax kiln rounded, a bf16 model's V): taken as it was
                operands[label], reshape = narrow
                if reshape is not None:
                    body.append(_reshaped(f"%{label}", reshape, operands[label].type, f"tensor<{mlir.dims(shape)}xbf16>"))
                    names[label] = f"%{label}_r"
            elif _element(value) != e:
                lines, names[label] = mlir.truncate(f"%{label}", shape, fresh)
                body += lines
        a, b = operands["a"], operands["b"]
        lines, packed = mlir.pack_batched(names["b"], call, fresh, e)
        body += lines
        lines, rows = mlir.pad_last(names["a"], [batch, m, k], extra, fresh, e)
        body += lines
        kx = k + extra
        body.append(
            f"%x = tensor.expand_shape {rows} [[0], [1, 2], [3]] output_shape [{batch}, {m // strip}, {strip}, {kx}] : "
            f"tensor<{batch}x{m}x{kx}x{e}> into tensor<{batch}x{m // strip}x{strip}x{kx}x{e}>"
        )
        lines, y = mlir.dispatch("%x", packed, call, fresh, e)
        body += lines
        out = f"tensor<{batch}x{m}x{n}xf32>"
        body.append(f"%r = tensor.collapse_shape {y} [[0], [1, 2], [3]] : tensor<{batch}x{m // strip}x{strip}x{n}xf32> into {out}")
        result = "%r"
        zero = _is_zero_fill(init)
        if not zero:
            lines, result = _add_init(result, "%init", [batch, m, n], fresh)
            body += lines
        body.append(f"return {result} : {out}")
        name = self._function_name("attention")
        arguments = f"%a: {a.type}, %b: {b.type}" + ("" if zero else f", %init: {out}")
        self._replace(op, name, [a, b] if zero else [a, b, init], _function(name, arguments, out, body))
        return call


def _softmax_chain(division: ir.Operation) -> tuple[ir.Value, ir.Value | None] | None:
    """The scores [..., cols] (f32, static) and additive mask [rows, cols] (or None) whose softmax over
    the last dimension `division` computes as e / sum(e), e = exp(s - max(s)), s = scores (+ mask);
    None where `division` is not the end of such a chain."""
    e, total = _elementwise(division, "arith.divf")
    if e is None or total is None or not _static(e) or _element(e) != "f32":
        return None
    rank = len(_shape(e))
    if not _row_reduction(_through_unit_reshapes(total), e, "arith.addf", zero=True):
        return None
    exponent = _producer(e)
    if _name(exponent) != "linalg.generic" or [o.name for o in _body(exponent)] != ["math.exp", "linalg.yield"]:
        return None
    if len(exponent.operands) != 2 or not _identities(exponent, rank):
        return None
    scores, top = _elementwise(_producer(exponent.operands[0]), "arith.subf")
    if scores is None or top is None or not _row_reduction(_through_unit_reshapes(top), scores, "arith.maximumf"):
        return None
    return _biased(scores)


def _safe_select(p: ir.Value, x: ir.Value, bias: ir.Value | None) -> ir.Operation | None:
    """The op of PyTorch's safe softmax (attention's) after softmax `p` of scores `x` (+ `bias`):
    select(all of the row's scores are -inf, 0, p), the row's test a minimum over isneginf(scores);
    None where `p` has no such user."""
    rank = len(_shape(p))
    for use in p.uses:
        op = _user(use)
        if _name(op) != "linalg.generic" or len(op.operands) != 4 or op.operands[2] != p:
            continue
        if [o.name for o in _body(op)] != ["arith.select", "linalg.yield"] or list(_body(op)[0].operands) != [_block_argument(op, i) for i in range(3)]:
            continue
        maps = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]]
        if maps[0] != _row_maps(rank)[0] or maps[1:] != [_identity(rank)] * 3 or not _zeros(op.operands[1]):
            continue
        if _all_scores_minus_infinity(op.operands[0], x, bias):
            return op
    return None


def _zeros(value: ir.Value) -> bool:
    constant = _producer(value)
    if _name(constant) != "arith.constant" or not isinstance(constant.attributes["value"], ir.DenseElementsAttr):
        return False
    attribute = ir.DenseElementsAttr(constant.attributes["value"])
    return attribute.is_splat and str(attribute.get_splat_value()) in ("0.000000e+00 : f32", "-0.000000e+00 : f32")


def _all_scores_minus_infinity(test: ir.Value, x: ir.Value, bias: ir.Value | None) -> bool:
    """Whether `test` [..., 1] (i1) is: min over the last dimension of isneginf(x + bias) != 0, as
    kiln's linalg has PyTorch's safe softmax test it."""
    nonzero = _producer(test)
    if _name(nonzero) != "linalg.generic" or [o.name for o in _body(nonzero)] != ["arith.cmpf", "linalg.yield"]:
        return False
    compare = _body(nonzero)[0]
    if " une," not in str(compare) or _argument_number(compare.operands[0]) != 0 or _float_constant(compare.operands[1]) != 0.0:
        return False
    minimum = _through_unit_reshapes(nonzero.operands[0])
    reduction = _producer(minimum)
    if _name(reduction) != "linalg.generic" or minimum != reduction.results[0] or "reduction" not in str(list(reduction.attributes["iterator_types"])[-1]):
        return False
    minima = [o for o in _body(reduction) if o.name == "arith.minimumf"]
    if len(minima) != 1 or {_argument_number(v) for v in minima[0].operands} != {0, 1}:
        return False
    init = _producer(reduction.operands[1])
    if _name(init) != "linalg.fill" or _float_constant(init.operands[0]) != float("inf"):
        return False
    flags = _producer(reduction.operands[0])
    if _name(flags) != "linalg.generic" or list(flags.operands)[:-1] != ([x, bias] if bias is not None else [x]):
        return False
    steps = [o.name for o in _body(flags)]
    if steps[: len(steps) - 3] not in (["arith.addf", "arith.extf"], ["arith.addf"], ["arith.extf"], []) or (bias is not None and steps[0] != "arith.addf"):
        return False
    compare, convert = _body(flags)[-3], _body(flags)[-2]
    return compare.name == "arith.cmpf" and " oeq," in str(compare) and _float_constant(compare.operands[1]) == float("-inf") and convert.name == "arith.uitofp"


_RSTD_BODY = ["arith.addf", "math.rsqrt", "linalg.yield"]


@dataclass(frozen=True)
class _Moments:
    """A layer norm's statistics in kiln's linalg: mean = sum(x) / n, squares = (x - mean)^2 and
    rstd = 1 / sqrt(sum(squares) / n + eps), over the last dimension of f32 `x`."""

    x: ir.Value
    mean: ir.Operation
    squares: ir.Operation
    eps: float


@dataclass(frozen=True)
class _Normalization:
    """The generic that normalizes x with the moments: ((x - mean) * rstd) * weight + bias, each
    parameter optional, [cols] of f32 or bf16, its result in `out` (f32, or bf16 by an arith.truncf)."""

    op: ir.Operation
    weight: ir.Value | None
    bias: ir.Value | None
    out: str


def _moments_chain(rstd: ir.Operation) -> _Moments | None:
    """The moments where `rstd` computes 1 / sqrt(sum((x - mean)^2) / n + eps) per row of f32 `x`
    (static, n its last dimension) and the mean's op sum(x) / n; None otherwise."""
    add = _body(rstd)[0]
    if len(rstd.operands) != 2 or _argument_number(add.operands[0]) != 0 or not _identities(rstd, len(_shape(rstd.operands[0]))):
        return None
    eps = _float_constant(add.operands[1])
    variance = _row_average(rstd.operands[0])
    if eps is None or variance is None:
        return None
    squares, n = variance
    op = _producer(squares)
    if _name(op) != "linalg.generic" or len(op.operands) < 3:
        return None
    k = len(op.operands) - 2  # the inputs before the mean: x's, or its producer's
    mean_value = op.operands[k]
    mean, average = _producer(mean_value), _row_average(mean_value)
    if average is None or average[1] != n or _name(mean) != "linalg.generic":
        return None
    x = average[0]
    rank = len(_shape(x)) if _static(x) else 0
    maps = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]]
    if not rank or _element(x) != "f32" or n != _shape(x)[-1] or maps[-1] != _identity(rank) or maps[k] not in _row_maps(rank):
        return None
    steps, value, read = _reading(op, x)
    if read != k or [o.name for o in steps] != ["arith.subf", "arith.mulf", "linalg.yield"]:
        return None
    sub, mul = steps[0], steps[1]
    if list(sub.operands) != [value, _block_argument(op, k)] or list(mul.operands) != [sub.results[0], sub.results[0]]:
        return None
    return _Moments(x, mean, op, eps)


def _reading(op: ir.Operation, x: ir.Value) -> tuple[list[ir.Operation], ir.Value | None, int]:
    """(the rest of the body, the value standing for f32 `x`, the inputs read for it) of a generic
    whose first input is `x`, or whose first inputs are those of x's elementwise producer, with the
    producer's body cloned at the start of its own (kiln's fusion computes a residual add, or a bf16
    model's widening, again in each consumer); (the body, None, 0) otherwise."""
    steps = _body(op)
    if op.operands[0] == x:
        return steps, _block_argument(op, 0), 1
    producer = _producer(x)
    if _name(producer) != "linalg.generic" or len(producer.results) != 1:
        return steps, None, 0
    inputs = list(producer.operands)[: len(producer.operands) - 1]
    theirs = _body(producer)
    rank = len(_shape(x))
    maps = [str(ir.AffineMapAttr(m).value) for m in producer.attributes["indexing_maps"]]
    ours = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]][: len(inputs)]
    if list(op.operands)[: len(inputs)] != inputs or ours != maps[: len(inputs)] or maps[-1] != _identity(rank):
        return steps, None, 0
    if any("reduction" in str(t) for t in producer.attributes["iterator_types"]) or len(steps) < len(theirs):
        return steps, None, 0
    clone = len(theirs) - 1
    same = {_block_argument(producer, i): _block_argument(op, i) for i in range(len(inputs))}
    for mine, original in zip(steps[:clone], theirs[:clone], strict=True):
        if mine.name != original.name or len(mine.results) != 1 or mine.results[0].type != original.results[0].type:
            return steps, None, 0
        if _attributes(mine) != _attributes(original) or list(mine.operands) != [same.get(v, v) for v in original.operands]:
            return steps, None, 0
        same[original.results[0]] = mine.results[0]
    return steps[clone:], same.get(theirs[-1].operands[0]), len(inputs)


def _attributes(op: ir.Operation) -> list[tuple[str, str]]:
    return [(name, str(op.attributes[name])) for name in op.attributes]


def _block_argument(op: ir.Operation, number: int) -> ir.Value:
    return op.regions[0].blocks[0].arguments[number]


def _normalization(chain: _Moments, rstd: ir.Operation) -> _Normalization | None:
    """The one op that uses the chain's mean and rstd besides the chain itself, where it normalizes x
    (see _Normalization); None where there is none, or the statistics are used elsewhere too."""
    mean, deviation = chain.mean.results[0], rstd.results[0]
    users = {_user(use) for use in (*mean.uses, *deviation.uses)} - {chain.squares}
    if len(users) != 1:
        return None
    (op,) = users
    rank = len(_shape(chain.x))
    if _name(op) != "linalg.generic" or len(op.results) != 1 or _shape(op.results[0]) != _shape(chain.x):
        return None
    ins = list(op.operands)[: len(op.operands) - 1]
    maps = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]]
    dims = ", ".join(f"d{i}" for i in range(rank))
    column = f"({dims}) -> (d{rank - 1})"
    steps, value, k = _reading(op, chain.x)  # ins: x's (k of them), mean, rstd, then the parameters
    if value is None or ins[k : k + 2] != [mean, deviation] or maps[-1] != _identity(rank):
        return None
    if maps[k] not in _row_maps(rank) or maps[k + 1] not in _row_maps(rank) or any(m != column for m in maps[k + 2 : len(ins)]):
        return None
    if [o.name for o in steps[:2]] != ["arith.subf", "arith.mulf"] or list(steps[0].operands) != [value, _block_argument(op, k)]:
        return None
    value = steps[0].results[0]
    if {_argument_number(v) for v in steps[1].operands} != {k + 1, None} or value not in list(steps[1].operands):
        return None
    value, parameters, widened, out = steps[1].results[0], {}, {}, "f32"
    for step in steps[2:-1]:
        operands = list(step.operands)
        if step.name == "arith.extf" and (_argument_number(operands[0]) or 0) >= k + 2:
            widened[step.results[0]] = _argument_number(operands[0])
            continue
        if step.name in ("arith.mulf", "arith.addf") and value in operands and out == "f32":
            role = "weight" if step.name == "arith.mulf" else "bias"
            other = operands[1] if operands[0] == value else operands[0]
            number = widened.get(other, _argument_number(other))
            if role in parameters or (role == "weight" and "bias" in parameters) or number is None or number < k + 2:
                return None
            parameters[role], value = ins[number], step.results[0]
            continue
        if step.name == "arith.truncf" and operands == [value] and str(step.results[0].type) == "bf16":
            value, out = step.results[0], "bf16"
            continue
        return None
    if list(steps[-1].operands) != [value] or _element(op.results[0]) != out:
        return None
    if any(len(_shape(v)) != 1 or _element(v) not in ("f32", "bf16") for v in parameters.values()):
        return None
    return _Normalization(op, parameters.get("weight"), parameters.get("bias"), out)


@dataclass(frozen=True)
class _Fused:
    """A layer norm's elementwise producer as a row program: its input `values`, in the program's order."""

    program: row_program.LayerNormProgram
    values: tuple[ir.Value, ...]
    ops: int  # the producer's body, for the report


# Element types a row program reads its inputs in.
_ROW_PROGRAM_INPUTS = ("f32", "bf16", "f16")


def _fused_producer(chain: _Moments, normalization: _Normalization) -> _Fused | None:
    """The row program computing the layer norm with the elementwise generic producing its x, where
    the layer norm is x's only use, each input is read per element, per column or per row, and the
    body is arith and math ops on those inputs and scalar constants; None otherwise."""
    x, producer = chain.x, _producer(chain.x)
    if _name(producer) != "linalg.generic" or len(producer.results) != 1:
        return None
    rank, cols = len(_shape(x)), _shape(x)[-1]
    maps = [str(ir.AffineMapAttr(m).value) for m in producer.attributes["indexing_maps"]]
    if rank < 2 or cols % row_program.WIDTH or cols > row_program.MAX_COLS or maps[-1] != _identity(rank):
        return None
    if any("reduction" in str(t) for t in producer.attributes["iterator_types"]):
        return None
    total = _producer(chain.mean.operands[0])
    if {_user(use) for use in x.uses} - {total, chain.squares, normalization.op}:
        return None
    dims = ", ".join(f"d{i}" for i in range(rank))
    reads = {_identity(rank): "element", f"({dims}) -> (d{rank - 1})": "column", **dict.fromkeys(_row_maps(rank), "row")}
    values = tuple(producer.operands)[: len(producer.operands) - 1]
    inputs = []
    for value, indexing in zip(values, maps, strict=False):
        kind = reads.get(indexing)
        if kind is None or not _static(value) or _element(value) not in _ROW_PROGRAM_INPUTS:
            return None
        inputs.append(row_program.Input(kind, _element(value)))
    body = _vector_body(producer)
    if body is None:
        return None
    lines, value = body
    flat = _Rows(x)
    program = row_program.LayerNormProgram(
        tuple(inputs), tuple(lines), value, flat.rows, cols, chain.eps,
        normalization.weight is not None, normalization.bias is not None, normalization.out,
    )  # fmt: skip
    return _Fused(program, values, len(_body(producer)) - 1)


def _vector_body(producer: ir.Operation) -> tuple[list[str], str] | None:
    """(lines, result) computing `producer`'s body on vectors from `%in<i>` (its inputs): each op in
    generic form with its attributes and its types widened to vectors, each scalar constant it reads
    broadcast; None where an op is not an arith or math op of one result, or reads another value."""
    names: dict[ir.Value, str] = {_block_argument(producer, i): f"%in{i}" for i in range(len(producer.operands) - 1)}
    lines: list[str] = []
    fresh = mlir.Namer()

    def splat(constant: ir.Operation) -> str | None:
        element = str(constant.results[0].type)
        if "<" in element:
            return None
        name = fresh("k")
        lines.extend(
            [f"{name}s = arith.constant {constant.attributes['value']}", f"{name} = vector.broadcast {name}s : {element} to {row_program.vector(element)}"]
        )
        return name

    steps = _body(producer)
    for op in steps[:-1]:
        if op.name.split(".")[0] not in ("arith", "math") or len(op.results) != 1 or len(op.regions):
            return None
        if op.name == "arith.constant":
            name = splat(op)
            if name is None:
                return None
            names[op.results[0]] = name
            continue
        operands = []
        for value in op.operands:
            if value not in names:
                constant = _producer(value)
                name = splat(constant) if _name(constant) == "arith.constant" else None
                if name is None:
                    return None
                names[value] = name
            operands.append(names[value])
        element = str(op.results[0].type)
        if "<" in element:
            return None
        result = fresh("v")
        attributes = ", ".join(f"{name} = {value}" for name, value in _attributes(op))
        types = ", ".join(row_program.vector(str(value.type)) for value in op.operands)
        lines.append(f'{result} = "{op.name}"({", ".join(operands)}) {{{attributes}}} : ({types}) -> {row_program.vector(element)}')
        names[op.results[0]] = result
    yielded = steps[-1].operands[0]
    if yielded not in names or str(yielded.type) != "f32":
        return None
    return lines, names[yielded]


def _collapsed(name: str, value: ir.Value, shape: list[int], lines: list[str]) -> str:
    """`name` (of `value`'s static type) as a tensor of `shape`, its leading dimensions merged (a
    line added to `lines` where the shapes differ)."""
    source = _shape(value)
    if source == shape:
        return name
    lead = len(source) - (len(shape) - 1)
    groups = [list(range(lead))] + [[axis] for axis in range(lead, len(source))]
    lines.append(f"{name}c = tensor.collapse_shape {name} {groups} : {value.type} into tensor<{mlir.dims(shape)}x{_element(value)}>")
    return f"{name}c"


def _user(use: Any) -> ir.Operation:
    owner = use.owner
    return owner if isinstance(owner, ir.Operation) else owner.operation


@dataclass(frozen=True)
class _Rows:
    """A static tensor (`value`) as the row kernels see it: rows of its last dimension, [rows][cols]."""

    value: ir.Value

    @property
    def shape(self) -> list[int]:
        return _shape(self.value)

    @property
    def rows(self) -> int:
        return math.prod(self.shape[:-1])

    @property
    def cols(self) -> int:
        return self.shape[-1]

    def _collapse(self) -> list[list[int]]:
        rank = len(self.shape)
        return [list(range(rank - 1)), [rank - 1]]

    def collapsed(self, name: str) -> str:
        """The line making `%x2`, the tensor `name` (of the value's type) as [rows][cols]."""
        return f"%x2 = tensor.collapse_shape {name} {self._collapse()} : {self.value.type} into tensor<{self.rows}x{self.cols}xf32>"

    def expanded(self, flat: str, element: str, result: str) -> str:
        """The line making `%r`, the [rows][cols] `flat` of `element` in the value's shape, typed `result`."""
        return (
            f"%r = tensor.expand_shape {flat} {self._collapse()} output_shape {self.shape} : "
            f"tensor<{self.rows}x{self.cols}x{element}> into {result}"
        )


def _retyped(type_: ir.Type, element: str) -> str:
    """Static tensor type `type_` with `element` in place of its own."""
    return f"tensor<{mlir.dims(ir.RankedTensorType(type_).shape)}x{element}>"


def _row_average(value: ir.Value) -> tuple[ir.Value, float] | None:
    """(x, n) where `value` is sum(x) / n over x's last dimension (a zero-filled reduction, then a
    division by the constant n); None otherwise."""
    op = _producer(value)
    if _name(op) != "linalg.generic" or len(op.operands) != 2 or [o.name for o in _body(op)] != ["arith.divf", "linalg.yield"]:
        return None
    divide = _body(op)[0]
    n = _float_constant(divide.operands[1])
    if _argument_number(divide.operands[0]) != 0 or n is None or not _identities(op, len(_shape(value))):
        return None
    total = _producer(op.operands[0])
    if _name(total) != "linalg.generic" or not op.operands[0].owner or not _row_reduction(op.operands[0], total.operands[0], "arith.addf", zero=True):
        return None
    return total.operands[0], n


def _float_constant(value: ir.Value) -> float | None:
    constant = _producer(value)
    if _name(constant) != "arith.constant" or not isinstance(constant.attributes["value"], ir.FloatAttr):
        return None
    return ir.FloatAttr(constant.attributes["value"]).value


def _elementwise(op: ir.Operation | None, name: str) -> tuple[ir.Value | None, ir.Value | None]:
    """(a, b) where `op` is a parallel generic yielding `name`(a, b[row]) with b broadcast along the
    last dimension (a reduction's result); (None, None) otherwise."""
    if _name(op) != "linalg.generic" or len(op.operands) != 3 or [o.name for o in _body(op)] != [name, "linalg.yield"]:
        return None, None
    operation = _body(op)[0]
    if [_argument_number(v) for v in operation.operands] != [0, 1]:
        return None, None
    a, b = op.operands[0], op.operands[1]
    rank = len(_shape(a)) if _static(a) else 0
    maps = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]]
    if not rank or maps[0] != _identity(rank) or maps[2] != _identity(rank) or maps[1] not in _row_maps(rank):
        return None, None
    if any("reduction" in str(t) for t in op.attributes["iterator_types"]):
        return None, None
    return a, b


def _row_reduction(value: ir.Value, source: ir.Value, combine: str, zero: bool = False) -> bool:
    """Whether `value` is a result of a generic reducing `source` over its last dimension with
    `combine`(element, accumulator), from a zero fill (`zero`) or a -inf one."""
    op = _producer(value)
    if _name(op) != "linalg.generic" or op.operands[0] != source or not _static(source):
        return False
    rank = len(_shape(source))
    iterators = [str(t) for t in op.attributes["iterator_types"]]
    if len(iterators) != rank or "reduction" not in iterators[-1] or any("reduction" in t for t in iterators[:-1]):
        return False
    inputs = len(op.operands) - len(op.results)
    if inputs != 1 or str(ir.AffineMapAttr(op.attributes["indexing_maps"][0]).value) != _identity(rank):
        return False
    index = next(i for i, result in enumerate(op.results) if result == value)
    yielded = _body(op)[-1].operands[index]
    combined = _producer(yielded)
    if _name(combined) != combine or sorted(_argument_number(v) for v in combined.operands) != [0, 1 + index]:
        return False
    fill = _producer(op.operands[inputs + index])
    if _name(fill) != "linalg.fill" or _name(_producer(fill.operands[0])) != "arith.constant":
        return False
    initial = _producer(fill.operands[0]).attributes["value"]
    wanted = 0.0 if zero else float("-inf")
    return isinstance(initial, ir.FloatAttr) and initial.value == wanted


def _biased(scores: ir.Value) -> tuple[ir.Value, ir.Value | None]:
    """(a, mask) where `scores` is a + mask, mask [rows, cols] shared by a's leading dimensions; else (scores, None)."""
    op = _producer(scores)
    rank = len(_shape(scores))
    if (
        _name(op) == "linalg.generic"
        and rank >= 2
        and len(op.operands) == 3
        and [o.name for o in _body(op)] == ["arith.addf", "linalg.yield"]
        and [_argument_number(v) for v in _body(op)[0].operands] == [0, 1]
        and _static(op.operands[1])
        and _element(op.operands[0]) == _element(op.operands[1]) == "f32"
        and not any("reduction" in str(t) for t in op.attributes["iterator_types"])
    ):
        maps = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]]
        trailing = f"({', '.join(f'd{i}' for i in range(rank))}) -> (d{rank - 2}, d{rank - 1})"
        if maps[0] == maps[2] == _identity(rank) and maps[1] == trailing:
            return op.operands[0], op.operands[1]
    return scores, None


def _through_unit_reshapes(value: ir.Value) -> ir.Value:
    """`value` before the expand_shape/collapse_shape ops that only add or drop dimensions of size 1."""
    op = _producer(value)
    while _name(op) in ("tensor.expand_shape", "tensor.collapse_shape"):
        source = op.operands[0]
        if [d for d in _shape(source) if d != 1] != [d for d in _shape(value) if d != 1]:
            break
        value, op = source, _producer(source)
    return value


def _identity(rank: int) -> str:
    dims = ", ".join(f"d{i}" for i in range(rank))
    return f"({dims}) -> ({dims})"


def _row_maps(rank: int) -> tuple[str, str]:
    """The maps of a per-row value broadcast along the last dimension: kept as size 1, or dropped."""
    dims = ", ".join(f"d{i}" for i in range(rank))
    lead = ", ".join(f"d{i}" for i in range(rank - 1))
    return f"({dims}) -> ({lead}, 0)", f"({dims}) -> ({lead})"


def _identities(op: ir.Operation, rank: int) -> bool:
    return all(str(ir.AffineMapAttr(m).value) == _identity(rank) for m in op.attributes["indexing_maps"])


def _argument_number(value: ir.Value) -> int | None:
    return ir.BlockArgument(value).arg_number if isinstance(value.owner, ir.Block) else None


def _require_static_and_filled(*values: ir.Value) -> None:
    """Skip an op whose operands have dynamic shapes, or an empty one: with nothing to multiply, the
    kernel would never write the result."""
    if not all(_static(v) for v in values):
        raise _Skip("dynamic shapes")
    if any(0 in _shape(v) for v in values):
        raise _Skip("an empty operand")


def _unpadded(x: ir.Value) -> tuple[ir.Value, list[int], list[int]]:
    """The NCHW tensor `x` zero-pads in height and width, with the low and high padding; else `x`, 0s."""
    source, low, high, value = _padded_by_constant(x)
    if value is not None and not (isinstance(value, ir.FloatAttr) and value.value == 0.0):
        return x, [0, 0], [0, 0]
    return source, low, high


def _padded_by_constant(x: ir.Value) -> tuple[ir.Value, list[int], list[int], ir.Attribute | None]:
    """The NCHW tensor `x` pads in height and width with a constant, the low and high padding and the
    constant; else `x`, 0s and None."""
    pad = _producer(x)
    none = (x, [0, 0], [0, 0], None)
    if _name(pad) != "tensor.pad" or len(pad.operands) != 1 or not _static(pad.operands[0]):
        return none
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
    constant = _producer(_body(pad)[-1].operands[0])
    if _name(constant) != "arith.constant" or low[:2] != [0, 0] or high[:2] != [0, 0] or min(low + high) < 0:
        return none
    return pad.operands[0], low[2:], high[2:], constant.attributes["value"]


def _weight_of(b16: ir.Value) -> tuple[ir.Value, str]:
    """The weight behind a bf16 [K, N] right operand: W [N, K] when it is W's transpose, else itself."""
    transpose = _producer(b16)
    if _name(transpose) == "linalg.transpose" and list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"])) == [1, 0]:
        return transpose.operands[0], "nk"
    return b16, "kn"


def _bf16_behind(a: ir.Value) -> tuple[ir.Value, ir.Operation | None] | None:
    """(the bf16 tensor, the reshape after its widening or None) where f32 `a` is a plain widening of
    a bf16 tensor, or a collapse or expand of one; None otherwise."""
    widened = _widened_from_bf16(a)
    if widened is not None:
        return widened, None
    reshape = _producer(a)
    if _name(reshape) in ("tensor.collapse_shape", "tensor.expand_shape"):
        widened = _widened_from_bf16(reshape.operands[0])
        if widened is not None:
            return widened, reshape
    return None


def _reshaped(source: str, reshape: ir.Operation, source_type: ir.Type, result_type: str) -> str:
    """The line making `source`_r: `reshape` (a collapse or expand) applied to `source`, of type
    `source_type`, giving `result_type`."""
    groups = reshape.attributes["reassociation"]
    if reshape.name == "tensor.collapse_shape":
        return f"{source}_r = tensor.collapse_shape {source} {groups} : {source_type} into {result_type}"
    shape = _shape(reshape.results[0])
    return f"{source}_r = tensor.expand_shape {source} {groups} output_shape {shape} : {source_type} into {result_type}"


def _shared_weight(b: ir.Value, element: str) -> ir.Value | None:
    """The weight [K][N] of `element` that a batch matmul's right operand `b` broadcasts over the batch
    (one GEMM), else None (b is an activation: attention's K^T or V)."""
    broadcast = _producer(b)
    shared = (
        _name(broadcast) == "linalg.generic"
        and len(broadcast.operands) == 2
        and _element(b) == element
        and [o.name for o in _body(broadcast)] == ["linalg.yield"]
        and "(d0, d1, d2) -> (d1, d2)" in str(broadcast.attributes["indexing_maps"])
    )
    return broadcast.operands[0] if shared else None


def _check_batch_matmul(op: ir.Operation, element: str) -> None:
    """Skip batch matmul `op` of a model of `element` where the kernel cannot take it."""
    a, b, init = op.operands[0], op.operands[1], op.operands[2]
    _require_static_and_filled(a, b, init)
    if _element(init) != "f32":
        raise _Skip(f"{_element(init)} result, not f32")
    if _shape(a)[2] % 32:
        raise _Skip(f"K = {_shape(a)[2]}, not a multiple of 32")
    if element == "f32" and (_element(a), _element(b)) != ("f32", "f32"):
        raise _Skip(f"{_element(a)} x {_element(b)}, not f32 x f32")


def _attention_operands(op: ir.Operation) -> bool:
    """Whether `_batch_matmul` gives batch matmul `op` of a bf16 model to `_attention`: the kernel
    takes it, and its right operand is an activation, not a shared weight."""
    try:
        _check_batch_matmul(op, "bf16")
    except _Skip:
        return False
    return _shared_weight(op.operands[1], "bf16") is None


def _activations(a: ir.Value) -> tuple[ir.Value, bool]:
    """The bf16 activations behind a matmul's left operand, and whether they must be truncated (exactly)."""
    if _element(a) == "bf16":
        return a, False
    widened = _widened_from_bf16(a)
    if widened is not None:
        return widened, False
    if _bf16_valued(a):
        return a, True
    raise _Skip("the left operand is f32 with values that are not all bf16")


def _nchw_result(y: str, call: Call, init: str | None) -> list[str]:
    """Lines turning the kernel's NHWC f32 result into the op's NCHW result (plus `init`), returned."""
    nb, cout, oh, ow = call.nb, call.cout, call.oh, call.ow
    out = f"tensor<{nb}x{cout}x{oh}x{ow}xf32>"
    nhwc_map = "affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>"
    identity = "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>"
    parallel = ", ".join(['"parallel"'] * 4)
    if init is None:
        return [
            f"%re = tensor.empty() : {out}",
            f"%r = linalg.transpose ins({y} : tensor<{nb}x{oh}x{ow}x{cout}xf32>) outs(%re : {out}) permutation = [0, 3, 1, 2]",
            f"return %r : {out}",
        ]
    return [
        f"%re = tensor.empty() : {out}",
        f"%r = linalg.generic {{indexing_maps = [{nhwc_map}, {identity}, {identity}], iterator_types = [{parallel}]}} "
        f"ins({y}, {init} : tensor<{nb}x{oh}x{ow}x{cout}xf32>, {out}) outs(%re : {out}) {{\n"
        "    ^bb0(%v: f32, %i: f32, %o: f32):\n      %s = arith.addf %v, %i : f32\n      linalg.yield %s : f32\n"
        f"    }} -> {out}",
        f"return %r : {out}",
    ]


def _add_init(value: str, init: str, shape: list[int], fresh: mlir.Namer) -> tuple[list[str], str]:
    """Lines adding a contraction's (non-zero) init to its result, elementwise in f32."""
    rank = len(shape)
    identity = f"affine_map<({', '.join(f'd{i}' for i in range(rank))}) -> ({', '.join(f'd{i}' for i in range(rank))})>"
    parallel = ", ".join(['"parallel"'] * rank)
    tensor = f"tensor<{mlir.dims(shape)}xf32>"
    name = fresh("sum")
    return [
        f"{name}e = tensor.empty() : {tensor}",
        f"{name} = linalg.generic {{indexing_maps = [{identity}, {identity}, {identity}], iterator_types = [{parallel}]}} "
        f"ins({value}, {init} : {tensor}, {tensor}) outs({name}e : {tensor}) {{\n"
        "    ^bb0(%v: f32, %i: f32, %o: f32):\n      %s = arith.addf %v, %i : f32\n      linalg.yield %s : f32\n"
        f"    }} -> {tensor}",
    ], name


def _function(name: str, arguments: str, result: str, body: list[str]) -> str:
    lines = "\n    ".join(body)
    return f"  func.func private @{name}({arguments}) -> {result} {{\n    {lines}\n  }}"
