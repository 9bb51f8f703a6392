"""The rewrite on a linalg file, by hand or in a lit test (targets/llvm_cpu/tests/kernels/):

    python -m kiln.targets.llvm_cpu.kernels IN.mlir [--isa amx|avx512bf16] [--attention] [--report]

prints the module as iree-compile would get it (or, with --report, what computes each bf16
contraction). Modules separated by `// -----` lines are rewritten one by one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .features import AMX, AVX512_BF16
from .rewrite import substitute

_ISAS = {isa.name: isa for isa in (AMX, AVX512_BF16)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m kiln.targets.llvm_cpu.kernels", description=__doc__.split("\n\n")[0])
    parser.add_argument("input", type=Path)
    parser.add_argument("--isa", choices=sorted(_ISAS), default="amx")
    parser.add_argument("--attention", action="store_true", help="attention's matmuls too, operands rounded to bf16 (kiln's default)")
    parser.add_argument("--report", action="store_true", help="print the decisions instead of the module")
    args = parser.parse_args()
    outputs = []
    for text in args.input.read_text().split("\n// -----\n"):
        substitution = substitute(text, _ISAS[args.isa], args.attention, locations=False)
        outputs.append(substitution.report() if args.report else substitution.text)
    print("\n// -----\n".join(outputs))


if __name__ == "__main__":
    main()
