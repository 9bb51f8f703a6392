"""lit configuration for the cuda room's pass tests: one `<pass-name>.mlir` per pass, run with `kiln opt`.

Run them with `lit targets/cuda/tests/passes` (or through pytest: tests/test_passes_lit.py). `kiln` and
`filecheck` come from the environment lit runs in.
"""

import os
import sys

import lit.formats

config.name = "kiln-cuda-passes"  # noqa: F821  (lit defines `config`)
config.test_format = lit.formats.ShTest()  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.environment["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])  # noqa: F821
