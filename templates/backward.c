/* @NAME@: the gradient of the Rosenbrock function
 *   f(x) = sum_{i=0}^{n-2} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2,
 * as a backward alone, for the parameter x of the bundled rosenbrock step
 * (in place of rosenbrock's own backward). A loopkit plugin of kind
 * backward, written by `loopkit new --kind backward`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini minimises f with the bundled rosenbrock as the step, this
 * plugin as the backward and the bundled sgd: x moves from (-1.2, 1)
 * towards the minimum at (1, 1), as it does with rosenbrock's own
 * backward. `loopkit gradcheck @NAME@.ini` holds this gradient against
 * central differences of the step's loss.
 *
 * A backward is the gradient of one loss: it knows the step it
 * differentiates, and finds that step's parameters with lk_host_params
 * (the step is created first). A separate backward replaces a model's
 * (another formula, a cheaper approximation) or gives one to a step that
 * has none; a model usually implements both kinds in one plugin, as
 * `loopkit new NAME --kind model` writes it. */
#include "preamble.h"

typedef struct grad {
  lk_host *host;
  lk_tensor *x; /* the step's parameter, owned by the host */
} grad;

static void destroy(void *self) {
  free(self);
}

/* create: the step's parameters exist already; find the one we
 * differentiate, and refuse a run where it is missing or not a vector of
 * reals, naming what we looked for. */
static int create(lk_host *host, const lk_options *opts, void **self) {
  (void)opts;
  size_t n = 0;
  lk_tensor *const *params = lk_host_params(host, &n);
  lk_tensor *x = NULL;
  for (size_t i = 0; i < n && !x; i++)
    if (strcmp(params[i]->name, "x") == 0)
      x = params[i];
  if (!x)
    return lk_fail(host, LK_ECONFIG,
                   "the step has no parameter x: this backward is the "
                   "gradient of the bundled rosenbrock ([plugins] step = "
                   "rosenbrock)");
  if ((x->dtype != LK_F64 && x->dtype != LK_F32) || x->ndim != 1 ||
      x->numel < 2)
    return lk_fail(host, LK_ECONFIG,
                   "parameter x: expected a vector of at least 2 f32 or f64");
  grad *g = calloc(1, sizeof *g);
  if (!g)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  g->host = host;
  g->x = x;
  *self = g;
  return 0;
}

/* Element I of tensor T's data or gradient, f32 or f64. */
static double get(const lk_tensor *t, const void *v, size_t i) {
  return t->dtype == LK_F32 ? ((const float *)v)[i] : ((const double *)v)[i];
}

static void add(const lk_tensor *t, void *v, size_t i, double d) {
  if (t->dtype == LK_F32)
    ((float *)v)[i] += (float)d;
  else
    ((double *)v)[i] += d;
}

/* backward: ADDS scale * df/dx into x's gradient (the host zeroes
 * gradients before each accumulation window, with the zero_grad plugin,
 * and passes scale = 1/N when N batches accumulate, or times a precision
 * plugin's loss scale). It runs right after training_step, with the same
 * BATCH (here empty: rosenbrock has no data) and the same parameters.
 * Term i of f, with d = x[i+1] - x[i]^2, gives
 *   df/dx[i]   += -400 x[i] d - 2 (1 - x[i])
 *   df/dx[i+1] +=  200 d */
static int backward(void *self, const lk_batch *batch, double scale) {
  grad *g = self;
  const lk_tensor *x = g->x;
  (void)batch;
  for (size_t i = 0; i + 1 < x->numel; i++) {
    double xi = get(x, x->data, i), next = get(x, x->data, i + 1);
    double d = next - xi * xi;
    add(x, x->grad, i, scale * (-400 * xi * d - 2 * (1 - xi)));
    add(x, x->grad, i + 1, scale * 200 * d);
  }
  return 0;
}

/* No options: the table is only its end. */
static const lk_option options[] = {{NULL, 0, NULL, NULL, NULL}};

static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "the gradient of the Rosenbrock function, for rosenbrock's x",
    .options = options,
    .create = create,
    .destroy = destroy,
    .backward = &backward_ops,
};
