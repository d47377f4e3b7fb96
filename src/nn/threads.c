/* The kit's thread pool: the caller and threads - 1 workers run the tasks
 * of one job at a time.
 *
 * A training step calls a hundred kernels back to back, each a job of a
 * few tens of microseconds, so waking a worker must cost far less than
 * that: workers spin on the job generation for a while after each job
 * (SPIN_NS) and only then sleep on a condition variable. The dispatcher
 * signals only when someone sleeps. Both sides publish with sequentially
 * consistent atomics (gen, sleepers), so a worker that decides to sleep
 * either sees the new job or is seen sleeping and woken: no lost wake-up.
 *
 * Tasks are claimed one at a time from a shared counter. Which thread runs
 * a task changes no result: every task writes its own outputs with the
 * same arithmetic, and the tasks are cut from the sizes only. The caller
 * waits only for workers that joined the job (enter, below).
 *
 * One pool serves every context with the same thread count (a model's and
 * an optimizer's, in one run): two pools would each spin on the cores the
 * other's job needs. A pool runs one job at a time; a caller that finds it
 * busy (another thread's job, or a task that calls the kit) runs its tasks
 * itself, which gives the same results. */
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "nn_internal.h"

typedef struct nn_pool {
  int threads, refs;     /* refs: contexts using it (pools_lock) */
  struct nn_pool *older; /* the list of pools (pools_lock) */
  _Atomic bool busy;     /* a job is running */
  pthread_t *workers;    /* workers 1 .. threads-1; the caller is 0 */
  int started;           /* workers created */
  _Atomic unsigned gen;  /* job generation */
  _Atomic int next;      /* next unclaimed task */
  _Atomic uint64_t door; /* the job's generation, closed, workers in */
  _Atomic int sleepers;  /* workers blocked on wake */
  _Atomic bool quit;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  nn_task_fn fn;
  void *ctx;
  int ntasks;
} nn_pool;

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static nn_pool *pools;

#define SPIN_NS 200000 /* 0.2 ms: longer than the gap between two kernels */

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void claim_tasks(nn_pool *nn, int thread) {
  for (;;) {
    int i = atomic_fetch_add_explicit(&nn->next, 1, memory_order_relaxed);
    if (i >= nn->ntasks)
      return;
    nn->fn(nn->ctx, i, thread);
  }
}

/* The door of job GEN: its generation in the high 32 bits, a closed bit,
 * and the count of workers inside. A worker enters only an open door of the job
 * it saw published; the caller, once every task is claimed, closes it and
 * waits for those inside only. So a worker the scheduler has not run yet
 * (another process on its core) holds nobody up: it finds the door closed
 * or a newer job, and the caller never waits for a thread that had no
 * core. */
#define DOOR_CLOSED (1ull << 31)
#define DOOR_COUNT (DOOR_CLOSED - 1)

static bool enter(nn_pool *nn, unsigned gen) {
  uint64_t d = atomic_load_explicit(&nn->door, memory_order_acquire);
  for (;;) {
    if ((unsigned)(d >> 32) != gen || (d & DOOR_CLOSED))
      return false;
    if (atomic_compare_exchange_weak_explicit(
            &nn->door, &d, d + 1, memory_order_acq_rel, memory_order_acquire))
      return true;
  }
}

typedef struct worker_arg {
  nn_pool *nn;
  int id;
} worker_arg;

static void *worker(void *arg) {
  nn_pool *nn = ((worker_arg *)arg)->nn;
  int id = ((worker_arg *)arg)->id;
  free(arg);
  unsigned seen = 0;
  for (;;) {
    unsigned g = atomic_load(&nn->gen);
    if (g == seen) {
      uint64_t t0 = now_ns();
      for (unsigned spins = 1;; spins++) {
        cpu_relax();
        if ((g = atomic_load(&nn->gen)) != seen)
          break;
        if (spins % 64 == 0 && now_ns() - t0 > SPIN_NS) {
          pthread_mutex_lock(&nn->lock);
          atomic_fetch_add(&nn->sleepers, 1);
          while ((g = atomic_load(&nn->gen)) == seen)
            pthread_cond_wait(&nn->wake, &nn->lock);
          atomic_fetch_sub(&nn->sleepers, 1);
          pthread_mutex_unlock(&nn->lock);
          break;
        }
      }
    }
    seen = g;
    if (atomic_load(&nn->quit))
      return NULL;
    if (!enter(nn, g))
      continue; /* finished without us */
    claim_tasks(nn, id);
    atomic_fetch_sub_explicit(&nn->door, 1, memory_order_release);
  }
}

static int pool_start(nn_pool *nn) {
  nn->workers = calloc((size_t)nn->threads, sizeof *nn->workers);
  if (!nn->workers)
    return lk__err(LK_ENOMEM, "lk_nn_create: out of memory for %d threads",
                   nn->threads);
  if (pthread_mutex_init(&nn->lock, NULL) != 0)
    return lk__err(LK_ENOMEM, "lk_nn_create: cannot create a mutex");
  if (pthread_cond_init(&nn->wake, NULL) != 0) {
    pthread_mutex_destroy(&nn->lock);
    return lk__err(LK_ENOMEM, "lk_nn_create: cannot create a condition");
  }
  nn->started = 1; /* thread 0 is the caller */
  for (int i = 1; i < nn->threads; i++) {
    worker_arg *a = malloc(sizeof *a);
    if (!a)
      return lk__err(LK_ENOMEM, "lk_nn_create: out of memory for %d threads",
                     nn->threads);
    *a = (worker_arg){nn, i};
    if (pthread_create(&nn->workers[i], NULL, worker, a) != 0) {
      free(a);
      return lk__err(LK_ENOMEM, "lk_nn_create: cannot start thread %d of %d",
                     i + 1, nn->threads);
    }
    nn->started++;
  }
  return 0;
}

/* Safe after a partial start: joins the workers that were created. */
static void pool_stop(nn_pool *nn) {
  if (!nn->workers)
    return;
  if (nn->started > 0) {
    atomic_store(&nn->quit, true);
    pthread_mutex_lock(&nn->lock);
    atomic_fetch_add(&nn->gen, 1);
    pthread_cond_broadcast(&nn->wake);
    pthread_mutex_unlock(&nn->lock);
    for (int i = 1; i < nn->started; i++)
      pthread_join(nn->workers[i], NULL);
    pthread_cond_destroy(&nn->wake);
    pthread_mutex_destroy(&nn->lock);
  }
  free(nn->workers);
  nn->workers = NULL;
}

/* The context's pool: the process's pool of its thread count, made on
 * first use. */
int nn__pool_start(lk_nn *nn) {
  nn->pool = NULL;
  if (nn->threads <= 1)
    return 0;
  pthread_mutex_lock(&pools_lock);
  nn_pool *p = pools;
  while (p && p->threads != nn->threads)
    p = p->older;
  int rc = 0;
  if (p) {
    p->refs++;
  } else if (!(p = calloc(1, sizeof *p))) {
    rc = lk__err(LK_ENOMEM, "lk_nn_create: out of memory for %d threads",
                 nn->threads);
  } else {
    p->threads = nn->threads;
    p->refs = 1;
    if ((rc = pool_start(p)) != 0) {
      pool_stop(p);
      free(p);
      p = NULL;
    } else {
      p->older = pools;
      pools = p;
    }
  }
  pthread_mutex_unlock(&pools_lock);
  nn->pool = p;
  return rc;
}

/* The last context of a pool stops its threads. */
void nn__pool_stop(lk_nn *nn) {
  nn_pool *p = nn->pool;
  if (!p)
    return;
  nn->pool = NULL;
  pthread_mutex_lock(&pools_lock);
  bool last = --p->refs == 0;
  if (last) {
    nn_pool **link = &pools;
    while (*link != p)
      link = &(*link)->older;
    *link = p->older;
  }
  pthread_mutex_unlock(&pools_lock);
  if (last) {
    pool_stop(p);
    free(p);
  }
}

void nn__run(lk_nn *ctx_nn, int ntasks, nn_task_fn fn, void *ctx) {
  if (ntasks <= 0)
    return;
  nn_pool *nn = ctx_nn->pool;
  if (!nn || ntasks == 1 || atomic_exchange(&nn->busy, true)) {
    for (int i = 0; i < ntasks; i++)
      fn(ctx, i, 0);
    return;
  }
  nn->fn = fn;
  nn->ctx = ctx;
  nn->ntasks = ntasks;
  atomic_store_explicit(&nn->next, 0, memory_order_relaxed);
  unsigned gen = atomic_load_explicit(&nn->gen, memory_order_relaxed) + 1;
  atomic_store_explicit(&nn->door, (uint64_t)gen << 32, memory_order_release);
  atomic_store(&nn->gen, gen); /* publishes the job (seq_cst) */
  if (atomic_load(&nn->sleepers) > 0) {
    pthread_mutex_lock(&nn->lock);
    pthread_cond_broadcast(&nn->wake);
    pthread_mutex_unlock(&nn->lock);
  }
  claim_tasks(nn, 0);
  /* Every task is claimed: close the door and wait for the workers inside
   * (their tasks, and their last look at the job, must end before the
   * next job overwrites it). */
  uint64_t d =
      atomic_fetch_or_explicit(&nn->door, DOOR_CLOSED, memory_order_acq_rel);
  unsigned spins = 0;
  while ((d & DOOR_COUNT) != 0) {
    if (++spins % 1024 == 0)
      sched_yield(); /* a worker without a core: let it have ours */
    else
      cpu_relax();
    d = atomic_load_explicit(&nn->door, memory_order_acquire);
  }
  atomic_store(&nn->busy, false);
}

int lk_nn_parallel(lk_nn *nn, int ntasks,
                   void (*fn)(void *ctx, int task, int thread), void *ctx) {
  NN_CHECK(nn && fn, "lk_nn_parallel", "the context or the function is NULL");
  NN_CHECK(ntasks >= 0, "lk_nn_parallel", "ntasks is %d; expected >= 0",
           ntasks);
  nn__run(nn, ntasks, fn, ctx);
  return 0;
}
