"""The rocm room: AMD GPUs through IREE's HIP code (target.py); compile-only so far."""

from .target import TARGET

__all__ = ["TARGET"]
