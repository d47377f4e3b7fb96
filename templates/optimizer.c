/* @NAME@: stochastic gradient descent with momentum,
 *   v = momentum v + grad;  param -= lr v
 * (torch.optim.SGD's form, with v = grad on the first step). A loopkit
 * plugin of kind optimizer, written by `loopkit new`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini minimises the bundled rosenbrock function with it: x moves
 * from (-1.2, 1) towards the minimum at (1, 1); metrics.csv in the run
 * directory has the loss of every step, and
 * `loopkit dump RUN_DIR/checkpoints/last.ckpt` prints x.
 *
 * State that must survive a resume, here the learning rate (a scheduler
 * changes it during the run), the momentum buffers and a step counter, is
 * allocated with lk_host_add_state in create, so that a resumed run
 * continues exactly; check_state refuses a checkpoint's values this
 * plugin cannot work with. */
#include "preamble.h"

typedef struct sgd {
  lk_host *host;
  double momentum;
  size_t n;         /* parameters at create time */
  lk_tensor *lr;    /* [1] state: a scheduler changes it during the run */
  lk_tensor *steps; /* [1] state: steps taken (0: the buffers are empty) */
  lk_tensor **buf;  /* [n] state: one momentum buffer per parameter */
} sgd;

static void destroy(void *self) {
  sgd *s = self;
  free(s->buf);
  free(s);
}

/* create runs after the model's, so the parameters exist: their number,
 * shapes and types are known here, and never change during the run. The
 * host has checked lr and momentum against their ranges (the options
 * table, below). */
static int create(lk_host *host, const lk_options *opts, void **self) {
  double lr = lk_opt_double(opts, "lr");
  double momentum = lk_opt_double(opts, "momentum");
  size_t n = 0;
  lk_host_params(host, &n);
  if (n == 0)
    return lk_fail(host, LK_ECONFIG,
                   "no parameters to optimize (the model added none)");
  sgd *s = calloc(1, sizeof *s);
  if (s)
    s->buf = calloc(n, sizeof *s->buf);
  if (!s || !s->buf) {
    free(s);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  s->host = host;
  s->momentum = momentum;
  s->n = n;
  /* State names are prefixed with the plugin's name in checkpoints
   * ("@NAME@.lr"); state is f32 or f64, never optimized, has no grad.
   * lk_host_add_param_states adds one tensor per parameter, of its dtype
   * and shape: "@NAME@.momentum.x" for parameter x. */
  size_t one = 1;
  int rc = lk_host_add_state(host, "lr", LK_F64, 1, &one, &s->lr);
  if (rc == 0)
    rc = lk_host_add_state(host, "steps", LK_F64, 1, &one, &s->steps);
  if (rc == 0)
    rc = lk_host_add_param_states(host, "momentum", s->buf, n);
  if (rc != 0) {
    destroy(s);
    return rc;
  }
  *(double *)s->lr->data = lr; /* a resume then loads the saved rate */
  lk_log(host, LK_LOG_INFO, "lr %g, momentum %g, %zu parameter tensors", lr,
         momentum, n);
  *self = s;
  return 0;
}

/* check_state: a checkpoint has just restored lr, steps and the buffers.
 * The host has checked that they are finite and have the shapes created
 * here; what else we rely on is ours to check: a rate >= 0 and a whole
 * step count. */
static int check_state(void *self) {
  sgd *s = self;
  int rc = lk_state_check(s->host, s->lr, 0, INFINITY, false);
  if (rc == 0)
    rc = lk_state_check(s->host, s->steps, 0, LK_STATE_MAX_COUNT, true);
  return rc;
}

/* get_lr and set_lr: what lk_host_lr and lk_host_set_lr reach, so that a
 * scheduler can drive this optimizer and "lr" can be logged. NULL in the
 * ops table would mean "no single learning rate". */
static double get_lr(void *self) {
  return *(const double *)((sgd *)self)->lr->data;
}

static void set_lr(void *self, double lr) {
  *(double *)((sgd *)self)->lr->data = lr;
}

/* One parameter tensor: each element's update, in its own precision. */
static void update(lk_tensor *p, lk_tensor *buf, double lr, double momentum,
                   bool first) {
  for (size_t k = 0; k < p->numel; k++) {
    if (p->dtype == LK_F64) {
      double *x = p->data, *v = buf->data;
      const double *g = p->grad;
      v[k] = first ? g[k] : momentum * v[k] + g[k];
      x[k] -= lr * v[k];
    } else {
      float *x = p->data, *v = buf->data;
      const float *g = p->grad;
      v[k] = first ? g[k] : (float)momentum * v[k] + g[k];
      x[k] -= (float)lr * v[k];
    }
  }
}

/* step: one update of PARAMS (the run's parameters, in the order they were
 * added). CLOSURE evaluates the model: it runs training_step, zero_grad and
 * backward, leaves the gradients in each param->grad and returns the loss;
 * it returns NaN when the evaluation failed or gave no loss, and then we
 * must return at once without touching the parameters. An optimizer that
 * needs several evaluations (a line search) may call it again. CLOSURE is
 * NULL in manual optimization: the gradients are already there. */
static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  sgd *s = self;
  if (closure && !isfinite(closure()))
    return 0;
  if (n != s->n)
    return lk_fail(s->host, LK_ESTATE,
                   "called with %zu parameters, created with %zu", n, s->n);
  double *steps = s->steps->data;
  for (size_t i = 0; i < n; i++)
    update(params[i], s->buf[i], get_lr(s), s->momentum, *steps == 0);
  *steps += 1;
  return 0;
}

/* The last field is the range the host holds each value to, before
 * create: "lr = -1" is refused with "option lr = -1: must be >= 0". */
static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.001", "learning rate", "[0, inf)"},
    {"momentum", LK_OPT_DOUBLE, "0.9", "momentum factor", "[0, 1)"},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_optimizer_ops optimizer_ops = {
    .step = step, .get_lr = get_lr, .set_lr = set_lr};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "stochastic gradient descent with momentum",
    .options = options,
    .create = create,
    .destroy = destroy,
    .optimizer = &optimizer_ops,
    .check_state = check_state,
};
