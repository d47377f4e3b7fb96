/* @NAME@: exponential decay of the learning rate,
 *   lr = max(min_lr, base_lr * gamma^t)
 * after t optimizer steps (or epochs), base_lr being the optimizer's rate
 * when training starts. A loopkit plugin of kind scheduler, written by
 * `loopkit new`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini minimises the bundled rosenbrock function with the bundled
 * sgd under this schedule: the lr column of metrics.csv, in the run
 * directory, shrinks by gamma every step.
 *
 * State that must survive a resume, here t and base_lr, is allocated with
 * lk_host_add_state in create, so that a resumed run continues the
 * schedule exactly; check_state refuses a checkpoint's values the
 * schedule cannot continue from. */
#include "preamble.h"

typedef struct scheduler {
  lk_host *host;
  lk_interval interval; /* the one this schedule acts on */
  double gamma, min_lr;
  lk_tensor *t;       /* [1] state: intervals so far */
  lk_tensor *base_lr; /* [1] state: the optimizer's rate at the start */
} scheduler;

static void destroy(void *self) {
  free(self);
}

/* create runs after the optimizer's, so lk_host_lr reads its rate (NaN if
 * the optimizer has no get_lr, and then there is nothing to schedule).
 * This is where a scheduler sets the initial rate; ours starts at
 * base_lr, the rate as the optimizer has it. */
static int create(lk_host *host, const lk_options *opts, void **self) {
  double gamma = lk_opt_double(opts, "gamma");   /* in (0, 1]: ranged */
  double min_lr = lk_opt_double(opts, "min_lr"); /* >= 0 */
  double lr = lk_host_lr(host);
  if (!isfinite(lr))
    return lk_fail(host, LK_ECONFIG,
                   "the optimizer has no learning rate to schedule (it does "
                   "not implement get_lr and set_lr)");
  scheduler *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->gamma = gamma;
  s->min_lr = min_lr;
  /* An LK_OPT_ENUM option is one of its choices, checked by the host. */
  s->interval = strcmp(lk_opt_string(opts, "interval"), "epoch") == 0
                    ? LK_INTERVAL_EPOCH
                    : LK_INTERVAL_STEP;
  size_t one = 1;
  int rc = lk_host_add_state(host, "t", LK_F64, 1, &one, &s->t);
  if (rc == 0)
    rc = lk_host_add_state(host, "base_lr", LK_F64, 1, &one, &s->base_lr);
  if (rc != 0) {
    free(s);
    return rc;
  }
  *(double *)s->base_lr->data = lr; /* t is 0: the host zero-fills state */
  *self = s;
  return 0;
}

/* check_state: a checkpoint has just restored t and base_lr (the host has
 * checked they are finite): t must count whole intervals and base_lr be a
 * rate. */
static int check_state(void *self) {
  scheduler *s = self;
  int rc = lk_state_check(s->host, s->t, 0, LK_STATE_MAX_COUNT, true);
  if (rc == 0)
    rc = lk_state_check(s->host, s->base_lr, 0, INFINITY, false);
  return rc;
}

/* step: after every optimizer step (WHEN = LK_INTERVAL_STEP) and after
 * every epoch and its validation (LK_INTERVAL_EPOCH); we act on the
 * interval the options name and ignore the other. METRICS are the values
 * just logged ("loss", the step's metrics; at an epoch's end the epoch's
 * mean loss and "val_..."): what a schedule that watches a metric reads.
 * The host logs the rate each step used as metrics.csv's lr column. */
static int step(void *self, lk_interval when, const lk_metric *metrics,
                size_t n) {
  scheduler *s = self;
  (void)metrics;
  (void)n;
  if (when != s->interval)
    return 0;
  double *t = s->t->data;
  *t += 1;
  double lr = *(const double *)s->base_lr->data * pow(s->gamma, *t);
  /* lk_host_set_lr fails (with a message) on a rate that is not >= 0. */
  return lk_host_set_lr(s->host, lr > s->min_lr ? lr : s->min_lr);
}

/* The last field is a number's range or an enum's choices: the host
 * refuses "gamma = 0" or "interval = batch" before create, naming them. */
static const lk_option options[] = {
    {"gamma", LK_OPT_DOUBLE, "0.99", "factor of the rate per interval",
     "(0, 1]"},
    {"min_lr", LK_OPT_DOUBLE, "0", "the rate never goes below this",
     "[0, inf)"},
    {"interval", LK_OPT_ENUM, "step",
     "decay after every optimizer step, or after every epoch", "step|epoch"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_scheduler_ops scheduler_ops = {.step = step};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "exponential decay of the learning rate",
    .options = options,
    .create = create,
    .destroy = destroy,
    .scheduler = &scheduler_ops,
    .check_state = check_state,
};
