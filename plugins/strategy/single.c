/* single: the default strategy, named so that a config can say
 * `strategy = single` (the default, loopkit.ini(5)): one process, rank 0 of 1,
 * nothing to reduce. The host behaves the same without any strategy. */
#include <loopkit/loopkit.h>

#include "bundled.h"

static int rank(void *self) {
  (void)self;
  return 0;
}

static int world_size(void *self) {
  (void)self;
  return 1;
}

static const lk_strategy_ops strategy_ops = {.rank = rank,
                                             .world_size = world_size};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_DESCRIPTOR(.name = "single",
                       .summary = "one process (the default strategy)",
                       .strategy = &strategy_ops);
