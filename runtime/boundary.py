"""How a tensor crosses between torch (or numpy) and IREE, and how results come back.

One boundary per loaded artifact, by the kind of device it runs on:
- CPU (`HostBoundary`): a dense, 64-byte aligned tensor is imported by DLPack as is (IREE reads
  torch's memory); results that IREE allocated are exported by DLPack, so the tensor the caller
  gets is a view of IREE's memory that lives as long as the tensor does.
- CUDA (`CudaBoundary`): inputs are imported by DLPack as on the CPU. IREE 3.13 cannot export the
  results it allocates on CUDA (they come from its stream-ordered pool), so torch allocates each
  result and IREE writes into it, through the artifact's out variant (`storage`; a later call
  reuses that memory once the caller has dropped the result: kiln.runtime.result_pool). IREE runs on
  a stream of its own and 3.13 cannot wait on torch's, so `before_call` synchronizes torch's
  current stream from the host: whatever torch queued on the inputs (or on the memory the results
  reuse) is done before IREE starts. The call returns once IREE is done, so torch may use the
  results at once.
- Other GPUs (`StagedBoundary`: Vulkan, ROCm): through host memory, as IREE's Python API allows.

Where memory does not allow the fast route (a strided or misaligned tensor, a tensor on another
device, a read-only numpy array), the value is copied once: `Copies` counts it by reason, and the
first copy of each reason warns (KilnCopyWarning). Slow, never wrong.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Hashable

import iree.runtime as rt
import ml_dtypes
import numpy as np
import torch
from torch.utils.dlpack import from_dlpack, to_dlpack

from kiln.errors import KilnError

STAGE = "runtime"

# IREE's kernels assume their buffers start on 64 bytes (its CPU import refuses less; its CUDA
# import accepts less and the call then fails, hanging the process at exit): misaligned inputs are
# copied first. torch allocates on 64 bytes (CPU) or more (CUDA); numpy only on 16.
ALIGNMENT = 64

_KDL_CPU = 1  # DLPack's device type for host memory

Value = torch.Tensor | np.ndarray


class KilnCopyWarning(UserWarning):
    """A call copied a value it could not hand to IREE as is (warned once per reason and artifact)."""


class Copies:
    """The copies one artifact's calls made at the boundary, by reason ("not contiguous", ...)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, reason: str, detail: str, warn: bool = True) -> None:
        """Count one copy; the first of its reason warns (unless not `warn`: a copy the manifest
        announces), with `detail` saying which value and why."""
        with self._lock:
            self._counts[reason] += 1
            first = self._counts[reason] == 1
        if first and warn:
            message = f"kiln copied {detail} (further copies for this reason are counted, not warned)"
            warnings.warn(message, KilnCopyWarning, stacklevel=_caller_level())

    @property
    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())


def _caller_level() -> int:
    """The stack level of the first frame outside kiln.runtime: the user's call, for warnings."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_RUNTIME_FOLDER):
        level, frame = level + 1, frame.f_back
    return level


_RUNTIME_FOLDER = os.path.dirname(os.path.abspath(__file__))


class Boundary:
    """Values in as IREE buffer views, results out as torch tensors, for one IREE device.

    `home` is the torch device whose memory IREE uses directly ("cpu" for the CPU, "cuda:N");
    `storage_results` says whether the caller allocates results (`storage`) or IREE does (`leave`).
    """

    home: torch.device
    storage_results: bool = False

    def __init__(self, device: rt.HalDevice) -> None:
        self.device = device
        self.copies = Copies()

    def enter(self, value: Value, name: str, written: bool = False) -> tuple[torch.Tensor, rt.HalBufferView]:
        """Input `name` for IREE: the tensor IREE reads (`value` itself where memory allows, else a
        counted copy) and IREE's view of it, which keeps the tensor alive. An input the artifact
        may write into (`written`: the manifest's `overwritten`) is always a copy."""
        if written:
            tensor = self.dense(value, name).clone()
            self.copies.count("the artifact writes into it", f"input '{name}'", warn=False)
            return tensor, self.device.from_dlpack_capsule(to_dlpack(tensor))
        if type(value) is torch.Tensor and self.is_home(value) and not value.data_ptr() % ALIGNMENT:
            try:  # the common case, in as few checks as possible: they are a call's overhead
                return value, self.device.from_dlpack_capsule(to_dlpack(value))
            except (RuntimeError, ValueError):
                pass  # torch will not export a tensor that requires grad; IREE refuses a strided one
        tensor = self.dense(value, name)
        return tensor, self.device.from_dlpack_capsule(to_dlpack(tensor))

    def dense(self, value: Value, name: str) -> torch.Tensor:
        """Input `name` as a dense, aligned torch tensor on `home`: itself where it already is one, else a copy."""
        if isinstance(value, torch.Tensor):
            tensor = value.detach() if value.requires_grad else value
        elif isinstance(value, np.ndarray):
            tensor = self._from_numpy(value, name)
        else:
            raise KilnError(
                f"input '{name}' must be a torch.Tensor or numpy array, got {type(value).__name__}",
                stage=STAGE,
            )
        if not self.is_home(tensor):
            tensor = self.moved_home(tensor, name)
        if not tensor.is_contiguous():
            self.copies.count(
                "not contiguous", f"input '{name}': it is not contiguous (strides {tensor.stride()})"
            )
            tensor = tensor.contiguous()
        if tensor.data_ptr() % ALIGNMENT:
            self.copies.count(
                f"not {ALIGNMENT}-byte aligned",
                f"input '{name}': its data does not start on {ALIGNMENT} bytes",
            )
            tensor = tensor.clone()
        return tensor

    def is_home(self, tensor: torch.Tensor) -> bool:
        raise NotImplementedError

    def moved_home(self, tensor: torch.Tensor, name: str) -> torch.Tensor:
        """A copy of `tensor` on `home`, counted: from the CPU or a GPU; a KilnError from elsewhere ("meta")."""
        if tensor.device.type not in ("cpu", "cuda"):
            raise KilnError(f"input '{name}' is on {tensor.device}; the artifact runs on {self.home}", stage=STAGE)
        self.copies.count(f"input on {tensor.device}", f"input '{name}' from {tensor.device} to {self.home}")
        return tensor.to(self.home)

    def stream(self) -> Hashable:
        """The caller's queue: what `before_call` waits on, and what a call's results are lent on
        (kiln.runtime.result_pool). The CPU has one."""
        return None

    def before_call(self, stream: Hashable) -> None:
        """Make what torch has queued on `stream` (the inputs) visible to IREE (nothing to do on the CPU)."""

    def results_device(self, args: tuple[Value, ...]) -> torch.device | None:
        """Where the results of a call with `args` go, when not `home`: the device of the first CUDA
        input, else the CPU. None: they stay on `home`."""
        for value in args:
            if isinstance(value, torch.Tensor) and value.is_cuda:
                return value.device
        return None

    def storage(self, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, rt.HalBufferView]:
        """A fresh torch tensor for a result, and IREE's view of it (only where `storage_results`;
        calls take them through a kiln.runtime.result_pool)."""
        tensor = torch.empty(shape, dtype=dtype, device=self.home)
        return tensor, self.device.from_dlpack_capsule(to_dlpack(tensor))

    def leave(self, view: rt.HalBufferView, dtype: torch.dtype) -> torch.Tensor:
        """A result IREE allocated, as a torch tensor of `dtype` on `home`."""
        raise NotImplementedError

    def as_dtype(self, tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """A result as the manifest's `dtype`. IREE's integers are signless (a uint8 result comes back
        as int8 bits): same-size types are reinterpreted; others are converted, counted."""
        if tensor.dtype == dtype:
            return tensor
        if tensor.dtype.itemsize == dtype.itemsize:
            return tensor.view(dtype)
        self.copies.count("result converted", f"a {tensor.dtype} result to {dtype}, as the manifest says")
        return tensor.to(dtype)

    def _from_numpy(self, array: np.ndarray, name: str) -> torch.Tensor:
        """`array` as a torch tensor over its own memory where torch can share it, else one counted
        copy into torch's (aligned) memory."""
        reason = (
            "read-only numpy array" if not array.flags.writeable
            else "non-native byte order" if not array.dtype.isnative
            else "negative strides" if any(stride < 0 for stride in array.strides)
            else None
        )  # fmt: skip
        if reason is None:
            return _shared(array)
        self.copies.count(reason, f"input '{name}': a {reason}")
        with warnings.catch_warnings():  # torch warns of sharing a read-only array; the clone does not share it
            warnings.simplefilter("ignore", UserWarning)
            return _shared(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))).clone()


def _shared(array: np.ndarray) -> torch.Tensor:
    if array.dtype == ml_dtypes.bfloat16:  # numpy has no bf16 of its own; torch reads its bits
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


class HostBoundary(Boundary):
    """IREE's CPU devices: DLPack both ways, so neither inputs nor results are copied."""

    home = torch.device("cpu")

    def is_home(self, tensor: torch.Tensor) -> bool:
        return tensor.is_cpu

    def leave(self, view: rt.HalBufferView, dtype: torch.dtype) -> torch.Tensor:
        return self.as_dtype(from_dlpack(self.device.create_dlpack_capsule(view, _KDL_CPU, 0)), dtype)


class CudaBoundary(Boundary):
    """IREE's CUDA device on torch's `cuda:N`: DLPack in, results in tensors torch allocates."""

    storage_results = True

    def __init__(self, device: rt.HalDevice, index: int) -> None:
        super().__init__(device)
        self.home = torch.device("cuda", index)
        self._index = index
        self._streams: dict[Hashable, torch.cuda.Stream] = {}  # torch's streams by id, made once

    def is_home(self, tensor: torch.Tensor) -> bool:
        return tensor.is_cuda and tensor.get_device() == self._index

    def moved_home(self, tensor: torch.Tensor, name: str) -> torch.Tensor:
        if tensor.is_cuda:
            raise KilnError(
                f"input '{name}' is on {tensor.device}; the artifact runs on {self.home}",
                stage=STAGE,
                hint=f"move it with .to('{self.home}'), or load the artifact with device='cuda:{tensor.get_device()}'",
            )
        return super().moved_home(tensor, name)

    def stream(self) -> tuple[int, int, int]:
        # (stream id, device index, device type): torch.cuda.current_stream makes a Stream object of
        # these, switching devices to do so, 2-4 us a call on the H100's host
        return torch._C._cuda_getCurrentStream(self._index)

    def before_call(self, stream: Hashable) -> None:
        waited = self._streams.get(stream)
        if waited is None:
            stream_id, device_index, device_type = stream  # type: ignore[misc]
            waited = torch.cuda.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
            self._streams[stream] = waited
        waited.synchronize()

    def results_device(self, args: tuple[Value, ...]) -> torch.device | None:
        for value in args:
            if isinstance(value, torch.Tensor) and value.is_cuda:
                return None  # on `home`: a CUDA input elsewhere was refused
        return torch.device("cpu")

    def leave(self, view: rt.HalBufferView, dtype: torch.dtype) -> torch.Tensor:
        """Only for artifacts without an out variant: through the host, counted."""
        self.copies.count(
            "result through the host", "a result through the host (the artifact has no out variant)"
        )
        return self.as_dtype(_host_tensor(self.device, view), dtype).to(self.home)


class StagedBoundary(Boundary):
    """Devices torch cannot share memory with here (Vulkan; ROCm, untried): every value through the host.

    Inputs are copied into IREE's memory and results back to host tensors; these copies are the
    route itself, not a fallback, so they are not counted.
    """

    home = torch.device("cpu")

    def is_home(self, tensor: torch.Tensor) -> bool:
        return tensor.is_cpu

    def enter(self, value: Value, name: str, written: bool = False) -> tuple[torch.Tensor, rt.HalBufferView]:
        tensor = self.dense(value, name)  # IREE gets a buffer of its own: a written input needs no other copy
        bits = tensor.view(_BITS[tensor.dtype]) if tensor.dtype in _BITS else tensor
        return tensor, self.device.allocator.allocate_buffer_copy(
            memory_type=rt.MemoryType.DEVICE_LOCAL,
            allowed_usage=rt.BufferUsage.DEFAULT,
            device=self.device,
            buffer=bits.numpy(),
            element_type=_ELEMENT_TYPES[tensor.dtype],
        )

    def leave(self, view: rt.HalBufferView, dtype: torch.dtype) -> torch.Tensor:
        return self.as_dtype(_host_tensor(self.device, view), dtype)


def _host_tensor(device: rt.HalDevice, view: rt.HalBufferView) -> torch.Tensor:
    array = rt.DeviceArray(device, view, implicit_host_transfer=True).to_host()
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(np.array(array.view(np.int16), copy=True)).view(torch.bfloat16)
    return torch.from_numpy(np.array(array, copy=True))


# bf16 and bool have no numpy dtype that IREE's Python API maps: their bits travel as int16 / uint8.
_BITS = {torch.bfloat16: torch.int16, torch.bool: torch.uint8}
_ELEMENT_TYPES: dict[torch.dtype, rt.HalElementType] = {
    torch.float32: rt.HalElementType.FLOAT_32,
    torch.float16: rt.HalElementType.FLOAT_16,
    torch.bfloat16: rt.HalElementType.BFLOAT_16,
    torch.float64: rt.HalElementType.FLOAT_64,
    torch.int8: rt.HalElementType.SINT_8,
    torch.uint8: rt.HalElementType.UINT_8,
    torch.int16: rt.HalElementType.SINT_16,
    torch.int32: rt.HalElementType.SINT_32,
    torch.int64: rt.HalElementType.SINT_64,
    torch.bool: rt.HalElementType.BOOL_8,
    torch.complex64: rt.HalElementType.COMPLEX_64,
    torch.complex128: rt.HalElementType.COMPLEX_128,
}


def boundary_for(device: rt.HalDevice, kind: str, index: int) -> Boundary:
    """The boundary for an IREE device of `kind` ("cpu", "cuda", ...), torch's device `index` for GPUs."""
    if kind == "cpu":
        return HostBoundary(device)
    if kind == "cuda":
        return CudaBoundary(device, index)
    return StagedBoundary(device)
