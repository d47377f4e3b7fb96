/* The kit's matrix product: OpenBLAS's sgemm on one thread, or the
 * portable loop, run on tiles of C by the kit's own threads.
 *
 * Why not OpenBLAS's threads: measured on this project's machine (2 cores
 * of an AMD EPYC, OpenBLAS 0.3.21 with its Haswell kernels) on the products of
 * bench/nn_layers, a one-thread sgemm on each half of C run by two spinning
 * kit threads gave 1.7x to 2.1x one thread's speed, OpenBLAS's own two
 * threads 1.25x to 1.75x (64x128x3136: 1.6x against 1.45x; 768x384x128:
 * 2.05x against 1.5x). And the layers' other kernels (im2col, attention,
 * the norms) need the kit's threads anyway; two pools spinning on two
 * cores slow each other down.
 *
 * Why fixed tiles: OpenBLAS rounds an element of C differently depending
 * on the shape of the call that computes it (its kernels for the edges of
 * a tile sum in another order), so handing each thread "its half" would
 * make the result depend on the thread count. The tiles here depend on M,
 * N and K only; each is one call, whoever runs it. Measured on one
 * thread, 4 tiles instead of 1 cost 1% to 4%; tiles are at least 128 wide
 * and 4 MFLOP, and their number is a power of two (even shares for 1, 2, 4
 * threads).
 *
 * Which kernels OpenBLAS runs: on this project's machine (an AMD EPYC
 * with AVX-512 F, BW, DQ, VL and BF16) OpenBLAS 0.3.21 picks its
 * Cooperlake kernels by itself, whose sgemm is twice its Haswell one (100
 * to 200 GFLOP/s at 768x384x128 and 1536^3). It ran Haswell's there only
 * because the machine's environment sets OPENBLAS_CORETYPE=Haswell, which
 * OpenBLAS obeys before it looks at the CPU. The kit leaves that variable
 * alone, as every other user of OpenBLAS in the process does: it is the
 * way to choose kernels on purpose (a core that misdetects, a comparison),
 * and a library that overrode it would take that away. So nothing is set
 * here; `env -u OPENBLAS_CORETYPE` (or OPENBLAS_CORETYPE=SKYLAKEX) gives
 * the fast kernels where the environment names slow ones, and
 * bench/nn_layers and bench/cnn print which kernels ran. */
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

#ifdef LK_HAVE_BLAS
#include <cblas.h>
#include <dlfcn.h>

/* OpenBLAS, loaded once and privately (RTLD_LOCAL), so that its cblas_*
 * never enter the process's global scope: linked into libloopkit, they
 * would replace the BLAS of every plugin loaded later (GSL's, under
 * gsl_bfgs, whose iterates then changed by 3e-7). NULL if it cannot be
 * loaded: the kit then runs the portable product. */
static struct {
  __typeof__(&cblas_sgemm) sgemm;
  __typeof__(&openblas_set_num_threads) set_threads;
  bool clears_c; /* beta = 0 overwrites C, NaN included (probed) */
} blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* Does sgemm with beta = 0 write C without reading it? BLAS says C need
 * not be set then, and OpenBLAS 0.3.21 does overwrite it, through its
 * small-matrix kernels and through its beta kernel (sgemm_beta sets zeros);
 * some versions multiplied C by 0 instead, so a NaN in C (a fresh
 * activation buffer) stayed NaN. Where the product overwrites, clearing C
 * first is a second pass over every forward activation for nothing: it was
 * 2.3% of a baby-GPT step. The probe runs a square product of side N
 * (4 takes the small kernels; PROBE_BIG the packed path) over a C of NaN
 * and checks every element. */
#define PROBE_BIG 160
static bool blas_probe_clears(int n) {
  size_t nn = (size_t)n * (size_t)n;
  float *a = malloc(3 * nn * sizeof *a);
  if (!a)
    return false;
  float *c = a + 2 * nn, nan = __builtin_nanf("");
  for (size_t i = 0; i < 2 * nn; i++)
    a[i] = 1;
  for (size_t i = 0; i < nn; i++)
    c[i] = nan;
  blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n,
             a + nn, n, 0, c, n);
  bool ok = true;
  for (size_t i = 0; i < nn && ok; i++)
    ok = c[i] == (float)n;
  free(a);
  return ok;
}

static void blas_load(void) {
  void *h = dlopen(LK_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
  /* POSIX's way to take a function from dlsym */
  void *f = dlsym(h, "cblas_sgemm"), *t = dlsym(h, "openblas_set_num_threads");
  if (!f || !t)
    return; /* the handle stays: the library is resident */
  memcpy(&blas.sgemm, &f, sizeof f);
  memcpy(&blas.set_threads, &t, sizeof t);
  blas.set_threads(1);
  blas.clears_c = blas_probe_clears(4) && blas_probe_clears(PROBE_BIG);
}

bool nn__blas_open(void) {
  pthread_once(&blas_once, blas_load);
  if (!blas.sgemm)
    return false;
  blas.set_threads(1);
  return true;
}
#else
bool nn__blas_open(void) {
  return false;
}
#endif

#define TILE_MIN 128     /* rows or columns of C */
#define TILE_FLOPS 4.0e6 /* a tile must be worth a call */
#define TILE_MAX 64

/* C = beta C over [M, N] (beta == 0 writes zeros: C may hold NaN). */
static void scale_c(int m, int n, float beta, float *c, int ldc) {
  for (int i = 0; i < m; i++) {
    float *ci = c + (size_t)i * (size_t)ldc;
    if (beta == 0)
      memset(ci, 0, (size_t)n * sizeof *ci);
    else if (beta != 1)
      for (int j = 0; j < n; j++)
        ci[j] *= beta;
  }
}

void nn__gemm1(const lk_nn *nn, bool ta, bool tb, int m, int n, int k,
               float alpha, const float *a, int lda, const float *b, int ldb,
               float beta, float *c, int ldc) {
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0 || alpha == 0) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
#ifdef LK_HAVE_BLAS
  if (!nn->portable) {
    if (beta == 0 && !blas.clears_c) /* blas_probe_clears: NaN would stay */
      scale_c(m, n, 0, c, ldc);
    blas.sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
               tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
               beta, c, ldc);
    return;
  }
#endif
  nn->k->sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void nn__gemm_plan(nn_gemm *g) {
  g->split_n = g->n > g->m;
  int side = g->split_n ? g->n : g->m;
  double flops = 2.0 * g->m * g->n * g->k;
  int t = 1;
  while (t * 2 <= TILE_MAX && side / (t * 2) >= TILE_MIN &&
         flops / (t * 2) >= TILE_FLOPS)
    t *= 2;
  g->tiles = g->m > 0 && g->n > 0 ? t : 0;
}

/* Tile boundaries on multiples of 16, so that every tile but the last
 * starts a whole group of the kernels' rows or columns. */
static int edge(int side, int tiles, int i) {
  if (i >= tiles)
    return side;
  return (int)((long long)side * i / tiles) / 16 * 16;
}

void nn__gemm_bounds(const nn_gemm *g, int tile, int *lo, int *hi) {
  int side = g->split_n ? g->n : g->m;
  *lo = edge(side, g->tiles, tile);
  *hi = edge(side, g->tiles, tile + 1);
}

void nn__gemm_tile(const nn_gemm *g, int tile) {
  const lk_nn *nn = g->nn;
  int lo, hi;
  nn__gemm_bounds(g, tile, &lo, &hi);
  if (hi <= lo)
    return;
  if (g->split_n) {
    const float *b = g->tb ? g->b + (size_t)lo * (size_t)g->ldb : g->b + lo;
    nn__gemm1(nn, g->ta, g->tb, g->m, hi - lo, g->k, g->alpha, g->a, g->lda, b,
              g->ldb, g->beta, g->c + lo, g->ldc);
  } else {
    const float *a = g->ta ? g->a + lo : g->a + (size_t)lo * (size_t)g->lda;
    nn__gemm1(nn, g->ta, g->tb, hi - lo, g->n, g->k, g->alpha, a, g->lda, g->b,
              g->ldb, g->beta, g->c + (size_t)lo * (size_t)g->ldc, g->ldc);
  }
}

static void gemm_task(void *ctx, int tile, int thread) {
  (void)thread;
  const nn_gemm *g = ctx;
  nn__gemm_tile(g, tile);
}

int lk_nn_sgemm(lk_nn *nn, bool transa, bool transb, int m, int n, int k,
                float alpha, const float *a, int lda, const float *b, int ldb,
                float beta, float *c, int ldc) {
  NN_CHECK(nn, "sgemm", "the context is NULL");
  NN_CHECK(m >= 0 && n >= 0 && k >= 0, "sgemm",
           "sizes M = %d, N = %d, K = %d; expected >= 0", m, n, k);
  int acols = transa ? m : k, bcols = transb ? k : n;
  NN_CHECK(lda >= (acols > 1 ? acols : 1) && ldb >= (bcols > 1 ? bcols : 1) &&
               ldc >= (n > 1 ? n : 1),
           "sgemm",
           "leading dimensions lda = %d, ldb = %d, ldc = %d are less than "
           "the rows of A%s (%d), B%s (%d) and C (%d)",
           lda, ldb, ldc, transa ? "^T" : "", acols, transb ? "^T" : "", bcols,
           n);
  if (m == 0 || n == 0)
    return 0;
  NN_CHECK(c && ((a && b) || k == 0 || alpha == 0), "sgemm",
           "a matrix is NULL (A %p, B %p, C %p)", (const void *)a,
           (const void *)b, (void *)c);
  nn_gemm g = {.ta = transa,
               .tb = transb,
               .m = m,
               .n = n,
               .k = k,
               .lda = lda,
               .ldb = ldb,
               .ldc = ldc,
               .alpha = alpha,
               .beta = beta,
               .a = a,
               .b = b,
               .c = c,
               .nn = nn};
  nn__gemm_plan(&g);
  nn__run(nn, g.tiles, gemm_task, &g);
  return 0;
}
