/* A complete loopkit plugin: the model f(x) = sum (x_i - target)^2 as a
 * step and its gradient as a backward. Build: make; run: see quadratic.ini */
#include <loopkit/loopkit.h>

static int create(lk_host *host, const lk_options *opts, void **self) {
  size_t n = (size_t)lk_opt_int(opts, "n");
  lk_tensor *x;
  int rc = lk_host_add_param(host, "x", LK_F64, 1, &n, &x);
  *self = x; /* the model's state is just its parameter */
  return rc;
}

static int step(void *self, const lk_batch *batch, lk_step_result *out) {
  lk_tensor *x = self;
  double *v = x->data, f = 0;
  (void)batch; /* no data: the problem is the whole batch */
  for (size_t i = 0; i < x->numel; i++)
    f += (v[i] - 3.0) * (v[i] - 3.0);
  out->has_loss = true;
  out->loss = f;
  return 0;
}

static int backward(void *self, const lk_batch *batch, double scale) {
  lk_tensor *x = self;
  double *v = x->data, *g = x->grad;
  (void)batch;
  for (size_t i = 0; i < x->numel; i++)
    g[i] += scale * 2.0 * (v[i] - 3.0);
  return 0;
}

static const lk_option options[] = {
    {"n", LK_OPT_INT, "4", "number of variables", "[0, inf)"}, {NULL}};
static const lk_step_ops step_ops = {.training_step = step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "quadratic",
    .version = "1.0",
    .summary = "sum of (x_i - 3)^2, an out-of-tree example",
    .options = options,
    .create = create,
    .step = &step_ops,
    .backward = &backward_ops};
