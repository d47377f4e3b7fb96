/* @NAME@: a callback that implements every hook: it logs the loop's
 * progress, adds a grad_norm column to metrics.csv, and can stop training
 * once the validation loss is low enough. A loopkit plugin of kind
 * callback, written by `loopkit new`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini trains the bundled linear model on data.csv (csv data plugin,
 * sgd) with this callback: the log shows its lines, and metrics.csv in the
 * run directory has a grad_norm column.
 *
 * Hooks run in this order for each training batch (callbacks in the order
 * [plugins] callbacks lists them, then the model's own hooks if the step
 * plugin has any): on_train_batch_start, (training_step),
 * on_before_zero_grad, (zero_grad), on_before_backward, (backward),
 * on_after_backward, on_before_optimizer_step, (clipping, the update),
 * on_after_optimizer_step, on_train_batch_end. Epoch and validation hooks
 * run only with a data plugin. Every hook is optional: leave it NULL.
 * This callback's counters are for the log only: it has no state to
 * resume. */
#include "preamble.h"

typedef struct callback {
  lk_host *host;
  double stop_below; /* option: stop when val_loss < this (0: never) */
  double grad_norm;  /* of the last backward */
  double loss;       /* the last loss backward got */
  uint64_t batches, backwards, steps, validations; /* this epoch */
} callback;

static void destroy(void *self) {
  free(self);
}

static int create(lk_host *host, const lk_options *opts, void **self) {
  double stop_below = lk_opt_double(opts, "stop_below"); /* >= 0: ranged */
  callback *c = calloc(1, sizeof *c);
  if (!c)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  c->host = host;
  c->stop_below = stop_below;
  *self = c;
  return 0;
}

/* Once, before the first batch (also when a run resumes). */
static int on_train_start(void *self) {
  callback *c = self;
  size_t n = 0, values = 0;
  lk_tensor *const *params = lk_host_params(c->host, &n);
  for (size_t i = 0; i < n; i++)
    values += params[i]->numel;
  uint64_t epoch, step;
  lk_host_progress(c->host, &epoch, &step);
  lk_log(c->host, LK_LOG_INFO,
         "train start: %zu parameter tensors, %zu values; epoch %llu, step "
         "%llu",
         n, values, (unsigned long long)epoch, (unsigned long long)step);
  return 0;
}

static int on_train_epoch_start(void *self, uint64_t epoch) {
  callback *c = self;
  (void)epoch;
  c->batches = c->backwards = c->steps = 0;
  return 0;
}

/* BATCH is the data plugin's, valid during the call: read, never keep. */
static int on_train_batch_start(void *self, const lk_batch *batch) {
  callback *c = self;
  (void)batch;
  c->batches++;
  return 0;
}

static int on_before_zero_grad(void *self) {
  (void)self;
  return 0; /* the gradients still hold the last window's */
}

/* LOSS is what backward differentiates (divided by N when N batches
 * accumulate). */
static int on_before_backward(void *self, double loss) {
  callback *c = self;
  c->loss = loss;
  return 0;
}

/* After every backward. On the last batch of an accumulation window the
 * gradients are complete here (averaged over the processes of a
 * distributed run, divided by a precision plugin's loss scale), before
 * clipping: the place to measure them. */
static int on_after_backward(void *self) {
  callback *c = self;
  size_t n = 0;
  lk_tensor *const *params = lk_host_params(c->host, &n);
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *p = params[i];
    for (size_t k = 0; k < p->numel; k++) {
      double g = p->dtype == LK_F32 ? ((const float *)p->grad)[k]
                                    : ((const double *)p->grad)[k];
      sum += g * g;
    }
  }
  c->grad_norm = sqrt(sum);
  c->backwards++;
  return 0;
}

/* Called for every evaluation the optimizer asks for (once for sgd; a line
 * search may evaluate several times). */
static int on_before_optimizer_step(void *self) {
  (void)self;
  return 0;
}

static int on_after_optimizer_step(void *self) {
  callback *c = self;
  c->steps++;
  return 0;
}

/* RESULT is the step's loss and metrics. lk_host_log_metric adds a column
 * to the metrics.csv row written next: the row of this step. */
static int on_train_batch_end(void *self, const lk_step_result *result) {
  callback *c = self;
  (void)result;
  return lk_host_log_metric(c->host, "grad_norm", c->grad_norm);
}

static int on_train_epoch_end(void *self, uint64_t epoch) {
  callback *c = self;
  lk_log(c->host, LK_LOG_INFO,
         "epoch %llu: %llu batches, %llu backwards, %llu optimizer steps, "
         "last grad_norm %.4g",
         (unsigned long long)epoch, (unsigned long long)c->batches,
         (unsigned long long)c->backwards, (unsigned long long)c->steps,
         c->grad_norm);
  return 0;
}

/* After on_train_epoch_end, every [loop] val_every_n_epochs epochs. */
static int on_validation_start(void *self) {
  callback *c = self;
  c->validations++;
  return 0;
}

/* RESULT holds the validation split's mean loss and metrics. */
static int on_validation_end(void *self, const lk_step_result *result) {
  callback *c = self;
  if (!result->has_loss || !(result->loss < c->stop_below))
    return 0;
  lk_log(c->host, LK_LOG_INFO, "val_loss %.4g < stop_below %g: stopping",
         result->loss, c->stop_below);
  lk_host_request_stop(c->host); /* no further epoch starts */
  return 0;
}

/* Once, after the last batch (and before the test split, if any). */
static int on_train_end(void *self) {
  callback *c = self;
  double val;
  uint64_t epoch, step;
  lk_host_progress(c->host, &epoch, &step);
  /* The latest value of any metrics.csv column; LK_ENOTFOUND if none. */
  if (lk_host_metric(c->host, "val_loss", &val) != 0)
    val = NAN;
  lk_log(c->host, LK_LOG_INFO,
         "train end: %llu epochs, %llu steps, %llu validations, last "
         "val_loss %.4g",
         (unsigned long long)epoch, (unsigned long long)step,
         (unsigned long long)c->validations, val);
  return 0;
}

static const lk_option options[] = {
    {"stop_below", LK_OPT_DOUBLE, "0",
     "stop training once val_loss is below this (0: never)", "[0, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_callback_ops callback_ops = {
    .on_train_start = on_train_start,
    .on_train_epoch_start = on_train_epoch_start,
    .on_train_batch_start = on_train_batch_start,
    .on_before_zero_grad = on_before_zero_grad,
    .on_before_backward = on_before_backward,
    .on_after_backward = on_after_backward,
    .on_before_optimizer_step = on_before_optimizer_step,
    .on_after_optimizer_step = on_after_optimizer_step,
    .on_train_batch_end = on_train_batch_end,
    .on_validation_end = on_validation_end,
    .on_train_epoch_end = on_train_epoch_end,
    .on_train_end = on_train_end,
    .on_validation_start = on_validation_start,
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "every hook: logs progress and a grad_norm column",
    .options = options,
    .create = create,
    .destroy = destroy,
    .callback = &callback_ops,
};
