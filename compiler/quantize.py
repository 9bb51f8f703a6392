"""`--quantize int8|int4`: weight-only quantization of a model's Linear layers.

Why: a decode step reads every weight once per token and little else, so its time is the weights'
bytes; int8 halves them and int4 quarters them (with a scale per group). Activations stay in the
model's dtype: each Linear dequantizes its weight and multiplies as before, which is what eager
PyTorch runs for `--verify` and the tests, and what kiln's GEMV kernel computes from the quantized
bytes without making the dequantized weight (targets/cuda/passes/quantized_weights.py).

Schemes, symmetric (no zero points), scales in f32:
- `int8`: one scale per output channel, values in [-127, 127]; `weight_scale` is [N, 1].
- `int4-gG` (`int4` is G = 128): a scale per group of G inputs, values in [-7, 7] stored plus 8 in
  nibbles; `weight_scale` is [N, K / G]. The byte j of a row holds input j in its low nibble and
  input j + K/2 in its high one ("halves"): unpacking is a mask, a shift and a concatenation, no
  interleave, and a kernel reads both halves of a row with one load.

Each quantized Linear's parameters are `weight_q` and `weight_scale` (its `bias` is kept): from a
checkpoint, they are made from the stored `weight` a slice of rows at a time, when the archive is
written (`derived_chunks`). A Linear the scheme cannot take (int4: K not a multiple of 2G) keeps its
weight; a model with none it can take is an error.

Imports neither torch_mlir nor IREE: the GPU-side benchmark writes quantized archives with it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from kiln.errors import KilnError
from kiln.runtime.manifest import QUANTIZE_SCHEMES

if TYPE_CHECKING:
    from .model_file import ModelSpec

STAGE = "load"
VALUES, SCALES = "weight_q", "weight_scale"  # a quantized Linear's parameters, beside its bias


@dataclass(frozen=True)
class Scheme:
    """`bits` per weight, and `group` inputs a scale (0: one scale per output channel)."""

    bits: int
    group: int = 0

    @classmethod
    def parse(cls, name: str) -> Scheme:
        found = re.fullmatch(r"int8|int4(?:-g(32|64|128))?", name)
        if found is None:
            raise KilnError(f"unknown --quantize '{name}'; known: {', '.join(QUANTIZE_SCHEMES)}", stage="options")
        return cls(8) if name == "int8" else cls(4, int(found.group(1) or 128))

    @property
    def name(self) -> str:
        return "int8" if self.bits == 8 else f"int4-g{self.group}"

    def takes(self, in_features: int) -> bool:
        """Whether a Linear with `in_features` inputs can be quantized this way."""
        return self.bits == 8 or in_features % (2 * self.group) == 0

    def shapes(self, out_features: int, in_features: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """The shapes of `weight_q` and `weight_scale`."""
        if self.bits == 8:
            return (out_features, in_features), (out_features, 1)
        return (out_features, in_features // 2), (out_features, in_features // self.group)


def quantize_rows(weight: torch.Tensor, scheme: Scheme) -> tuple[torch.Tensor, torch.Tensor]:
    """(values as int8, scales as f32) of some whole rows of a weight [rows, K]."""
    w = weight.to(torch.float32)
    rows, k = w.shape
    limit = 127 if scheme.bits == 8 else 7
    grouped = w.view(rows, 1 if scheme.bits == 8 else k // scheme.group, -1)
    scales = grouped.abs().amax(dim=2, keepdim=True) / limit
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))  # a row (group) of zeros stays zeros
    q = torch.round(grouped / scales).clamp(-limit, limit).to(torch.int8).view(rows, k)
    if scheme.bits == 8:
        return q, scales.view(rows, 1)
    nibbles = (q + 8).to(torch.uint8)
    packed = nibbles[:, : k // 2] | (nibbles[:, k // 2 :] << 4)
    return packed.view(torch.int8), scales.view(rows, -1)


class QuantizedLinear(nn.Module):
    """nn.Linear over a weight-only quantized weight: dequantized in f32, rounded to the input's dtype,
    then multiplied (the ops kiln's kernels recognize)."""

    def __init__(self, in_features: int, out_features: int, scheme: Scheme, values: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.in_features, self.out_features, self.scheme = in_features, out_features, scheme
        self.weight_q = nn.Parameter(values, requires_grad=False)
        self.weight_scale = nn.Parameter(scales, requires_grad=False)
        self.bias = nn.Parameter(bias, requires_grad=False) if bias is not None else None

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        n, k = self.out_features, self.in_features
        if self.scheme.bits == 8:
            return (self.weight_q.to(torch.float32) * self.weight_scale).to(dtype)
        packed = self.weight_q
        nibbles = torch.cat([packed & 15, (packed >> 4) & 15], dim=1)
        grouped = (nibbles.to(torch.float32) - 8).view(n, k // self.scheme.group, self.scheme.group)
        return (grouped * self.weight_scale.unsqueeze(-1)).view(n, k).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dequantized(x.dtype), self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.scheme.name}"


@dataclass(frozen=True)
class Derived:
    """A quantized tensor made from a float weight when it is written: `part` is VALUES or SCALES."""

    weight: str  # the model's name of the float weight (as the checkpoint binds it)
    part: str
    scheme: Scheme
    dtype: torch.dtype  # the float weight's dtype in the model, before quantization (after --dtype)


def quantize_model(spec: ModelSpec, name: str | None) -> ModelSpec:
    """`spec` with every Linear the scheme takes replaced by a QuantizedLinear (a copy of its module).
    Real weights are quantized now; weights a checkpoint holds are on the meta device, and `spec.weights`
    learns how to make their quantized tensors (`derived`)."""
    if name is None:
        return spec
    scheme = Scheme.parse(name)
    converted: dict[int, nn.Module] = {}
    derived: dict[str, Derived] = {}
    for entry in spec.entries:
        if id(entry.module) not in converted:
            module = copy.deepcopy(entry.module)
            derived.update(quantize_module(module, scheme))
            converted[id(entry.module)] = module
    if not any(isinstance(m, QuantizedLinear) for module in converted.values() for m in module.modules()):
        raise KilnError(f"--quantize {name}: the model has no nn.Linear layer it can quantize", stage=STAGE)
    entries = tuple(replace(entry, module=converted[id(entry.module)]) for entry in spec.entries)
    weights = spec.weights.with_derived(derived) if spec.weights is not None else None
    return replace(spec, entries=entries, weights=weights, quantized=scheme.name)


def quantize_module(module: nn.Module, scheme: Scheme) -> dict[str, Derived]:
    """Replace, in place, each nn.Linear of `module` the scheme takes by a QuantizedLinear; returns how
    to make the quantized tensors of those whose weights are on the meta device."""
    derived: dict[str, Derived] = {}
    for prefix, owner in list(module.named_modules()):
        for child_name, child in list(owner.named_children()):
            if type(child) is not nn.Linear or not scheme.takes(child.in_features) or not child.weight.is_floating_point():
                continue
            weight = child.weight
            full = f"{prefix}.{child_name}" if prefix else child_name
            values_shape, scales_shape = scheme.shapes(child.out_features, child.in_features)
            if weight.device.type == "meta":
                values = torch.empty(values_shape, dtype=torch.int8, device="meta")
                scales = torch.empty(scales_shape, dtype=torch.float32, device="meta")
                derived[f"{full}.{VALUES}"] = Derived(f"{full}.weight", VALUES, scheme, weight.dtype)
                derived[f"{full}.{SCALES}"] = Derived(f"{full}.weight", SCALES, scheme, weight.dtype)
            else:
                values, scales = quantize_rows(weight.detach(), scheme)
            bias = child.bias.detach() if child.bias is not None else None
            setattr(owner, child_name, QuantizedLinear(child.in_features, child.out_features, scheme, values, scales, bias))
    return derived


def derived_chunks(rows: Iterator[torch.Tensor], derived: Derived) -> Iterator[torch.Tensor]:
    """The quantized tensor `derived` names, a slice of rows at a time, from its float weight's rows as
    stored (each converted to the model's dtype first, as the unquantized model would hold them)."""
    for chunk in rows:
        values, scales = quantize_rows(chunk.to(derived.dtype), derived.scheme)
        yield values if derived.part == VALUES else scales
