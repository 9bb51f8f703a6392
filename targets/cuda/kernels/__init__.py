"""kiln's own GPU contraction kernels: Triton sources compiled here, with no GPU, to sm_90a PTX that
IREE launches as external executables.

The pass outline-contractions moves each eligible matmul, convolution and attention of a cuda/sm_90a compile into
a private function described by a `kiln.contraction` attribute; outline-row-programs does the same
for each layer norm and the elementwise ops around it, and for long elementwise chains (row
programs, whose kernel row_source.py
writes out from its steps). The backend stage then asks
`substitute.plan` what computes each one: a kernel (tiles.py picks its configuration, measured on an
H100 where the shape was, build.py compiles it with Triton through cache.py, embed.py writes it as an
`hal.executable.source` and a dispatching function) or IREE's own code, the function's torch-op
body, where a kernel was measured slower or could not be made (with a note). Triton is an optional
dependency (`torchkiln[kernels]`); it is imported only when a kernel is compiled.
"""
