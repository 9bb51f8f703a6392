"""`--dtype bf16|f16`: compile an f32 model in reduced precision.

The module's floating-point parameters and buffers and the floating-point example inputs are
converted before capture, so the artifact takes and returns the reduced dtype; integer and bool
inputs are left alone. The manifest records the conversion; `--verify` compares with the
converted model in eager PyTorch, with the tolerances of the reduced dtype.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch
from torch.utils._pytree import tree_map

from kiln.errors import KilnError

from .model_file import ModelSpec

PRECISIONS: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "f16": torch.float16}


def convert_precision(spec: ModelSpec, precision: str | None) -> ModelSpec:
    if precision is None:
        return spec
    if precision not in PRECISIONS:
        raise KilnError(f"unknown --dtype '{precision}'; known: {', '.join(PRECISIONS)}", stage="options")
    dtype = PRECISIONS[precision]
    converted: dict[int, torch.nn.Module] = {}  # entry points of one module share its converted copy
    entries = []
    for entry in spec.entries:
        module = converted.setdefault(id(entry.module), copy.deepcopy(entry.module).to(dtype))
        inputs = tree_map(lambda x: x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x, entry.example_inputs)
        entries.append(replace(entry, module=module, example_inputs=inputs))
    return replace(spec, entries=tuple(entries), precision=precision)
