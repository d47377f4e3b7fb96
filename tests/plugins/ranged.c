/* ranged: a model whose options declare ranges (ABI 1.4), for the host's
 * checks of them: loss = sum (x_i - target)^2 over `n` weights. */
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct ranged {
  lk_tensor *x;
  double target;
} ranged;

static int create(lk_host *host, const lk_options *o, void **self) {
  ranged *r = calloc(1, sizeof *r);
  if (!r)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  size_t n = (size_t)lk_opt_int(o, "n");
  r->target = lk_opt_double(o, "unit");
  int rc = lk_host_add_param(host, "x", LK_F64, 1, &n, &r->x);
  if (rc != 0) {
    free(r);
    return rc;
  }
  *self = r;
  return 0;
}

static int step(void *self, const lk_batch *b, lk_step_result *out) {
  ranged *r = self;
  (void)b;
  const double *x = r->x->data;
  double f = 0;
  for (size_t i = 0; i < r->x->numel; i++)
    f += (x[i] - r->target) * (x[i] - r->target);
  out->has_loss = true;
  out->loss = f;
  return 0;
}

static int backward(void *self, const lk_batch *b, double scale) {
  ranged *r = self;
  (void)b;
  const double *x = r->x->data;
  double *g = r->x->grad;
  for (size_t i = 0; i < r->x->numel; i++)
    g[i] += scale * 2 * (x[i] - r->target);
  return 0;
}

static const lk_option options[] = {
    {"n", LK_OPT_INT, "2", "weights", "[1, 1000]"},
    {"unit", LK_OPT_DOUBLE, "0.5", "the target", "[0, 1)"},
    {"positive", LK_OPT_DOUBLE, "1", "> 0", "(0, inf)"},
    {"scale", LK_OPT_DOUBLE, "inf", "> 0, inf allowed", "(0, inf]"},
    {"betas", LK_OPT_DOUBLES, "0.9,0.999", "each in [0, 1]", "[0, 1]"},
    {"plain", LK_OPT_DOUBLE, "0", "any finite number", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "ranged",
    .version = "1.0",
    .summary = "a quadratic whose options declare ranges (tests)",
    .options = options,
    .create = create,
    .destroy = free,
    .step = &step_ops,
    .backward = &backward_ops,
};
