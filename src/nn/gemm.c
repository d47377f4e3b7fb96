/* The kit's matrix product: oneDNN's or OpenBLAS's sgemm on one thread,
 * or the portable loop, run on tiles of C by the kit's own threads.
 *
 * Why not the libraries' threads: measured on this project's machine (2 cores
 * of an AMD EPYC, OpenBLAS 0.3.21 with its Haswell kernels) on the products of
 * bench/nn_layers, a one-thread sgemm on each half of C run by two spinning
 * kit threads gave 1.7x to 2.1x one thread's speed, OpenBLAS's own two
 * threads 1.25x to 1.75x (64x128x3136: 1.6x against 1.45x; 768x384x128:
 * 2.05x against 1.5x). And the layers' other kernels (im2col, attention,
 * the norms) need the kit's threads anyway; two pools spinning on two
 * cores slow each other down.
 *
 * Why fixed tiles: OpenBLAS (and oneDNN) rounds an element of C differently
 * depending on the shape of the call that computes it (its kernels for the
 * edges of a tile sum in another order), so handing each thread "its half"
 * would make the result depend on the thread count. The tiles here depend on M,
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

/* A product library: its sgemm behind one signature, run on the calling
 * thread only. */
typedef void nn_sgemm_fn(bool ta, bool tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb,
                         float beta, float *c, int ldc);
struct nn_blas {
  const char *name;
  nn_sgemm_fn *sgemm;
  bool clears_c; /* beta = 0 overwrites C, NaN included (probed) */
  bool loaded;
};

#if defined(LK_HAVE_BLAS) || defined(LK_HAVE_ONEDNN)
#include <dlfcn.h>

/* Does sgemm with beta = 0 write C without reading it? BLAS says C need
 * not be set then, and OpenBLAS 0.3.21 and oneDNN 2.6 do overwrite it
 * (OpenBLAS through its small-matrix kernels and its beta kernel); some
 * OpenBLAS versions multiplied C by 0 instead, so a NaN in C (a fresh
 * activation buffer) stayed NaN. Where the product overwrites, clearing C
 * first is a second pass over every forward activation for nothing: it was
 * 2.3% of a baby-GPT step. The probe runs a square product of side N
 * (4 takes the small kernels; PROBE_BIG the packed path) over a C of NaN
 * and checks every element. */
#define PROBE_BIG 160
static bool probe_clears(const struct nn_blas *blas, int n) {
  size_t nn = (size_t)n * (size_t)n;
  float *a = malloc(3 * nn * sizeof *a);
  if (!a)
    return false;
  float *c = a + 2 * nn, nan = __builtin_nanf("");
  for (size_t i = 0; i < 2 * nn; i++)
    a[i] = 1;
  for (size_t i = 0; i < nn; i++)
    c[i] = nan;
  blas->sgemm(false, false, n, n, n, 1, a, n, a + nn, n, 0, c, n);
  bool ok = true;
  for (size_t i = 0; i < nn && ok; i++)
    ok = c[i] == (float)n;
  free(a);
  return ok;
}

static void probe(struct nn_blas *blas) {
  blas->clears_c = probe_clears(blas, 4) && probe_clears(blas, PROBE_BIG);
  blas->loaded = true;
}

/* POSIX's way to take a function from dlsym */
static bool symbol(void *h, const char *name, void *fn, size_t size) {
  void *f = dlsym(h, name);
  if (f)
    memcpy(fn, &f, size);
  return f != NULL;
}
#endif

#ifdef LK_HAVE_ONEDNN
/* oneDNN's sgemm, as torch's conv and its matmuls on CPUs with AVX-512
 * take it: on this project's machine (2 cores of an AMD EPYC, AVX-512),
 * one thread, warm caches, it ran the products of a baby-GPT step (768 x
 * {128, 256, 384, 512} x {128, 512, 768}) at 106 to 117 GFLOP/s where
 * OpenBLAS 0.3.21's Cooperlake kernels ran them at 100 to 105: oneDNN
 * packs less (a fifth of OpenBLAS's time there went to packing) and has
 * kernels for these narrow shapes. bench/gpt: 16.2k and 17.0k tokens/s
 * against 14.0k and 14.3k on one thread.
 *
 * Loaded privately, as OpenBLAS is (configure.ac): libloopkit does not
 * link it, so a process that never makes a layer kit context does not map
 * it (nor its OpenMP runtime). Debian's oneDNN runs its parallel regions
 * with OpenMP (libgomp), whose team size is a per-thread setting: the
 * call is made with the calling thread's set to 1 and restored after, so
 * each product runs on the kit thread that calls it, as OpenBLAS's do,
 * and nothing else in the process sees the change. A oneDNN built with
 * another runtime (TBB, a thread pool) is not used: its threads would
 * fight the kit's. */
#include <dnnl.h>

static struct {
  __typeof__(&dnnl_sgemm) sgemm;
  int (*omp_get_max_threads)(void);
  void (*omp_set_num_threads)(int);
} onednn;

static void onednn_sgemm(bool ta, bool tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb,
                         float beta, float *c, int ldc) {
  int team = onednn.omp_get_max_threads ? onednn.omp_get_max_threads() : 1;
  if (team != 1)
    onednn.omp_set_num_threads(1);
  dnnl_status_t status = onednn.sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
                                      alpha, a, lda, b, ldb, beta, c, ldc);
  if (team != 1)
    onednn.omp_set_num_threads(team);
  if (status != dnnl_success) /* out of memory for its packing buffers */
    nn__kernels_base.sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                           ldc);
}

static struct nn_blas onednn_blas = {.name = "onednn", .sgemm = onednn_sgemm};
static pthread_once_t onednn_once = PTHREAD_ONCE_INIT;

static void onednn_load(void) {
  void *h = dlopen(LK_ONEDNN_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
  __typeof__(&dnnl_version) version = NULL;
  if (!symbol(h, "dnnl_version", &version, sizeof version) ||
      !symbol(h, "dnnl_sgemm", &onednn.sgemm, sizeof onednn.sgemm))
    return; /* the handle stays: the library is resident */
  const dnnl_version_t *v = version();
  if (v->cpu_runtime == DNNL_RUNTIME_OMP) {
    /* dlsym on the handle searches its dependencies: its OpenMP */
    if (!symbol(h, "omp_get_max_threads", &onednn.omp_get_max_threads,
                sizeof onednn.omp_get_max_threads) ||
        !symbol(h, "omp_set_num_threads", &onednn.omp_set_num_threads,
                sizeof onednn.omp_set_num_threads))
      return;
  } else if (v->cpu_runtime != DNNL_RUNTIME_SEQ) {
    return;
  }
  probe(&onednn_blas);
}
#endif

#ifdef LK_HAVE_BLAS
#include <cblas.h>

/* OpenBLAS, loaded once and privately (RTLD_LOCAL), so that its cblas_*
 * never enter the process's global scope: linked into libloopkit, they
 * would replace the BLAS of every plugin loaded later (GSL's, under
 * gsl_bfgs, whose iterates then changed by 3e-7). */
static struct {
  __typeof__(&cblas_sgemm) sgemm;
  __typeof__(&openblas_set_num_threads) set_threads;
} openblas;

static void openblas_sgemm(bool ta, bool tb, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb,
                           float beta, float *c, int ldc) {
  openblas.sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                 tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
                 beta, c, ldc);
}

static struct nn_blas openblas_blas = {.name = "openblas",
                                       .sgemm = openblas_sgemm};
static pthread_once_t openblas_once = PTHREAD_ONCE_INIT;

static void openblas_load(void) {
  void *h = dlopen(LK_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
  if (!symbol(h, "cblas_sgemm", &openblas.sgemm, sizeof openblas.sgemm) ||
      !symbol(h, "openblas_set_num_threads", &openblas.set_threads,
              sizeof openblas.set_threads))
    return;
  openblas.set_threads(1);
  probe(&openblas_blas);
}
#endif

/* LOOPKIT_GEMM: which library every context takes at most (a
 * comparison, a machine whose oneDNN misbehaves): "onednn" (the default
 * order), "openblas" or "portable". Anything else is ignored. */
static unsigned env_flags(void) {
  const char *v = getenv("LOOPKIT_GEMM");
  if (!v)
    return 0;
  if (!strcmp(v, "openblas"))
    return LK_NN_NO_ONEDNN;
  if (!strcmp(v, "portable"))
    return LK_NN_NO_BLAS;
  return 0;
}

const struct nn_blas *nn__blas_open(unsigned flags) {
  flags |= env_flags();
  if (flags & (LK_NN_PORTABLE | LK_NN_NO_BLAS))
    return NULL;
#ifdef LK_HAVE_ONEDNN
  if (!(flags & LK_NN_NO_ONEDNN)) {
    pthread_once(&onednn_once, onednn_load);
    if (onednn_blas.loaded)
      return &onednn_blas;
  }
#endif
#ifdef LK_HAVE_BLAS
  pthread_once(&openblas_once, openblas_load);
  if (openblas_blas.loaded) {
    /* again: a library may have changed it since */
    openblas.set_threads(1);
    return &openblas_blas;
  }
#endif
  return NULL;
}

const char *nn__blas_name(const struct nn_blas *blas) {
  return blas ? blas->name : "portable";
}

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

/* nn__gemm1 with a bias (nn_gemm's): the bf16 kernels add it as they
 * store C; the libraries' products add into a C filled with it (beta =
 * 1), as torch's addmm does: one pass over C fewer than a product into
 * zeros and a sum after, and no clearing of C by the library. */
static void gemm1(const lk_nn *nn, bool ta, bool tb, int m, int n, int k,
                  float alpha, const float *a, int lda, const float *b, int ldb,
                  float beta, float *c, int ldc, const float *bias) {
  if (m <= 0 || n <= 0)
    return;
  if (bias && k > 0 && alpha != 0 && nn__bf16(nn) &&
      nn__bf16_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias))
    return;
  if (bias) {
    for (int i = 0; i < m; i++)
      memcpy(c + (size_t)i * (size_t)ldc, bias, (size_t)n * sizeof *bias);
    beta = 1;
  }
  if (k <= 0 || alpha == 0) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  if (nn__bf16(nn) &&
      nn__bf16_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL))
    return;
  if (nn->blas) {
    if (beta == 0 && !nn->blas->clears_c) /* probe_clears: NaN would stay */
      scale_c(m, n, 0, c, ldc);
    nn->blas->sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  nn->k->sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void nn__gemm1(const lk_nn *nn, bool ta, bool tb, int m, int n, int k,
               float alpha, const float *a, int lda, const float *b, int ldb,
               float beta, float *c, int ldc) {
  gemm1(nn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
}

void nn__gemm_plan(nn_gemm *g) {
  g->split_n = g->n > g->m;
  int side = g->split_n ? g->n : g->m;
  double flops = 2.0 * g->m * g->n * g->k;
  int t = 1;
  if (nn__bf16(g->nn)) {
    /* The bf16 kernels sum every element of C in the same order wherever
     * it lies in C (gemm_bf16.c), so the tiles need not be fixed: one per
     * thread, as few as may be, since each packs its own copy of the
     * operand it shares with the others. On the AMX tiles packing costs
     * more than the products: 4 fixed tiles ran a baby-GPT step's products
     * at half the speed of 1. */
    while (t < g->nn->threads && side / (t + 1) >= TILE_MIN &&
           flops / (t + 1) >= TILE_FLOPS)
      t++;
  } else {
    while (t * 2 <= TILE_MAX && side / (t * 2) >= TILE_MIN &&
           flops / (t * 2) >= TILE_FLOPS)
      t *= 2;
  }
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
    gemm1(nn, g->ta, g->tb, g->m, hi - lo, g->k, g->alpha, g->a, g->lda, b,
          g->ldb, g->beta, g->c + lo, g->ldc, g->bias ? g->bias + lo : NULL);
  } else {
    const float *a = g->ta ? g->a + lo : g->a + (size_t)lo * (size_t)g->lda;
    gemm1(nn, g->ta, g->tb, hi - lo, g->n, g->k, g->alpha, a, g->lda, g->b,
          g->ldb, g->beta, g->c + (size_t)lo * (size_t)g->ldc, g->ldc, g->bias);
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
