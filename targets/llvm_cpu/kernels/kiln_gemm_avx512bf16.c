// kiln's implicit-GEMM kernel, AVX512-BF16 path (bf16): the AMX path's packed weights
// (kiln_gemm.h), VDPBF16PS on one 16-column row of a tile; for CPUs without AMX.

#include "kiln_gemm.h"

__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))
static void avx512_rows(const conv_geom_t* g, const bf16_t* const* a, float* const* c, int m,
                        const bf16_t* p0, const bf16_t* p1, int nc0, int nc1, size_t t0, size_t t1,
                        int first) {
  __m512 acc[8][2];
  const __mmask16 k0 = (__mmask16)((1u << nc0) - 1), k1 = (__mmask16)((1u << nc1) - 1);
  for (int i = 0; i < m; ++i) {
    acc[i][0] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(k0, c[i]);
    acc[i][1] = first || !nc1 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(k1, c[i] + 16);
  }
  kwalk_t w;
  kwalk_start(&w, g, t0);
  for (size_t t = t0; t < t1; ++t) {
    const bf16_t* b0 = p0 + t * 512;
    const bf16_t* b1 = p1 + t * 512;
    for (int r = 0; r < 16; ++r) {
      __m512bh v0 = (__m512bh)_mm512_loadu_si512(b0 + r * 32);
      __m512bh v1 = nc1 ? (__m512bh)_mm512_loadu_si512(b1 + r * 32) : (__m512bh)_mm512_setzero_si512();
      for (int i = 0; i < m; ++i) {
        uint32_t pair;  // two bf16 values, not 4-byte aligned in a row window
        __builtin_memcpy(&pair, a[i] + w.off + 2 * r, sizeof pair);
        __m512bh av = (__m512bh)_mm512_set1_epi32((int)pair);
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, v0);
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, v1);
      }
    }
    kwalk_next(&w);
  }
  for (int i = 0; i < m; ++i) {
    _mm512_mask_storeu_ps(c[i], k0, acc[i][0]);
    if (nc1) _mm512_mask_storeu_ps(c[i] + 16, k1, acc[i][1]);
  }
}

__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))
void kiln_gemm_avx512bf16_workgroup(const conv_geom_t* g, const bf16_t* x, const bf16_t* p, float* y,
                                    size_t wx, size_t wy) {
  const bounds_t b = workgroup_bounds(g, wx, wy);
  const size_t ksteps = b.ksteps, n_begin = b.n_begin, n_end = b.n_end, r_begin = b.r_begin, r_end = b.r_end;
  for (size_t t0 = 0; t0 < ksteps; t0 += g->kc) {
    size_t t1 = t0 + g->kc < ksteps ? t0 + g->kc : ksteps;
    for (size_t n = n_begin; n < n_end; n += 32) {
      const int nc0 = channels_in_block(n, n_end, 0), nc1 = channels_in_block(n, n_end, 1);
      const bf16_t* p0 = p + (n / 16) * ksteps * 512;
      const bf16_t* p1 = p0 + ksteps * 512;
      for (size_t r = r_begin; r < r_end; ++r) {
        const bf16_t* q0 = p0 + (g->p_bstride ? (r / g->oh) * g->p_bstride : 0);
        const bf16_t* q1 = p1 + (g->p_bstride ? (r / g->oh) * g->p_bstride : 0);
        for (size_t w0 = 0; w0 < g->ow; w0 += 8) {
          int m = g->ow - w0 >= 8 ? 8 : (int)(g->ow - w0);
          const bf16_t* a[8];
          float* c[8];
          for (int i = 0; i < m; ++i) {
            a[i] = a_pixel(g, x, r, w0 + i);
            c[i] = c_pixel(g, y, r, w0 + i) + n;
          }
          avx512_rows(g, a, c, m, q0, q1, nc0, nc1, t0, t1, t0 == 0);
        }
      }
    }
  }
}
