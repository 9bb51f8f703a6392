"""kiln.conformance: which ATen ops kiln compiles, checked case by case against eager PyTorch.

Import rule: kiln.compiler, kiln.runtime and kiln.errors. `cases` is the case table (data),
`runner` compiles and checks cases in worker processes, `support` keeps each case's expected
outcome as data and writes SUPPORT.md from it (never reading it back).
"""
