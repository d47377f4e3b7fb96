/* ema: an exponential moving average of the weights, updated after every
 * optimizer step, ema = decay * ema + (1 - decay) * w, in each parameter's
 * dtype. Validation sees the averaged weights: on_validation_start swaps
 * the contents of the weights and the averages, on_validation_end swaps
 * them back. With apply_at_end the averages are copied into the weights at
 * on_train_end, so that the test split and the final checkpoint use them
 * (a run resumed from that checkpoint trains on from the averages).
 *
 * The averages are host state ("ema.<parameter>"), so they are
 * checkpointed and a resumed run continues them; "ema.flags" says whether
 * they were initialized (from the weights, at the first on_train_start) and
 * whether a checkpoint was written while they were swapped in: a callback
 * listed before ema that saves at on_validation_end (checkpoint) writes the
 * averages as the weights, and a run resumed from that file swaps them back
 * before it trains. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

enum { FLAG_INITIALIZED, FLAG_SWAPPED, N_FLAGS };

typedef struct ema {
  lk_host *host;
  double decay;
  bool apply_at_end;
  size_t n;         /* the parameters there were at create */
  lk_tensor **avg;  /* avg[i] averages the parameter i */
  lk_tensor *flags; /* f64[N_FLAGS] */
} ema;

static void destroy(void *self) {
  ema *s = self;
  free(s->avg);
  free(s);
}

/* Asked each time: a plugin created later may add parameters, and the
 * host's list may move. */
static lk_tensor *const *params(const ema *s) {
  size_t n;
  return lk_host_params(s->host, &n);
}

static int add_averages(ema *s, lk_host *host) {
  size_t nf = N_FLAGS;
  int rc = lk_host_add_state(host, "flags", LK_F64, 1, &nf, &s->flags);
  for (size_t i = 0; rc == 0 && i < s->n; i++) {
    const lk_tensor *p = params(s)[i];
    if (p->dtype != LK_F32 && p->dtype != LK_F64)
      return lk_fail(host, LK_ECONFIG,
                     "parameter %s is %s: only f32 and f64 are averaged",
                     p->name, lk_dtype_name(p->dtype));
    rc = lk_host_add_state(host, p->name, p->dtype, p->ndim, p->shape,
                           &s->avg[i]);
  }
  return rc;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  size_t n;
  lk_host_params(host, &n);
  if (n == 0)
    return lk_fail(host, LK_ECONFIG, "the run has no parameters to average");
  ema *s = calloc(1, sizeof *s);
  if (!s || !(s->avg = calloc(n, sizeof *s->avg))) {
    free(s);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  s->host = host;
  s->decay = lk_opt_double(o, "decay");
  s->apply_at_end = lk_opt_bool(o, "apply_at_end");
  s->n = n;
  int rc = add_averages(s, host);
  if (rc != 0) {
    destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

static bool flag(const ema *s, int which) {
  return ((const double *)s->flags->data)[which] != 0;
}

static void set_flag(ema *s, int which, bool on) {
  ((double *)s->flags->data)[which] = on ? 1 : 0;
}

static size_t bytes(const lk_tensor *t) {
  return t->numel * lk_dtype_size(t->dtype);
}

static void copy_into(lk_tensor *const *dst, lk_tensor *const *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    memcpy(dst[i]->data, src[i]->data, bytes(src[i]));
}

static void swap_contents(ema *s) {
  for (size_t i = 0; i < s->n; i++) {
    unsigned char *a = params(s)[i]->data, *b = s->avg[i]->data;
    for (size_t k = 0, len = bytes(s->avg[i]); k < len; k++) {
      unsigned char t = a[k];
      a[k] = b[k];
      b[k] = t;
    }
  }
  set_flag(s, FLAG_SWAPPED, !flag(s, FLAG_SWAPPED));
}

/* A checkpoint's values: two flags. */
static int check_state(void *self) {
  ema *s = self;
  return lk_state_check(s->host, s->flags, 0, 1, true);
}

static int on_train_start(void *self) {
  ema *s = self;
  if (flag(s, FLAG_SWAPPED)) {
    swap_contents(s);
    lk_log(s->host, LK_LOG_INFO,
           "the checkpoint held the averages as the weights (written during "
           "a validation): swapped back");
  }
  if (!flag(s, FLAG_INITIALIZED)) {
    copy_into(s->avg, params(s), s->n);
    set_flag(s, FLAG_INITIALIZED, true);
  }
  return 0;
}

static void update_f64(double *avg, const double *w, size_t n, double decay) {
  double k = 1.0 - decay;
  for (size_t i = 0; i < n; i++)
    avg[i] = decay * avg[i] + k * w[i];
}

static void update_f32(float *avg, const float *w, size_t n, double decay) {
  float d = (float)decay, k = (float)(1.0 - decay);
  for (size_t i = 0; i < n; i++)
    avg[i] = d * avg[i] + k * w[i];
}

static int on_after_optimizer_step(void *self) {
  ema *s = self;
  for (size_t i = 0; i < s->n; i++) {
    const lk_tensor *p = params(s)[i];
    if (p->dtype == LK_F64)
      update_f64(s->avg[i]->data, p->data, p->numel, s->decay);
    else
      update_f32(s->avg[i]->data, p->data, p->numel, s->decay);
  }
  return 0;
}

static int on_validation_start(void *self) {
  swap_contents(self);
  return 0;
}

static int on_validation_end(void *self, const lk_step_result *result) {
  (void)result;
  swap_contents(self);
  return 0;
}

static int on_train_end(void *self) {
  ema *s = self;
  if (s->apply_at_end)
    copy_into(params(s), s->avg, s->n);
  return 0;
}

static const lk_option options[] = {
    {"decay", LK_OPT_DOUBLE, "0.999",
     "ema = decay * ema + (1 - decay) * weights after every optimizer step",
     "[0, 1)"},
    {"apply_at_end", LK_OPT_BOOL, "true",
     "copy the averages into the weights when training ends (the test split "
     "and the final checkpoint then use them)",
     NULL},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_CALLBACK(
    "ema",
    "exponential moving average of the weights, used for "
    "validation and applied at the end",
    destroy, check_state, .on_train_start = on_train_start,
    .on_after_optimizer_step = on_after_optimizer_step,
    .on_validation_end = on_validation_end, .on_train_end = on_train_end,
    .on_validation_start = on_validation_start);
