/* @NAME@: the single-process strategy, with every entry a data-parallel
 * strategy has, each doing what it must when the world is one process.
 * A loopkit plugin of kind strategy, written by `loopkit new`: the place
 * to start a strategy of your own (an all-reduce over sockets, threads,
 * ...); the bundled mpi plugin is a complete one.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini minimises the bundled rosenbrock function with the bundled
 * sgd under this strategy; its log line says what setup found.
 *
 * abort is the one entry of any plugin whose job is to end the process. A
 * strategy usually has no state of its own; processes that start from the
 * same seed draw the same random numbers, which keeps them in step.
 *
 * Data parallel: every process holds the whole model and trains on its
 * own share of each epoch's batches (the loop hands process r the batches
 * r, r + world, ...); the gradients are averaged after every backward, so
 * every process takes the same step. */
#include "preamble.h"

typedef struct strategy {
  lk_host *host;
  bool check_finite; /* option */
  int rank, world;
} strategy;

static void destroy(void *self) {
  free(self);
}

/* create: a real strategy joins its group of processes here, so that rank
 * and world_size are known when the other plugins are created. */
static int create(lk_host *host, const lk_options *opts, void **self) {
  strategy *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->check_finite = lk_opt_bool(opts, "check_finite");
  s->rank = 0;
  s->world = 1;
  *self = s;
  return 0;
}

/* setup: after every plugin is created, before a checkpoint is loaded.
 * Every process must start from the same parameters and state (model
 * weights, optimizer buffers, the host's own state): a real strategy
 * broadcasts PARAMS and lk_host_states from rank 0. One process already
 * agrees with itself: we only say what there is. */
static int setup(void *self, lk_tensor *const *params, size_t n) {
  strategy *s = self;
  size_t values = 0, n_states = 0;
  for (size_t i = 0; i < n; i++)
    values += params[i]->numel;
  lk_host_states(s->host, &n_states);
  lk_log(s->host, LK_LOG_INFO,
         "rank %d of %d: %zu parameter tensors (%zu values) and %zu state "
         "tensors, nothing to broadcast",
         s->rank, s->world, n, values, n_states);
  return 0;
}

/* reduce_gradients: after every backward (only the last of an
 * accumulation window), before clipping and the update: average each
 * gradient over the processes. The sum over one process is its own
 * gradient and the mean divides by 1, so nothing changes; with
 * check_finite we also catch what an all-reduce would spread to every
 * process, a gradient that is inf or NaN, and name it. */
static int reduce_gradients(void *self, lk_tensor *const *params, size_t n) {
  strategy *s = self;
  for (size_t i = 0; s->check_finite && i < n; i++) {
    const lk_tensor *p = params[i];
    for (size_t k = 0; k < p->numel; k++) {
      double g = p->dtype == LK_F32 ? ((const float *)p->grad)[k]
                                    : ((const double *)p->grad)[k];
      if (!isfinite(g))
        return lk_fail(s->host, LK_EPLUGIN,
                       "gradient of %s[%zu] is %g (check_finite = true)",
                       p->name, k, g);
    }
  }
  return 0;
}

/* reduce_metrics: SUM N values over the processes, in place (the host
 * divides where it wants means). Every process calls it at the same points
 * with the same N. Over one process the values are their sums already;
 * the host calls it only when world_size is above 1. */
static int reduce_metrics(void *self, double *values, size_t n) {
  (void)self;
  (void)values;
  (void)n;
  return 0;
}

/* rank and world_size: this process's number (rank 0 writes the run
 * directory) and how many processes there are; what lk_host_rank and
 * lk_host_world_size tell the other plugins. */
static int rank(void *self) {
  return ((strategy *)self)->rank;
}

static int world_size(void *self) {
  return ((strategy *)self)->world;
}

/* abort: this process failed with MESSAGE, and the others would wait for
 * it in a collective forever: log it naming the rank, and end every
 * process with exit status STATUS (1: the run failed, 2: nothing was
 * trained). It does not return. The host calls it only when world_size is
 * above 1, so in one process it never runs. */
static void stop_all(void *self, int status, const char *message) {
  strategy *s = self;
  lk_log(s->host, LK_LOG_ERROR, "rank %d of %d: %s", s->rank, s->world,
         message);
  _Exit(status); /* a real strategy first stops the others (MPI_Abort) */
}

static const lk_option options[] = {
    {"check_finite", LK_OPT_BOOL, "false",
     "fail on a gradient that is inf or NaN, naming it", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_strategy_ops strategy_ops = {
    .setup = setup,
    .reduce_gradients = reduce_gradients,
    .reduce_metrics = reduce_metrics,
    .rank = rank,
    .world_size = world_size,
    .abort = stop_all,
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "one process, with every entry of a data-parallel strategy",
    .options = options,
    .create = create,
    .destroy = destroy,
    .strategy = &strategy_ops,
};
