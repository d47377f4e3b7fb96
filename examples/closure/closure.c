/* closure: an optimizer plugin minimising a closure made from three plain
 * C functions, the way the core of loopkit composes a training step.
 * Build: make; run: ./closure [CONFIG.ini] (default closure.ini).
 *
 * The problem is a least-squares line fit, y = a x + b, to points this
 * program owns. step computes the loss, zero_grad clears the gradients,
 * backward adds d(loss)/d(a, b). lk_closure_new composes them into one
 * evaluation (step, zero_grad, backward, in that order, the result kept
 * for lk_closure_consume) behind a plain double (*)(void): all an
 * optimizer asks of a model. lk_optimizer_open creates the optimizer that
 * [optimizer] name says (adam, lbfgs, ...) for the program's own tensor,
 * with its options from the config's section of that name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#define N_POINTS 8

typedef struct line {
  double x[N_POINTS], y[N_POINTS];
  lk_tensor *w; /* w[0] = a, w[1] = b */
} line;

/* The mean squared error of the fit. */
static int step(void *self, const lk_batch *batch, lk_step_result *out) {
  line *l = self;
  const double *w = l->w->data;
  double loss = 0;
  (void)batch;
  for (int i = 0; i < N_POINTS; i++) {
    double r = w[0] * l->x[i] + w[1] - l->y[i];
    loss += r * r / N_POINTS;
  }
  out->has_loss = true;
  out->loss = loss;
  return 0;
}

static int zero_grad(void *self, lk_tensor *const *params, size_t n) {
  (void)self;
  for (size_t i = 0; i < n; i++)
    memset(params[i]->grad, 0, params[i]->numel * sizeof(double));
  return 0;
}

/* Adds SCALE times the gradient (SCALE is 1 / the accumulation count). */
static int backward(void *self, const lk_batch *batch, double scale) {
  line *l = self;
  const double *w = l->w->data;
  double *g = l->w->grad;
  (void)batch;
  for (int i = 0; i < N_POINTS; i++) {
    double r = w[0] * l->x[i] + w[1] - l->y[i];
    g[0] += scale * 2 * r * l->x[i] / N_POINTS;
    g[1] += scale * 2 * r / N_POINTS;
  }
  return 0;
}

static int fail(const char *what) {
  fprintf(stderr, "closure: %s: %s\n", what, lk_last_error());
  return 1;
}

int main(int argc, char **argv) {
  lk_config *cfg = NULL;
  if (lk_config_load(argc > 1 ? argv[1] : "closure.ini", &cfg) != 0)
    return fail("config");
  const lk_config_entry *name = lk_config_find(cfg, "optimizer", "name");
  const lk_config_entry *steps = lk_config_find(cfg, "optimizer", "steps");
  int n_steps = steps ? atoi(steps->value) : 200;

  /* The points, on y = 2 x - 1 with a little noise of our own. */
  line l;
  for (int i = 0; i < N_POINTS; i++) {
    l.x[i] = i - 3.5;
    l.y[i] = 2 * l.x[i] - 1 + 0.01 * ((i * 37 % 11) - 5);
  }
  double data[2] = {0, 0}, grad[2] = {0, 0};
  lk_tensor w = {"w", LK_F64, 1, {2}, 2, data, grad};
  lk_tensor *params[] = {&w};
  l.w = &w;

  lk_closure_parts parts = {
      .step = step,
      .step_self = &l,
      .zero_grad = zero_grad,
      .backward = backward,
      .backward_self = &l,
      .params = params,
      .n_params = 1,
      .step_name = "line",
      .zero_grad_name = "line",
      .backward_name = "line",
  };
  lk_closure *closure = NULL;
  lk_optimizer *opt = NULL;
  if (lk_closure_new(&parts, &closure) != 0) {
    lk_config_free(cfg);
    return fail("closure");
  }
  if (lk_optimizer_open(name ? name->value : "adam", cfg, params, 1, &opt) !=
      0) {
    lk_closure_free(closure);
    lk_config_free(cfg);
    return fail("optimizer");
  }
  lk_batch none = {0}; /* the whole problem, every step */
  lk_step_result r = {0};
  int rc = 0;
  for (int s = 0; s < n_steps && rc == 0; s++) {
    lk_closure_prepare(closure, &none, 1, true, 0, (uint64_t)s);
    rc = lk_optimizer_step(opt, params, 1, lk_closure_function(closure));
    if (rc == 0)
      rc = lk_closure_consume(closure, &r);
  }
  if (rc != 0)
    fail("step");
  else
    printf("a %.17g\nb %.17g\nloss %.17g after %d steps\n", data[0], data[1],
           r.loss, n_steps);
  lk_optimizer_close(opt);
  lk_closure_free(closure);
  lk_config_free(cfg);
  return rc ? 1 : 0;
}
