// Checks the GEMM kernel's workgroup functions (kiln_gemm_*.c, linked together) against a
// double-precision reference, outside IREE: every workgroup of a few tilings, on small and edge
// shapes (tails of rows and channels, strides, 7x7 maps, batched right-hand sides, padded rows, row
// windows over 3 channels).
//
//   check_kernel amx|avx512|f32  the AMX path (build with -DKILN_AMX_EMULATE on a CPU without AMX),
//                                the AVX512-BF16 one, or the f32 one (AVX-512F); prints a line per
//                                case, exits 1 on a mismatch
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint16_t bf16_t;

int kiln_conv_bf16_workgroup(const bf16_t* x, size_t x_off, const bf16_t* p, size_t p_off, float* y, size_t y_off,
                             size_t nb, size_t hp, size_t wp, size_t cin, size_t oh, size_t ow, size_t cout, size_t kh,
                             size_t kw, size_t stride, size_t rows, size_t nbw, size_t kc, size_t p_bstride, size_t xs,
                             size_t wx, size_t wy, const uint64_t* processor_data);
int kiln_conv_f32_workgroup(const float* x, size_t x_off, const float* p, size_t p_off, float* y, size_t y_off,
                            size_t nb, size_t hp, size_t wp, size_t cin, size_t oh, size_t ow, size_t cout, size_t kh,
                            size_t kw, size_t stride, size_t rows, size_t nbw, size_t kc, size_t p_bstride, size_t xs,
                            size_t wx, size_t wy, const uint64_t* processor_data);

typedef struct {
  const char* name;
  size_t nb, h, w, cin, cout, k, stride, pad;  // a conv; a matmul is h = 1, k = 1, pad = 0: M = nb * w
  int batched;  // every image has its own weights (attention)
  size_t xs;    // the input's pixel stride in elements; 0: cin
} shape_t;

static const shape_t SHAPES[] = {
    {"mm 64x64x64", 1, 1, 64, 64, 64, 1, 1, 0},
    {"mm 40x96x48 (tails)", 1, 1, 40, 96, 48, 1, 1, 0},
    {"mm 17x32x20", 1, 1, 17, 32, 20, 1, 1, 0},
    {"conv 3x3 s1 12x12x64->64 b2", 2, 12, 12, 64, 64, 3, 1, 1},
    {"conv 3x3 s2 14x14x64->48", 1, 14, 14, 64, 48, 3, 2, 1},
    {"conv 3x3 s1 7x7x64->40 b3", 3, 7, 7, 64, 40, 3, 1, 1},
    {"conv 1x1 s2 10x10x32->48", 1, 10, 10, 32, 48, 1, 2, 0},
    {"bmm 3x(40x64 * 64x24) batched", 3, 1, 40, 64, 24, 1, 1, 0, 1},
    {"mm 40x64x48 padded rows (xs 96)", 1, 1, 40, 64, 48, 1, 1, 0, 0, 96},
    {"row window 7x7 s2 20x20x3->32", 1, 20, 20, 3, 32, 7, 2, 3},
    {"row window 3x3 s1 9x9x3->16 b2", 2, 9, 9, 3, 16, 3, 1, 1},
    {"row window 3x3 s1 6x6x48->20", 1, 6, 6, 48, 20, 3, 1, 1},
};

typedef struct {
  size_t rows, nbw, kc;
} tiles_t;

static const tiles_t TILINGS[] = {{1, 32, 1000000}, {2, 64, 3}, {5, 16, 1}, {3, 48, 7}};

static float to_f32(bf16_t v) {
  uint32_t bits = (uint32_t)v << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static bf16_t to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  return (bf16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

static uint64_t state = 88172645463325252ull;
static float uniform(void) {  // [-1, 1)
  state ^= state << 13, state ^= state >> 7, state ^= state << 17;
  return (float)((state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static int check(const shape_t* s, tiles_t t, int amx, int f32) {
  const size_t hp = s->h + 2 * s->pad, wp = s->w + 2 * s->pad, cin = s->cin;
  const size_t oh = (hp - s->k) / s->stride + 1, ow = (wp - s->k) / s->stride + 1;
  const int window = cin % 32 != 0;  // walked as kw = 1 over kw * cin values rounded up to 32
  const size_t kcin = window ? (s->k * cin + 31) / 32 * 32 : cin, kkw = window ? 1 : s->k;
  const size_t xs = window ? cin : (s->xs ? s->xs : cin), rows_alloc = hp + (window ? 1 : 0);
  const size_t ksteps = s->k * kkw * kcin / 32, n16 = (s->cout + 15) / 16, images = s->batched ? s->nb : 1;
  // Input: NHWC, zero border, NaN in the padding past cin of padded rows (never read), one zero row
  // past the end for a row window.
  size_t xn = s->nb * rows_alloc * wp * xs;
  bf16_t* x = malloc((xn + 64) * 2);
  for (size_t i = xn; i < xn + 64; ++i) x[i] = 0x7fc0;  // NaN past the end: a read there shows
  for (size_t n = 0; n < s->nb; ++n)
    for (size_t h = 0; h < rows_alloc; ++h)
      for (size_t w = 0; w < wp; ++w)
        for (size_t c = 0; c < xs; ++c) {
          int inside = h >= s->pad && h < hp - s->pad && w >= s->pad && w < wp - s->pad;
          x[((n * rows_alloc + h) * wp + w) * xs + c] = c >= cin ? 0x7fc0 : inside ? to_bf16(uniform()) : 0;
        }
  size_t kreal = s->k * s->k * cin;  // W[img][co][kh][kw][ci]
  bf16_t* wt = malloc(images * s->cout * kreal * 2);
  for (size_t i = 0; i < images * s->cout * kreal; ++i) wt[i] = to_bf16(uniform() * 0.1f);
  size_t per = n16 * ksteps * 512;
  bf16_t* p = calloc(images * per, 2);
  for (size_t img = 0; img < images; ++img)
    for (size_t co = 0; co < s->cout; ++co)
      for (size_t k = 0; k < ksteps * 32; ++k) {
        size_t khi = k / (kkw * kcin), rest = k % (kkw * kcin), kwi, ci;
        if (window) {
          if (rest >= s->k * cin) continue;  // zero past the window
          kwi = rest / cin, ci = rest % cin;
        } else {
          kwi = rest / cin, ci = rest % cin;
        }
        bf16_t v = wt[((img * s->cout + co) * s->k * s->k + khi * s->k + kwi) * cin + ci];
        size_t tstep = k / 32, r = (k % 32) / 2, q = k % 2;
        p[img * per + (((co / 16) * ksteps + tstep) * 16 + r) * 32 + (co % 16) * 2 + q] = v;
      }
  // The f32 path: the same values (all bf16-exact) as f32, weights in its layout P[n16][t][r][j].
  float* xf = malloc((xn + 64) * 4);
  float* pf = calloc(images * per, 4);
  for (size_t i = 0; i < xn + 64; ++i) xf[i] = to_f32(x[i]);
  for (size_t img = 0; img < images; ++img)
    for (size_t i = 0; i < per; ++i) {
      size_t q = i % 2, co = (i / 2) % 16, r = (i / 32) % 16, tn = i / 512;  // tn = n16 * ksteps + t
      pf[img * per + tn * 512 + (2 * r + q) * 16 + co] = to_f32(p[img * per + i]);
    }
  size_t yn = s->nb * oh * ow * s->cout;
  float* y = malloc(yn * 4);
  for (size_t i = 0; i < yn; ++i) y[i] = NAN;  // every output must be written
  size_t rows = oh == 1 && s->nb == 1 ? 1 : t.rows;
  size_t gx = (s->cout + t.nbw - 1) / t.nbw, gy = (s->nb * oh + rows - 1) / rows;
  uint64_t features[2] = {amx ? (1ull << 50) | (1ull << 52) : 0, 0};
  for (size_t wy = 0; wy < gy; ++wy)
    for (size_t wx = 0; wx < gx; ++wx)
      if (f32)
        kiln_conv_f32_workgroup(xf, 0, pf, 0, y, 0, s->nb, rows_alloc, wp, kcin, oh, ow, s->cout, s->k, kkw, s->stride,
                                rows, t.nbw, t.kc, s->batched ? per : 0, xs, wx, wy, features);
      else
        kiln_conv_bf16_workgroup(x, 0, p, 0, y, 0, s->nb, rows_alloc, wp, kcin, oh, ow, s->cout, s->k, kkw, s->stride,
                                 rows, t.nbw, t.kc, s->batched ? per : 0, xs, wx, wy, features);
  double worst = 0;
  for (size_t i = 0; i < yn; ++i) {
    size_t co = i % s->cout, pix = i / s->cout, wo = pix % ow, r = pix / ow, ho = r % oh, n = r / oh;
    double ref = 0, mag = 0;
    for (size_t a = 0; a < s->k; ++a)
      for (size_t b = 0; b < s->k; ++b)
        for (size_t c = 0; c < cin; ++c) {
          double u = to_f32(x[((n * rows_alloc + ho * s->stride + a) * wp + wo * s->stride + b) * xs + c]);
          double v = to_f32(wt[(((s->batched ? n : 0) * s->cout + co) * s->k * s->k + a * s->k + b) * cin + c]);
          ref += u * v, mag += fabs(u * v);
        }
    double err = fabs(y[i] - ref) / (mag + 1e-30);
    if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
  }
  free(x), free(wt), free(p), free(y), free(xf), free(pf);
  int ok = worst < 1e-5;
  printf("%-34s rows %zu nbw %2zu kc %7zu: max rel err %.2e %s\n", s->name, rows, t.nbw, t.kc, worst, ok ? "ok" : "FAIL");
  return ok;
}

int main(int argc, char** argv) {
  int amx = argc > 1 && !strcmp(argv[1], "amx"), f32 = argc > 1 && !strcmp(argv[1], "f32"), failed = 0;
  for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; ++i)
    for (size_t t = 0; t < sizeof TILINGS / sizeof *TILINGS; ++t) failed += !check(&SHAPES[i], TILINGS[t], amx, f32);
  printf("%s\n", failed ? "FAILED" : "all passed");
  return failed != 0;
}
