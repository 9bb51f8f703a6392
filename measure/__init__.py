"""kiln.measure: time artifacts against eager PyTorch and Inductor, and carry them to where they run.

Import rule: kiln.runtime and kiln.errors only, never the compiler. This package runs on the
machine with the device (a GPU host with torch, iree-base-runtime and kiln, no torch-mlir or
iree-compile): `timing` times calls alike for every contender, `bench` checks and times one
artifact, `results` holds the records and tables (pure Python), `bundle` is the one folder format
for "compile here, run there", `suite` is the benchmark suite's timing half (kiln.tune.bench is its
compiling half), `contractions` reads the kernels' contraction labels back.
"""
