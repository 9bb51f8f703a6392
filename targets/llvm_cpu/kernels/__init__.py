"""kiln's own CPU kernel for contractions: bf16 on AMX tiles where the CPU has them, AVX512-BF16
otherwise; f32 on AVX-512F.

IREE 3.13 has no AMX code, its AVX512-BF16 microkernels run bf16 matmuls and convolutions far below
the CPU's rate, and its f32 convolutions run at a fraction of it (benchmarks/NOTES.md). kiln_amx.c is
one implicit-GEMM kernel (NHWC convolutions, matmuls as their 1x1 case) with both bf16 paths over one
packed weight layout and an f32 path over its own. Just before iree-compile, the backend stage
rewrites the linalg hand-off (rewrite.py): each contraction of the model's element type the
kernel takes becomes a dispatch of it (mlir.py), with its weight packed once at load time; the rest
stays with IREE. kiln_rows.c has the row kernels: the softmax IREE's three passes are replaced by
(attention's among them) and the layer norm; row_program.py writes a layer norm together with the
elementwise op producing its input as one dispatch of kiln's vector code. features.py says which path a target CPU has, build.py builds the kernels' objects
with the host's C compiler at first use and caches them, geometry.py tiles each call.
"""
