/* The kit's context: threads, the choice of product, and the workspace
 * that kernels borrow scratch memory from. */
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn_internal.h"

#define ALIGN 64

static size_t round_up(size_t n) {
  return (n + ALIGN - 1) / ALIGN * ALIGN;
}

/* CPUs this process may run on (taskset, cgroups' cpusets), not the
 * machine's. */
static int cpus(void) {
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* The process's default precision of products: bf16 while anyone holds
 * it (lk_nn_bf16_acquire), for every context created without LK_NN_BF16
 * or LK_NN_F32. Read at each product, not at create: a run creates its
 * models before its precision plugin (the kinds' creation order), and the
 * plugin's choice must reach the contexts the models already have. */
static _Atomic int bf16_users;

#define NO_ENGINE                                                              \
  "this CPU has no bf16 product instruction (neither AMX-BF16 nor "            \
  "AVX512_BF16: /proc/cpuinfo's amx_bf16, avx512_bf16), and the layer kit "    \
  "does not emulate one"

int lk_nn_bf16_acquire(void) {
  if (!nn__bf16_engine())
    return lk__err(LK_EINVAL, "bf16 products: %s", NO_ENGINE);
  atomic_fetch_add(&bf16_users, 1);
  return 0;
}

void lk_nn_bf16_release(void) {
  int n = atomic_load(&bf16_users);
  while (n > 0 && !atomic_compare_exchange_weak(&bf16_users, &n, n - 1))
    ;
}

const char *lk_nn_bf16_engine(void) {
  return nn__bf16_engine();
}

bool nn__bf16(const lk_nn *nn) {
  if (nn->precision)
    return nn->precision == LK_NN_BF16;
  return atomic_load_explicit(&bf16_users, memory_order_relaxed) > 0;
}

const char *lk_nn_products(const lk_nn *nn) {
  return nn && nn__bf16(nn) ? "bf16" : "f32";
}

int lk_nn_create(lk_nn **out, int threads, unsigned flags) {
  if (!out)
    return lk__err(LK_EINVAL, "lk_nn_create: out is NULL");
  *out = NULL;
  if (threads < 0 || threads > NN_MAX_THREADS)
    return lk__err(LK_EINVAL,
                   "lk_nn_create: threads is %d; expected 0 (one per CPU) "
                   "to %d",
                   threads, NN_MAX_THREADS);
  unsigned known =
      LK_NN_PORTABLE | LK_NN_NO_BLAS | LK_NN_NO_ONEDNN | LK_NN_BF16 | LK_NN_F32;
  if (flags & ~known)
    return lk__err(LK_EINVAL, "lk_nn_create: unknown flags 0x%x",
                   flags & ~known);
  if ((flags & LK_NN_BF16) && (flags & LK_NN_F32))
    return lk__err(LK_EINVAL,
                   "lk_nn_create: LK_NN_BF16 and LK_NN_F32 together");
  if ((flags & LK_NN_BF16) && !nn__bf16_engine())
    return lk__err(LK_EINVAL, "lk_nn_create: LK_NN_BF16: %s", NO_ENGINE);
  lk_nn *nn = calloc(1, sizeof *nn);
  if (!nn)
    return lk__err(LK_ENOMEM, "lk_nn_create: out of memory");
  nn->threads = threads ? threads : cpus();
  if (nn->threads > NN_MAX_THREADS)
    nn->threads = NN_MAX_THREADS;
  nn->ws_limit = SIZE_MAX;
  nn->precision = flags & (LK_NN_BF16 | LK_NN_F32);
  /* oneDNN or OpenBLAS on one thread (gemm.c says why), or the kit's */
  nn->blas = nn__blas_open(flags);
  nn->k = &nn__kernels_base;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!(flags & LK_NN_PORTABLE)) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
      nn->k = &nn__kernels_avx512;
    else if (__builtin_cpu_supports("avx2"))
      nn->k = &nn__kernels_avx2;
  }
#endif
  int rc = nn__pool_start(nn);
  if (rc < 0) {
    lk_nn_free(nn);
    return rc;
  }
  *out = nn;
  return 0;
}

void lk_nn_free(lk_nn *nn) {
  if (!nn)
    return;
  nn__pool_stop(nn);
  free(nn->ws);
  free(nn);
}

int lk_nn_threads(const lk_nn *nn) {
  return nn ? nn->threads : 0;
}

const char *lk_nn_backend(const lk_nn *nn) {
  return nn__blas_name(nn ? nn->blas : NULL);
}

const char *lk_nn_isa(const lk_nn *nn) {
  return nn ? nn->k->isa : "";
}

size_t lk_nn_workspace_size(const lk_nn *nn) {
  return nn ? nn->ws_bytes : 0;
}

void lk_nn_set_workspace_limit(lk_nn *nn, size_t bytes) {
  if (nn)
    nn->ws_limit = bytes;
}

int nn__reserve(lk_nn *nn, const char *layer, size_t shared,
                size_t per_thread) {
  shared = round_up(shared);
  per_thread = round_up(per_thread);
  size_t t = (size_t)nn->threads;
  if (per_thread > (SIZE_MAX - shared) / t)
    return lk__err(LK_ENOMEM, "%s: a workspace of more than %zu bytes", layer,
                   SIZE_MAX);
  size_t need = shared + per_thread * t;
  if (need > nn->ws_limit)
    return lk__err(LK_ENOMEM,
                   "%s: needs a workspace of %zu bytes, over the limit of %zu "
                   "(lk_nn_set_workspace_limit)",
                   layer, need, nn->ws_limit);
  if (need > nn->ws_bytes) {
    /* Grow to the need, not past it: the largest layer sets the size once
     * and every later call finds it there. */
    void *p = aligned_alloc(ALIGN, need);
    if (!p)
      return lk__err(LK_ENOMEM,
                     "%s: out of memory for a workspace of %zu bytes", layer,
                     need);
    free(nn->ws);
    nn->ws = p;
    nn->ws_bytes = need;
  }
  nn->shared_bytes = shared;
  nn->thread_bytes = per_thread;
  return 0;
}

void *nn__shared(lk_nn *nn) {
  return nn->ws;
}

void *nn__scratch(lk_nn *nn, int thread) {
  return (char *)nn->ws + nn->shared_bytes + nn->thread_bytes * (size_t)thread;
}
