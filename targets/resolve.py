"""A compile's target with every choice made, once, before any stage runs.

The generic choices (architecture, hand-off, weights, iree-compile's flags) are made here; each room
makes its own through `Target.choose` (its kernels, its passes, what the manifest says of them).
A bad choice fails here, before any work is done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kiln.errors import KilnError
from kiln.runtime.devices import CPU_DRIVER_CHOICES

from . import get_target
from .gpu import choose_arch
from .levers import NO_CONST_EVAL
from .target import WEIGHT_POLICIES, ResolvedTarget

if TYPE_CHECKING:
    from kiln.compiler.options import CompileOptions

STAGE = "target"

# Where IREE takes the model over. "linalg": kiln lowers to linalg-on-tensors (its own passes run
# to the end, attention is decomposed into matmuls and a softmax). "torch": kiln hands over the
# simplified torch dialect and IREE's torch input pipeline lowers it, keeping
# scaled_dot_product_attention whole (one fused attention op) and using IREE's own lowerings.
HANDOFFS = ("linalg", "torch")
KERNEL_CHOICES = ("on", "off")
CPU_ATTENTION_CHOICES = ("f32", "bf16")


def resolve(options: CompileOptions) -> ResolvedTarget:
    """Every choice `options` leave open, made now: a bad one fails here, before any work is done."""
    target = get_target(options.target)
    arch = choose_arch(target.name, target.archs, options.gpu_arch) if target.archs is not None else None
    handoff = options.handoff or target.handoff
    if handoff not in HANDOFFS:
        raise KilnError(f"unknown hand-off '{handoff}'; known: {', '.join(HANDOFFS)}", stage=STAGE)
    if options.params not in WEIGHT_POLICIES:
        raise KilnError(f"unknown --params '{options.params}'; known: {', '.join(WEIGHT_POLICIES)}", stage=STAGE)
    input_type = ["--iree-input-type=torch"] if handoff == "torch" else []
    flags = (
        *target.flags(options, arch),
        *input_type,
        f"--iree-opt-level={options.opt_level}",
        *options.extra_iree_flags,
    )
    for name, value, known in (
        ("--kernels", options.kernels, KERNEL_CHOICES),
        ("--cpu-attention", options.cpu_attention, CPU_ATTENTION_CHOICES),
        ("--cpu-driver", options.cpu_driver, CPU_DRIVER_CHOICES),
    ):
        if value not in known:
            raise KilnError(f"unknown {name} '{value}'; known: {', '.join(known)}", stage=STAGE)
    choices = target.choose(options, arch, handoff)
    details = {**target.details(options, arch), "handoff": handoff, **choices.details}
    if options.tuned is not None:
        details["tuned"] = options.tuned
    attributes = {"kiln.target": target.name, "kiln.handoff": handoff}
    if arch is not None:
        attributes["kiln.gpu_arch"] = arch.arch
    attributes.update(choices.attributes)
    described = target.archs.description(arch.arch) if target.archs is not None and arch is not None else None
    return ResolvedTarget(
        target,
        arch,
        handoff,
        options.params,
        flags,
        details,
        module_attributes=attributes,
        device_targets=described.device_targets if described is not None else None,
        driver=choices.driver or target.driver,
        kernels=choices.kernels,
        passes=choices.passes,
        levers=(NO_CONST_EVAL, *target.levers),  # first: its fallback costs compile time, not speed
        user_flags=len(options.extra_iree_flags),
    )
