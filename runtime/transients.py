"""The memory a CPU context's calls keep their intermediate tensors in (kiln.compiler.transients).

One `TransientStorage` per IREE context: calls in one context run one at a time (executors.Context
holds its lock around each), so they can share one buffer, sized for the largest call so far. It is
anonymous memory mapped by kiln, not IREE's heap: mapped once, its pages stay in across calls, and
it asks the kernel for transparent huge pages (madvise; the default "madvise" policy of most
distributions honours it), which spares the TLB misses of 16 threads sweeping hundreds of MB in
4 KiB pages. It is returned to the system when the loaded module is dropped.
"""

from __future__ import annotations

import mmap

import iree.runtime as rt
import numpy as np

HUGE_PAGE = 2 << 20  # x86-64's transparent huge page


class TransientStorage:
    """A growable host buffer, lent to each call of one context that needs transient storage."""

    def __init__(self, device: rt.HalDevice) -> None:
        self._device = device
        self._buffer: rt.HalBuffer | None = None
        self._size = 0

    @property
    def size(self) -> int:
        """Bytes mapped now (0 before the first call that needs storage)."""
        return self._size

    def buffer(self, size: int) -> rt.HalBuffer:
        """A buffer of at least `size` bytes; only one call at a time may use it (the caller's lock)."""
        if size > self._size or self._buffer is None:
            self._buffer = None  # the old mapping goes once IREE's last reference to it does
            self._buffer = self._map(size)
            self._size = size
        return self._buffer

    def release(self) -> None:
        """Unmap the buffer (once IREE holds no reference to it); the next call that needs one maps anew."""
        self._buffer = None
        self._size = 0

    def _map(self, size: int) -> rt.HalBuffer:
        # Over-map by a huge page so the buffer can start on a huge-page boundary.
        region = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        start = -_address(region) % HUGE_PAGE
        if hasattr(mmap, "MADV_HUGEPAGE"):
            region.madvise(mmap.MADV_HUGEPAGE)
        view = memoryview(region)[start : start + size]
        return self._device.allocator.import_host_allocation(
            view,
            rt.MemoryType.DEVICE_LOCAL | rt.MemoryType.HOST_VISIBLE,
            rt.BufferUsage.DEFAULT,
        )


def _address(region: mmap.mmap) -> int:
    return np.frombuffer(region, dtype=np.uint8, count=1).ctypes.data
