"""lit configuration for the llvm_cpu room's pass tests: tests/passes/lit.cfg.py's, for this folder.

Run them with `lit targets/llvm_cpu/tests/passes` (or through pytest: tests/test_passes_lit.py).
"""

import os

lit_config.load_config(config, os.path.join(os.path.dirname(__file__), *[os.pardir] * 4, "tests", "passes", "lit.cfg.py"))  # noqa: F821
config.name = "kiln-llvm-cpu-passes"  # noqa: F821  (lit defines `config` and `lit_config`)
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
