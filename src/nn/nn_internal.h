/* Private to the layer kit (src/nn): the context, its thread pool and
 * workspace, the single-threaded product every kernel calls, and the
 * argument checks. Nothing here is exported. */
#ifndef LK_NN_INTERNAL_H
#define LK_NN_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/internal.h"
#include "loopkit/nn.h"

#define NN_MAX_THREADS LK_NN_MAX_THREADS

/* One piece of a parallel job: TASK of the job's tasks, run by THREAD
 * (0 = the caller), which indexes the per-thread scratch. */
typedef void (*nn_task_fn)(void *ctx, int task, int thread);

/* kernels.h, one table per instruction set. */
typedef struct nn_kernels {
  const char *isa;
  void (*gelu)(float *y, const float *x, size_t n);
  /* dx += dy * gelu'(x) */
  void (*gelu_grad)(float *dx, const float *dy, const float *x, size_t n);
  void (*tanh)(float *y, const float *x, size_t n);
  void (*sigmoid)(float *y, const float *x, size_t n);
  /* SiLU and Mish: y = f(x); dx += dy * f'(x) */
  void (*silu)(float *y, const float *x, size_t n);
  void (*silu_grad)(float *dx, const float *dy, const float *x, size_t n);
  void (*mish)(float *y, const float *x, size_t n);
  void (*mish_grad)(float *dx, const float *dy, const float *x, size_t n);
  /* ELU (alpha, unused) and softplus (beta, threshold), the same way */
  void (*elu)(float *y, const float *x, size_t n, float a, float b);
  void (*elu_grad)(float *dx, const float *dy, const float *x, size_t n,
                   float a, float b);
  void (*softplus)(float *y, const float *x, size_t n, float a, float b);
  void (*softplus_grad)(float *dx, const float *dy, const float *x, size_t n,
                        float a, float b);
  /* y = e^(x - m) */
  void (*exp_shift)(float *y, const float *x, float m, size_t n);
  /* acc[j] += x[i ld + j] for rows i in [0, rows) in order, j < cols */
  void (*col_sums)(float *acc, const float *x, size_t rows, size_t cols,
                   size_t ld);
  /* gemm_kernel.h: C = alpha op(A) op(B) + beta C, on the calling thread */
  void (*sgemm)(bool ta, bool tb, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta,
                float *c, int ldc);
} nn_kernels;
extern const nn_kernels nn__kernels_base, nn__kernels_avx2, nn__kernels_avx512;

struct lk_nn {
  int threads;
  /* Its products' operands: LK_NN_BF16 or LK_NN_F32 as created, else
   * whatever the process's default is at each product (context.c) */
  unsigned precision;
  /* gemm.c: the library the products run in; NULL: the kit's own */
  const struct nn_blas *blas;
  const nn_kernels *k;

  /* The pool (threads.c), shared by every context of the process with
   * this many threads: a run's model and its optimizer each have a context,
   * and two pools spinning on the same cores would slow each other. */
  struct nn_pool *pool;

  /* The workspace (context.c): one block, a shared part then one part per
   * thread, every part 64-byte aligned. It only grows. */
  void *ws;
  size_t ws_bytes, ws_limit;
  size_t shared_bytes, thread_bytes; /* the current split */
};

/* threads.c */
int nn__pool_start(lk_nn *nn);
void nn__pool_stop(lk_nn *nn);
/* Runs fn(ctx, i, thread) for i in [0, ntasks) on the pool and returns
 * when all are done. One task, or one thread: inline on the caller. */
void nn__run(lk_nn *nn, int ntasks, nn_task_fn fn, void *ctx);

/* context.c: makes the workspace hold SHARED bytes plus PER_THREAD bytes
 * for each thread (LK_ENOMEM naming LAYER if it cannot). */
int nn__reserve(lk_nn *nn, const char *layer, size_t shared, size_t per_thread);
void *nn__shared(lk_nn *nn);
void *nn__scratch(lk_nn *nn, int thread);

/* gemm.c: the product library for a context of lk_nn_create's FLAGS
 * (loaded once): oneDNN, else OpenBLAS, each on one thread; NULL if
 * the flags ask for the kit's own product or the build has neither or
 * neither can be loaded. */
const struct nn_blas *nn__blas_open(unsigned flags);
const char *nn__blas_name(const struct nn_blas *blas);
/* gemm.c: one product on the calling thread (the context's library or
 * the kit's own loop), for kernels that cut their own work. */
void nn__gemm1(const lk_nn *nn, bool ta, bool tb, int m, int n, int k,
               float alpha, const float *a, int lda, const float *b, int ldb,
               float beta, float *c, int ldc);
/* gemm_bf16.c: the bf16 product on the calling thread (false: no buffer
 * for it, nothing done), and the engine this CPU has for it ("avx512_bf16",
 * or NULL). BIAS (NULL, or N values; only with beta = 0): C = alpha op(A)
 * op(B) + BIAS on every row, the same bits as C filled with it and beta =
 * 1, without the pass that fills C. */
bool nn__bf16_gemm(bool ta, bool tb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta,
                   float *c, int ldc, const float *bias);
const char *nn__bf16_engine(void);
/* context.c: whether NN's products take bf16 operands now. */
bool nn__bf16(const lk_nn *nn);
/* The pieces lk_nn_sgemm cuts a product into: tiles of C along its longer
 * side, their number a function of M, N and K only. */
typedef struct nn_gemm {
  const lk_nn *nn;
  bool ta, tb, split_n;
  int m, n, k, lda, ldb, ldc, tiles;
  float alpha, beta;
  const float *a, *b;
  float *c;
  /* NULL, or N values added to every row of C (with beta = 0): C =
   * alpha op(A) op(B) + bias, as torch's addmm with the bias broadcast */
  const float *bias;
} nn_gemm;
void nn__gemm_plan(nn_gemm *g);
void nn__gemm_tile(const nn_gemm *g, int tile);
/* Tile TILE covers columns (split_n) or rows [lo, hi) of C. */
void nn__gemm_bounds(const nn_gemm *g, int tile, int *lo, int *hi);

/* Splits [0, total) into parts of at least GRAIN (the last takes the rest):
 * how many, and part I's range. Sizes only: never the thread count. */
static inline int nn__parts(size_t total, size_t grain) {
  size_t p = grain ? total / grain : total;
  if (p < 1)
    p = 1;
  if (p > 1024)
    p = 1024;
  return (int)p;
}
static inline void nn__range(size_t total, int parts, int i, size_t *lo,
                             size_t *hi) {
  *lo = total * (size_t)i / (size_t)parts;
  *hi = total * (size_t)(i + 1) / (size_t)parts;
}

/* The same for elementwise work: parts of at least GRAIN values whose
 * bounds are multiples of 16 (whole vectors, whole cache lines). */
static inline void nn__range16(size_t total, int parts, int i, size_t *lo,
                               size_t *hi) {
  *lo = i == 0 ? 0 : total * (size_t)i / (size_t)parts / 16 * 16;
  *hi = i + 1 == parts ? total
                       : total * (size_t)(i + 1) / (size_t)parts / 16 * 16;
}

/* A * B through lk_size_mul (loopkit/tensor.h), the one checked product
 * of sizes, saturating: SIZE_MAX when it does not fit a size_t, so that
 * any bound a product of a layer's sizes is held to refuses it (a layer
 * checks its sizes >= 0 first; a factor 0 gives 0, the true product). */
static inline size_t nn__mul(size_t a, size_t b) {
  size_t p;
  return lk_size_mul(a, b, &p) ? p : SIZE_MAX;
}
/* The most floats an array a layer is given may hold: more bytes than a
 * size_t counts cannot have been allocated. */
#define NN_MAX_FLOATS (SIZE_MAX / sizeof(float))

/* LK_EINVAL "LAYER: WHAT" unless COND. */
#define NN_CHECK(cond, layer, ...)                                             \
  do {                                                                         \
    if (!(cond))                                                               \
      return lk__err(LK_EINVAL, layer ": " __VA_ARGS__);                       \
  } while (0)

/* The pointers and the context every layer needs. */
#define NN_NEED(nn, layer, ptr)                                                \
  NN_CHECK((nn) != NULL, layer, "the context is NULL");                        \
  NN_CHECK((ptr) != NULL, layer, "%s is NULL", #ptr)

/* Why bf16 products cannot run here (precision.c, context.c). */
#define NN_NO_BF16_ENGINE                                                      \
  "this CPU has no bf16 product instruction (neither AMX-BF16 nor "            \
  "AVX512_BF16: /proc/cpuinfo's amx_bf16, avx512_bf16), and the layer kit "    \
  "does not emulate one"

#endif
