"""Which devices IREE sees here, and the pytest marks that skip a test without one.

Apart from testkit.py (which re-exports these) because it imports no compiler: tests/runtime/ runs
on the device machine, which has the runtime alone, and its files also run as scripts there (this
folder is then first on the path; under pytest, pyproject's `pythonpath` puts it there).
"""

from __future__ import annotations

import pytest


def device_visible(driver: str) -> bool:
    """Whether IREE sees a device of `driver` ("cuda", "vulkan") on this machine."""
    try:
        import iree.runtime as rt

        return bool(rt.get_driver(driver).query_available_devices())
    except Exception:
        return False


gpu = pytest.mark.skipif(not device_visible("cuda"), reason="no CUDA device visible to IREE")
vulkan = pytest.mark.skipif(not device_visible("vulkan"), reason="no Vulkan device visible to IREE")
