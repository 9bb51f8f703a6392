"""A manifest's contraction labels read back: the GEMM each of kiln's GPU kernels computes.

A cuda artifact's manifest names every contraction its kernels take by the label the compiler gave
it (the cuda target's `Matmul.label` and `Conv2d.label`, kernels/contraction.py). Where the
artifacts run there is no compiler to ask, so the kernel tables (benchmarks/zoo_kernels.py) read
sizes, FLOPs and precision off the label itself; tests/test_bench.py checks the two agree.
"""

from __future__ import annotations

import re
from typing import Any

MM = re.compile(
    r"mm(?P<m>\d+)x(?P<n>\d+)x(?P<k>\d+)-(?P<dtype>f32|bf16|f16)(?:-(?P<precision>tf32x3|tf32|ieee))?-(?P<layout>nk|kn)(?P<bias>-bias)?"
)
CONV = re.compile(
    r"conv(?P<n>\d+)x(?P<c>\d+)x(?P<h>\d+)x(?P<w>\d+)-k(?P<k>\d+)r(?P<r>\d+)x(?P<s>\d+)s(?P<stride>\d+)p(?P<pad>\d+)"
    r"(?:d(?P<dilation>\d+))?(?:g(?P<groups>\d+))?-(?P<dtype>f32|bf16|f16)(?:-(?P<precision>tf32x3|tf32|ieee))?"
)


def shape_of(label: str) -> dict[str, Any] | None:
    """The GEMM a contraction label describes: kind, sizes, FLOPs, dtype and the precision kiln runs;
    None for a label that is no matmul or convolution (attention, row programs)."""
    if found := MM.fullmatch(label):
        m, n, k = (int(found[name]) for name in "mnk")
        return {"kind": "mm", "m": m, "n": n, "k": k, "bias": bool(found["bias"]), "dtype": found["dtype"],
                "precision": found["precision"] or found["dtype"], "flops": 2 * m * n * k}  # fmt: skip
    if found := CONV.match(label):
        sizes = {name: int(found[name]) for name in ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")}
        groups, dilation = int(found["groups"] or 1), int(found["dilation"] or 1)
        p = (sizes["h"] + 2 * sizes["pad"] - dilation * (sizes["r"] - 1) - 1) // sizes["stride"] + 1
        q = (sizes["w"] + 2 * sizes["pad"] - dilation * (sizes["s"] - 1) - 1) // sizes["stride"] + 1
        flops = 2 * sizes["n"] * p * q * sizes["k"] * sizes["c"] // groups * sizes["r"] * sizes["s"]
        return {"kind": "conv", **sizes, "groups": groups, "dilation": dilation, "dtype": found["dtype"],
                "precision": found["precision"] or found["dtype"], "flops": flops}  # fmt: skip
    return None
