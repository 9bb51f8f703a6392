"""Import: the ExportedProgram becomes torch-dialect MLIR made of `torch.aten.*` ops.

torch-mlir's FX importer does the work. Before it, the program is decomposed with torch-mlir's
own decomposition table (the ops its lowerings expect) and kiln's additions (decompositions.py);
attention masks that are causal masks computed from constants become the is_causal flag
(causal_masks.py). Weights are inlined as literals, or, when
externalized, lifted into named parameters (see weights.py).
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram
from torch_mlir import ir
from torch_mlir.dialects import torch as torch_dialect
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir.extras.fx_importer import FxImporter, GraphNodeImporter

from kiln.errors import KilnError

from .boundary import ELEMENT_TYPES
from .causal_masks import causal_masks_as_flags
from .decompositions import attention_masks_at_full_batch, kiln_decompositions, real_ffts_as_matmuls
from .fx_calls import argument
from .weights import Parameters, WeightHooks

STAGE = "aten"


# Ops IREE's torch input pipeline lowers whole, to one fused op (attention: iree_linalg_ext.attention).
# Kept out of the decomposition table when kiln hands IREE the torch dialect.
FUSED_IN_IREE = (
    torch.ops.aten.scaled_dot_product_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
)


# A target's kernels' word on one attention (KernelProvider.takes_attention, kiln.targets.target):
# (query, key, value shapes, dtype, plain, mask shape and dtype) -> whether a kernel computes it whole.
TakesAttention = Callable[[tuple[int, ...], tuple[int, ...], tuple[int, ...], str, bool, tuple[tuple[int, ...], str] | None], bool]


def fused_attention_kept(program: ExportedProgram, dtypes: tuple[str, ...] | None, takes: TakesAttention | None = None) -> bool:
    """Whether the program's attention may stay whole: every query's dtype is one of `dtypes` (None: any),
    or the target's kernels (`takes`, where they apply) compute it, in any dtype."""
    if dtypes is None:
        return True
    attention = [node for node in program.graph_module.graph.nodes if node.target in FUSED_IN_IREE]
    return all(
        str(node.args[0].meta["val"].dtype).removeprefix("torch.") in dtypes or (takes is not None and _kernel_attention(node, takes))
        for node in attention
    )


def _kernel_attention(node: torch.fx.Node, takes: TakesAttention) -> bool:
    """Whether the target's kernels take this attention node."""
    if node.target != torch.ops.aten.scaled_dot_product_attention.default:
        return False

    q, k, v = (node.args[index].meta["val"] for index in range(3))
    shapes = [tuple(tensor.shape) for tensor in (q, k, v)]
    if not all(isinstance(size, int) for shape in shapes for size in shape):
        return False  # dynamic: the kernel takes static shapes
    plain = argument(node, 4, "dropout_p", 0.0) == 0 and not node.kwargs.get("enable_gqa", False)
    given = argument(node, 3, "attn_mask")
    mask = None
    if isinstance(given, torch.fx.Node):
        value = given.meta["val"]
        mask = (tuple(value.shape), ELEMENT_TYPES.get(value.dtype, ""))
        if not all(isinstance(size, int) for size in mask[0]):
            return False
    same_dtype = q.dtype == k.dtype == v.dtype
    return same_dtype and takes(*shapes, ELEMENT_TYPES.get(q.dtype, ""), plain, mask)


def decomposition_table(keep_fused: bool) -> dict[torch._ops.OperatorBase, Callable[..., object]]:
    table = {**get_decomposition_table(), **kiln_decompositions()}
    return {op: fn for op, fn in table.items() if not (keep_fused and op in FUSED_IN_IREE)}


def import_program(
    programs: dict[str, ExportedProgram],
    external_weights: bool,
    keep_fused: bool = False,
    prepare: Callable[[str, ExportedProgram], Any] = lambda name, program: None,
    fused_dtypes: tuple[str, ...] | None = None,
    takes_attention: TakesAttention | None = None,
    on_decomposed: Callable[[dict[str, ExportedProgram]], Any] = lambda programs: None,
) -> tuple[ir.Module, Parameters | None]:
    """Import each program as the function of its name into one module; weights are shared.

    `keep_fused`: leave the ops in FUSED_IN_IREE whole, for IREE's torch input pipeline, where their
    dtypes are among `fused_dtypes` (None: any; Target.fused_attention_dtypes) or where the target's
    kernels take them (`takes_attention`).
    Every program is decomposed (functional) first, and `on_decomposed(programs)` sees them all, by
    name (what one function mutates, every function reads: signature.shared_state); then
    `prepare(name, program)` sees each decomposed program as it is imported. Each program is
    decomposed once: after the import itself, that is the stage's largest cost.
    """
    context = ir.Context()
    torch_dialect.register_dialect(context)
    context.allow_unregistered_dialects = True  # the `#stream.parameter.named` attribute is IREE's
    module = ir.Module.create(ir.Location.unknown(context))
    hooks = WeightHooks(module, external=external_weights)
    functional: dict[str, ExportedProgram] = {}
    try:
        for name, program in programs.items():
            real_ffts_as_matmuls(program)
            causal_masks_as_flags(program)
            fused = keep_fused and fused_attention_kept(program, fused_dtypes, takes_attention)
            if fused:
                attention_masks_at_full_batch(program)
            functional[name] = program.run_decompositions(decomposition_table(fused))
        on_decomposed(functional)
        for name, decomposed in functional.items():
            prepare(name, decomposed)
            # The frozen import looks up every buffer in the state dict, but torch.export keeps
            # non-persistent buffers (e.g. BERT's position_ids) among the constants.
            for buffer in decomposed.graph_signature.non_persistent_buffers:
                decomposed.state_dict[buffer] = decomposed.constants[buffer]
            hooks.name_weights(decomposed)
            _weights_out_of_lists(decomposed)
            importer = FxImporter(module=module, hooks=hooks, graph_node_importer_cls=_NodeImporter)
            importer.import_frozen_program(decomposed, func_name=name)
    except KilnError:
        raise
    except NotImplementedError as exc:
        raise KilnError(
            f"the torch-mlir importer cannot import this program: {exc}",
            stage=STAGE,
            hint="an op or construct in the model has no MLIR import; --debug shows where",
        ) from exc
    except Exception as exc:  # torch's decompositions and torch-mlir's importer raise plain errors
        raise _import_error(exc) from exc
    return module, Parameters(hooks.lifted) if external_weights else None


def _weights_out_of_lists(program: ExportedProgram) -> None:
    """Pass each weight that sits in a list argument through a clone.

    torch-mlir's frozen import replaces every weight's placeholder by its tensor, and imports a
    tensor as a literal only where it is an argument itself: one in a list argument (Swin's
    `table[relative_position_index]` is `aten.index(table, [index])`, a buffer in the list) fails
    with "Heterogeneous lists are not supported: expected vtensor, got torch.Tensor". The clone's
    argument is the tensor itself, which imports as a literal; IREE folds the copy of a constant.
    """
    signature = program.graph_signature
    weights = {
        *signature.inputs_to_parameters,
        *signature.inputs_to_buffers,
        *signature.inputs_to_lifted_tensor_constants,
    }
    graph = program.graph_module.graph
    for node in list(graph.nodes):
        listed = {
            item
            for value in (*node.args, *node.kwargs.values())
            if isinstance(value, (list, tuple))
            for item in value
            if isinstance(item, torch.fx.Node) and item.name in weights
        }
        if node.op != "call_function" or not listed:
            continue
        copies = {}
        with graph.inserting_before(node):
            for weight in listed:
                copies[weight] = graph.call_function(torch.ops.aten.clone.default, (weight,))
                copies[weight].meta = dict(weight.meta)
        node.args = tuple(_replaced_in_lists(arg, copies) for arg in node.args)
        node.kwargs = {key: _replaced_in_lists(value, copies) for key, value in node.kwargs.items()}
    graph.lint()


def _replaced_in_lists(value: object, copies: dict[torch.fx.Node, torch.fx.Node]) -> object:
    if not isinstance(value, (list, tuple)):
        return value
    return type(value)(copies.get(item, item) if isinstance(item, torch.fx.Node) else item for item in value)


class _NodeImporter(GraphNodeImporter):
    """torch-mlir's node importer, with a failure on a node turned into a KilnError naming that node's
    op and the model's source line (torch-mlir's own asserts say neither)."""

    def _import_torch_op_overload(self, loc, node, concrete_target=None):  # type: ignore[no-untyped-def]
        try:
            return super()._import_torch_op_overload(loc, node, concrete_target)
        except (AssertionError, ValueError, TypeError, KeyError, RuntimeError, NotImplementedError) as exc:
            raise _import_error(exc, node) from exc


def _import_error(exc: Exception, node: torch.fx.Node | None = None) -> KilnError:
    """One KilnError for an exception from torch's decompositions or torch-mlir's importer: its first
    line, the op it was on, and the model's line (from the node, or from torch's "While executing"
    note: "%view_6 : ... target=torch.ops.aten.view.default ... Original traceback: File ..., line N").

    Where kiln's own code raised it (a decomposition of kiln's that torch ran, a hook of kiln's the
    importer called), it is kiln's bug, and the error says so and names that code."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    op = str(node.target) if node is not None else _EXECUTING_OP.search(text)
    op = op if isinstance(op, str) or op is None else op.group(1)
    trace = node.meta.get("stack_trace", "") if node is not None else text.partition("Original traceback:")[2]
    lines = _TRACE_LINE.findall(trace or "")
    where = f" at {lines[-1][0]}:{lines[-1][1]}" if lines else ""
    subject = f"op {op.removeprefix('torch.ops.')}" if op else "the program"
    culprit = _kiln_code_that_raised(exc)
    if culprit is not None:
        return KilnError(
            f"{subject}{where} failed to import: {culprit} raised {type(exc).__name__}: {first}",
            stage=STAGE,
            hint="a kiln bug, not the model's, torch's or torch-mlir's: --debug shows the traceback",
        )
    return KilnError(
        f"{subject}{where} failed to import: {type(exc).__name__}: {first}",
        stage=STAGE,
        hint="a limit of torch's decompositions or of torch-mlir's importer (not of the model); --debug shows the trace",
    )


def _kiln_code_that_raised(exc: BaseException) -> str | None:
    """Which of kiln's code was running when `exc` was raised, below the import's own try: "kiln's
    decomposition of <op> (<file>:<line>, in <function>)"; None where only torch's and torch-mlir's
    code was (kiln's frames here just call them)."""
    decompositions = {
        function.__code__: str(op)
        for op, function in kiln_decompositions().items()
        if hasattr(function, "__code__")
    }
    ours = [
        (frame, line)
        for frame, line in traceback.walk_tb(exc.__traceback__)
        if frame.f_code.co_name not in _COMPREHENSIONS  # its function's frame has the same line
        and (
            frame.f_code in decompositions
            or (str(frame.f_globals.get("__name__", "")).startswith("kiln.") and frame.f_code not in _CALLERS)
        )
    ]
    if not ours:
        return None
    deepest, line = ours[-1]
    place = f"{'/'.join(Path(deepest.f_code.co_filename).parts[-2:])}:{line}, in {deepest.f_code.co_name}"
    table_op = next((decompositions[frame.f_code] for frame, _ in reversed(ours) if frame.f_code in decompositions), None)
    return f"kiln's decomposition of {table_op} ({place})" if table_op else f"kiln's code ({place})"


_EXECUTING_OP = re.compile(r"While executing %\S+ : .*?target=([\w.]+)")
_TRACE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
# kiln's frames that only call torch's and torch-mlir's code and turn what it raises into a KilnError.
_CALLERS = {import_program.__code__, _NodeImporter._import_torch_op_overload.__code__}
_COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}
