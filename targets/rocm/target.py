"""rocm: AMD GPUs through HIP.

Compile-only so far: kiln has not run a rocm artifact on an AMD GPU. IREE's code only; the hand-off
is linalg (unmeasured).
"""

from __future__ import annotations

from ..gpu import GpuArchs, gpu_details, gpu_flags, iree_code_only, local_amd_arch
from ..levers import KEEP_ASSERTIONS
from ..target import Target

AMD_GFX = (
    "gfx908", "gfx90a", "gfx942", "gfx950", "mi300x",  # CDNA: MI100, MI200, MI300, MI350
    "gfx1100", "gfx1101", "gfx1151", "gfx1200", "gfx1201",  # RDNA 3 and 4
)  # fmt: skip


ROCM_ARCHS = GpuArchs(
    device="hip",
    flag="--iree-rocm-target",  # IREE 3.13 has no --iree-hip-target
    default="gfx942",
    known=AMD_GFX,
    newer=None,  # AMD machine code runs only on the ISA it was built for: no stand-in
    newer_why="",
    detect=local_amd_arch,
)

TARGET = Target(
    name="rocm",
    summary="AMD GPUs through HIP (compile-only here: kiln has not run a rocm artifact on an AMD GPU)",
    driver="hip",
    flags=gpu_flags(ROCM_ARCHS),
    details=gpu_details(ROCM_ARCHS),
    choose=iree_code_only,
    archs=ROCM_ARCHS,
    levers=(KEEP_ASSERTIONS,),
)
