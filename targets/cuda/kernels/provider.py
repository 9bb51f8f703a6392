"""The cuda room's KernelProvider (targets/target.py): kiln's Triton kernels for one compile.

The plan is substitute.py's Substitution: which outlined contraction gets a kernel, spliced into
the printed module before iree-compile (always, not as a lever: a kernel that cannot be made leaves
IREE's body in its place, with a note).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .contract import attention_outlined

if TYPE_CHECKING:
    from .substitute import Substitution


@dataclass(frozen=True)
class CudaKernels:
    def plan(self, module: Any, text: str) -> Substitution:
        from .substitute import plan  # torch_mlir and the kernels' builders: only when a compile gets here

        return plan(module)

    def takes_attention(self, query: tuple[int, ...], key: tuple[int, ...], value: tuple[int, ...],
                        dtype: str, plain: bool, mask: tuple[tuple[int, ...], str] | None) -> bool:  # fmt: skip
        return attention_outlined(query, key, value, dtype, plain, mask)
