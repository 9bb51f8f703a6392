"""Attention masks computed from constants: a causal one becomes `is_causal`, one that keeps every score goes.

transformers builds a decoder's mask inside the graph from `arange`s (masking_utils: a causal
function, a padding function, a check for packed sequences), even for a model that takes no
attention mask: torch.export captures a [batch, 1, seq, seq] boolean tensor that no input of the
program affects. A kernel handed that tensor reads it for every key block and computes every block;
handed `is_causal`, it reads nothing and skips the blocks above the diagonal (kiln's CUDA attention
kernel on the H200, bf16 at 8x512: GPT-2's 81 -> 24 us a layer, Llama-3.2-1B's 177 -> 56; the whole
call 0.85x and 0.86x, with grouped heads read unrepeated). So where a mask depends only on
constants, it is evaluated here, once, with torch; if it keeps exactly the scores PyTorch's
`is_causal` keeps (key j for query i where j <= i, in every batch and head), the attention takes the
flag and the mask's ops are dropped. A mask that keeps every score (an encoder's padding mask built
from `arange(n) >= 0` when the model takes none: ViT, DeiT, BEiT) is dropped too: kiln's CPU code
added it to the scores in a pass of its own (DeiT-S bf16 at batch 64 on the 16-core Xeon: 20 ms of
377). Anything else (a sliding window, a padding mask from an input, an additive mask of finite
values) stays as it was.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.node import map_arg

from .fx_calls import argument, set_argument

aten = torch.ops.aten
MAX_ELEMENTS = 1 << 26  # a larger mask is not evaluated at compile time
MASK, CAUSAL = 3, 5  # scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, ...)


def causal_masks_as_flags(program: ExportedProgram) -> int:
    """Rewrite, in place, each attention whose mask is a constant causal mask, or keeps every score;
    return how many."""
    graph = program.graph_module.graph
    constants = _constants(program)
    values: dict[Node, torch.Tensor | None] = {}  # one mask serves every layer
    rewritten = 0
    for node in list(graph.nodes):
        if node.target != aten.scaled_dot_product_attention.default:
            continue
        mask = argument(node, MASK, "attn_mask")
        if not isinstance(mask, Node) or argument(node, CAUSAL, "is_causal") or mask.meta["val"].numel() > MAX_ELEMENTS:
            continue
        if mask not in values:
            values[mask] = _evaluated(mask, constants)
        value = values[mask]
        seq_q, seq_k = node.args[0].meta["val"].shape[-2], node.args[1].meta["val"].shape[-2]
        if value is None:
            continue
        keeps_all = _keeps_all(value)
        if not (keeps_all or _is_causal(value, seq_q, seq_k)):
            continue
        set_argument(node, CAUSAL, "is_causal", not keeps_all)
        set_argument(node, MASK, "attn_mask", None)
        rewritten += 1
    if rewritten:
        graph.eliminate_dead_code()
        program.graph_module.recompile()
    return rewritten


def _constants(program: ExportedProgram) -> dict[str, torch.Tensor]:
    """Placeholder name -> value, for the placeholders that are not the program's inputs (buffers, lifted constants)."""
    signature = program.graph_signature
    named = {**signature.inputs_to_buffers, **signature.inputs_to_lifted_tensor_constants}
    values = {**program.state_dict, **program.constants}
    return {placeholder: values[name] for placeholder, name in named.items() if isinstance(values.get(name), torch.Tensor)}


def _evaluated(node: Node, constants: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """`node`'s value computed with torch from constants alone; None where it depends on an input, a
    parameter or a random op, or a value is not at hand (weights left out of a thin build)."""
    needed: set[Node] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if current not in needed:
            needed.add(current)
            pending.extend(current.all_input_nodes)
    values: dict[Node, object] = {}
    for current in node.graph.nodes:  # topological order
        if current not in needed:
            continue
        if current.op == "placeholder":
            value = constants.get(current.name)
            if value is None or value.is_meta:
                return None
            values[current] = value
        elif current.op == "call_function" and isinstance(current.target, torch._ops.OpOverload):
            if torch.Tag.nondeterministic_seeded in current.target.tags:
                return None
            args = map_arg(current.args, values.__getitem__)
            kwargs = map_arg(current.kwargs, values.__getitem__)
            with torch.no_grad():
                values[current] = current.target(*args, **kwargs)
        else:
            return None
    result = values[node]
    return result if isinstance(result, torch.Tensor) else None


def _keeps_all(mask: torch.Tensor) -> bool:
    """Whether `mask` (boolean, or additive) keeps every score as it is: all True, or all 0."""
    return bool(mask.all()) if mask.dtype == torch.bool else mask.is_floating_point() and not bool(mask.any())


def _is_causal(mask: torch.Tensor, seq_q: int, seq_k: int) -> bool:
    """Whether `mask` (boolean, or additive of 0 and -inf) keeps exactly PyTorch's is_causal scores,
    the lower-left triangle of seq_q x seq_k with its diagonal, in every leading slice."""
    if mask.dtype == torch.bool:
        kept = mask
    elif mask.is_floating_point() and bool(((mask == 0) | (mask == float("-inf"))).all()):
        kept = mask == 0
    else:
        return False
    if kept.dim() < 2 or tuple(kept.shape[-2:]) != (seq_q, seq_k):
        return False
    return bool((kept == torch.ones(seq_q, seq_k, dtype=torch.bool).tril()).all())
