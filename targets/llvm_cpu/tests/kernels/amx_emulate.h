// A software model of the AMX tile intrinsics kiln_gemm_amx.c uses, for testing its indexing and
// tile configurations on a CPU without AMX (build with -DKILN_AMX_EMULATE; single-threaded use only).
// Faults like the hardware would (#UD) on an unconfigured tile or mismatched shapes: abort().
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

typedef struct {
  int configured;
  uint16_t colsb[8];
  uint8_t rows[8];
  uint8_t data[8][16][64];
} emu_amx_t;

static emu_amx_t emu_amx;

static void emu_fault(const char* why) {
  fprintf(stderr, "AMX emulation fault: %s\n", why);
  abort();
}

static void emu_loadconfig(const void* p) {
  const uint8_t* cfg = (const uint8_t*)p;
  if (cfg[0] != 1) emu_fault("palette");
  memset(&emu_amx, 0, sizeof emu_amx);
  emu_amx.configured = 1;
  for (int t = 0; t < 8; ++t) {
    emu_amx.colsb[t] = (uint16_t)(cfg[16 + 2 * t] | cfg[17 + 2 * t] << 8);
    emu_amx.rows[t] = cfg[48 + t];
    if (emu_amx.colsb[t] > 64 || emu_amx.rows[t] > 16) emu_fault("config out of range");
    if ((emu_amx.colsb[t] == 0) != (emu_amx.rows[t] == 0)) emu_fault("half-configured tile");
  }
}

static void emu_check(int t) {
  if (!emu_amx.configured || emu_amx.rows[t] == 0) emu_fault("unconfigured tile");
}

static void emu_loadd(int t, const void* base, long stride) {
  emu_check(t);
  memset(emu_amx.data[t], 0, sizeof emu_amx.data[t]);
  for (int r = 0; r < emu_amx.rows[t]; ++r)
    memcpy(emu_amx.data[t][r], (const uint8_t*)base + r * stride, emu_amx.colsb[t]);
}

static void emu_stored(int t, void* base, long stride) {
  emu_check(t);
  for (int r = 0; r < emu_amx.rows[t]; ++r)
    memcpy((uint8_t*)base + r * stride, emu_amx.data[t][r], emu_amx.colsb[t]);
}

static void emu_zero(int t) {
  emu_check(t);
  memset(emu_amx.data[t], 0, sizeof emu_amx.data[t]);
}

static float emu_bf16(const uint8_t* p) {
  uint32_t bits = (uint32_t)(p[0] | p[1] << 8) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static void emu_dpbf16ps(int c, int a, int b) {
  emu_check(c), emu_check(a), emu_check(b);
  int m = emu_amx.rows[c], n = emu_amx.colsb[c] / 4, k = emu_amx.colsb[a] / 4;
  if (emu_amx.rows[a] != m || emu_amx.rows[b] != k || emu_amx.colsb[b] != emu_amx.colsb[c])
    emu_fault("tdpbf16ps shapes");
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc;
      memcpy(&acc, &emu_amx.data[c][i][4 * j], 4);
      for (int q = 0; q < k; ++q)
        acc += emu_bf16(&emu_amx.data[a][i][4 * q]) * emu_bf16(&emu_amx.data[b][q][4 * j]) +
               emu_bf16(&emu_amx.data[a][i][4 * q + 2]) * emu_bf16(&emu_amx.data[b][q][4 * j + 2]);
      memcpy(&emu_amx.data[c][i][4 * j], &acc, 4);
    }
}

#undef _tile_loadconfig
#undef _tile_loadd
#undef _tile_stream_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbf16ps
#undef _tile_release
#define _tile_loadconfig(p) emu_loadconfig(p)
#define _tile_loadd(t, base, stride) emu_loadd(t, base, (long)(stride))
#define _tile_stream_loadd(t, base, stride) emu_loadd(t, base, (long)(stride))
#define _tile_stored(t, base, stride) emu_stored(t, base, (long)(stride))
#define _tile_zero(t) emu_zero(t)
#define _tile_dpbf16ps(c, a, b) emu_dpbf16ps(c, a, b)
#define _tile_release() (emu_amx.configured = 0)
