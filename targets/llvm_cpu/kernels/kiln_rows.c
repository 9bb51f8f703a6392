// Row kernels over f32 for x86-64 AVX-512F, each row read from memory once and kept in L1:
//
// - softmax: y[r][:] = exp(s - max(s)) / sum(exp(s - max(s))), with s = x[r][:] + b[r % bias_rows][:]
//   (an additive mask shared by the leading dimensions, such as attention's causal mask over
//   [queries, keys]) or s = x[r][:] where bias_rows is 0. IREE 3.13 computes attention's softmax
//   over [batch, heads, 1024, 1024] in three passes over the scores, reducing each 16-wide vector
//   horizontally (a GPT-2 block's largest IREE dispatch on the 16-core host). "Safe", a fully masked
//   row gives zeros, as PyTorch's attention does (IREE's pass over the scores that finds such rows
//   then goes). Stored as f32, or rounded to bf16 where a bf16 model's attention rounds it anyway
//   before its second matmul (half the bytes written, and no pass of IREE's to round them).
// - moments: a layer norm's mean[r] = sum(x[r]) / n and rstd[r] = 1 / sqrt(sum((x[r] - mean)^2) / n
//   + eps). IREE fuses the normalized value's producer into each of its reductions and computes it
//   again in every pass (a GELU's erf three times); here the producer is computed once, by IREE,
//   and the two passes over a row run in L1.
// - layer norm: the moments, then y[r][c] = (x[r][c] - mean) * rstd * w[c] + b[c] (w and b each
//   optional) in a third pass over the row still in L1, stored as f32 or rounded to bf16 (to
//   nearest even, as arith.truncf): one dispatch and one read of x from memory, where the moments
//   and IREE's normalization take two of each.
//
// exp: 2^(x log2 e) split into 2^n (VSCALEFPS) times 2^f, |f| <= 1/2, by its degree-6 Taylor
// polynomial (relative error under 2e-7). Below 2^-151 it is 0, so masked (-inf) entries give
// exactly 0; NaN stays NaN. Division as IREE's divf (not a reciprocal), so rows agree to rounding.
//
// Freestanding, like the GEMM kernel (kiln_gemm.h): linked into IREE's embedded ELF (no libc, no globals).

#include <stddef.h>
#include <stdint.h>
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f")))

TARGET static inline __m512 exp_ps(__m512 x) {
  __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  t = _mm512_max_ps(_mm512_set1_ps(-151.0f), t);  // NaN in t is returned as is (second operand)
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_mul_ps(_mm512_sub_ps(t, n), _mm512_set1_ps(0.693147180559945309f));  // f ln 2
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

TARGET static inline __mmask16 lanes(size_t left) {
  return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
}

// The row's scores, 16 at a time (bias added); masked-off lanes read -inf.
TARGET static inline __m512 scores(const float* x, const float* b, size_t c, __mmask16 k) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 s = _mm512_mask_loadu_ps(minus_inf, k, x + c);
  return b ? _mm512_maskz_add_ps(k, s, _mm512_maskz_loadu_ps(k, b + c)) : s;
}

// The row's exponentials exp(s - max) into e (y's f32 row, or a scratch row where y is bf16);
// returns their sum, or 0 for a safe row whose scores are all -inf (e then holds zeros).
TARGET static float softmax_exps(const float* x, const float* b, float* e, size_t cols, int safe) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 top = minus_inf;
  __mmask16 unmasked = 0;  // lanes that saw a score other than -inf (NaN included)
  for (size_t c = 0; c < cols; c += 16) {
    const __mmask16 k = lanes(cols - c);
    const __m512 s = scores(x, b, c, k);
    top = _mm512_mask_max_ps(top, k, top, s);
    unmasked |= _mm512_mask_cmp_ps_mask(k, s, minus_inf, _CMP_NEQ_UQ);
  }
  if (safe && !unmasked) {  // every score -inf: zeros, as PyTorch's safe softmax (attention) gives
    for (size_t c = 0; c < cols; c += 16) _mm512_mask_storeu_ps(e + c, lanes(cols - c), _mm512_setzero_ps());
    return 0.0f;
  }
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(top));
  __m512 sum = _mm512_setzero_ps();
  for (size_t c = 0; c < cols; c += 16) {
    const __mmask16 k = lanes(cols - c);
    const __m512 v = exp_ps(_mm512_sub_ps(scores(x, b, c, k), m));
    _mm512_mask_storeu_ps(e + c, k, v);
    sum = _mm512_mask_add_ps(sum, k, sum, v);
  }
  return _mm512_reduce_add_ps(sum);
}

TARGET static void softmax_row(const float* x, const float* b, float* y, size_t cols, int safe) {
  const float total = softmax_exps(x, b, y, cols, safe);
  if (total == 0.0f) return;
  const __m512 t = _mm512_set1_ps(total);
  for (size_t c = 0; c < cols; c += 16) {
    const __mmask16 k = lanes(cols - c);
    _mm512_mask_storeu_ps(y + c, k, _mm512_div_ps(_mm512_maskz_loadu_ps(k, y + c), t));
  }
}

TARGET static void moments_row(const float* x, size_t cols, float eps, float* mean, float* rstd) {
  __m512 sum = _mm512_setzero_ps();
  for (size_t c = 0; c < cols; c += 16) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(lanes(cols - c), x + c));
  const float m = _mm512_reduce_add_ps(sum) / (float)cols;
  const __m512 mv = _mm512_set1_ps(m);
  __m512 squares = _mm512_setzero_ps();
  for (size_t c = 0; c < cols; c += 16) {
    const __mmask16 k = lanes(cols - c);
    const __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + c), mv);
    squares = _mm512_fmadd_ps(d, d, squares);
  }
  const float variance = _mm512_reduce_add_ps(squares) / (float)cols + eps;
  *mean = m;
  *rstd = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(variance)));
}

// Flags of the layer norm: which of the affine parameters there are.
#define LN_WEIGHT 1u
#define LN_BIAS 2u

// The normalized row, 16 values from column c: (x - mean) * rstd, then * w, then + b, each rounded
// to f32 in that order (IREE's generic computes the same ops one by one).
TARGET static inline __m512 normalized(const float* x, const float* w, const float* b, size_t c, __mmask16 k,
                                       __m512 mean, __m512 rstd, unsigned flags) {
  __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + c), mean), rstd);
  if (flags & LN_WEIGHT) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, w + c));
  if (flags & LN_BIAS) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, b + c));
  return v;
}

// 16 floats rounded to bf16, to nearest even; NaN stays a (quiet) NaN. AVX-512F only: integer
// rounding on the bits, then VPMOVDW.
TARGET static inline __m256i to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  rounded = _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(rounded);
}

// 16 values rounded to bf16 and stored at y16 + c, the row's tail (cols - c < 16) included.
TARGET static inline void store_bf16(uint16_t* y16, size_t c, size_t cols, __m512 v) {
  if (cols - c >= 16) {
    _mm256_storeu_si256((__m256i*)(y16 + c), to_bf16(v));
  } else {  // VPMOVDW's masked store needs AVX512BW
    uint16_t tail[16];
    _mm256_storeu_si256((__m256i*)tail, to_bf16(v));
    for (size_t i = 0; c + i < cols; ++i) y16[c + i] = tail[i];
  }
}

TARGET static void layer_norm_row(const float* x, const float* w, const float* b, float* y32, uint16_t* y16,
                                  size_t cols, float eps, unsigned flags) {
  float m, r;
  moments_row(x, cols, eps, &m, &r);
  const __m512 mean = _mm512_set1_ps(m), rstd = _mm512_set1_ps(r);
  for (size_t c = 0; c < cols; c += 16) {
    const __mmask16 k = lanes(cols - c);
    const __m512 v = normalized(x, w, b, c, k, mean, rstd, flags);
    if (y32)
      _mm512_mask_storeu_ps(y32 + c, k, v);
    else
      store_bf16(y16, c, cols, v);
  }
}

// The softmax rounded to bf16 (as arith.truncf rounds), its exponentials in `scratch` (cols floats).
TARGET static void softmax_row_bf16(const float* x, const float* b, uint16_t* y, float* scratch, size_t cols, int safe) {
  const float total = softmax_exps(x, b, scratch, cols, safe);
  const __m512 t = _mm512_set1_ps(total == 0.0f ? 1.0f : total);  // a safe row's zeros stay zeros
  for (size_t c = 0; c < cols; c += 16)
    store_bf16(y, c, cols, _mm512_div_ps(_mm512_maskz_loadu_ps(lanes(cols - c), scratch + c), t));
}

// The softmax of rows [wx * per_workgroup, +per_workgroup), into y32 (f32) or y16 (bf16, the
// exponentials through `scratch`, a row of cols floats).
static int softmax_rows(const float* x, const float* b, float* y32, uint16_t* y16, float* scratch, size_t rows,
                        size_t cols, size_t bias_rows, size_t safe, size_t per_workgroup, size_t wx) {
  const size_t begin = wx * per_workgroup;
  const size_t end = begin + per_workgroup < rows ? begin + per_workgroup : rows;
  for (size_t r = begin; r < end; ++r) {
    const float* bias = bias_rows ? b + (r % bias_rows) * cols : NULL;
    if (y32)
      softmax_row(x + r * cols, bias, y32 + r * cols, cols, safe != 0);
    else
      softmax_row_bf16(x + r * cols, bias, y16 + r * cols, scratch, cols, safe != 0);
  }
  return 0;
}

// The IREE workgroup functions: bareptr memrefs (base + element offset), then scalars; workgroup wx
// takes rows [wx * per_workgroup, +per_workgroup). They return 0 (see kiln_gemm_bf16.c).
// safe: a row whose scores are all -inf (fully masked) gives zeros instead of NaN.
int kiln_softmax_f32_workgroup(const float* restrict x, size_t x_off, const float* restrict b, size_t b_off,
                               float* restrict y, size_t y_off, size_t rows, size_t cols, size_t bias_rows,
                               size_t safe, size_t per_workgroup, size_t wx, const uint64_t* processor_data) {
  (void)processor_data;
  return softmax_rows(x + x_off, b + b_off, y + y_off, NULL, NULL, rows, cols, bias_rows, safe, per_workgroup, wx);
}

// Rows of at most SOFTMAX_BF16_MAX_COLS (the rewrite's bound, mlir.py): the scratch row is on the stack.
#define SOFTMAX_BF16_MAX_COLS 8192
int kiln_softmax_bf16_workgroup(const float* restrict x, size_t x_off, const float* restrict b, size_t b_off,
                                uint16_t* restrict y, size_t y_off, size_t rows, size_t cols, size_t bias_rows,
                                size_t safe, size_t per_workgroup, size_t wx, const uint64_t* processor_data) {
  (void)processor_data;
  float scratch[SOFTMAX_BF16_MAX_COLS];
  if (cols > SOFTMAX_BF16_MAX_COLS) return 1;
  return softmax_rows(x + x_off, b + b_off, NULL, y + y_off, scratch, rows, cols, bias_rows, safe, per_workgroup, wx);
}

// eps is passed as the bits of an f32 (every scalar argument is an index).
int kiln_moments_f32_workgroup(const float* restrict x, size_t x_off, float* restrict mean, size_t mean_off,
                               float* restrict rstd, size_t rstd_off, size_t rows, size_t cols, size_t eps_bits,
                               size_t per_workgroup, size_t wx, const uint64_t* processor_data) {
  (void)processor_data;
  union { uint32_t bits; float value; } eps = {(uint32_t)eps_bits};
  const size_t begin = wx * per_workgroup;
  const size_t end = begin + per_workgroup < rows ? begin + per_workgroup : rows;
  for (size_t r = begin; r < end; ++r)
    moments_row(x + x_off + r * cols, cols, eps.value, mean + mean_off + r, rstd + rstd_off + r);
  return 0;
}

// The layer norm, its result in f32 or in bf16 (y16); w and b hold cols values where flags name them,
// one unused value otherwise.
static int layer_norm_rows(const float* x, const float* w, const float* b, float* y32, uint16_t* y16, size_t rows,
                           size_t cols, size_t eps_bits, size_t flags, size_t per_workgroup, size_t wx) {
  union { uint32_t bits; float value; } eps = {(uint32_t)eps_bits};
  const size_t begin = wx * per_workgroup;
  const size_t end = begin + per_workgroup < rows ? begin + per_workgroup : rows;
  for (size_t r = begin; r < end; ++r)
    layer_norm_row(x + r * cols, w, b, y32 ? y32 + r * cols : NULL, y16 ? y16 + r * cols : NULL, cols, eps.value,
                   (unsigned)flags);
  return 0;
}

int kiln_layer_norm_f32_workgroup(const float* restrict x, size_t x_off, const float* restrict w, size_t w_off,
                                  const float* restrict b, size_t b_off, float* restrict y, size_t y_off, size_t rows,
                                  size_t cols, size_t eps_bits, size_t flags, size_t per_workgroup, size_t wx,
                                  const uint64_t* processor_data) {
  (void)processor_data;
  return layer_norm_rows(x + x_off, w + w_off, b + b_off, y + y_off, NULL, rows, cols, eps_bits, flags, per_workgroup, wx);
}

int kiln_layer_norm_bf16_workgroup(const float* restrict x, size_t x_off, const float* restrict w, size_t w_off,
                                   const float* restrict b, size_t b_off, uint16_t* restrict y, size_t y_off,
                                   size_t rows, size_t cols, size_t eps_bits, size_t flags, size_t per_workgroup,
                                   size_t wx, const uint64_t* processor_data) {
  (void)processor_data;
  return layer_norm_rows(x + x_off, w + w_off, b + b_off, NULL, y + y_off, rows, cols, eps_bits, flags, per_workgroup, wx);
}
