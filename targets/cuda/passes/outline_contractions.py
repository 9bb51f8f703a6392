"""outline-contractions: each matmul, convolution and attention kiln has a GPU kernel for moves into a function of its own.

For CUDA on Hopper (sm_90a) at the torch hand-off, kiln computes matmuls and convolutions with its
own kernels (targets/cuda/kernels/). This pass marks where: each eligible contraction becomes a
`func.call` of a private function that takes the contraction's operands, carries a
`kiln.contraction` dictionary describing it (kind, sizes, dtypes, layout, precision), and computes
it with the same torch ops as before. Just before iree-compile the compiler replaces the body of each
function it has a kernel for by a dispatch of that kernel; any other function keeps its torch ops,
which IREE inlines and compiles as it always did. Identical contractions share one function.

Eligible, with static shapes:
- `aten.mm(A, B)` of f32, bf16 or f16 operands, B being `permute(W, [1, 0])` (nn.Linear's W[N, K],
  passed as is) or any [K, N] value. When both operands are `aten.to.dtype` upcasts of 16-bit values
  (kiln's bf16 Linear layers compute in f32 from bf16 values), the function takes the 16-bit values:
  a 16-bit kernel with f32 accumulation and an f32 result is the same arithmetic.
  The elementwise ops after the product (and its bias) that read nothing else, a GELU say, are its
  epilogue (matmul_epilogue.py), which the kernel computes on its tile. Where the kernel is the GEMV
  (a decode step: `contract.gated_outlined`), two matmuls of one A by two weights whose products only
  such ops read together (SwiGLU: silu(x @ Wg^T) * (x @ Wu^T)) are one function taking both weights,
  the kernel computing both products and the ops. There too a weight that `--quantize` made
  (quantized_weights.py: int8 or int4 values dequantized by torch ops) is taken as its values and
  scales, which the GEMV reads as they are stored.
- `aten.bmm(A, broadcast_to(B, [b, k, n]))` of a 2-D B (one weight for every batch: the in-projection
  of nn.MultiheadAttention on batch-first inputs) is first rewritten as the one matmul it is:
  `view(mm(view(A, [b*m, k]), B), [b, m, n])`.
- `aten.convolution` in 2-D, not transposed, groups 1 (an implicit GEMM), grouped (RegNet's and
  ResNeXt's 3x3s: an implicit GEMM per group) or depthwise (groups = input channels = output channels:
  MobileNet's 3x3 stencils, which f32 computes in plain f32 FMAs, "ieee"),
  with its channel epilogue: the per-channel affine ops after it (batch norm in inference, a bias;
  in the convolution's dtype or in f32) and a clamp by constants (ReLU, ReLU6), each the only user of
  the one before. The function takes their vectors and the kernel applies them to its accumulator.
- `aten.max_pool2d` (floor mode), 4-D: ResNet's stem pooling, a stencil like a depthwise convolution.
- `aten.scaled_dot_product_attention` without dropout or `enable_gqa`, causal or not, with or without
  a rank-4 mask tensor (boolean, or additive in a float dtype; the function takes it before any
  `expand` broadcast it), of 4-D f32, bf16 or f16 operands whose head dimension the kernel takes
  (`contract.head_dim_taken`: 16 to 128, up to 256 in 16-bit dtypes). Where Q, K and V
  are all `permute(x, [0, 2, 1, 3])` (heads moved forward from [batch, seq, heads, dim]), the function
  takes the x and the kernel reads them through strides (layout "bshd"). Where K and V are key/value
  heads repeated for groups of query heads (transformers' repeat_kv: GQA, MQA), the function takes
  them unrepeated and the kernel reads each group's head (`kv_group`); likewise a result whose only
  use is that permute is returned permuted (out_layout "bshd"): no transposes are materialized.
  Where Q, K and V are instead made by longer chains of layout ops from earlier tensors (a fused QKV
  projection split in three; nn.MultiheadAttention's sequence-first reshapes and selects), the
  function takes those earlier tensors (`sources`) and the kernel reads each operand through the
  strides the chain amounts to (layout "strided", `views` [offset, batch, head, seq strides]; see
  strided_views.py): nothing is copied.
  The compiler keeps such attention whole at import for this (compiler/importer.py), in f32 too.

Not outlined: a contraction (or, in outline-row-programs, a row program) of literals alone, with no
input, parameter or state in it (`compile_time_constants`): IREE evaluates it while compiling.

The cuda room places this pass where its kernels apply (sm_90a, the torch hand-off, --kernels on:
targets/cuda/target.py). `kiln.matmul_precision` and `kiln.conv_precision`, module attributes the
room sets from the compile's options (PyTorch's "highest" / "high" / "medium"), give f32 kernels their
precision: tf32x3 (f32-class accuracy) for "highest", TF32 otherwise; PyTorch's defaults where absent.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from torch_mlir import ir

from kiln.passes.pass_api import Pass, PassRun, ops_named
from kiln.passes.torch_build import constant_ints, static_type
from kiln.passes.torch_ir import defining_op, is_none, number, producer, splat, tensor_type, user_op, vtensor

from ..kernels.contract import ATTRIBUTE, KERNEL_DTYPES, MAX_STACKED, attention_outlined, gated_outlined
from . import matmul_epilogue, quantized_weights
from .row_steps import replay
from .strided_views import LAYOUT_OPS, StridedView, integer_arguments, strided_view

F32_PRECISION = {"highest": "tf32x3", "high": "tf32", "medium": "tf32"}  # PyTorch's name -> the kernels'
# aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
BIAS, STRIDE, PADDING, DILATION, TRANSPOSED, GROUPS = 2, 3, 4, 5, 6, 8
# aten.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
MASK, DROPOUT, CAUSAL, SCALE, GQA = 3, 4, 5, 6, 7
ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}
HEADS_FORWARD = [0, 2, 1, 3]  # [batch, seq, heads, dim] <-> [batch, heads, seq, dim]
# Ops that only read a constant: movable anywhere in their block (_call_fits_at)
HOISTABLE = ("ml_program.global_load_const", "torch_c.from_builtin_tensor", "torch.vtensor.literal")


def run(module: ir.Operation, pass_run: PassRun) -> None:
    precisions = kernel_precisions(module)
    if precisions is None:
        return
    outliner = Outliner(module)
    for function in model_functions(module):
        for op in ops_named(function, ("torch.aten.bmm",)):
            _bmm_as_mm(op)
        for op in ops_named(function, ("torch.aten.mm",)):
            _bias_before_view(op)
        for first, second in _same_rows_pairs(ops_named(function, ("torch.aten.mm",))):
            if first.results[0].uses and second.results[0].uses:  # neither taken by an earlier pair
                _outline_match(outliner, first, _match_mm(first, precisions[0], second))
        for group in _same_rows_groups(ops_named(function, ("torch.aten.mm",))):
            _outline_stacked(outliner, [op for op in group if op.results[0].uses], precisions[0])
        for op in ops_named(function, ("torch.aten.mm", "torch.aten.convolution", "torch.aten.max_pool2d", "torch.aten.scaled_dot_product_attention")):
            _outline(outliner, op, *precisions)


def model_functions(module: ir.Operation) -> list[ir.Operation]:
    """The module's functions other than those outlined already."""
    return [op for op in _body(module) if op.name == "func.func" and ATTRIBUTE not in op.attributes]


def kernel_precisions(module: ir.Operation) -> tuple[str, str] | None:
    """(f32 matmul precision, f32 convolution precision) of the kernels, from the module's attributes;
    None for a precision the kernels do not know."""

    def text(name: str, default: str) -> str:
        attribute = module.attributes[name] if name in module.attributes else None
        return attribute.value if isinstance(attribute, ir.StringAttr) else default

    matmul, conv = text("kiln.matmul_precision", "highest"), text("kiln.conv_precision", "high")
    if matmul not in F32_PRECISION or conv not in F32_PRECISION:
        return None
    return F32_PRECISION[matmul], F32_PRECISION[conv]


class Outliner:
    """Makes the outlined functions (one per distinct description and operand types) and the calls to them."""

    def __init__(self, module: ir.Operation) -> None:
        self.module = module
        self.functions: dict[str, str] = {}  # description + types, as JSON -> function name
        self.taken = {op.attributes["sym_name"].value for op in _body(module) if "sym_name" in op.attributes}

    def call(
        self,
        replaced: ir.Operation,
        description: dict[str, Any],
        operands: list[ir.Value],
        build_body: Any,
        also: tuple[ir.Value, ...] = (),
    ) -> None:
        """Make every use of `replaced`'s result read a call of the function `description` names,
        taking `operands` (all defined before `replaced`) and computing its body with `build_body`
        (which returns one value, or with `also` a list: the result, then one for each of `also`,
        values whose uses the call's further results take over; all their users come after `replaced`)."""
        result_types = [replaced.results[0].type, *(value.type for value in also)]
        key = json.dumps([description, [str(value.type) for value in operands], [str(t) for t in result_types]], sort_keys=True)
        if key not in self.functions:
            self.functions[key] = self._function(description, operands, result_types, build_body)
        with replaced.location, ir.InsertionPoint(replaced):
            callee = ir.FlatSymbolRefAttr.get(self.functions[key])
            call = ir.Operation.create("func.call", results=result_types, operands=operands, attributes={"callee": callee})
        for value, result in zip([replaced.results[0], *also], call.results, strict=True):
            value.replace_all_uses_with(result)

    def _function(self, description: dict[str, Any], operands: list[ir.Value], result_types: list[ir.Type], build_body: Any) -> str:
        name = _fresh(f"kiln_{description['kind']}", self.taken)
        signature = ir.FunctionType.get([value.type for value in operands], result_types)
        with ir.Location.unknown(), ir.InsertionPoint(_module_block(self.module)):
            function = ir.Operation.create(
                "func.func",
                attributes={
                    "sym_name": ir.StringAttr.get(name),
                    "sym_visibility": ir.StringAttr.get("private"),
                    "function_type": ir.TypeAttr.get(signature),
                    ATTRIBUTE: description_attribute(description),
                },
                regions=1,
            )
            block = function.regions[0].blocks.append(*[value.type for value in operands])
            with ir.InsertionPoint(block):
                built = build_body(Builder(), list(block.arguments))
                ir.Operation.create("func.return", operands=built if isinstance(built, list) else [built])
        return name


def _outline(outliner: Outliner, op: ir.Operation, matmul_precision: str, conv_precision: str) -> None:
    if op.name == "torch.aten.mm":
        match = _match_mm(op, matmul_precision)
    elif op.name == "torch.aten.convolution":
        match = _match_conv(op, conv_precision)
    elif op.name == "torch.aten.max_pool2d":
        match = _match_max_pool(op)
    else:
        match = _match_attention(op, matmul_precision)
    _outline_match(outliner, op, match)


def _outline_match(outliner: Outliner, op: ir.Operation, match: Match | None) -> None:
    if match is None:
        return
    description, operands, build_body, epilogue = match
    if compile_time_constants(operands):
        return
    # the call returns what the last op of the epilogue made, where every operand is defined, the bias too
    outliner.call(epilogue[-1] if epilogue else op, description, operands, build_body)
    for index in reversed(range(len(epilogue))):  # last first; those before it are still to erase
        erase_with_unused_producers(epilogue[index], spared=epilogue[:index])
    erase_with_unused_producers(op)


def compile_time_constants(values: list[ir.Value]) -> bool:
    """Whether `values` are computed from literals alone: from no function argument, parameter or state.

    Such a contraction is left to IREE's code, which computes it once, when the artifact is loaded. With
    IREE's const-eval on (`--iree-flag --iree-opt-const-eval=true`; kiln turns it off, targets/levers.py)
    IREE evaluates it while compiling, on the CPU: a kiln kernel there is CUDA code that the evaluation
    cannot run, and iree-compile 3.13 crashed on it (SIGSEGV in LLVMCPUAssignImportOrdinalsPass;
    SigLIP's pooling head projects a learned probe, a weight, through its query weights: no input in it)."""
    seen: set[ir.Value] = set()
    pending = list(values)
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        op = defining_op(value)
        if op is None or op.name in RUN_TIME_SOURCES:
            return False
        pending.extend(op.operands)
    return True


RUN_TIME_SOURCES = ("ml_program.global_load", "ml_program.global_load_const", "util.global.load")  # state, parameters


class Builder:
    """Creates torch ops at the current insertion point; each returns its one result. Constants are
    made once per builder (one builder per insertion point)."""

    def __init__(self) -> None:
        self._constants: dict[tuple[str, object], ir.Value] = {}

    def op(self, name: str, operands: list[ir.Value], result_type: ir.Type, attributes: dict[str, ir.Attribute] | None = None) -> ir.Value:
        return ir.Operation.create(name, results=[result_type], operands=operands, attributes=attributes).results[0]

    def int_(self, value: int) -> ir.Value:
        if ("int", value) not in self._constants:
            attribute = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
            self._constants["int", value] = self.op("torch.constant.int", [], ir.Type.parse("!torch.int"), {"value": attribute})
        return self._constants["int", value]

    def ints(self, values: list[int]) -> ir.Value:
        return self.op("torch.prim.ListConstruct", [self.int_(value) for value in values], ir.Type.parse("!torch.list<int>"))

    def bool_(self, value: bool) -> ir.Value:
        if ("bool", value) not in self._constants:
            attribute = ir.BoolAttr.get(value)
            self._constants["bool", value] = self.op("torch.constant.bool", [], ir.Type.parse("!torch.bool"), {"value": attribute})
        return self._constants["bool", value]

    def float_(self, value: float) -> ir.Value:
        if ("float", value) not in self._constants:
            attribute = ir.FloatAttr.get(ir.F64Type.get(), value)
            self._constants["float", value] = self.op("torch.constant.float", [], ir.Type.parse("!torch.float"), {"value": attribute})
        return self._constants["float", value]

    def none(self) -> ir.Value:
        if ("none", None) not in self._constants:
            self._constants["none", None] = self.op("torch.constant.none", [], ir.Type.parse("!torch.none"))
        return self._constants["none", None]

    def permute(self, x: ir.Value, order: list[int]) -> ir.Value:
        described = static_type(x)
        shape = [described.shape[axis] for axis in order]
        return self.op("torch.aten.permute", [x, self.ints(order)], vtensor(shape, described.dtype))

    def replay(self, chain: tuple[ir.Operation, ...], x: ir.Value) -> ir.Value:
        """The layout ops of `chain` again, from `x` (their integer arguments as constants here)."""
        for op in chain:
            constants = integer_arguments(op) or []  # the chain's ops were read with constant arguments
            arguments = [self.ints(item) if isinstance(item, list) else self.int_(item) for item in constants]
            x = self.op(op.name, [x, *arguments], op.results[0].type)
        return x

    def replay_elementwise(self, op: ir.Operation, before: ir.Value, x: ir.Value, vectors: dict[ir.Value, ir.Value]) -> ir.Value:
        """`op` again, reading `x` where it read `before`, the function's arguments where it read
        `vectors`' keys, and copies of the constants it read (_constant_operands)."""
        operands = [
            x if operand == before else vectors[operand] if operand in vectors else defining_op(operand).clone().results[0]
            for operand in op.operands
        ]
        attributes = {named.name: named.attr for named in op.attributes}
        return self.op(op.name, operands, op.results[0].type, attributes)

    def view(self, x: ir.Value, shape: list[int]) -> ir.Value:
        return self.op("torch.aten.view", [x, self.ints(shape)], vtensor(shape, static_type(x).dtype))

    def upcast(self, x: ir.Value) -> ir.Value:
        """`x.to(torch.float32)`."""
        operands = [x, self.int_(6), self.bool_(False), self.bool_(False), self.none()]  # 6: torch.float32
        return self.op("torch.aten.to.dtype", operands, vtensor(static_type(x).shape, "f32"))


# -- matching ---------------------------------------------------------------------------------------

# The description, the function's operands, its body builder, and the ops after the contraction that
# the function computes too (each the only user of the one before), whose last result the call replaces.
Match = tuple[dict[str, Any], list[ir.Value], Any, list[ir.Operation]]


def _same_rows_groups(mms: list[ir.Operation]) -> list[list[ir.Operation]]:
    """The matmuls of one A (the same value, or views of one value) with the GEMV's few rows
    (`contract.gated_outlined`), in block order, by A."""
    groups: dict[tuple[Any, str], list[ir.Operation]] = {}
    for op in mms:
        a = op.operands[0]
        rows = static_type(a)
        if rows is None or not rows.shape or not gated_outlined(rows.shape[0]):
            continue
        view = producer(a, "torch.aten.view")
        groups.setdefault((view.operands[0] if view is not None else a, str(a.type)), []).append(op)
    return list(groups.values())


def _same_rows_pairs(mms: list[ir.Operation]) -> list[tuple[ir.Operation, ir.Operation]]:
    """Pairs of matmuls, in block order, of one A by weights of one type: SwiGLU's gate and up
    projections, candidates for one kernel (_match_mm's `second`)."""
    return [
        (group[i], group[j])
        for group in _same_rows_groups(mms)
        for i in range(len(group))
        for j in range(i + 1, len(group))
        if str(group[i].operands[1].type) == str(group[j].operands[1].type)
    ]


def _outline_stacked(outliner: Outliner, mms: list[ir.Operation], precision: str) -> None:
    """Matmuls of one A whose products are read apart (a decode step's Q, K and V projections) as one
    function of their weights stacked along N (Matmul.stacked), MAX_STACKED at a time: one GEMV
    dispatch where there were as many as weights. Each must be a plain product (its bias, no
    epilogue) of a W[N, K] of one type and bias; the call goes where the first one's result is made,
    which every operand must precede (_call_fits_at) and every other result's reader follow."""
    matches = [(op, _match_mm(op, precision)) for op in mms]
    plain = [(op, match) for op, match in matches if match is not None and "epilogue" not in match[0] and match[0]["b_layout"] == "nk"]
    kinds: dict[str, list[tuple[ir.Operation, Match]]] = {}
    for op, match in plain:
        description = {key: value for key, value in match[0].items() if key != "n"}
        kinds.setdefault(json.dumps(description, sort_keys=True), []).append((op, match))
    for members in kinds.values():
        for start in range(0, len(members) - 1, MAX_STACKED):
            chunk = members[start : start + MAX_STACKED]
            if len(chunk) > 1:
                _outline_chunk(outliner, chunk)


def _outline_chunk(outliner: Outliner, chunk: list[tuple[ir.Operation, Match]]) -> None:
    description, operands, _, _ = chunk[0][1]
    finals = [match[3][-1] if match[3] else op for op, match in chunk]
    stacked_operands = [operands[0], *(value for _, match in chunk for value in match[1][1:])]
    if not _call_fits_at(finals[0], stacked_operands, [final.results[0] for final in finals[1:]]) or compile_time_constants(stacked_operands):
        return
    widths = [match[0]["n"] for _, match in chunk]
    stacked = {**description, "n": sum(widths), "stacked": widths}
    per_member = len(operands) - 1  # a weight, and its bias where there is one

    def body(build: Builder, args: list[ir.Value]) -> list[ir.Value]:
        return [
            match[2](build, [args[0], *args[1 + index * per_member : 1 + (index + 1) * per_member]])
            for index, (_, match) in enumerate(chunk)
        ]

    outliner.call(finals[0], stacked, stacked_operands, body, also=tuple(final.results[0] for final in finals[1:]))
    for op, match in chunk:
        for index in reversed(range(len(match[3]))):
            erase_with_unused_producers(match[3][index], spared=match[3][:index])
        erase_with_unused_producers(op)


def _call_fits_at(at: ir.Operation, operands: list[ir.Value], later: list[ir.Value]) -> bool:
    """Whether a call placed before `at` (in its block) can take `operands` and make the values whose
    readers `later` lists: every operand defined before `at`, every reader after it. Operands made
    after `at` by loads of constants (a checkpoint's weights, loaded where each is used) are moved
    before it where the call fits."""
    position = {op: index for index, op in enumerate(op.operation for op in at.block.operations)}
    here = position[at]
    moved: list[ir.Operation] = []
    for value in operands:
        chain = _made_after(value, position, here)
        if chain is None:
            return False
        moved += [op for op in chain if op not in moved]
    if not all(position.get(user_op(use), -1) > here for value in later for use in value.uses):
        return False
    for op in moved:
        op.move_before(at)
    return True


def _made_after(value: ir.Value, position: dict[ir.Operation, int], here: int) -> list[ir.Operation] | None:
    """The ops at or after `here` that make `value`, producers first, if all are constant loads
    (HOISTABLE) of values made before `here`; None otherwise."""
    op = defining_op(value)
    if op is None or position.get(op.operation, -1) < here:
        return []  # a block argument, or made before (in this block, or in an enclosing one)
    if op.name not in HOISTABLE:
        return None
    chain: list[ir.Operation] = []
    for operand in op.operands:
        found = _made_after(operand, position, here)
        if found is None:
            return None
        chain += found
    return [*chain, op.operation]


def _match_mm(op: ir.Operation, precision: str, second: ir.Operation | None = None) -> Match | None:
    """`op` with nn.Linear's bias and the elementwise ops after it (matmul_epilogue.py); with `second`,
    a matmul of the same A by another weight, the two products and the elementwise ops that read both
    (SwiGLU: silu(x @ Wg^T) * (x @ Wu^T)), and no bias."""
    a, a_upcast = _strip_upcast(op.operands[0])
    b, layout, b_upcast = _weight(op.operands[1])
    upcast = a_upcast and b_upcast
    a_type, b_type, result = static_type(a), static_type(b), static_type(op.results[0])
    if a_upcast != b_upcast or a_type is None or b_type is None or result is None:
        return None  # one operand upcast: a mixed-precision product the kernels do not compute
    if a_type.dtype != b_type.dtype or a_type.dtype not in KERNEL_DTYPES or len(a_type.shape) != 2:
        return None
    (m, k), n = a_type.shape, result.shape[1]
    quantized = quantized_weights.match(b) if layout == "nk" and gated_outlined(m) else None
    b2 = quantized2 = None
    if second is not None:
        b2, layout2, b2_upcast = _weight(second.operands[1])
        if layout2 != layout or b2_upcast != b_upcast or str(b2.type) != str(b.type) or str(second.results[0].type) != str(op.results[0].type):
            return None
        quantized2 = quantized_weights.match(b2) if quantized is not None else None
        if quantized is not None and (quantized2 is None or quantized2.scheme != quantized.scheme):
            return None
        bias, bias_ops = None, []
    else:
        bias, bias_ops = _bias_epilogue(op, n, a_type.dtype)
    product = bias_ops[-1].results[0] if bias_ops else op.results[0]
    elementwise = matmul_epilogue.find([product, *([second.results[0]] if second is not None else [])])
    if elementwise is None and second is not None:
        return None
    epilogue = [*bias_ops, *([second] if second is not None else [])]  # erased after the call replaces the last
    if elementwise is not None:
        for view in elementwise.stale:
            erase_with_unused_producers(view)
        epilogue += elementwise.ops
    final = static_type(epilogue[-1].results[0]) if epilogue else result
    assert final is not None
    description = {
        "kind": "mm",
        "m": m,
        "n": n,
        "k": k,
        "dtype": a_type.dtype,
        "out_dtype": final.dtype,
        "b_layout": layout,
        "precision": precision if a_type.dtype == "f32" else "",
        "bias": bias is not None,
    }
    if elementwise is not None:
        description.update(epilogue=[list(step) for step in elementwise.steps], product_dtype=static_type(product).dtype)  # type: ignore[union-attr]
    if second is not None:
        description["gated"] = True
    if quantized is not None:
        description["quantized"] = quantized.scheme
    mm_type = op.results[0].type
    cast = bias_ops[1] if len(bias_ops) == 2 else None
    per_weight = 1 if quantized is None else 2  # the weight, or its values and scales

    def matmul(build: Builder, lhs: ir.Value, weight_args: list[ir.Value], source: quantized_weights.QuantizedWeight | None) -> ir.Value:
        weight = weight_args[0]
        if source is not None:  # dequantized again, from the function's arguments
            weight = replay(list(source.ops), {source.values: weight_args[0], source.scales: weight_args[1]})[source.ops[-1].results[0]]
        rhs = build.upcast(weight) if upcast else weight
        return build.op("torch.aten.mm", [lhs, build.permute(rhs, [1, 0]) if layout == "nk" else rhs], mm_type)

    def with_bias(build: Builder, lhs: ir.Value, args: list[ir.Value]) -> ir.Value:
        product = matmul(build, lhs, args[1 : 1 + per_weight], quantized)
        if bias is None:
            return product
        bias_arg = args[1 + per_weight]
        added = build.op("torch.aten.add.Tensor", [product, build.upcast(bias_arg) if upcast else bias_arg, build.int_(1)], mm_type)
        if cast is None:
            return added
        code = number(cast.operands[1])
        assert isinstance(code, int)
        operands = [added, build.int_(code), build.bool_(False), build.bool_(False), build.none()]
        return build.op("torch.aten.to.dtype", operands, cast.results[0].type)

    def body(build: Builder, args: list[ir.Value]) -> ir.Value:
        lhs = build.upcast(args[0]) if upcast else args[0]
        value = with_bias(build, lhs, args)
        if elementwise is None:
            return value
        mapping = {product: value}
        if second is not None:
            mapping[second.results[0]] = matmul(build, lhs, args[-per_weight:], quantized2)
        return replay(elementwise.ops, mapping)[elementwise.ops[-1].results[0]]

    weights = [quantized.values, quantized.scales] if quantized is not None else [b]
    weights2 = [quantized2.values, quantized2.scales] if quantized2 is not None else [b2] if b2 is not None else []
    return description, [a, *weights, *([bias] if bias is not None else []), *weights2], body, epilogue


def _bias_epilogue(op: ir.Operation, n: int, dtype: str) -> tuple[ir.Value | None, list[ir.Operation]]:
    """nn.Linear's bias after a matmul: `add(mm, bias[n], 1)`, the add being the matmul's only user,
    and, for a bf16 Linear computed in f32 from upcast 16-bit values, the `to.dtype` back to 16 bits
    that is the add's only user. Returns (the bias as the kernel reads it, in the operands' dtype;
    [add] or [add, to.dtype]), or (None, []). The kernel adds the bias to its f32 accumulator and
    rounds once, which is what the f32 ops compute; where the graph adds a 16-bit bias to a 16-bit
    product, it rounds once where the graph rounds twice (as cuBLAS's addmm, eager's nn.Linear, does)."""
    product = static_type(op.results[0])
    add = _only_user(op.results[0], "torch.aten.add.Tensor")
    if product is None or add is None or add.operands[0] != op.results[0] or number(add.operands[2]) != 1:
        return None, []
    bias, upcast = _strip_upcast(add.operands[1])
    bias_type = static_type(bias)
    if bias_type is None or bias_type.shape != (n,) or bias_type.dtype != dtype or upcast != (product.dtype != dtype):
        return None, []
    if product.dtype == dtype:  # f32, or a 16-bit product and bias added as they are
        return bias, [add]
    cast = _only_user(add.results[0], "torch.aten.to.dtype")
    if cast is None or static_type(cast.results[0]) is None or static_type(cast.results[0]).dtype != dtype:
        return None, []
    return bias, [add, cast]


def _bias_before_view(op: ir.Operation) -> None:
    """`add(view(mm), bias[n], 1)` -> `view(add(mm, bias, 1))` where the view keeps the matmul's
    columns (nn.Linear on a batch of sequences, as torch.export leaves nn.MultiheadAttention's
    in-projection), so that the bias joins the matmul's epilogue (_bias_epilogue)."""
    view = _only_user(op.results[0], "torch.aten.view")
    add = _only_user(view.results[0], "torch.aten.add.Tensor") if view is not None else None
    if view is None or add is None or add.operands[0] != view.results[0]:
        return
    product, viewed, bias, added = (static_type(value) for value in (op.results[0], view.results[0], add.operands[1], add.results[0]))
    if product is None or viewed is None or bias is None or added is None or added.dtype != product.dtype:
        return
    if viewed.shape[-1:] != product.shape[-1:] or bias.shape != product.shape[-1:]:
        return
    with add.location, ir.InsertionPoint(add):
        build = Builder()
        sum_ = build.op("torch.aten.add.Tensor", [op.results[0], add.operands[1], add.operands[2]], op.results[0].type)
        moved = build.view(sum_, list(viewed.shape))
    add.results[0].replace_all_uses_with(moved)
    add.erase()
    view.erase()


def _only_user(value: ir.Value, name: str) -> ir.Operation | None:
    uses = list(value.uses)
    user = uses[0].owner.operation if len(uses) == 1 else None
    return user if user is not None and user.name == name else None


def _match_conv(op: ir.Operation, precision: str) -> Match | None:
    x, w, bias = op.operands[0], op.operands[1], op.operands[BIAS]
    stride, padding, dilation = (constant_ints(op.operands[i]) for i in (STRIDE, PADDING, DILATION))
    transposed, groups = _bool(op.operands[TRANSPOSED]), number(op.operands[GROUPS])
    x_type, w_type, result = static_type(x), static_type(w), static_type(op.results[0])
    if x_type is None or w_type is None or result is None or stride is None or padding is None or dilation is None:
        return None
    if transposed is not False or groups is None or len(x_type.shape) != 4 or len(stride) != 2:
        return None
    if x_type.dtype not in KERNEL_DTYPES or w_type.dtype != x_type.dtype or result.dtype != x_type.dtype:
        return None
    has_bias = not is_none(bias)
    if has_bias and (static_type(bias) is None or static_type(bias).dtype != x_type.dtype):
        return None
    n, c, h, width = x_type.shape
    k_out, per_group, r, s = w_type.shape
    depthwise = groups == c == k_out and per_group == 1 and c > 1
    if groups < 1 or c % groups or k_out % groups or per_group != c // groups:
        return None
    epilogue = _channel_epilogue(op, k_out)
    final = static_type(epilogue.ops[-1].results[0]) if epilogue.ops else result
    if final is None or final.dtype not in KERNEL_DTYPES:
        return None
    description = {
        "kind": "conv2d",
        **dict(n=n, c=c, h=h, w=width, k_out=k_out, r=r, s=s),
        "stride": stride,
        "padding": padding if len(padding) == 2 else padding * 2,
        "dilation": dilation if len(dilation) == 2 else dilation * 2,
        "dtype": x_type.dtype,
        "out_dtype": final.dtype,
        "precision": ("ieee" if depthwise else precision) if x_type.dtype == "f32" else "",
        "bias": has_bias,
        "groups": groups,
        **({"epilogue": epilogue.steps} if epilogue.steps else {}),
        **({"clamp": list(epilogue.clamp)} if epilogue.clamp else {}),
    }
    result_type = op.results[0].type
    first_vector = 3 if has_bias else 2

    def body(build: Builder, args: list[ir.Value]) -> ir.Value:
        operands = [
            args[0],
            args[1],
            args[2] if has_bias else build.none(),
            build.ints(description["stride"]),
            build.ints(description["padding"]),
            build.ints(description["dilation"]),
            build.bool_(False),
            build.ints([0, 0]),
            build.int_(groups),
        ]
        y = build.op("torch.aten.convolution", operands, result_type)
        vectors = dict(zip(epilogue.vectors, args[first_vector:], strict=True))
        before = op.results[0]
        for taken in epilogue.ops:
            y = build.replay_elementwise(taken, before, y, vectors)
            before = taken.results[0]
        return y

    return description, [x, w, *([bias] if has_bias else []), *epilogue.vectors], body, epilogue.ops


def _match_max_pool(op: ir.Operation) -> Match | None:
    x, result = static_type(op.operands[0]), static_type(op.results[0])
    window, stride, padding, dilation = (constant_ints(op.operands[i]) for i in range(1, 5))
    ceil_mode = _bool(op.operands[5])
    if x is None or result is None or None in (window, stride, padding, dilation) or ceil_mode is not False:
        return None
    if len(x.shape) != 4 or x.dtype not in KERNEL_DTYPES:
        return None
    pair = lambda values: values if len(values) == 2 else values * 2  # noqa: E731
    n, c, h, w = x.shape
    (r, s), stride = pair(window), pair(stride or window)  # PyTorch: no stride means the window's
    description = {
        "kind": "maxpool2d",
        **dict(n=n, c=c, h=h, w=w, r=r, s=s),
        "stride": stride,
        "padding": pair(padding),
        "dilation": pair(dilation),
        "dtype": x.dtype,
    }
    result_type = op.results[0].type

    def body(build: Builder, args: list[ir.Value]) -> ir.Value:
        geometry = [build.ints([r, s]), *(build.ints(description[name]) for name in ("stride", "padding", "dilation"))]
        return build.op("torch.aten.max_pool2d", [args[0], *geometry, build.bool_(False)], result_type)

    return description, [op.operands[0]], body, []


AFFINE_STEPS = {
    "torch.aten.add.Tensor": "add", "torch.aten.sub.Tensor": "sub", "torch.aten.mul.Tensor": "mul", "torch.aten.div.Tensor": "div",
}  # fmt: skip
COMMUTATIVE = ("add", "mul")
CLAMPS = ("torch.aten.maximum", "torch.aten.minimum", "torch.aten.relu", "torch.aten.clamp", "torch.aten.hardtanh")


@dataclass
class _ChannelEpilogue:
    """What follows a convolution that its kernel computes too: per-channel affine steps (batch norm in
    inference, a bias), then a clamp (ReLU, ReLU6, hardtanh); each op the only user of the one before.
    The kernel applies them to its f32 accumulator as one scale and shift per channel and rounds once."""

    ops: list[ir.Operation] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)  # add / sub / mul / div, one per affine op
    vectors: list[ir.Value] = field(default_factory=list)  # each step's per-channel operand
    clamp: tuple[float, float] = ()  # (low, high), +-inf for an open side; () for none


def _channel_epilogue(op: ir.Operation, channels: int) -> _ChannelEpilogue:
    """The epilogue of the convolution `op` (NCHW result of `channels` channels): affine steps by
    [C, 1, 1] or [1, C, 1, 1] vectors (computed in the convolution's dtype or in f32, as batch norm of
    16-bit values is), a `to.dtype` back to 16 bits, then clamps by constants. Empty where none follows."""
    epilogue = _ChannelEpilogue()
    low, high = -math.inf, math.inf
    value = op.results[0]
    while True:
        uses = list(value.uses)
        if len(uses) != 1:
            break
        user = uses[0].owner.operation
        result = static_type(user.results[0]) if len(user.results) == 1 else None
        if result is None or result.shape != static_type(value).shape:
            break
        if not _constant_operands(user, value):
            break
        step = AFFINE_STEPS.get(user.name)
        if step is not None and not epilogue.clamp and not _cast_taken(epilogue):
            if step in ("add", "sub") and number(user.operands[2]) != 1:
                break
            operands = list(user.operands[:2])
            if operands[0] == value:
                vector = operands[1]
            elif step in COMMUTATIVE and operands[1] == value:
                vector = operands[0]
            else:
                break
            vector_type = static_type(vector)
            if vector_type is None or vector_type.shape not in ((channels, 1, 1), (1, channels, 1, 1)) or not vector_type.is_float:
                break
            epilogue.steps.append(step)
            epilogue.vectors.append(vector)
        elif user.name == "torch.aten.to.dtype" and not epilogue.clamp and not _cast_taken(epilogue):
            if static_type(value).dtype != "f32" or result.dtype not in ("bf16", "f16"):
                break  # a rounding back to 16 bits: the kernel's final store does it
        elif user.name in CLAMPS:
            bounds = _clamp_bounds(user, value)
            if bounds is None:
                break
            low, high = max(low, bounds[0]), min(high, bounds[1])
            epilogue.clamp = (low, high)
        else:
            break
        epilogue.ops.append(user)
        value = user.results[0]
    return epilogue


def _constant_operands(op: ir.Operation, value: ir.Value) -> bool:
    """Whether every operand of `op` but `value` and tensors is a constant (an op without operands),
    which the outlined function can copy."""
    others = [operand for operand in op.operands if operand != value and static_type(operand) is None]
    literals = [operand for operand in op.operands if operand != value and static_type(operand) is not None and static_type(operand).shape == ()]
    return all(defining_op(operand) is not None and not list(defining_op(operand).operands) for operand in [*others, *literals])


def _cast_taken(epilogue: _ChannelEpilogue) -> bool:
    return any(taken.name == "torch.aten.to.dtype" for taken in epilogue.ops)


def _clamp_bounds(op: ir.Operation, value: ir.Value) -> tuple[float, float] | None:
    """(low, high) of a clamp of `value` by constants: relu, maximum/minimum with a constant scalar
    tensor (either side), clamp and hardtanh with constant (or none) bounds; None for anything else."""
    if op.name == "torch.aten.relu":
        return 0.0, math.inf
    if op.name in ("torch.aten.maximum", "torch.aten.minimum"):
        other = op.operands[1] if op.operands[0] == value else op.operands[0]
        bound = splat(other) if static_type(other) is not None and static_type(other).shape == () else None
        if bound is None or isinstance(bound, bool):
            return None
        return (float(bound), math.inf) if op.name == "torch.aten.maximum" else (-math.inf, float(bound))
    if op.operands[0] != value:
        return None
    low, high = (None if is_none(bound) else number(bound) for bound in op.operands[1:3])
    if (low is None and not is_none(op.operands[1])) or (high is None and not is_none(op.operands[2])):
        return None
    return (-math.inf if low is None else float(low)), (math.inf if high is None else float(high))


def _match_attention(op: ir.Operation, precision: str) -> Match | None:
    q, k, v = (static_type(op.operands[index]) for index in range(3))
    causal = _bool(op.operands[CAUSAL])
    scale = op.operands[SCALE]
    dropout = number(op.operands[DROPOUT])
    gqa = _bool(op.operands[GQA]) if len(op.operands) > GQA else False
    mask = None if is_none(op.operands[MASK]) else _mask_source(op.operands[MASK])
    if q is None or k is None or v is None or causal is None or (number(scale) is None and not is_none(scale)):
        return None
    if not is_none(op.operands[MASK]) and mask is None:
        return None
    mask_type = static_type(mask) if mask is not None else None
    described_mask = (mask_type.shape, mask_type.dtype) if mask_type is not None else None
    if not attention_outlined(q.shape, k.shape, v.shape, q.dtype, dropout == 0 and gqa is False, described_mask):
        return None
    if k.dtype != q.dtype or v.dtype != q.dtype:
        return None
    batch, heads, seq_q, head_dim = q.shape
    shared = [shared_heads(op.operands[index]) for index in (1, 2)]
    group = shared[0][1] if shared[0] is not None and shared[1] is not None and shared[0][1] == shared[1][1] else 1
    read = [op.operands[0], *((pair[0] for pair in shared) if group > 1 else op.operands[1:3])]  # type: ignore[index]
    permutes = [producer(value, "torch.aten.permute") for value in read]
    peeled = all(permute is not None and constant_ints(permute.operands[1]) == HEADS_FORWARD for permute in permutes)
    operands = [permute.operands[0] for permute in permutes] if peeled else read  # type: ignore[union-attr]
    views = _strided_operands(op, q.dtype) if group == 1 and any(_is_layout(value) for value in operands) else None
    if views is not None:
        operands = [view.root for view in views]
    user = _only_user(op.results[0], "torch.aten.permute")
    out_peeled = user is not None and constant_ints(user.operands[1]) == HEADS_FORWARD
    description = {
        "kind": "attention",
        **dict(batch=batch, heads=heads, seq_q=seq_q, seq_k=k.shape[2], head_dim=head_dim),
        "dtype": q.dtype,
        "causal": causal,
        "scale": float(number(scale) if number(scale) is not None else head_dim**-0.5),
        "precision": precision if q.dtype == "f32" else "",
        "layout": "strided" if views is not None else "bshd" if peeled else "bhsd",
        "out_layout": "bshd" if out_peeled else "bhsd",
    }
    if mask_type is not None:
        description.update(mask="bool" if mask_type.dtype == "i1" else mask_type.dtype, mask_shape=list(mask_type.shape))
    if group > 1:
        description["kv_group"] = group
    if views is not None:
        description.update(
            sources=[list(static_type(view.root).shape) for view in views],  # type: ignore[union-attr]
            views=[[view.offset, *view.strides[:3]] for view in views],
        )
    result_type = op.results[0].type
    full_mask = [batch, heads, seq_q, k.shape[2]]

    def body(build: Builder, args: list[ir.Value]) -> ir.Value:
        if views is not None:
            qkv = [build.replay(view.chain, arg) for view, arg in zip(views, args[:3], strict=True)]
        else:
            qkv = [build.permute(arg, HEADS_FORWARD) for arg in args[:3]] if peeled else args[:3]
        if group > 1:  # IREE's attention takes as many key/value heads as query heads
            qkv = [qkv[0], *(_repeat_heads(build, value, group) for value in qkv[1:])]
        given = build.none()
        if mask_type is not None:  # at the full batch: IREE's fused attention does not broadcast it
            given = build.op("torch.aten.expand", [args[3], build.ints(full_mask), build.bool_(False)], vtensor(full_mask, mask_type.dtype))
        operands = [*qkv, given, build.float_(0.0), build.bool_(causal), build.float_(description["scale"]), build.bool_(False)]
        result = build.op("torch.aten.scaled_dot_product_attention", operands, result_type)
        return build.permute(result, HEADS_FORWARD) if out_peeled else result

    return description, [*operands, *([mask] if mask is not None else [])], body, [user] if out_peeled else []


def shared_heads(value: ir.Value) -> tuple[ir.Value, int] | None:
    """A key or value tensor repeated for groups of query heads, as transformers' repeat_kv writes it,
    `view(broadcast_to(unsqueeze(x, 2), [b, kv_heads, group, s, d]), [b, kv_heads * group, s, d])`:
    (x, group); else None."""
    view = producer(value, "torch.aten.view", "torch.aten.reshape")
    broadcast = producer(view.operands[0], "torch.aten.broadcast_to", "torch.aten.expand") if view is not None else None
    unsqueeze = producer(broadcast.operands[0], "torch.aten.unsqueeze") if broadcast is not None else None
    if unsqueeze is None or number(unsqueeze.operands[1]) != 2:
        return None
    source, repeated, result = (static_type(v) for v in (unsqueeze.operands[0], broadcast.results[0], value))  # type: ignore[union-attr]
    if source is None or repeated is None or result is None or len(source.shape) != 4:
        return None
    batch, kv_heads, seq, dim = source.shape
    group = repeated.shape[2]
    if tuple(repeated.shape) != (batch, kv_heads, group, seq, dim) or tuple(result.shape) != (batch, kv_heads * group, seq, dim):
        return None
    return unsqueeze.operands[0], group


def _repeat_heads(build: Builder, x: ir.Value, group: int) -> ir.Value:
    """`x` [b, kv_heads, s, d] with each head repeated `group` times in place: [b, kv_heads * group, s, d]."""
    described = static_type(x)
    batch, kv_heads, seq, dim = described.shape  # type: ignore[union-attr]
    dtype = described.dtype  # type: ignore[union-attr]
    one = build.op("torch.aten.unsqueeze", [x, build.int_(2)], vtensor([batch, kv_heads, 1, seq, dim], dtype))
    shape = [batch, kv_heads, group, seq, dim]
    return build.view(build.op("torch.aten.broadcast_to", [one, build.ints(shape)], vtensor(shape, dtype)), [batch, kv_heads * group, seq, dim])


def _is_layout(value: ir.Value) -> bool:
    op = defining_op(value)
    return op is not None and op.name in LAYOUT_OPS


def _strided_operands(op: ir.Operation, dtype: str) -> list[StridedView] | None:
    """Q, K and V as strided windows of earlier tensors the kernel can read: the head dimension
    contiguous, each start on 16 bytes (its vector loads); else None (they are copied)."""
    views = [strided_view(op.operands[index]) for index in range(3)]
    for view in views:
        if view is None or view.strides[3] != 1 or view.offset * ELEMENT_BYTES[dtype] % 16:
            return None
    return views  # type: ignore[return-value]


def _mask_source(mask: ir.Value) -> ir.Value | None:
    """The attention mask as the kernel reads it: the tensor an `expand`/`broadcast_to` broadcast (the
    kernel broadcasts it through zero strides), static; None for a mask it cannot read."""
    source = mask
    while (expanded := producer(source, "torch.aten.expand", "torch.aten.broadcast_to")) is not None:
        described = static_type(expanded.operands[0])
        if described is None or len(described.shape) != 4:
            break
        source = expanded.operands[0]
    described = static_type(source)
    return source if described is not None and len(described.shape) == 4 else None


def _bmm_as_mm(op: ir.Operation) -> None:
    """`bmm(A[b,m,k], broadcast_to(B[k,n], [b,k,n]))` -> `view(mm(view(A, [b*m, k]), B), [b, m, n])`."""
    broadcast = producer(op.operands[1], "torch.aten.broadcast_to", "torch.aten.expand")
    a_type, result = static_type(op.operands[0]), static_type(op.results[0])
    if broadcast is None or a_type is None or result is None:
        return
    b = broadcast.operands[0]
    b_type = static_type(b)
    if b_type is None or len(b_type.shape) != 2:
        return
    batch, m, k = a_type.shape
    n = b_type.shape[1]
    build = Builder()
    with op.location, ir.InsertionPoint(op):
        flat = build.view(op.operands[0], [batch * m, k])
        product = build.op("torch.aten.mm", [flat, b], vtensor([batch * m, n], result.dtype))
        batched = build.view(product, [batch, m, n])
    op.results[0].replace_all_uses_with(batched)
    erase_with_unused_producers(op)


def _weight(b: ir.Value) -> tuple[ir.Value, str, bool]:
    """A matmul's B as (the value the kernel reads, "nk" when that is W of B = W^T else "kn", whether it
    was upcast from 16 bits), through an upcast and a transpose in either order."""
    b, upcast = _strip_upcast(b)
    permute = producer(b, "torch.aten.permute")
    if permute is None or constant_ints(permute.operands[1]) != [1, 0]:
        return b, "kn", upcast
    weight = permute.operands[0]
    if not upcast:
        weight, upcast = _strip_upcast(weight)
    return weight, "nk", upcast


def _strip_upcast(value: ir.Value) -> tuple[ir.Value, bool]:
    """(the 16-bit source, True) when `value` is an `aten.to.dtype` of a bf16/f16 value to f32, else (value, False)."""
    op = producer(value, "torch.aten.to.dtype")
    if op is None:
        return value, False
    source, target = tensor_type(op.operands[0].type), tensor_type(value.type)
    if source is None or target is None or source.dtype not in ("bf16", "f16") or target.dtype != "f32":
        return value, False
    return op.operands[0], True


def _bool(value: ir.Value) -> bool | None:
    op = producer(value, "torch.constant.bool")
    return op.attributes["value"].value if op is not None else None


# -- the module -------------------------------------------------------------------------------------


def _body(module: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in _module_block(module).operations]


def _module_block(module: ir.Operation) -> ir.Block:
    return module.regions[0].blocks[0]


def _fresh(stem: str, taken: set[str]) -> str:
    index = 0
    while f"{stem}_{index}" in taken:
        index += 1
    taken.add(f"{stem}_{index}")
    return f"{stem}_{index}"


def description_attribute(description: dict[str, Any]) -> ir.Attribute:
    """The description as an MLIR dictionary: ints as i64, floats as f64, lists of ints as arrays, strings, bools."""

    def one(value: Any) -> ir.Attribute:
        if isinstance(value, bool):
            return ir.BoolAttr.get(value)
        if isinstance(value, float):
            return ir.FloatAttr.get(ir.F64Type.get(), value)
        if isinstance(value, int):
            return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
        if isinstance(value, list):
            return ir.ArrayAttr.get([one(item) for item in value])
        return ir.StringAttr.get(value)

    return ir.DictAttr.get({name: one(value) for name, value in description.items()})


# What a replaced contraction read that may be left unused: erased with it, so no dead torch op stays
# (MLIR does not see torch ops as trivially dead).
ERASABLE = (
    *LAYOUT_OPS, *quantized_weights.DEQUANTIZING, "torch.aten.to.dtype", "torch.aten.broadcast_to", "torch.aten.expand", "torch.vtensor.literal",
    "torch.prim.ListConstruct", "torch.constant.int", "torch.constant.float", "torch.constant.bool", "torch.constant.none",
)  # fmt: skip


def erase_with_unused_producers(op: ir.Operation, spared: list[ir.Operation] | None = None) -> None:
    """Erase `op`, then every op of ERASABLE it read from that nothing reads any more, users first;
    not those `spared` (an epilogue's ops, which the caller erases itself)."""
    worklist = [op]
    while worklist:
        current = worklist.pop(0)
        producers = [defining_op(value) for value in current.operands]
        current.erase()
        for candidate in producers:
            if candidate is None or candidate.name not in ERASABLE or candidate in worklist or candidate in (spared or []):
                continue
            if all(not list(result.uses) for result in candidate.results):
                worklist.append(candidate)


PASS = Pass(
    name="outline-contractions",
    summary="matmuls, convolutions and attention kiln has GPU kernels for -> calls of outlined functions (cuda, sm_90a)",
    level="torch",
    run=run,
)
