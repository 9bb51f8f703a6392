"""A stage's dump text, printed without rendering the weights it leaves out, and how to tell that a dump left some out.

MLIR's printer elides a resource over `large_resource_limit` only after rendering it as hex: every
dump of DistilBERT in f32 (253 MB of inline weights) took 0.5-1.2 s to print, four dumps a
compile. Printed op by op, a module's resources are not rendered at all; that is how a dump is
printed once any weight is over the limit, so it holds no weights (without the large ones it could
not reproduce its stage anyway). A dump whose weights are all small is printed whole, and
reproduces its stage.
"""

from __future__ import annotations

import math
import re

from torch_mlir import ir

DUMP_RESOURCE_LIMIT = 1 << 20  # characters of hex: weights of about 512 KiB and more are left out of dumps

# A weight's use in the ops, and a resource's entry in the `{-# dialect_resources: ... #-}` section.
_USE = re.compile(r"dense_resource<([^>]+)>")
_ENTRY = re.compile(r'^\s*"?([^"\s:]+)"?: "0x', re.MULTILINE)
_NOTE = "// This dump leaves out its weights (some are over {kib} KiB): it shows the stage, and cannot reproduce it.\n"


def dump_text(module: ir.Module) -> str:
    """The module as a dump: whole where every weight is within DUMP_RESOURCE_LIMIT, else its ops alone."""
    if _largest_weight(module) <= DUMP_RESOURCE_LIMIT or not module.operation.verify():
        return module.operation.get_asm(large_resource_limit=DUMP_RESOURCE_LIMIT)
    # Verified once here: each op printed alone would verify the whole module again.
    ops = "\n".join(_indented(op.get_asm(assume_verified=True)) for op in module.body.operations)
    header = module.operation.get_asm(skip_regions=True)  # "module attributes {...} {...}\n"
    return _NOTE.format(kib=DUMP_RESOURCE_LIMIT // 2 >> 10) + header.removesuffix("{...}\n") + "{\n" + ops + "\n}\n"


def left_out_weights(text: str) -> list[str]:
    """The weights a dump's ops use whose data it does not hold (left out, or `__elided__` by hand)."""
    section = text.find("{-#")
    held = set(_ENTRY.findall(text[section:])) if section >= 0 else set()
    ops = text[:section] if section >= 0 else text
    return sorted(set(_USE.findall(ops)) - held)


def _largest_weight(module: ir.Module) -> float:
    """The hex characters of the module's largest weight held in its resources (`dense_resource<...>`)."""
    largest = 0.0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal largest
        for index in range(len(op.attributes)):
            attribute = op.attributes[index].attr
            # Not downcast: a resource's handle, cheap to print (a dense<> would print its data).
            if type(attribute) is ir.Attribute and str(attribute).startswith("dense_resource<"):
                largest = max(largest, _hex_chars(ir.ShapedType(attribute.type)))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return largest


def _indented(op_text: str) -> str:
    return "\n".join(f"  {line}" if line else line for line in op_text.rstrip("\n").split("\n"))


def _hex_chars(tensor: ir.ShapedType) -> float:
    """How many hex characters a weight of this type prints as; infinite for an element type without a width."""
    width = getattr(tensor.element_type, "width", None)
    if width is None or not tensor.has_static_shape:
        return math.inf
    return 2 * max(1, width // 8) * math.prod(tensor.shape)
