// bf16 x bf16 -> f32 implicit-GEMM convolution (and matmul, its 1x1 case) for x86-64 AMX,
// with an AVX512-BF16 fallback, and the same for f32 x f32 -> f32 with AVX-512 FMAs (at the
// end of this file); one call computes one IREE workgroup's block of the output.
//
// Freestanding: linked into IREE's embedded ELF (no libc, no globals, no syscalls, no TLS).
// The process must hold permission for AMX tile data (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA)) before the AMX path runs; the caller (kiln's runtime) requests it.
//
// Geometry. Input X: NHWC bf16, already padded: [nb][hp][wp][cin]. Output Y: NHWC f32
// [nb][oh][ow][cout], i.e. C[M = nb*oh*ow][N = cout], row-major. Weights: packed once (at
// load time, by IREE's hoisted initializers) into AMX's VNNI tile layout:
//   P[n16][t][r][j][p] = W[co = 16*n16 + j][k = 32*t + 2*r + p],  16 x 16 x 2 bf16 = 1 KiB a tile,
// with k running over (kh, kw, ci), ci fastest; cout padded to 16 with zeros. cin % 32 == 0,
// so each 32-wide K step lies in one (kh, kw). A matmul A[M][K] x B[K][N] is the case
// nb = 1, oh = 1, ow = M, cin = K, kh = kw = stride = 1.
//
// A tile is 16 output pixels of one output row: consecutive pixels are `stride * cin`
// elements apart in X, so AMX loads them straight from the NHWC input (no im2col copy).
// The C block is 2 x 2 tiles (32 pixels x 32 channels): four accumulators, two A and two B
// tiles, 4 TDPBF16PS per 4 tile loads. Partial tiles (row tails, cout tails) get their own
// tile configuration.
//
// `xs` is X's pixel stride. Usually xs >= cin: a matmul whose rows are a multiple of 4 KiB apart
// maps all 16 rows of an A tile to one L1 set, so kiln pads such rows by 32 elements (a free change
// of its producer's layout) and passes the padded stride here. A "row window" has xs < cin: a
// convolution with few input channels (a stem's 3) is walked with kw = 1 and cin = its kernel
// row's kw * cin values rounded up to 32, which lie contiguous in NHWC; the weights past the real
// window are zero, and kiln gives the input a zero row at the bottom so that no read leaves it.
//
// A batched matmul (attention: both operands are activations) gives every image its own packed
// right-hand side, `p_bstride` elements apart; convolutions and weight matmuls share one (0).
//
// Workgroup (x, y): output channels [x * nbw, +nbw), output rows [y * rows, +rows) of the
// flattened (n, oh) index. Within it the K steps are taken in chunks of `kc` steps (the
// B panel of a chunk stays in L1/L2 while all pixels of the workgroup pass over it); the
// accumulators go back to Y between chunks.

#include <stddef.h>
#include <stdint.h>
#include <immintrin.h>
#ifdef KILN_AMX_EMULATE
#include "amx_emulate.h"
#endif

typedef uint16_t bf16_t;

typedef struct {
  size_t nb, hp, wp, cin;     // padded input
  size_t oh, ow, cout;        // output
  size_t kh, kw, stride;      // window
  size_t rows, nbw, kc;       // workgroup: output rows, output channels, K steps a chunk
  size_t p_bstride;           // elements between the packed weights of consecutive images; 0: shared
  size_t xs;                  // elements between consecutive pixels of X (>= cin; > cin: padded rows)
} conv_geom_t;

// What workgroup (wx, y) computes: K steps, output channels [n_begin, n_end), output rows
// [r_begin, r_end) of the flattened (n, oh) index.
typedef struct {
  size_t ksteps, n_begin, n_end, r_begin, r_end;
} bounds_t;

static inline bounds_t workgroup_bounds(const conv_geom_t* g, size_t wx, size_t wy) {
  bounds_t b;
  b.ksteps = g->kh * g->kw * (g->cin / 32);
  b.n_begin = wx * g->nbw;
  b.n_end = b.n_begin + g->nbw < g->cout ? b.n_begin + g->nbw : g->cout;
  const size_t r_total = g->nb * g->oh;
  b.r_begin = wy * g->rows;
  b.r_end = b.r_begin + g->rows < r_total ? b.r_begin + g->rows : r_total;
  return b;
}

// Channels of 16-wide block `half` (0 or 1) of the 32 starting at n, below n_end.
static inline int channels_in_block(size_t n, size_t n_end, int half) {
  size_t start = n + 16 * half;
  return start >= n_end ? 0 : n_end - start >= 16 ? 16 : (int)(n_end - start);
}

// ---------------------------------------------------------------------------------------------
// AMX path

typedef struct {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} __attribute__((aligned(64))) tile_config_t;

// Tiles: 0..3 accumulators C[m][n] (0: m0n0, 1: m0n1, 2: m1n0, 3: m1n1), 4..5 A (m0, m1),
// 6..7 B (n0, n1). mr1 == 0 or nc1 == 0 leaves those tiles unconfigured (never touched).
__attribute__((target("amx-tile,amx-bf16")))
static void amx_configure(tile_config_t* cfg, int mr0, int mr1, int nc0, int nc1) {
  volatile uint64_t* words = (volatile uint64_t*)cfg;  // volatile: no memset call in freestanding code
  for (int i = 0; i < 8; ++i) words[i] = 0;
  cfg->palette_id = 1;
  cfg->rows[0] = mr0; cfg->colsb[0] = nc0 * 4;
  cfg->rows[4] = mr0; cfg->colsb[4] = 64;
  cfg->rows[6] = 16;  cfg->colsb[6] = nc0 * 4;
  if (nc1) {
    cfg->rows[1] = mr0; cfg->colsb[1] = nc1 * 4;
    cfg->rows[7] = 16;  cfg->colsb[7] = nc1 * 4;
  }
  if (mr1) {
    cfg->rows[2] = mr1; cfg->colsb[2] = nc0 * 4;
    cfg->rows[5] = mr1; cfg->colsb[5] = 64;
    if (nc1) { cfg->rows[3] = mr1; cfg->colsb[3] = nc1 * 4; }
  }
  _tile_loadconfig(cfg);
}

// Walks the K steps [t0, t1) of a chunk: the element offset of step t inside the receptive field.
typedef struct {
  size_t cc, kwi, off;  // ci chunk, kw index, current offset
  size_t csteps, kw, row_jump, xs;
} kwalk_t;

static inline void kwalk_start(kwalk_t* w, const conv_geom_t* g, size_t t) {
  w->csteps = g->cin / 32;
  w->kw = g->kw;
  w->xs = g->xs;
  size_t seg = t / w->csteps;
  w->cc = t - seg * w->csteps;
  size_t khi = seg / g->kw;
  w->kwi = seg - khi * g->kw;
  w->off = (khi * g->wp + w->kwi) * g->xs + w->cc * 32;
  w->row_jump = g->wp * g->xs - g->kw * g->xs;  // from past the last kw of one kh to the next kh
}

static inline void kwalk_next(kwalk_t* w) {
  w->off += 32;
  if (++w->cc == w->csteps) {
    w->cc = 0;
    w->off += w->xs - w->csteps * 32;  // from past this pixel's channels to the next pixel's
    if (++w->kwi == w->kw) {
      w->kwi = 0;
      w->off += w->row_jump;
    }
  }
}

#define A_STRIDE(g) ((g)->stride * (g)->xs * sizeof(bf16_t))
#define C_STRIDE(g) ((g)->cout * sizeof(float))

// One C block: pixels a0/c0 (mr0 rows) and a1/c1 (mr1 rows, may be 0), output channel
// 16-blocks n16 and n16 + 1 (nc1 may be 0), K steps [t0, t1). `first`: start from zero.
#define AMX_BLOCK_BODY(HAS_M1, HAS_N1)                                                      \
  do {                                                                                      \
    if (first) {                                                                            \
      _tile_zero(0);                                                                        \
      if (HAS_N1) _tile_zero(1);                                                            \
      if (HAS_M1) _tile_zero(2);                                                            \
      if (HAS_M1 && HAS_N1) _tile_zero(3);                                                  \
    } else {                                                                                \
      _tile_loadd(0, c0, cs);                                                               \
      if (HAS_N1) _tile_loadd(1, c0 + 16, cs);                                              \
      if (HAS_M1) _tile_loadd(2, c1, cs);                                                   \
      if (HAS_M1 && HAS_N1) _tile_loadd(3, c1 + 16, cs);                                    \
    }                                                                                       \
    kwalk_t w;                                                                              \
    kwalk_start(&w, g, t0);                                                                 \
    const bf16_t* b0 = p0 + t0 * 512;                                                       \
    const bf16_t* b1 = p1 + t0 * 512;                                                       \
    for (size_t t = t0; t < t1; ++t) {                                                      \
      _tile_loadd(4, a0 + w.off, as);                                                       \
      _tile_loadd(6, b0, 64);                                                               \
      if (HAS_M1) _tile_loadd(5, a1 + w.off, as);                                           \
      if (HAS_N1) _tile_loadd(7, b1, 64);                                                   \
      _tile_dpbf16ps(0, 4, 6);                                                              \
      if (HAS_N1) _tile_dpbf16ps(1, 4, 7);                                                  \
      if (HAS_M1) _tile_dpbf16ps(2, 5, 6);                                                  \
      if (HAS_M1 && HAS_N1) _tile_dpbf16ps(3, 5, 7);                                        \
      b0 += 512;                                                                            \
      b1 += 512;                                                                            \
      kwalk_next(&w);                                                                       \
    }                                                                                       \
    _tile_stored(0, c0, cs);                                                                \
    if (HAS_N1) _tile_stored(1, c0 + 16, cs);                                               \
    if (HAS_M1) _tile_stored(2, c1, cs);                                                    \
    if (HAS_M1 && HAS_N1) _tile_stored(3, c1 + 16, cs);                                     \
  } while (0)

__attribute__((target("amx-tile,amx-bf16")))
static void amx_block(const conv_geom_t* g, const bf16_t* a0, const bf16_t* a1,
                      const bf16_t* p0, const bf16_t* p1, float* c0, float* c1,
                      int has_m1, int has_n1, size_t t0, size_t t1, int first) {
  const size_t as = A_STRIDE(g), cs = C_STRIDE(g);
  if (has_m1 && has_n1) AMX_BLOCK_BODY(1, 1);
  else if (has_m1) AMX_BLOCK_BODY(1, 0);
  else if (has_n1) AMX_BLOCK_BODY(0, 1);
  else AMX_BLOCK_BODY(0, 0);
}

// The pixels of output row `r` (flattened n, oh): the input element where pixel `ow`'s receptive
// field starts, and A/C pointers for it.
static inline size_t x_index(const conv_geom_t* g, size_t r, size_t ow) {
  size_t n = r / g->oh, oh = r - n * g->oh;
  return ((n * g->hp + oh * g->stride) * g->wp + ow * g->stride) * g->xs;
}
static inline const bf16_t* a_pixel(const conv_geom_t* g, const bf16_t* x, size_t r, size_t ow) {
  return x + x_index(g, r, ow);
}
static inline float* c_pixel(const conv_geom_t* g, float* y, size_t r, size_t ow) {
  return y + (r * g->ow + ow) * g->cout;
}

__attribute__((target("amx-tile,amx-bf16")))
static void amx_workgroup(const conv_geom_t* g, const bf16_t* x, const bf16_t* p, float* y,
                          size_t wx, size_t wy) {
  const bounds_t b = workgroup_bounds(g, wx, wy);
  const size_t ksteps = b.ksteps, n_begin = b.n_begin, n_end = b.n_end, r_begin = b.r_begin, r_end = b.r_end;
  const size_t segs = (g->ow + 15) / 16;  // 16-pixel segments of an output row
  tile_config_t cfg;
  int current = -1;  // the configured shape, as mr0 | mr1 << 5 | nc0 << 10 | nc1 << 15
  for (size_t t0 = 0; t0 < ksteps; t0 += g->kc) {
    size_t t1 = t0 + g->kc < ksteps ? t0 + g->kc : ksteps;
    for (size_t n = n_begin; n < n_end; n += 32) {
      const int nc0 = channels_in_block(n, n_end, 0), nc1 = channels_in_block(n, n_end, 1);
      const bf16_t* p0 = p + (n / 16) * ksteps * 512;
      const bf16_t* p1 = p0 + ksteps * 512;
      // Pairs of segments; a pair may straddle two output rows (each segment has its own pointers),
      // but not two images with their own weights (then each segment goes alone).
      size_t total = (r_end - r_begin) * segs;
      for (size_t s = 0; s < total;) {
        size_t r0 = r_begin + s / segs, w0 = (s % segs) * 16;
        int mr0 = g->ow - w0 >= 16 ? 16 : (int)(g->ow - w0);
        int mr1 = 0;
        size_t r1 = 0, w1 = 0;
        if (s + 1 < total) {
          r1 = r_begin + (s + 1) / segs;
          w1 = ((s + 1) % segs) * 16;
          mr1 = g->ow - w1 >= 16 ? 16 : (int)(g->ow - w1);
          if (g->p_bstride && r1 / g->oh != r0 / g->oh) mr1 = 0;
        }
        s += mr1 ? 2 : 1;
        const bf16_t* q0 = p0 + (g->p_bstride ? (r0 / g->oh) * g->p_bstride : 0);
        const bf16_t* q1 = p1 + (g->p_bstride ? (r0 / g->oh) * g->p_bstride : 0);
        int shape = mr0 | mr1 << 5 | nc0 << 10 | nc1 << 15;
        if (shape != current) {
          amx_configure(&cfg, mr0, mr1, nc0, nc1);
          current = shape;
        }
        amx_block(g, a_pixel(g, x, r0, w0), mr1 ? a_pixel(g, x, r1, w1) : 0, q0, q1,
                  c_pixel(g, y, r0, w0) + n, mr1 ? c_pixel(g, y, r1, w1) + n : 0, mr1 != 0,
                  nc1 != 0, t0, t1, t0 == 0);
      }
    }
  }
  _tile_release();
}

// ---------------------------------------------------------------------------------------------
// AVX512-BF16 path: the same packed weights, VDPBF16PS on one 16-column row of a tile.

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
static void avx512_workgroup(const conv_geom_t* g, const bf16_t* x, const bf16_t* p, float* y,
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

// ---------------------------------------------------------------------------------------------
// f32 path (AVX-512F): the same geometry and K walk over an f32 input, weights packed as
//   P[n16][t][r][j] = W[co = 16*n16 + j][k = 32*t + r],  32 x 16 f32 = 2 KiB a K step,
// the same 512 elements a step as the bf16 layout. A block is F32_M pixels x 32 channels: 2*F32_M
// accumulators, each K value one broadcast of the pixel's input times two 16-channel weight rows.
// Channel tails are zero in P and masked at the loads and stores of C. F32_M = 10 ran best on the
// 16-core Xeon (1.2-1.5 TFLOP/s on GPT-2's matmuls and ResNet-18's 3x3 convolutions; 6 and 14
// within 10%), 4-6x IREE's f32 convolutions and 1.4x its data-tiled matmuls there.

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

// ---------------------------------------------------------------------------------------------
// Entry points. `processor_data`: IREE's CPU feature words (iree/schemas/cpu_feature_bits.inl:
// x86-64 word 0, bit 50 amx-tile, bit 52 amx-bf16, bit 31 avx512bf16), or NULL to ask CPUID.

#define KILN_CPU_AMX_TILE (1ull << 50)
#define KILN_CPU_AMX_BF16 (1ull << 52)

static int use_amx(const uint64_t* processor_data) {
  if (processor_data) {
    uint64_t need = KILN_CPU_AMX_TILE | KILN_CPU_AMX_BF16;
    return (processor_data[0] & need) == need;
  }
  uint32_t a, b, c, d;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  if (!((d >> 22) & 1) || !((d >> 24) & 1)) return 0;
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA enabled by the OS
}

// The IREE workgroup function: bareptr memrefs (base + element offset), then scalars. Returns 0
// (IREE 3.13 mis-lowers a void function imported with hal.import.fields, so it returns a value).
int kiln_conv_bf16_workgroup(const bf16_t* restrict x, size_t x_off, const bf16_t* restrict p,
                              size_t p_off, float* restrict y, size_t y_off, size_t nb, size_t hp,
                              size_t wp, size_t cin, size_t oh, size_t ow, size_t cout, size_t kh,
                              size_t kw, size_t stride, size_t rows, size_t nbw, size_t kc,
                              size_t p_bstride, size_t xs, size_t wx, size_t wy,
                              const uint64_t* processor_data) {
  conv_geom_t g = {nb, hp, wp, cin, oh, ow, cout, kh, kw, stride, rows, nbw, kc, p_bstride, xs};
  if (use_amx(processor_data))
    amx_workgroup(&g, x + x_off, p + p_off, y + y_off, wx, wy);
  else
    avx512_workgroup(&g, x + x_off, p + p_off, y + y_off, wx, wy);
  return 0;
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
