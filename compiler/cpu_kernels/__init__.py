"""kiln's own CPU kernel for bf16 contractions: AMX tiles where the CPU has them, AVX512-BF16 otherwise.

IREE 3.13 has no AMX code and its AVX512-BF16 microkernels run bf16 matmuls and convolutions far
below the CPU's rate (benchmarks/NOTES.md). kiln_amx.c is one implicit-GEMM kernel (NHWC
convolutions, matmuls as their 1x1 case) with both paths over one packed weight layout. Just before
iree-compile, the backend stage rewrites the linalg hand-off (rewrite.py): each bf16 contraction the
kernel takes becomes a dispatch of it (mlir.py), with its weight packed once at load time; the rest
stays with IREE. features.py says which path a target CPU has, build.py builds the kernel's object
with the host's C compiler at first use and caches it, geometry.py tiles each call.
"""
