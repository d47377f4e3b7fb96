/* trials: gradient descent that tries several step sizes in each step and
 * keeps the best one. An optimizer plugin that evaluates the closure more
 * than once per step.
 *
 * One step from w, with loss f0 and gradient g at w: for every factor c of
 * option factors it evaluates the trial point w - lr*c*g through the
 * closure. The parameters end at the trial with the lowest loss if that
 * loss is below f0, and stay at w otherwise. With adapt = true the learning
 * rate then becomes the step size that won (or shrinks by the smallest
 * factor when none did), so that the next step starts from there.
 *
 * Build: make (see the Makefile). Run: loopkit train trials.ini */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct trials {
  lk_host *host;
  lk_tensor *lr;         /* [1] f64, host state: checkpointed */
  const double *factors; /* the option's values: valid until destroy */
  size_t n_factors;
  double smallest; /* the smallest factor */
  bool adapt;
  size_t n, total; /* parameters at create, and their elements */
  double *w0, *g;  /* the start point and its gradient, concatenated */
} trials;

static void destroy(void *self) {
  trials *t = self;
  free(t->w0);
  free(t->g);
  free(t);
}

static int create(lk_host *host, const lk_options *opts, void **self) {
  /* lr and every factor are in their ranges: the host checked them. */
  double lr = lk_opt_double(opts, "lr");
  size_t nf = 0;
  const double *factors = lk_opt_doubles(opts, "factors", &nf);
  if (nf == 0) /* the host refuses an empty list: a guard for the loop */
    return lk_fail(host, LK_ECONFIG, "option factors is empty");
  double smallest = factors[0];
  for (size_t k = 0; k < nf; k++)
    smallest = fmin(smallest, factors[k]);

  /* The model was created before us: its parameters are all there. */
  size_t n = 0;
  lk_tensor *const *params = lk_host_params(host, &n);
  if (n == 0)
    return lk_fail(host, LK_ECONFIG, "no parameters to optimize");
  trials *t = calloc(1, sizeof *t);
  if (!t)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  t->host = host;
  t->factors = factors;
  t->n_factors = nf;
  t->smallest = smallest;
  t->adapt = lk_opt_bool(opts, "adapt");
  t->n = n;
  for (size_t i = 0; i < n; i++)
    t->total += params[i]->numel;
  /* Scratch space, not state: it holds nothing from one step to the next,
   * so a checkpoint need not keep it. */
  t->w0 = malloc(t->total * sizeof *t->w0);
  t->g = malloc(t->total * sizeof *t->g);
  if (!t->w0 || !t->g) {
    destroy(t);
    return lk_fail(host, LK_ENOMEM, "out of memory for %zu elements", t->total);
  }
  /* The learning rate is state: adapt and schedulers change it during the
   * run, and a resumed run must go on with the rate it had. The host
   * checkpoints it as "trials.lr". */
  size_t one = 1;
  int rc = lk_host_add_state(host, "lr", LK_F64, 1, &one, &t->lr);
  if (rc != 0) {
    destroy(t);
    return rc;
  }
  *(double *)t->lr->data = lr;
  *self = t;
  return 0;
}

static double get_lr(void *self) {
  return *(const double *)((trials *)self)->lr->data;
}

static void set_lr(void *self, double lr) {
  *(double *)((trials *)self)->lr->data = lr;
}

/* Element k of a tensor's data or grad, as double, whatever its dtype. */
static double get(const lk_tensor *p, const void *v, size_t k) {
  return p->dtype == LK_F64 ? ((const double *)v)[k]
                            : (double)((const float *)v)[k];
}

static void put(lk_tensor *p, size_t k, double v) {
  if (p->dtype == LK_F64)
    ((double *)p->data)[k] = v;
  else
    ((float *)p->data)[k] = (float)v;
}

/* w0 and g from the parameters, just after an evaluation at w0. */
static void save(trials *t, lk_tensor *const *params) {
  size_t at = 0;
  for (size_t i = 0; i < t->n; i++)
    for (size_t k = 0; k < params[i]->numel; k++, at++) {
      t->w0[at] = get(params[i], params[i]->data, k);
      t->g[at] = get(params[i], params[i]->grad, k);
    }
}

/* The parameters at w0 - step * g (step 0: back at w0). */
static void move(trials *t, lk_tensor *const *params, double step) {
  size_t at = 0;
  for (size_t i = 0; i < t->n; i++)
    for (size_t k = 0; k < params[i]->numel; k++, at++)
      put(params[i], k, t->w0[at] - step * t->g[at]);
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  trials *t = self;
  if (!closure) /* manual optimization, or a wrapper that passes none */
    return lk_fail(t->host, LK_EINVAL,
                   "trials evaluates the model several times per step: it "
                   "needs a closure");
  if (n != t->n)
    return lk_fail(t->host, LK_ESTATE,
                   "called with %zu parameters, created with %zu", n, t->n);
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    total += params[i]->numel;
  if (total != t->total) /* w0 and g were sized at create */
    return lk_fail(t->host, LK_ESTATE,
                   "called with %zu parameter elements, created with %zu",
                   total, t->total);

  /* NaN (or any non-finite loss) means the evaluation failed or gave no
   * loss: return at once and leave the parameters as they were. The loop
   * reports the closure's own error. */
  double f0 = closure();
  if (!isfinite(f0))
    return 0;
  /* Read the gradient now: every later evaluation replaces it (or, inside
   * a gradient-accumulation window, adds to it). */
  save(t, params);

  double lr = get_lr(t), best = f0, best_step = 0, last_step = 0;
  for (size_t k = 0; k < t->n_factors; k++) {
    last_step = lr * t->factors[k];
    move(t, params, last_step);
    double f = closure();
    if (!isfinite(f)) {
      move(t, params, 0); /* the NaN rule: put w0 back, stop */
      return 0;
    }
    if (f < best) {
      best = f;
      best_step = last_step;
    }
  }
  /* The loop logs the last evaluation's loss. Make the last evaluation the
   * one at the point we keep, so that metrics.csv shows the loss of the
   * parameters this step leaves behind. */
  if (best_step != last_step) {
    move(t, params, best_step);
    if (!isfinite(closure())) {
      move(t, params, 0);
      return 0;
    }
  }
  if (t->adapt)
    set_lr(t, best_step > 0 ? best_step : lr * t->smallest);
  /* An extra metrics.csv column for this step's row. */
  return lk_host_log_metric(t->host, "step_size", best_step);
}

static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.1", "learning rate: the base step size",
     "[0, inf)"},
    {"factors", LK_OPT_DOUBLES, "0.5,1,2",
     "the trial step sizes, as multiples of lr", "(0, inf)"},
    {"adapt", LK_OPT_BOOL, "false",
     "make the winning step size the next step's lr", NULL},
    {NULL, 0, NULL, NULL, NULL}};

/* get_lr and set_lr let a scheduler (and lr_monitor) drive the rate. */
static const lk_optimizer_ops optimizer_ops = {
    .step = step, .get_lr = get_lr, .set_lr = set_lr};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "trials",
    .version = "1.0",
    .summary = "gradient descent that keeps the best of several step sizes",
    .options = options,
    .create = create,
    .destroy = destroy,
    .optimizer = &optimizer_ops,
};
