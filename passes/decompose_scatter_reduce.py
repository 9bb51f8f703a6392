"""decompose-scatter-reduce: sum and mean scatter reductions become `scatter_add`.

    scatter(x, dim, i, s, reduce="add")                  -> scatter_add(x, dim, i, s)
    scatter_reduce(x, dim, i, s, "sum", include_self)    -> scatter_add(base, dim, i, s)
    scatter_reduce(x, dim, i, s, "mean", include_self)   -> that / max(count, 1)

where `base` is x, or, without include_self, x with the scattered-to places zeroed (a scatter of
zeros), and `count` is how many values each place got (plus one for x's own). torch-mlir lowers
these, but keeps them whole, outside kiln's primitive set, where scatter_add is. prod, amax and
amin have no primitive to become (they stay, and check-primitives names them); mean is for
floats (PyTorch floors an integer mean). Static shapes only (the zeros and ones are literals).
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import constant_bool, static_type
from .torch_ir import float_constant, none_constant, splat_literal, string, tensor_type


def _filled(rewriter: Rewriter, like: ir.Value, value: float) -> ir.Value:
    """A literal tensor of `like`'s (static) type, every element `value`."""
    return splat_literal(rewriter, like.type, value)


def decompose_scatter_reduce(op: ir.OpView, rewriter: Rewriter) -> None:
    x, dim, index, src, reduce, include_self_value = op.operands
    mode, include_self, described = string(reduce), constant_bool(include_self_value), tensor_type(x.type)
    if described is None or include_self is None or mode not in ("sum", "mean") or str(x.type) != str(op.result.type):
        return
    if not described.static or static_type(src) is None:
        return
    if mode == "mean" and not described.is_float:
        return
    base = x
    if not include_self:
        base = rewriter.create("torch.aten.scatter.src", [x, dim, index, _filled(rewriter, src, 0)], x.type)
    total = rewriter.create("torch.aten.scatter_add", [base, dim, index, src], x.type)
    if mode == "mean":
        start = _filled(rewriter, x, 1 if include_self else 0)
        count = rewriter.create("torch.aten.scatter_add", [start, dim, index, _filled(rewriter, src, 1)], x.type)
        at_least_one = rewriter.create("torch.aten.clamp", [count, float_constant(rewriter, 1.0), none_constant(rewriter)], x.type)
        total = rewriter.create("torch.aten.div.Tensor", [total, at_least_one], x.type)
    rewriter.replace(total)


def decompose_scatter_add_mode(op: ir.OpView, rewriter: Rewriter) -> None:
    x, dim, index, src, reduce = op.operands
    if string(reduce) != "add" or str(x.type) != str(op.result.type):
        return
    rewriter.replace(rewriter.create("torch.aten.scatter_add", [x, dim, index, src], x.type))


PASS = pattern_pass(
    "decompose-scatter-reduce",
    "scatter_reduce sum/mean and scatter(reduce='add') -> scatter_add (and a division)",
    {"torch.aten.scatter_reduce.two": decompose_scatter_reduce, "torch.aten.scatter.reduce": decompose_scatter_add_mode},
)
