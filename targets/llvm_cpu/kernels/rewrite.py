"""Route a module's contractions and row computations to kiln's CPU kernels: a rewrite of the linalg
hand-off text.

The module is parsed in IREE's own MLIR context (`iree.compiler.ir`, which knows the flow and stream
ops the kernels' dispatches are written in). One walk finds the ops each kernel family matches;
each that matches becomes a call to a private function, which IREE inlines, holding the layout
changes, the weight packing and the dispatch. The families, one module each:

- gemm.py: convolutions, matmuls and batch matmuls (attention's among them) on the implicit-GEMM
  kernel (kiln_gemm_*.c), bf16 or f32 as the model is;
- pooling.py: NCHW poolings as NHWC ones, in a module where the GEMM kernel takes something;
- softmax.py: softmaxes over the last dimension on the row softmax (kiln_rows.c);
- layer_norm.py: layer norms on the row layer norm or the row moments (kiln_rows.c), or with their
  elementwise producer as one row program (row_program.py).

What they share is handoff.py: the Decision per op and the Substitution, the module being edited,
the reading helpers. Everything that does not match stays with IREE, and each contraction gets a
Decision saying what computes it and why.
"""

from __future__ import annotations

from iree.compiler import ir

from . import gemm, layer_norm, mlir, pooling, softmax
from .features import KernelIsa
from .handoff import HandOff, Substitution, body_of


def substitute(text: str, isa: KernelIsa, attention: bool = False, locations: bool = True) -> Substitution:
    """`text` (kiln's linalg hand-off) with the contractions and row computations that match routed
    to the kernels; printed with source locations (the model's lines, for IREE's messages) unless
    `locations` is off."""
    with ir.Context():
        module = ir.Module.parse(text)
        handoff = HandOff(module, isa, attention)
        _rewrite(handoff)
        substitution = Substitution(text, tuple(handoff.decisions))
        if substitution.taken:
            module.operation.verify()
        if substitution.taken or not locations:
            return Substitution(module.operation.get_asm(enable_debug_info=locations), substitution.decisions)
        return substitution


def _rewrite(handoff: HandOff) -> None:
    """Walk the module once for the ops of every family, then route them: the row computations, the
    contractions, the poolings; the kernels' executable goes in where anything was routed."""
    ops: list[ir.Operation] = []
    divisions: list[ir.Operation] = []
    deviations: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in gemm.CONTRACTIONS or op.name in gemm.OTHERS or op.name in pooling.POOLINGS:
            ops.append(op)
        elif op.name == "linalg.generic" and [o.name for o in body_of(op)] == softmax.DIVISION_BODY:
            divisions.append(op)
        elif op.name == "linalg.generic" and [o.name for o in body_of(op)] == layer_norm.RSTD_BODY:
            deviations.append(op)
        return ir.WalkResult.ADVANCE

    handoff.module.operation.walk(visit)
    # A module with bf16 contractions is a bf16 model: its f32 contractions (attention's, on f32
    # values kiln computed from bf16 ones) are listed too. Other models are f32 models.
    poolings = [op for op in ops if op.name in pooling.POOLINGS]
    ops = [op for op in ops if op.name not in pooling.POOLINGS]
    handoff.element = "bf16" if any(gemm.involves_bf16(op) for op in ops) else "f32"
    rows = softmax.route(handoff, divisions) + layer_norm.route(handoff, deviations)
    if not ops or (handoff.element == "bf16" and not handoff.isa.bf16):
        if rows:
            handoff.add(mlir.executable((), rows))
        return
    gemm.route(handoff, ops)
    if handoff.taken:
        for op in poolings:
            pooling.to_nhwc(handoff, op)
    if handoff.taken or rows:
        handoff.add(mlir.executable((handoff.element,) if handoff.taken else (), rows))
