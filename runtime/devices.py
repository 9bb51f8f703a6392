"""Choosing the IREE device an artifact runs on.

Users say `cpu`, `cuda`, `cuda:1` or `vulkan`; the manifest says which driver the artifact was
compiled for. A missing driver or device is an error that says so, never a hang or a crash.
"""

from __future__ import annotations

import iree.runtime as rt

from kiln.errors import KilnError

# User-facing device kind -> IREE driver. The CPU artifacts use the multithreaded task driver.
DRIVERS: dict[str, str] = {"cpu": "local-task", "cuda": "cuda", "vulkan": "vulkan", "rocm": "hip"}
KIND_OF_DRIVER: dict[str, str] = {driver: kind for kind, driver in DRIVERS.items()}

STAGE = "runtime"


def open_device(requested: str | None, artifact_driver: str) -> rt.HalDevice:
    """Open the device named by `requested` (default: the artifact's own driver)."""
    artifact_kind = KIND_OF_DRIVER.get(artifact_driver, artifact_driver)
    kind, index = _parse(requested or artifact_kind)
    if kind != artifact_kind:
        raise KilnError(
            f"this artifact targets {artifact_kind}; it cannot run on device '{requested}'",
            stage=STAGE,
            hint=f"load it with device='{artifact_kind}', or recompile with --target for {kind}",
        )
    driver_name = DRIVERS[kind]
    try:
        driver = rt.get_driver(driver_name)
        devices = driver.query_available_devices()
    except Exception as exc:
        raise KilnError(
            f"this artifact targets {kind}; no {kind.upper()} driver could be opened ({exc})", stage=STAGE
        ) from exc
    if not devices:
        raise KilnError(f"this artifact targets {kind}; no {kind.upper()} device is visible", stage=STAGE)
    if index >= len(devices):
        raise KilnError(
            f"device '{requested}' does not exist: {len(devices)} {kind} device(s) visible", stage=STAGE
        )
    if kind == "cpu":
        return rt.get_device(driver_name)
    return driver.create_device(devices[index]["device_id"])


def _parse(device: str) -> tuple[str, int]:
    kind, _, index = device.partition(":")
    if kind not in DRIVERS:
        raise KilnError(f"unknown device '{device}'; known: {', '.join(DRIVERS)} (e.g. 'cuda:1')", stage=STAGE)
    if index and not index.isdigit():
        raise KilnError(f"bad device index in '{device}'; expected e.g. '{kind}:0'", stage=STAGE)
    return kind, int(index or 0)
