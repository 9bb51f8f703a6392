"""Everything a compile can be asked to do differently, in one frozen value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kiln.passes import DEFAULT_PIPELINE, PassGroup


@dataclass(frozen=True)
class CompileOptions:
    target: str = "llvm-cpu"
    cpu: str = "host"  # llvm-cpu: LLVM CPU name to compile for ("host" = this machine)
    gpu_arch: str | None = None  # GPU targets: e.g. "sm_86", "ampere", "gfx942"; None = the local GPU's, else a default
    opt_level: str = "O3"  # IREE's own default is O0
    extra_iree_flags: tuple[str, ...] = ()
    handoff: str | None = None  # where IREE takes over: "linalg" (kiln lowers) or "torch"; None: the target's
    params: str = "auto"  # weights: "inline" in the .vmfb, "external" in an .irpa, or "auto" by size
    pipeline: tuple[PassGroup, ...] = DEFAULT_PIPELINE
    dump_dir: Path | None = None  # None: no stage dumps
    stop_after: str | None = None  # a stage name; stop there and keep the dumps
    start_from: Path | None = None  # a stage's dump (<NN>-<stage>.mlir): compile on from there
    disable_passes: tuple[str, ...] = ()  # passes left out of `pipeline`, wherever they are
    strict_primitives: bool = False  # require-primitives in check-primitives' place: any op outside the set fails
    print_after: tuple[str, ...] = ()  # dump the module after these passes: <NN>-<stage>.after-<pass>.mlir
    print_after_all: bool = False  # ... and after every pass
    tuned: str | None = None  # how `kiln tune` chose these options: recorded in the manifest
    # f32 contractions on targets with kiln kernels (cuda): PyTorch's precision names; None: PyTorch's
    # own setting at compile time (torch.get_float32_matmul_precision(), cuDNN's allow_tf32).
    matmul_precision: str | None = None  # "highest" (f32-class), "high" or "medium" (TF32)
    conv_precision: str | None = None  # "highest" (f32-class) or "high" (TF32, cuDNN's default)
    # kiln's own contraction kernels where they apply (llvm-cpu: bf16 on AMX or AVX512-BF16; cuda: sm_90a), or "off"
    kernels: str = "on"
    cpu_attention: str = "bf16"  # llvm-cpu, bf16 models: attention's matmuls on kiln's kernel, operands in bf16 as eager's; or "f32"
    cpu_driver: str = "auto"  # llvm-cpu: IREE's runtime driver, "local-task" or "local-sync"; auto: the runtime times both per input signature
