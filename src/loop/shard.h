/* Which batches of a split each process takes: shard.c, the one place
 * that shares a split's batches out among the run's processes (the
 * training loop, the evaluation, and auto.c counting an epoch's steps). */
#ifndef LK_SHARD_H
#define LK_SHARD_H

#include <stddef.h>

/* The batches of a split one process takes, of the split's NB: batch
 * FIRST + I * STRIDE for I below COUNT. */
typedef struct lk__shard {
  size_t first, stride, count;
} lk__shard;
/* Training's: every WORLD-th batch of the epoch's order from RANK's, the
 * same count each (they step together; the last NB % WORLD are left out),
 * so that K processes with batches of B train as one with batches of K*B.
 * None each when NB < WORLD. */
lk__shard lk__shard_train(size_t nb, int world, int rank);
/* An evaluation's: every WORLD-th batch from RANK's, to the split's end
 * (the sums are reduced); each takes all when NB < WORLD. */
lk__shard lk__shard_eval(size_t nb, int world, int rank);
static inline size_t lk__shard_batch(const lk__shard *s, size_t i) {
  return s->first + i * s->stride;
}

#endif
