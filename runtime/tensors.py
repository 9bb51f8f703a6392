"""Tensor dtypes and host copies: the names the manifest and tables use, numpy views of torch tensors.

bf16 is the awkward one: numpy has no bf16 of its own, so its bits travel as int16 (to_host_array)
or as ml_dtypes' bfloat16 (to_numpy). How tensors cross into IREE is kiln.runtime.boundary's job.
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
import torch

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
    "complex64": torch.complex64,  # IREE's complex<f32>: a (real, imaginary) pair of f32 per element, as torch's
    "complex128": torch.complex128,
}


SHORT_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int8: "i8", torch.uint8: "u8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
    torch.bool: "bool", torch.complex64: "c64", torch.complex128: "c128",
}  # fmt: skip


def short_dtype(dtype: torch.dtype) -> str:
    """"f32", "bf16", "i64", ...: how tables and messages name a dtype."""
    return SHORT_DTYPES.get(dtype, str(dtype).removeprefix("torch."))


def describe_inputs(inputs: Sequence[torch.Tensor]) -> str:
    """E.g. "f32[8, 1024], i64[8]"."""
    return ", ".join(f"{short_dtype(x.dtype)}[{', '.join(map(str, x.shape))}]" for x in inputs)


def dtype_name(dtype: torch.dtype | np.dtype) -> str:
    """The manifest's name for a torch or numpy dtype ("float32", "bfloat16", ...)."""
    if isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch.")
    name = np.dtype(dtype).name
    return "bool" if name == "bool" else name


def to_host_array(value: torch.Tensor | np.ndarray) -> np.ndarray:
    """A contiguous host numpy array holding `value`'s bits (a copy of a CUDA tensor); bf16 as an int16 view."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        if tensor.dtype == torch.bfloat16:
            return tensor.view(torch.int16).numpy()
        return tensor.numpy()
    array = np.ascontiguousarray(value)
    if array.dtype.name == "bfloat16":  # ml_dtypes' bfloat16
        return array.view(np.int16)
    return array


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """`tensor`'s values as a numpy array (bf16 as ml_dtypes' bfloat16); shares a CPU tensor's memory."""
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()
