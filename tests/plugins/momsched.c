/* momsched: a scheduler that sets the optimizer's momentum (ABI 1.5's
 * lk_host_set_momentum), for the tests of the optimizers' get_momentum and
 * set_momentum: before optimizer step k + 1 the momentum is
 * values[k mod n], k being the steps taken (global_step); create sets
 * values[0], unless create = false (a scheduler that first sets the
 * momentum while the run trains). It keeps no state: what a resumed run
 * continues with must come from the optimizer's. */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct momsched {
  lk_host *host;
  const double *values;
  size_t n;
} momsched;

/* Sets the momentum of step K + 1 (K steps taken). */
static int apply(momsched *s, uint64_t k) {
  return lk_host_set_momentum(s->host, s->values[k % s->n]);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  momsched *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->values = lk_opt_doubles(o, "values", &s->n);
  if (!s->values || s->n == 0) {
    free(s);
    return lk_fail(host, LK_ECONFIG, "values: give at least one");
  }
  if (isnan(lk_host_momentum(host))) {
    free(s);
    return lk_fail(host, LK_ECONFIG, "the optimizer has no momentum");
  }
  int rc = lk_opt_bool(o, "create") ? apply(s, 0) : 0;
  if (rc != 0) {
    free(s);
    return rc;
  }
  *self = s;
  return 0;
}

static int step(void *self, lk_interval when, const lk_metric *metrics,
                size_t n) {
  momsched *s = self;
  (void)metrics;
  (void)n;
  if (when != LK_INTERVAL_STEP)
    return 0;
  uint64_t epoch, global_step;
  lk_host_progress(s->host, &epoch, &global_step);
  return apply(s, global_step);
}

static const lk_option options[] = {
    {"values", LK_OPT_DOUBLES, "0.9", "the momentum before step k+1: values[k]",
     NULL},
    {"create", LK_OPT_BOOL, "true", "set values[0] at create", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_scheduler_ops scheduler_ops = {.step = step};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "momsched",
    .version = "1.0",
    .summary = "sets the optimizer's momentum from a list, step by step",
    .options = options,
    .create = create,
    .destroy = free,
    .scheduler = &scheduler_ops,
};
