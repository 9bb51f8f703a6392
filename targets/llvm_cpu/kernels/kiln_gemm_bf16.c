// kiln's implicit-GEMM kernel, bf16: the workgroup function IREE calls, which runs the AMX path
// (kiln_gemm_amx.c) where the CPU has AMX and the AVX512-BF16 path (kiln_gemm_avx512bf16.c) elsewhere.

#include "kiln_gemm.h"

// `processor_data`: IREE's CPU feature words (iree/schemas/cpu_feature_bits.inl: x86-64 word 0,
// bit 50 amx-tile, bit 52 amx-bf16, bit 31 avx512bf16), or NULL to ask CPUID.

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
    kiln_gemm_amx_workgroup(&g, x + x_off, p + p_off, y + y_off, wx, wy);
  else
    kiln_gemm_avx512bf16_workgroup(&g, x + x_off, p + p_off, y + y_off, wx, wy);
  return 0;
}
