"""lit configuration for the tests of kiln's CPU kernel rewrite, run with `python -m kiln.targets.llvm_cpu.kernels`.

Run them with `lit targets/llvm_cpu/tests/kernels` (or through pytest: targets/llvm_cpu/tests/test_cpu_kernels.py).
"""

import os
import sys

import lit.formats

config.name = "kiln-cpu-kernels"  # noqa: F821  (lit defines `config`)
config.test_format = lit.formats.ShTest()  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.environment["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])  # noqa: F821
