"""Artifacts without their weights, to carry to a machine that can put them back.

A `.vmfb` holds the model's weights byte for byte. `thin` zeroes every stretch of the artifact
that equals one of the model's tensors, records where, and compresses what is left: the weights
of the suite's MLP (100 MB) shrink to nothing. `thicken` writes the tensors back from the model
file, which makes the same weights from the same seed on any machine, and checks that the result
hashes to the original artifact, so the artifact that runs is exactly the one that was compiled.
Only torch is needed to thicken: the GPU machine has no compiler but can run the model files.

A weight may also sit in the artifact in another layout than the model's: kiln's NHWC convolution
kernels on Hopper read convolution weights as [K, R, S, C] (PERMUTATIONS), which IREE computes at
compile time and stores instead of the [K, C, R, S] original, and IREE stores a linear layer's
[out, in] weight as [in, out] where it folds the transpose of `x @ W.T` into the constant (cuda, seen
on transformers' BERT-style encoders in bf16: 126 MiB of a 127 MiB artifact). Those copies are
found and restored too.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable
from typing import Any

import torch

MIN_BYTES = 4096  # smaller tensors stay in the artifact
# Layouts, besides its own, in which a tensor of that rank may be stored: rank -> permutations.
PERMUTATIONS: dict[int, tuple[tuple[int, ...], ...]] = {2: ((1, 0),), 4: ((0, 2, 3, 1),)}  # W -> W.T; KCRS -> KRSC


def model_tensors(model: torch.nn.Module, remove_duplicate: bool = True) -> dict[str, torch.Tensor]:
    """Every parameter and buffer, by name (a tied one under each of its names with `remove_duplicate=False`)."""
    named = (*model.named_parameters(remove_duplicate=remove_duplicate), *model.named_buffers(remove_duplicate=remove_duplicate))
    return dict(named)


def thin(vmfb: bytes, tensors: dict[str, torch.Tensor]) -> tuple[bytes, dict[str, Any]]:
    """The artifact compressed with the bytes of `tensors` zeroed, and the recipe to restore them."""
    data = bytearray(vmfb)
    weights = []
    for name, tensor in tensors.items():
        for permutation in (None, *PERMUTATIONS.get(tensor.dim(), ())):
            raw = _bytes_of(tensor, permutation)
            if len(raw) < MIN_BYTES:
                continue
            offsets = list(_occurrences(vmfb, raw))
            for offset in offsets:
                data[offset : offset + len(raw)] = bytes(len(raw))
            if offsets:
                layout = {"permutation": list(permutation)} if permutation is not None else {}
                weights.append({"name": name, "nbytes": len(raw), "offsets": offsets, **layout})
    recipe = {"sha256": hashlib.sha256(vmfb).hexdigest(), "size": len(vmfb), "weights": weights}
    return zlib.compress(bytes(data), 6), recipe


def thicken(thinned: bytes, recipe: dict[str, Any], tensors: dict[str, torch.Tensor]) -> bytes:
    """The original artifact, from `thin`'s output and the same tensors; ValueError if they differ."""
    data = bytearray(zlib.decompress(thinned))
    for weight in recipe["weights"]:
        if weight["name"] not in tensors:
            raise ValueError(f"the model has no tensor '{weight['name']}' to restore")
        raw = _bytes_of(tensors[weight["name"]], weight.get("permutation"))
        if len(raw) != weight["nbytes"]:
            raise ValueError(f"tensor '{weight['name']}' has {len(raw)} bytes; the artifact held {weight['nbytes']}")
        for offset in weight["offsets"]:
            data[offset : offset + len(raw)] = raw
    if hashlib.sha256(data).hexdigest() != recipe["sha256"]:
        raise ValueError(
            "the rebuilt artifact differs from the compiled one: the model file made other weights here "
            "(another torch version's random numbers?)"
        )
    return bytes(data)


def _bytes_of(tensor: torch.Tensor, permutation: Iterable[int] | None = None) -> bytes:
    tensor = tensor.detach().cpu()
    if permutation is not None:
        tensor = tensor.permute(*permutation)
    flat = tensor.contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def _occurrences(haystack: bytes, needle: bytes) -> Iterable[int]:
    start = haystack.find(needle)
    while start >= 0:
        yield start
        start = haystack.find(needle, start + len(needle))
