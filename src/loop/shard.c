/* Which batches of a split each process takes (shard.h). */
#include "shard.h"

lk__shard lk__shard_train(size_t nb, int world, int rank) {
  if (world <= 1)
    return (lk__shard){0, 1, nb};
  return (lk__shard){(size_t)rank, (size_t)world, nb / (size_t)world};
}

lk__shard lk__shard_eval(size_t nb, int world, int rank) {
  if (world <= 1 || nb < (size_t)world)
    return (lk__shard){0, 1, nb};
  size_t w = (size_t)world, r = (size_t)rank;
  return (lk__shard){r, w, (nb - r + w - 1) / w};
}
