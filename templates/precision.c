/* @NAME@: dynamic loss scaling, as mixed-precision training does it
 * (torch.cuda.amp.GradScaler's rule). Backward runs on the loss times a
 * scale, so that small gradients survive a low-precision format; the
 * gradients are divided by the scale before the update. When they
 * overflowed, the step is skipped and the scale halved; after
 * growth_interval good steps in a row it doubles. A loopkit plugin of kind
 * precision (plugin ABI 1.3), written by `loopkit new`.
 *
 * The model here computes in double, so nothing overflows by itself:
 * option max_value emulates a float16 gradient, which cannot exceed 65504
 * (0 turns that off: then only inf and NaN count as overflow).
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini minimises the bundled rosenbrock function with the bundled
 * sgd under this plugin: the log shows the first steps skipped while the
 * scale comes down from 65536, and the scale growing again later.
 *
 * State that must survive a resume, here the scale and the count of good
 * steps, is allocated with lk_host_add_state in create, so that a resumed
 * run continues with the scale it had; check_state refuses a checkpoint's
 * scale that is not > 0.
 *
 * At most one precision plugin per run, with automatic optimization. */
#include "preamble.h"

typedef struct precision {
  lk_host *host;
  double growth, backoff, max_value;
  int64_t interval;
  lk_tensor *scale; /* [1] state: the current loss scale */
  lk_tensor *good;  /* [1] state: steps without overflow since a change */
  uint64_t skipped; /* for the log */
} precision;

static void destroy(void *self) {
  free(self);
}

/* The host has held every option to its range (the options table, below)
 * before create. */
static int create(lk_host *host, const lk_options *opts, void **self) {
  double init = lk_opt_double(opts, "init_scale");
  double growth = lk_opt_double(opts, "growth_factor");
  double backoff = lk_opt_double(opts, "backoff_factor");
  double max_value = lk_opt_double(opts, "max_value");
  int64_t interval = lk_opt_int(opts, "growth_interval");
  precision *p = calloc(1, sizeof *p);
  if (!p)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  p->host = host;
  p->growth = growth;
  p->backoff = backoff;
  p->max_value = max_value;
  p->interval = interval;
  size_t one = 1;
  int rc = lk_host_add_state(host, "scale", LK_F64, 1, &one, &p->scale);
  if (rc == 0)
    rc = lk_host_add_state(host, "good_steps", LK_F64, 1, &one, &p->good);
  if (rc != 0) {
    free(p);
    return rc;
  }
  *(double *)p->scale->data = init; /* a resume then loads the saved one */
  *self = p;
  return 0;
}

/* check_state: a checkpoint has just restored the scale and the count
 * (the host has checked they are finite). A scale must be > 0, which
 * lk_state_check's closed range cannot say; the count is a whole number. */
static int check_state(void *self) {
  precision *p = self;
  double scale = *(const double *)p->scale->data;
  if (!(scale > 0))
    return lk_fail(p->host, LK_EFORMAT,
                   "state %s = %g: the loss scale must be > 0", p->scale->name,
                   scale);
  return lk_state_check(p->host, p->good, 0, LK_STATE_MAX_COUNT, true);
}

/* loss_scale: asked before every backward; backward then gets
 * scale * loss_scale (scale being 1/N under accumulation), so the
 * gradients it adds are loss_scale times too large. It must be finite and
 * > 0. */
static double loss_scale(void *self) {
  return *(const double *)((precision *)self)->scale->data;
}

/* Whether scaled gradient G is one the emulated format cannot hold. */
static bool overflows(const precision *p, double g) {
  return !isfinite(g) || (p->max_value > 0 && fabs(g) > p->max_value);
}

/* unscale_gradients: once per optimizer step, after the last backward of
 * the accumulation window (and after the strategy averaged the gradients
 * over the processes), before on_after_backward, clipping and the update.
 * Divide every gradient by the scale it was computed with, and set *SKIP
 * when they overflowed: the host then zeroes the gradients, the optimizer
 * gets NaN from its closure and leaves the parameters alone, and the
 * step's loss is still logged. The scale for the next step is chosen
 * here. */
static int unscale_gradients(void *self, lk_tensor *const *params, size_t n,
                             bool *skip) {
  precision *p = self;
  double *scale = p->scale->data, *good = p->good->data;
  bool overflow = false;
  for (size_t i = 0; i < n && !overflow; i++) {
    const lk_tensor *t = params[i];
    for (size_t k = 0; k < t->numel && !overflow; k++)
      overflow =
          overflows(p, t->dtype == LK_F32 ? ((const float *)t->grad)[k]
                                          : ((const double *)t->grad)[k]);
  }
  if (overflow) {
    p->skipped++;
    lk_log(p->host, LK_LOG_INFO,
           "gradients overflowed at scale %g: step skipped (%llu so far), "
           "scale now %g",
           *scale, (unsigned long long)p->skipped, *scale * p->backoff);
    *scale *= p->backoff;
    *good = 0;
    *skip = true;
    return 0;
  }
  double inverse = 1 / *scale;
  for (size_t i = 0; i < n; i++) {
    lk_tensor *t = params[i];
    for (size_t k = 0; k < t->numel; k++) {
      if (t->dtype == LK_F32)
        ((float *)t->grad)[k] *= (float)inverse;
      else
        ((double *)t->grad)[k] *= inverse;
    }
  }
  if (++*good >= (double)p->interval) {
    lk_log(p->host, LK_LOG_INFO, "%lld steps without overflow: scale %g -> %g",
           (long long)p->interval, *scale, *scale * p->growth);
    *scale *= p->growth;
    *good = 0;
  }
  *skip = false;
  return 0;
}

/* The last field is each number's range, which the host enforces. */
static const lk_option options[] = {
    {"init_scale", LK_OPT_DOUBLE, "65536", "the first loss scale", "(0, inf)"},
    {"growth_factor", LK_OPT_DOUBLE, "2",
     "the scale's factor after growth_interval good steps", "(1, inf)"},
    {"backoff_factor", LK_OPT_DOUBLE, "0.5",
     "the scale's factor after an overflow", "(0, 1)"},
    {"growth_interval", LK_OPT_INT, "2000",
     "good steps in a row before the scale grows", "[1, 1000000000]"},
    {"max_value", LK_OPT_DOUBLE, "65504",
     "a scaled gradient above this overflows (65504: float16's largest; "
     "0: only inf and NaN do)",
     "[0, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_precision_ops precision_ops = {
    .loss_scale = loss_scale, .unscale_gradients = unscale_gradients};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "dynamic loss scaling, float16 overflow emulated",
    .options = options,
    .create = create,
    .destroy = destroy,
    .precision = &precision_ops,
    .check_state = check_state,
};
