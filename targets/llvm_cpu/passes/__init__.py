"""The llvm_cpu room's passes, found by the pass registry (passes/registry.py) and placed by the room."""
