// kiln's implicit-GEMM kernel: what its three paths share. bf16 x bf16 -> f32 convolutions (and
// matmuls, their 1x1 case) on AMX tiles (kiln_gemm_amx.c) or with AVX512-BF16 (kiln_gemm_avx512bf16.c),
// the one kiln_gemm_bf16.c picks per call, and the same for f32 x f32 -> f32 with AVX-512 FMAs
// (kiln_gemm_avx512f.c); one call computes one IREE workgroup's block of the output.
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
// nb = 1, oh = 1, ow = M, cin = K, kh = kw = stride = 1. (The f32 path's layout: kiln_gemm_avx512f.c.)
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
//
// Everything here is static inline: each path's object gets its own copy, inlined where it is used.

#pragma once
#include <stddef.h>
#include <stdint.h>
#include <immintrin.h>

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

// The two bf16 paths over the packed weights, one workgroup each; kiln_gemm_bf16.c calls one. Hidden
// where they are declared, so that the call is a direct one (-fvisibility=hidden applies only to
// definitions: with -fno-plt a call to a default-visibility declaration goes through the GOT).
#define KILN_HIDDEN __attribute__((visibility("hidden")))
KILN_HIDDEN void kiln_gemm_amx_workgroup(const conv_geom_t* g, const bf16_t* x, const bf16_t* p, float* y, size_t wx,
                                         size_t wy);
KILN_HIDDEN void kiln_gemm_avx512bf16_workgroup(const conv_geom_t* g, const bf16_t* x, const bf16_t* p, float* y,
                                                size_t wx, size_t wy);
