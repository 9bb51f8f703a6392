// kiln's implicit-GEMM kernel, AMX path (bf16): TDPBF16PS on tiles loaded straight from the NHWC
// input and the packed weights (kiln_gemm.h: the geometry, the layout, the workgroups).
//
// A tile is 16 output pixels of one output row: consecutive pixels are `stride * cin`
// elements apart in X, so AMX loads them straight from the NHWC input (no im2col copy).
// The C block is 2 x 2 tiles (32 pixels x 32 channels): four accumulators, two A and two B
// tiles, 4 TDPBF16PS per 4 tile loads. Partial tiles (row tails, cout tails) get their own
// tile configuration.

#include "kiln_gemm.h"
#ifdef KILN_AMX_EMULATE
#include "amx_emulate.h"
#endif

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

__attribute__((target("amx-tile,amx-bf16")))
void kiln_gemm_amx_workgroup(const conv_geom_t* g, const bf16_t* x, const bf16_t* p, float* y,
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
