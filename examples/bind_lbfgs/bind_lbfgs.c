/* bind_lbfgs: minimise a plain C function with loopkit's L-BFGS, without a
 * model plugin or a training run. Build: make; run: ./bind_lbfgs
 * [CONFIG.ini] (default bind_lbfgs.ini).
 *
 * The function knows nothing of loopkit: it takes the point and a gradient
 * array and returns the value. LK_BIND (lk_bind_n) fixes its three
 * arguments (pointers to arrays this program owns, and their length), counted
 * so that a forgotten one is an error, and gives back a
 * zero-argument closure, double (*)(void), which is all an optimizer
 * plugin asks of a model. lk_optimizer_open creates the plugin for the
 * program's own tensor. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

/* Counts the evaluations, to report what the line search cost. */
static unsigned long evaluations;

/* The chained Rosenbrock function of n variables, and its gradient into g:
 * f(x) = sum_{i<n-1} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2, least 0 at
 * x = (1, ..., 1). */
static double rosen(const double *x, double *g, size_t n) {
  double f = 0;
  evaluations++;
  for (size_t i = 0; i < n; i++)
    g[i] = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    double a = x[i + 1] - x[i] * x[i], b = 1 - x[i];
    f += 100 * a * a + b * b;
    g[i] += -400 * x[i] * a - 2 * b;
    g[i + 1] += 200 * a;
  }
  return f;
}

/* [problem] KEY of CFG as a positive integer, or DEF when absent. */
static int config_count(const lk_config *cfg, const char *key, long def,
                        long *out) {
  const lk_config_entry *e = lk_config_find(cfg, "problem", key);
  char *end;
  if (!e) {
    *out = def;
    return 0;
  }
  errno = 0;
  *out = strtol(e->value, &end, 10);
  if (errno || end == e->value || *end || *out < 1 || *out > 1000000) {
    fprintf(stderr,
            "bind_lbfgs: %s: [problem] %s = %s: expected 1 to 1000000\n",
            e->where, key, e->value);
    return -1;
  }
  return 0;
}

static int fail(const char *what) {
  fprintf(stderr, "bind_lbfgs: %s: %s\n", what, lk_last_error());
  return 1;
}

/* Steps L-BFGS until a step changes nothing, at most MAX_STEPS times. */
static int minimise(lk_optimizer *opt, lk_tensor *const *params,
                    lk_closure_fn f, long max_steps, long *steps) {
  const lk_tensor *t = params[0];
  double *x = t->data, *before = malloc(t->numel * sizeof *before);
  int rc = before ? 0 : LK_ENOMEM;
  bool moved = true;
  for (*steps = 0; rc == 0 && moved && *steps < max_steps; ++*steps) {
    for (size_t i = 0; i < t->numel; i++)
      before[i] = x[i];
    rc = lk_optimizer_step(opt, params, 1, f);
    moved = false;
    for (size_t i = 0; i < t->numel; i++)
      moved |= x[i] != before[i];
  }
  free(before);
  return rc;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "bind_lbfgs.ini";
  lk_config *cfg = NULL;
  long n = 0, max_steps = 0, steps = 0;
  if (argc > 2) {
    fprintf(stderr, "usage: bind_lbfgs [CONFIG.ini]\n");
    return 2;
  }
  if (lk_config_load(path, &cfg) != 0)
    return fail(path);
  if (config_count(cfg, "n", 2, &n) != 0 ||
      config_count(cfg, "max_steps", 100, &max_steps) != 0) {
    lk_config_free(cfg);
    return 2;
  }

  /* The program owns the parameter: its values and its gradient. */
  double *x = malloc((size_t)n * sizeof *x), *g = malloc((size_t)n * sizeof *g);
  if (!x || !g) {
    free(x);
    free(g);
    lk_config_free(cfg);
    fprintf(stderr, "bind_lbfgs: out of memory\n");
    return 1;
  }
  for (long i = 0; i < n; i++)
    x[i] = i % 2 ? 1.0 : -1.2; /* the classic start, (-1.2, 1, -1.2, ...) */
  lk_tensor t = {.name = "x",
                 .dtype = LK_F64,
                 .ndim = 1,
                 .shape = {(size_t)n},
                 .numel = (size_t)n,
                 .data = x,
                 .grad = g};
  lk_tensor *params[] = {&t};

  /* rosen(x, g, n) as a closure: LK_BIND copies the values its addresses
   * point to, and counts them, so that a forgotten one is an error. */
  const double *xa = x;
  double *ga = g;
  size_t na = (size_t)n;
  lk_bound *bound = NULL;
  lk_optimizer *opt = NULL;
  int status = 0;
  if (LK_BIND(rosen, "double (const double *, double *, size_t)", &bound, &xa,
              &ga, &na) != 0)
    status = fail("LK_BIND");
  else if (lk_optimizer_open("lbfgs", cfg, params, 1, &opt) != 0)
    status = fail("lk_optimizer_open lbfgs");
  else if (minimise(opt, params, lk_bound_function(bound), max_steps, &steps) !=
           0)
    status = fail("lk_optimizer_step");
  if (status == 0) {
    unsigned long calls = evaluations;
    double f = rosen(x, g, (size_t)n);
    printf("minimum %.17g after %ld steps and %lu evaluations\n", f, steps,
           calls);
    for (long i = 0; i < n; i++)
      printf("x[%ld] %.17g\n", i, x[i]);
  }
  lk_optimizer_close(opt);
  lk_bound_free(bound);
  lk_config_free(cfg);
  free(x);
  free(g);
  return status;
}
