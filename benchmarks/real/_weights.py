"""Weights by tensor name: every real model's parameters, the same bits on any machine and library version.

The real-model benchmark carries its artifacts thin (benchmarks/README.md): the weights stay here and
the machine that runs them rebuilds them from the model file, then checks that the rebuilt artifact
hashes to the compiled one. `torch.manual_seed` + a library's own initialization would tie the
weights to the order in which the library builds its modules and to torch's random number code, so
this module sets every floating-point parameter itself, as a function of its name alone:

- A tensor's stream of numbers comes from SplitMix64 over its element index, keyed by the first 8
  bytes of SHA-256(name). Everything is integer arithmetic modulo 2**64 (numpy uint64, defined
  wrap-around), so the bits are the same on every machine. Chunks of 64K elements run in threads
  (numpy lets go of the GIL), each writing its own slice: the order they finish in changes nothing.
- A normal-looking value is the sum of the four 16-bit lanes of one 64-bit draw (Irwin-Hall, n=4),
  centred and scaled to unit variance: bounded by +-3.46, bell-shaped, and computed with one exact
  integer subtraction and one float64 multiplication (IEEE rounds a single operation correctly
  everywhere; no transcendental function, whose last bit differs between math libraries), then
  rounded once to float32. A uniform one is the top 53 bits times 2**-53, exact.
- What a tensor holds follows its role, like the model's own initialization but with no zeros and
  ones a compiler could fold away (a trained model has none either):
    matrices, embeddings, convolutions, position tables, class tokens   normal(0, std)
    normalization weights (LayerNorm, RMSNorm, BatchNorm, GroupNorm)    1 + 0.1 * normal
    biases (of any module), normalization shifts                        0.02 * normal
    batch norm running_mean / running_var                               0.1 * normal / 0.5 + uniform[0, 1)
    other 1-d parameters (layer scales, CLIP's class embedding)         0.1 + 0.02 * normal
    scalars (CLIP's logit scale)                                        1 + 0.1 * normal
  `std` is the model's: its config's initializer_range (or init_std) for transformers, or, for a CNN
  (`fan_in=True`), LeCun's sqrt(1 / fan_in) for each convolution and matrix. (He's sqrt(2 / fan_in)
  compounds through fifty residual layers: batch norm in eval mode does not renormalize with
  statistics that are not the activations', and ResNet-50's logits reach 1e4; LeCun's keep them
  near 5.) Parameters that the library fills with a fixed table (Whisper's sinusoidal positions) are
  set by name too, so that they are the same bits everywhere.
- A tensor shared under several names (a tied LM head) is set once, under the smallest name.
- Buffers other than batch norm statistics (rotary frequencies, relative position indices, causal
  masks) are the architecture's, computed by the library from the config, and left alone.
- Tensors on the meta device (a model built for its shapes only, e.g. to count its parameters) are
  left alone.

The model is built by the library first (its own init runs and is then replaced: `set_weights`
checks that no floating-point parameter was missed), then converted to the case's dtype with
`.to(dtype)`, which rounds each float32 to bf16 the same way everywhere.
"""

from __future__ import annotations

import hashlib
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import nn

_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_CHUNK = 1 << 16  # elements per step: the temporaries stay in the cache
_STEPS = np.arange(1, _CHUNK + 1, dtype=np.uint64) * np.uint64(_GOLDEN)  # (i + 1) * golden, mod 2**64
_LANES_MEAN = 2 * 0xFFFF  # the mean of four 16-bit lanes' sum
_LANES_SD = math.sqrt((65536.0**2 - 1.0) / 3.0)  # its standard deviation (4 * (65536**2 - 1) / 12)
_THREADS = os.cpu_count() or 1  # numpy lets go of the GIL in its loops: chunks run in parallel

NORMS = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase, nn.RMSNorm)


def key_of(name: str) -> int:
    """A tensor's key: the first 8 bytes of SHA-256 of its name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def draws(name: str, start: int, count: int) -> np.ndarray:
    """SplitMix64's outputs `start` .. `start + count - 1` for the tensor `name` (uint64): output i
    mixes key + (i + 1) * golden. At most _CHUNK of them."""
    z, t = np.empty(count, np.uint64), np.empty(count, np.uint64)
    return _draws(key_of(name), start, z, t)


def _draws(key: int, start: int, z: np.ndarray, t: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        np.add(_STEPS[: len(z)], np.uint64((key + start * _GOLDEN) % 2**64), out=z)
        np.right_shift(z, np.uint64(30), out=t)
        z ^= t
        z *= _MIX1
        np.right_shift(z, np.uint64(27), out=t)
        z ^= t
        z *= _MIX2
        np.right_shift(z, np.uint64(31), out=t)
        z ^= t
    return z


def fill(name: str, numel: int, kind: str, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    """`numel` float32 values for the tensor `name`: `offset + scale * x`, x normal-looking with unit
    variance (kind "normal") or uniform in [0, 1) ("uniform"); computed in float64, rounded once."""
    if kind not in ("normal", "uniform"):
        raise ValueError(f"unknown kind {kind!r}")
    key, out = key_of(name), np.empty(numel, dtype=np.float32)
    factor = scale / _LANES_SD if kind == "normal" else scale * 2.0**-53

    def chunk(start: int) -> None:
        count = min(_CHUNK, numel - start)
        z = _draws(key, start, np.empty(count, np.uint64), np.empty(count, np.uint64))
        if kind == "normal":  # the four 16-bit lanes' sum, centred: exact in int64 (lane order is immaterial)
            lanes = z.view(np.uint16).reshape(count, 4)
            exact = lanes[:, 0].astype(np.int64)
            exact += lanes[:, 1]
            exact += lanes[:, 2]
            exact += lanes[:, 3]
            exact -= _LANES_MEAN
        else:  # the top 53 bits
            exact = (z >> np.uint64(11)).astype(np.int64)
        values = exact.astype(np.float64)  # exact: |values| < 2**53
        values *= factor  # one correctly rounded multiplication
        if offset:
            values += offset  # one correctly rounded addition
        out[start : start + count] = values  # float64 -> float32: one correctly rounded step

    starts = range(0, numel, _CHUNK)
    if len(starts) <= 2 or _THREADS == 1:
        for start in starts:
            chunk(start)
    else:
        with ThreadPoolExecutor(_THREADS) as pool:
            list(pool.map(chunk, starts))
    return out


Role = tuple[str, float, float]  # fill's kind, scale and offset


def role(module: nn.Module, leaf: str, tensor: torch.Tensor, std: float, fan_in: bool) -> Role:
    """What `fill` makes for the tensor `leaf` of `module` (see the module's docstring)."""
    if leaf == "running_var":
        return "uniform", 1.0, 0.5
    if leaf == "running_mean":
        return "normal", 0.1, 0.0
    is_norm = isinstance(module, NORMS) or type(module).__name__.endswith(("Norm", "NormLayer"))
    if is_norm and tensor.dim() == 1 and leaf == "weight":
        return "normal", 0.1, 1.0
    if leaf == "bias" or (leaf.endswith("_bias") and tensor.dim() <= 1):
        return "normal", 0.02, 0.0
    if tensor.dim() == 0 or tensor.numel() == 1:
        return "normal", 0.1, 1.0
    if tensor.dim() == 1:  # layer scales
        return "normal", 0.02, 0.1
    if fan_in and leaf == "weight" and not isinstance(module, nn.Embedding):
        fan = tensor[0].numel()  # [out, in / groups, *kernel]: in / groups * kernel
        return "normal", math.sqrt(1.0 / fan), 0.0
    return "normal", std, 0.0


def set_weights(model: nn.Module, std: float = 0.02, fan_in: bool = False) -> nn.Module:
    """Every floating-point parameter of `model`, and its batch norm statistics, set by name (in place,
    in float32; convert afterwards). `std`: the model's initializer range; `fan_in`: LeCun's
    sqrt(1 / fan_in) for weight matrices and convolutions instead (CNNs). Returns `model`."""
    owners = {}  # id(tensor) -> (smallest name, module, leaf, tensor)
    for module_name, module in model.named_modules(remove_duplicate=False):
        tensors = [*module.named_parameters(recurse=False, remove_duplicate=False)]
        tensors += [(leaf, b) for leaf, b in module.named_buffers(recurse=False, remove_duplicate=False) if leaf in ("running_mean", "running_var")]
        for leaf, tensor in tensors:
            if tensor is None or not tensor.is_floating_point():
                continue
            name = f"{module_name}.{leaf}" if module_name else leaf
            if id(tensor) not in owners or name < owners[id(tensor)][0]:
                owners[id(tensor)] = (name, module, leaf, tensor)
    with torch.no_grad():
        for name, module, leaf, tensor in sorted(owners.values(), key=lambda item: item[0]):
            if tensor.is_meta:  # a model built on the meta device (its shapes only): no values to set
                continue
            kind, scale, offset = role(module, leaf, tensor, std, fan_in)
            values = torch.from_numpy(fill(name, tensor.numel(), kind, scale, offset)).view(tensor.shape)
            if tensor.dtype == values.dtype and tensor.device == values.device:
                tensor.data = values  # the new values in place of the library's: no copy
            else:
                tensor.copy_(values)
    missed = [name for name, p in model.named_parameters() if p.is_floating_point() and id(p) not in owners]
    if missed:  # cannot happen unless a parameter lives outside named_modules
        raise RuntimeError(f"parameters not set by name: {missed[:3]}")
    return model


def normal_input(name: str, shape: tuple[int, ...], std: float = 1.0) -> torch.Tensor:
    """An example input (pixels, features) by name, like the weights: normal(0, std), float32."""
    return torch.from_numpy(fill(name, math.prod(shape), "normal", std)).view(shape)


def token_input(name: str, shape: tuple[int, ...], vocab: int) -> torch.Tensor:
    """Token ids by name in [0, vocab), int64."""
    numel = math.prod(shape)
    ids = [draws(name, start, min(_CHUNK, numel - start)) for start in range(0, numel, _CHUNK)]
    return torch.from_numpy((np.concatenate(ids) % np.uint64(vocab)).astype(np.int64)).view(shape)
