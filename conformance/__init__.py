"""kiln.conformance: which ATen ops and which real model families kiln compiles, checked against eager PyTorch.

Import rule: kiln.compiler, kiln.runtime and kiln.errors. `cases` is the op case table (data),
`runner` compiles and checks cases in worker processes, `support` keeps each case's expected
outcome as data and writes SUPPORT.md from it (never reading it back). `families` is the table of
model families (builders from transformers and timm), `family_runner` checks them in the same
worker processes and writes FAMILIES.md from their recorded outcomes.
"""
