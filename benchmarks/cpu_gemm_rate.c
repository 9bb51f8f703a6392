// kiln's CPU GEMM kernel alone: every workgroup of one matmul's grid, on T threads, as IREE's workers
// run it (workgroups taken in turn, x fastest), timed over repeated calls. Driven by cpu_gemm_rate.py,
// which builds kiln's kernel objects and links them with this file.
//
//   cpu_gemm_rate bf16|f32 M K N XS THREADS COPIES SECONDS STRIP:NBW:KC...
//
// XS: elements between rows of A (kiln pads rows that would be a multiple of 4 KiB apart); COPIES:
// packed weights to cycle through, one a call, so that a call finds its weights where a model's layer
// finds them (COPIES x the weights past the L3: in DRAM) or, with 1, hot in the caches. Then one
// tiling an argument: the rows of an M strip (geometry.strip), the channels and the K steps of a
// workgroup. Prints the median milliseconds a call, a line per tiling.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
  int f32;
  size_t m, k, n, xs, strip, nbw, kc, gx, gy;
  const void* x;
  void* y;
  const void* p;
  atomic_size_t next;
  pthread_barrier_t start, done;
  atomic_int stop;
} job_t;

static void run_workgroups(job_t* j) {
  const size_t total = j->gx * j->gy;
  for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < total;) {
    size_t wx = i % j->gx, wy = i / j->gx, oh = j->m / j->strip;
    if (j->f32)
      kiln_conv_f32_workgroup(j->x, 0, j->p, 0, j->y, 0, 1, oh, j->strip, j->k, oh, j->strip, j->n, 1, 1, 1, 1,
                              j->nbw, j->kc, 0, j->xs, wx, wy, NULL);
    else
      kiln_conv_bf16_workgroup(j->x, 0, j->p, 0, j->y, 0, 1, oh, j->strip, j->k, oh, j->strip, j->n, 1, 1, 1, 1,
                               j->nbw, j->kc, 0, j->xs, wx, wy, NULL);
  }
}

static void* worker(void* arg) {
  job_t* j = arg;
  syscall(SYS_arch_prctl, 0x1023, 18);  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA: this thread may use AMX
  for (;;) {
    pthread_barrier_wait(&j->start);
    if (atomic_load(&j->stop)) return NULL;
    run_workgroups(j);
    pthread_barrier_wait(&j->done);
  }
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

// The median milliseconds of the calls made in `seconds` (at least 5, after 3 to warm up).
static double median_call_ms(job_t* j, const char* p, size_t weight_bytes, int copies, double seconds) {
  static double samples[1000];
  int count = 0;
  double begin = now();
  for (int call = 0; count < 1000 && (call < 3 + 5 || now() - begin < seconds); ++call) {
    j->p = p + (size_t)(call % copies) * weight_bytes;
    atomic_store(&j->next, 0);
    double t0 = now();
    pthread_barrier_wait(&j->start);
    run_workgroups(j);
    pthread_barrier_wait(&j->done);
    if (call >= 3) samples[count++] = now() - t0;
  }
  qsort(samples, count, sizeof(double), by_value);
  return samples[count / 2] * 1e3;
}

int main(int argc, char** argv) {
  if (argc < 10) {
    fprintf(stderr, "usage: %s bf16|f32 M K N XS THREADS COPIES SECONDS STRIP:NBW:KC...\n", argv[0]);
    return 2;
  }
  syscall(SYS_arch_prctl, 0x1023, 18);
  job_t j = {.f32 = !strcmp(argv[1], "f32")};
  j.m = strtoull(argv[2], 0, 10), j.k = strtoull(argv[3], 0, 10), j.n = strtoull(argv[4], 0, 10);
  j.xs = strtoull(argv[5], 0, 10);
  int threads = atoi(argv[6]), copies = atoi(argv[7]);
  double seconds = atof(argv[8]);
  size_t es = j.f32 ? 4 : 2, weight_bytes = (j.n + 15) / 16 * j.k * 16 * es;  // 16-channel blocks, K whole
  char* x = aligned_alloc(64, (j.m * j.xs * es + 63) / 64 * 64);
  char* p = aligned_alloc(64, weight_bytes * copies);
  j.y = aligned_alloc(64, (j.m * j.n * 4 + 63) / 64 * 64);
  memset(x, 0x3c, j.m * j.xs * es);  // every page written (0x3c3c: a small finite bf16, 0x3c3c3c3c an f32)
  memset(p, 0x3c, weight_bytes * copies);
  j.x = x;
  pthread_barrier_init(&j.start, NULL, threads);
  pthread_barrier_init(&j.done, NULL, threads);
  pthread_t* pool = malloc(sizeof(pthread_t) * threads);
  for (int t = 1; t < threads; ++t) pthread_create(&pool[t], NULL, worker, &j);
  for (int a = 9; a < argc; ++a) {
    if (sscanf(argv[a], "%zu:%zu:%zu", &j.strip, &j.nbw, &j.kc) != 3) return 2;
    j.gx = (j.n + j.nbw - 1) / j.nbw, j.gy = j.m / j.strip;
    printf("%.4f\n", median_call_ms(&j, p, weight_bytes, copies, seconds));
    fflush(stdout);
  }
  atomic_store(&j.stop, 1);
  pthread_barrier_wait(&j.start);
  for (int t = 1; t < threads; ++t) pthread_join(pool[t], NULL);
  return 0;
}
