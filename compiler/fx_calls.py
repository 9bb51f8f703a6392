"""An FX call node's arguments by position or by name.

torch.export keeps each argument where the caller wrote it, so `scaled_dot_product_attention(q, k, v,
mask)` and `scaled_dot_product_attention(q, k, v, attn_mask=mask)` are different nodes for the same
call: every reader and writer of an argument has to look in both places.
"""

from __future__ import annotations

from torch.fx import Node


def argument(node: Node, index: int, name: str, default: object = None) -> object:
    """The argument at position `index`, or keyword `name`, of `node`'s call; `default` if absent."""
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


def set_argument(node: Node, index: int, name: str, value: object) -> None:
    """Set the argument at position `index`, or keyword `name`, where the call has it."""
    if len(node.args) > index:
        node.args = (*node.args[:index], value, *node.args[index + 1 :])
    else:
        node.kwargs = {**node.kwargs, name: value}
