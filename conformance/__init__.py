"""kiln.conformance: which ATen ops, and which modules as users write them, kiln compiles, checked against eager PyTorch.

Import rule: kiln.compiler, kiln.runtime and kiln.errors. `cases` is the op suite's table and
`modules` the module suite's (data), `runner` compiles and checks cases in worker processes,
`plain` sends them through the plain stack beneath kiln (torch-mlir and IREE alone) for
comparison, `support` keeps each case's expected outcome as data and writes SUPPORT.md from it
(never reading it back).
"""
