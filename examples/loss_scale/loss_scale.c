/* loss_scale: dynamic loss scaling, as torch.cuda.amp.GradScaler does it,
 * as a precision plugin. Build: make; run: see loss_scale.ini.
 *
 * Mixed-precision training computes gradients in fp16, whose range ends at
 * 65504 and whose small values flush to zero. Scaling the loss by a large
 * factor before backward keeps small gradients representable; the
 * gradients are divided by it again before the update. When the factor is
 * too large the gradients overflow: the step is skipped and the factor
 * halved (backoff_factor). After growth_interval steps in a row without
 * overflow it is doubled (growth_factor), to find the largest factor that
 * works as the gradients change.
 *
 * The host's gradients here are f32 or f64, so fp16's overflow is
 * emulated: a scaled gradient whose magnitude exceeds max_value (fp16's
 * largest value by default), or that is not finite, has overflowed.
 *
 * The plugin is also a callback, to put the scale of each step and whether
 * it overflowed into metrics.csv (columns loss_scale and overflow): name it
 * in [plugins] callbacks as well as in [plugins] precision, and the two
 * roles share one instance. */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct scaler {
  lk_host *host;
  double growth_factor, backoff_factor, max_value;
  int64_t growth_interval;
  /* Host state, so that a resumed run continues with them. */
  lk_tensor *scale; /* [1] f64: the factor */
  lk_tensor
      *tracker; /* [1] f64: steps without overflow since the last change */
  /* The last unscaled step, for the metrics. */
  double used_scale;
  bool overflowed, unscaled;
} scaler;

static int create(lk_host *host, const lk_options *o, void **self) {
  double init = lk_opt_double(o, "init_scale");
  double growth = lk_opt_double(o, "growth_factor");
  double backoff = lk_opt_double(o, "backoff_factor");
  double max_value = lk_opt_double(o, "max_value");
  int64_t interval = lk_opt_int(o, "growth_interval");
  /* The host has checked every value against its range (the option
   * table's last column) before create. */
  scaler *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->growth_factor = growth;
  s->backoff_factor = backoff;
  s->max_value = max_value;
  s->growth_interval = interval;
  size_t one = 1;
  int rc = lk_host_add_state(host, "scale", LK_F64, 1, &one, &s->scale);
  if (rc == 0)
    rc =
        lk_host_add_state(host, "growth_tracker", LK_F64, 1, &one, &s->tracker);
  if (rc != 0) {
    free(s);
    return rc;
  }
  /* A resumed run overwrites both with the checkpoint's values. */
  *(double *)s->scale->data = init;
  *self = s;
  return 0;
}

static void destroy(void *self) {
  free(self);
}

/* A checkpoint's values: a scale that is a number > 0, and a count of
 * good steps below growth_interval. */
static int check_state(void *self) {
  scaler *s = self;
  int rc = lk_state_check(s->host, s->scale, 1e-300, 1e300, false);
  if (rc == 0)
    rc = lk_state_check(s->host, s->tracker, 0,
                        (double)(s->growth_interval - 1), true);
  return rc;
}

static double loss_scale(void *self) {
  return *(const double *)((scaler *)self)->scale->data;
}

/* Multiplies one tensor's gradients by INV; false when one of them had
 * overflowed before. The host zeroes every gradient of a skipped step, so
 * a tensor left half unscaled does no harm. */
static bool unscale_f64(double *g, size_t n, double inv, double max_value) {
  for (size_t k = 0; k < n; k++) {
    if (!(fabs(g[k]) <= max_value)) /* NaN fails the test too */
      return false;
    g[k] *= inv;
  }
  return true;
}

static bool unscale_f32(float *g, size_t n, double inv, double max_value) {
  float finv = (float)inv;
  for (size_t k = 0; k < n; k++) {
    if (!(fabs((double)g[k]) <= max_value))
      return false;
    g[k] *= finv;
  }
  return true;
}

/* GradScaler.update: back off at once on overflow, grow after
 * growth_interval good steps. A factor that would leave (0, inf) stays. */
static void update(scaler *s, bool overflow) {
  double *scale = s->scale->data, *tracker = s->tracker->data;
  double next = *scale;
  if (overflow) {
    next = *scale * s->backoff_factor;
    *tracker = 0;
  } else if (++*tracker >= (double)s->growth_interval) {
    next = *scale * s->growth_factor;
    *tracker = 0;
  }
  if (next != *scale && next > 0 && isfinite(next)) {
    lk_log(s->host, LK_LOG_INFO, "loss scale %g -> %g (%s)", *scale, next,
           overflow ? "gradients overflowed, step skipped"
                    : "no overflow for growth_interval steps");
    *scale = next;
  }
}

static int unscale_gradients(void *self, lk_tensor *const *params, size_t n,
                             bool *skip) {
  scaler *s = self;
  double scale = loss_scale(s), inv = 1 / scale;
  bool ok = true;
  for (size_t i = 0; ok && i < n; i++) {
    lk_tensor *p = params[i];
    if (p->dtype == LK_F64)
      ok = unscale_f64(p->grad, p->numel, inv, s->max_value);
    else if (p->dtype == LK_F32)
      ok = unscale_f32(p->grad, p->numel, inv, s->max_value);
    else
      return lk_fail(s->host, LK_EINVAL,
                     "parameter %s is %s: expected f32 or f64", p->name,
                     lk_dtype_name(p->dtype));
  }
  s->used_scale = scale;
  s->overflowed = !ok;
  s->unscaled = true;
  update(s, !ok);
  *skip = !ok;
  return 0;
}

/* The row of the step just taken: the factor its gradients were computed
 * with, and whether they overflowed (the step was skipped). */
static int on_train_batch_end(void *self, const lk_step_result *result) {
  scaler *s = self;
  (void)result;
  if (!s->unscaled) /* inside an accumulation window */
    return 0;
  s->unscaled = false;
  int rc = lk_host_log_metric(s->host, "loss_scale", s->used_scale);
  return rc ? rc : lk_host_log_metric(s->host, "overflow", s->overflowed);
}

static const lk_option options[] = {
    {"init_scale", LK_OPT_DOUBLE, "65536", "the first factor", "(0, inf)"},
    {"growth_factor", LK_OPT_DOUBLE, "2",
     "the factor is multiplied by this after growth_interval good steps",
     "(1, inf)"},
    {"backoff_factor", LK_OPT_DOUBLE, "0.5",
     "the factor is multiplied by this when gradients overflow", "(0, 1)"},
    {"growth_interval", LK_OPT_INT, "2000",
     "steps without overflow before the factor grows", "[1, inf)"},
    /* The range closes on inf, so the host accepts inf here. */
    {"max_value", LK_OPT_DOUBLE, "65504",
     "a scaled gradient larger in magnitude has overflowed (fp16's largest "
     "value); inf: only non-finite ones",
     "(0, inf]"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_precision_ops precision_ops = {
    .loss_scale = loss_scale, .unscale_gradients = unscale_gradients};
static const lk_callback_ops callback_ops = {.on_train_batch_end =
                                                 on_train_batch_end};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "loss_scale",
    .version = "1.0",
    .summary = "dynamic loss scaling with emulated fp16 overflow, as "
               "GradScaler",
    .options = options,
    .create = create,
    .destroy = destroy,
    .callback = &callback_ops,
    .precision = &precision_ops,
    .check_state = check_state};
