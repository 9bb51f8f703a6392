"""The vulkan-spirv room: GPUs with Vulkan compute, through IREE's SPIR-V code (target.py)."""

from .target import TARGET

__all__ = ["TARGET"]
