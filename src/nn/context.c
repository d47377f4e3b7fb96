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
    return lk__err(LK_EINVAL, "lk_nn_create: LK_NN_BF16: %s", NN_NO_BF16_ENGINE);
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
  size_t all;
  if (shared > SIZE_MAX / 2 || per_thread > SIZE_MAX / 2 ||
      !lk_size_mul(round_up(per_thread), (size_t)nn->threads, &all) ||
      all > SIZE_MAX - round_up(shared))
    return lk__err(LK_ENOMEM, "%s: a workspace of more than %zu bytes", layer,
                   SIZE_MAX);
  shared = round_up(shared);
  per_thread = round_up(per_thread);
  size_t need = shared + all;
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
