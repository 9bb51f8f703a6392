// kiln's implicit-GEMM kernel, f32 path (AVX-512F): f32 x f32 -> f32 with AVX-512 FMAs, the
// geometry and K walk of the bf16 paths (kiln_gemm.h) over an f32 input, and the f32 workgroup
// function IREE calls. Weights packed as
//   P[n16][t][r][j] = W[co = 16*n16 + j][k = 32*t + r],  32 x 16 f32 = 2 KiB a K step,
// the same 512 elements a step as the bf16 layout. A block is F32_M pixels x 32 channels: 2*F32_M
// accumulators, each K value one broadcast of the pixel's input times two 16-channel weight rows.
// Channel tails are zero in P and masked at the loads and stores of C. F32_M = 10 ran best on the
// 16-core Xeon (1.2-1.5 TFLOP/s on GPT-2's matmuls and ResNet-18's 3x3 convolutions; 6 and 14
// within 10%), 4-6x IREE's f32 convolutions and 1.4x its data-tiled matmuls there.

#include "kiln_gemm.h"

#define F32_M 10

#define F32_ROWS(M)                                                                                         \
  __attribute__((target("avx512f"))) static void f32_rows_##M(                                              \
      const conv_geom_t* g, const float* const* a, float* const* c, const float* p0, const float* p1,        \
      __mmask16 k0, __mmask16 k1, size_t t0, size_t t1, int first) {                                         \
    __m512 acc0[M], acc1[M];                                                                                 \
    for (int i = 0; i < M; ++i) {                                                                            \
      acc0[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(k0, c[i]);                               \
      acc1[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(k1, c[i] + 16);                          \
    }                                                                                                        \
    kwalk_t w;                                                                                               \
    kwalk_start(&w, g, t0);                                                                                  \
    for (size_t t = t0; t < t1; ++t) {                                                                       \
      const float* b0 = p0 + t * 512;                                                                        \
      const float* b1 = p1 + t * 512;                                                                        \
      for (int r = 0; r < 32; ++r) {                                                                         \
        __m512 v0 = _mm512_loadu_ps(b0 + r * 16), v1 = _mm512_loadu_ps(b1 + r * 16);                         \
        for (int i = 0; i < M; ++i) {                                                                        \
          __m512 av = _mm512_set1_ps(a[i][w.off + r]);                                                       \
          acc0[i] = _mm512_fmadd_ps(av, v0, acc0[i]);                                                        \
          acc1[i] = _mm512_fmadd_ps(av, v1, acc1[i]);                                                        \
        }                                                                                                    \
      }                                                                                                      \
      kwalk_next(&w);                                                                                        \
    }                                                                                                        \
    for (int i = 0; i < M; ++i) {                                                                            \
      _mm512_mask_storeu_ps(c[i], k0, acc0[i]);                                                              \
      _mm512_mask_storeu_ps(c[i] + 16, k1, acc1[i]);                                                         \
    }                                                                                                        \
  }

F32_ROWS(1) F32_ROWS(2) F32_ROWS(3) F32_ROWS(4) F32_ROWS(5) F32_ROWS(6)
F32_ROWS(7) F32_ROWS(8) F32_ROWS(9) F32_ROWS(10)

// A switch, not a table of function pointers: the object has no data to relocate.
__attribute__((target("avx512f")))
static void f32_rows(int m, const conv_geom_t* g, const float* const* a, float* const* c, const float* p0,
                     const float* p1, __mmask16 k0, __mmask16 k1, size_t t0, size_t t1, int first) {
  switch (m) {
#define F32_CASE(M) case M: f32_rows_##M(g, a, c, p0, p1, k0, k1, t0, t1, first); break;
    F32_CASE(1) F32_CASE(2) F32_CASE(3) F32_CASE(4) F32_CASE(5) F32_CASE(6)
    F32_CASE(7) F32_CASE(8) F32_CASE(9) F32_CASE(10)
#undef F32_CASE
  }
}

__attribute__((target("avx512f")))
static void f32_workgroup(const conv_geom_t* g, const float* x, const float* p, float* y, size_t wx, size_t wy) {
  const bounds_t b = workgroup_bounds(g, wx, wy);
  const size_t ksteps = b.ksteps, n_begin = b.n_begin, n_end = b.n_end, r_begin = b.r_begin, r_end = b.r_end;
  for (size_t t0 = 0; t0 < ksteps; t0 += g->kc) {
    size_t t1 = t0 + g->kc < ksteps ? t0 + g->kc : ksteps;
    for (size_t n = n_begin; n < n_end; n += 32) {
      const int nc0 = channels_in_block(n, n_end, 0), nc1 = channels_in_block(n, n_end, 1);
      const __mmask16 k0 = (__mmask16)((1u << nc0) - 1), k1 = (__mmask16)((1u << nc1) - 1);
      const float* p0 = p + (n / 16) * ksteps * 512;
      const float* p1 = nc1 ? p0 + ksteps * 512 : p0;  // no second block: its (masked) sums are never stored
      for (size_t r = r_begin; r < r_end; ++r) {
        const size_t image = g->p_bstride ? (r / g->oh) * g->p_bstride : 0;
        for (size_t w0 = 0; w0 < g->ow; w0 += F32_M) {
          int m = g->ow - w0 >= F32_M ? F32_M : (int)(g->ow - w0);
          const float* a[F32_M];
          float* c[F32_M];
          for (int i = 0; i < m; ++i) {
            a[i] = x + x_index(g, r, w0 + i);
            c[i] = c_pixel(g, y, r, w0 + i) + n;
          }
          f32_rows(m, g, a, c, p0 + image, p1 + image, k0, k1, t0, t1, t0 == 0);
        }
      }
    }
  }
}

// The f32 workgroup function: the same arguments over f32 input and weights (processor_data unused:
// the path needs only AVX-512F, which the artifact's target CPU has).
int kiln_conv_f32_workgroup(const float* restrict x, size_t x_off, const float* restrict p, size_t p_off,
                            float* restrict y, size_t y_off, size_t nb, size_t hp, size_t wp, size_t cin,
                            size_t oh, size_t ow, size_t cout, size_t kh, size_t kw, size_t stride,
                            size_t rows, size_t nbw, size_t kc, size_t p_bstride, size_t xs, size_t wx,
                            size_t wy, const uint64_t* processor_data) {
  (void)processor_data;
  conv_geom_t g = {nb, hp, wp, cin, oh, ow, cout, kh, kw, stride, rows, nbw, kc, p_bstride, xs};
  f32_workgroup(&g, x + x_off, p + p_off, y + y_off, wx, wy);
  return 0;
}
