"""kiln's own CPU kernel for contractions: bf16 on AMX tiles where the CPU has them, AVX512-BF16
otherwise; f32 on AVX-512F.

IREE 3.13 has no AMX code, its AVX512-BF16 microkernels run bf16 matmuls and convolutions far below
the CPU's rate, and its f32 convolutions run at a fraction of it (benchmarks/NOTES.md). kiln's is
one implicit-GEMM kernel (NHWC convolutions, matmuls as their 1x1 case) with both bf16 paths over one
packed weight layout and an f32 path over its own: kiln_gemm.h (the geometry and layout the paths
share), kiln_gemm_amx.c, kiln_gemm_avx512bf16.c, kiln_gemm_bf16.c (the bf16 workgroup function,
which picks one of the two) and kiln_gemm_avx512f.c (the f32 path). kiln_rows.c has the row kernels:
the softmax IREE's three passes are replaced by (attention's among them) and the layer norm.

Just before iree-compile, the backend stage (provider.py) rewrites the linalg hand-off (rewrite.py:
one walk of the module, then a module per kernel family): gemm.py routes each contraction of the
model's element type the kernel takes to a dispatch of it (mlir.py), with its weight packed once at
load time; pooling.py moves the poolings between its convolutions to NHWC; softmax.py and
layer_norm.py route softmaxes and layer norms to the row kernels, row_program.py writing a layer
norm together with the elementwise op producing its input as one dispatch of kiln's vector code;
handoff.py has what they share. The rest stays with IREE. features.py says which path a target CPU
has, build.py builds the kernels' objects with the host's C compiler at first use and caches them,
geometry.py tiles each call.
"""
