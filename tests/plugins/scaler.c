/* scaler: a precision plugin for tests. A fixed loss scale; unscale calls
 * named in skip_at report an overflow. Each call is written to a trace
 * file (the probe model's, so the order with the other hooks shows). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct scaler {
  lk_host *host;
  FILE *trace;
  double scale;
  const double *skip_at;
  size_t n_skip;
  long calls;
  bool fail;
} scaler;

static int create(lk_host *host, const lk_options *o, void **self) {
  scaler *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->scale = lk_opt_double(o, "scale");
  s->fail = lk_opt_bool(o, "fail");
  s->skip_at = lk_opt_doubles(o, "skip_at", &s->n_skip);
  const char *trace = lk_opt_string(o, "trace");
  if (*trace && !(s->trace = fopen(trace, "a"))) {
    free(s);
    return lk_fail(host, LK_EIO, "cannot open trace %s", trace);
  }
  *self = s;
  return 0;
}

static void destroy(void *self) {
  scaler *s = self;
  if (s->trace)
    fclose(s->trace);
  free(s);
}

static double loss_scale(void *self) {
  scaler *s = self;
  if (s->trace)
    fprintf(s->trace, "precision:loss_scale\n"), fflush(s->trace);
  return s->scale;
}

static int unscale_gradients(void *self, lk_tensor *const *params, size_t n,
                             bool *skip) {
  scaler *s = self;
  long call = s->calls++;
  *skip = false;
  if (s->fail)
    return lk_fail(s->host, LK_ENONFINITE, "gradients are not finite (test)");
  for (size_t i = 0; i < s->n_skip; i++)
    *skip = *skip || s->skip_at[i] == (double)call;
  for (size_t i = 0; i < n; i++) {
    double *g = params[i]->grad;
    if (s->trace && i == 0)
      fprintf(s->trace, "precision:unscale g0=%g%s\n", g[0],
              *skip ? " skip" : "");
    if (s->trace)
      fflush(s->trace);
    for (size_t k = 0; k < params[i]->numel; k++)
      g[k] /= s->scale;
  }
  return 0;
}

static const lk_precision_ops precision = {loss_scale, unscale_gradients};

static const lk_option options[] = {
    {"scale", LK_OPT_DOUBLE, "1024",
     "the loss scale (0 or less: refused by "
     "the host at the first backward)",
     NULL},
    {"skip_at", LK_OPT_DOUBLES, "-1",
     "unscale calls (from 0) that report an overflow", NULL},
    {"fail", LK_OPT_BOOL, "false",
     "unscale_gradients fails with LK_ENONFINITE and a message", NULL},
    {"trace", LK_OPT_STRING, "", "file that receives one line per call", NULL},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "scaler",
    .version = "1.0",
    .summary = "test precision: a fixed loss scale, overflows on demand",
    .options = options,
    .create = create,
    .destroy = destroy,
    .precision = &precision,
};
