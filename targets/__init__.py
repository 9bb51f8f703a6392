"""kiln.targets: where an artifact can run, one room per target.

Each room (`llvm_cpu/`, `cuda/`, `vulkan_spirv/`, `rocm/`) holds its target's whole story: the
`Target` (IREE device, flags, defaults, levers), the passes only it wants (`passes/`, placed into
the pipeline by the room), its kernels (`kernels/`) and its tests. target.py is the interface the
driver calls: a `Target`, resolved once per compile (resolve.py) into a `ResolvedTarget` that
carries the room's choices, its pass placements and its `KernelProvider`.

Import rule: kiln.errors, kiln.passes, kiln.runtime, and the compiler's options (kiln.compiler.options,
for types only). The core (kiln.compiler) and the neutral passes (kiln.passes) import this package's
interface modules (this one, target.py, resolve.py, levers.py, gpu.py) and never a room; only the
tools (kiln.cli, kiln.tune, benchmarks) may name a room, for its own vocabulary.
"""

from __future__ import annotations

from kiln.errors import KilnError

from . import cuda, llvm_cpu, rocm, vulkan_spirv
from .target import Target

STAGE = "target"

TARGETS: dict[str, Target] = {room.TARGET.name: room.TARGET for room in (llvm_cpu, cuda, vulkan_spirv, rocm)}
GPU_TARGETS = tuple(name for name, target in TARGETS.items() if target.archs is not None)


def get_target(name: str) -> Target:
    if name not in TARGETS:
        raise KilnError(f"unknown target '{name}'; known targets: {', '.join(TARGETS)}", stage=STAGE)
    return TARGETS[name]


__all__ = ["GPU_TARGETS", "TARGETS", "Target", "get_target"]
