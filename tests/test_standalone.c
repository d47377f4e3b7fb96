/* lk_optimizer_open: an optimizer plugin minimising a closure made with
 * lk_bind from a plain C function, with no run and no model plugin; the
 * errors it gives for what it cannot use. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>

typedef void (*any_fn)(void);

/* The chained Rosenbrock function; its gradient into G. */
static double rosenbrock(const double *x, double *g, size_t n) {
  double f = 0;
  memset(g, 0, n * sizeof *g);
  for (size_t i = 0; i + 1 < n; i++) {
    double a = x[i + 1] - x[i] * x[i], b = 1 - x[i];
    f += 100 * a * a + b * b;
    g[i] += -400 * x[i] * a - 2 * b;
    g[i + 1] += 200 * a;
  }
  return f;
}

typedef struct problem {
  double x[4], g[4];
  lk_tensor t;
  lk_tensor *params[1];
  lk_bound *bound;
} problem;

static void problem_init(problem *p, size_t n) {
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < n; i++)
    p->x[i] = i % 2 ? 1.0 : -1.2;
  p->t = (lk_tensor){.name = "x",
                     .dtype = LK_F64,
                     .ndim = 1,
                     .shape = {n},
                     .numel = n,
                     .data = p->x,
                     .grad = p->g};
  p->params[0] = &p->t;
  const double *x = p->x;
  double *g = p->g;
  if (LK_BIND(rosenbrock, "double (const double *, double *, size_t)",
              &p->bound, &x, &g, &n) != 0)
    fail_msg("lk_bind: %s", lk_last_error());
}

static void test_lbfgs_minimises_a_bound_function(void **state) {
  (void)state;
  problem p;
  problem_init(&p, 4);
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_parse("standalone",
                                   "[lbfgs]\nmax_iter = 500\n"
                                   "line_search_fn = strong_wolfe\n"
                                   "tolerance_grad = 1e-12\n"
                                   "tolerance_change = 0\n",
                                   &cfg),
                   0);
  lk_optimizer *opt = NULL;
  if (lk_optimizer_open("lbfgs", cfg, p.params, 1, &opt) != 0)
    fail_msg("lk_optimizer_open: %s", lk_last_error());
  lk_config_free(cfg); /* the options are already read */
  assert_int_equal(
      lk_optimizer_step(opt, p.params, 1, lk_bound_function(p.bound)), 0);
  for (size_t i = 0; i < 4; i++)
    assert_true(fabs(p.x[i] - 1.0) < 1e-9);
  lk_optimizer_close(opt);
  lk_bound_free(p.bound);
}

/* Defaults but sgd's lr, which is required (as torch's); sam creates its
 * base optimizer (a plugin creating a plugin) just as it does in a run,
 * from the base's section. */
static void test_sgd_and_sam_with_defaults(void **state) {
  (void)state;
  const char *names[] = {"sgd", "sam"};
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_parse("standalone", "[sgd]\nlr = 0.001\n", &cfg),
                   0);
  for (size_t k = 0; k < 2; k++) {
    problem p;
    problem_init(&p, 2);
    lk_optimizer *opt = NULL;
    if (lk_optimizer_open(names[k], cfg, p.params, 1, &opt) != 0)
      fail_msg("lk_optimizer_open(%s): %s", names[k], lk_last_error());
    double before = lk_bound_function(p.bound)();
    for (int s = 0; s < 200; s++)
      assert_int_equal(
          lk_optimizer_step(opt, p.params, 1, lk_bound_function(p.bound)), 0);
    double after = lk_bound_function(p.bound)();
    if (!(after < before / 2))
      fail_msg("%s: f went from %g to %g", names[k], before, after);
    assert_true(lk_optimizer_lr(opt) == 0.001);
    lk_optimizer_close(opt);
    lk_bound_free(p.bound);
  }
  lk_config_free(cfg);
}

static void expect_error(const char *name, lk_tensor *const *params, size_t n,
                         int code, const char *want) {
  lk_optimizer *opt = (lk_optimizer *)&opt;
  assert_int_equal(lk_optimizer_open(name, NULL, params, n, &opt), code);
  assert_null(opt);
  if (!strstr(lk_last_error(), want))
    fail_msg("%s: message \"%s\" lacks \"%s\"", name, lk_last_error(), want);
}

static void test_refusals(void **state) {
  (void)state;
  problem p;
  problem_init(&p, 2);
  expect_error("rosenbrock", p.params, 1, LK_EKIND, "rosenbrock (");
  expect_error("rosenbrock", p.params, 1, LK_EKIND, "is not an optimizer");
  expect_error("no_such_plugin", p.params, 1, LK_ENOTFOUND, "no_such_plugin");
  expect_error("sgd", p.params, 0, LK_EINVAL, "no parameters");
  p.t.grad = NULL;
  expect_error("sgd", p.params, 1, LK_EINVAL,
               "parameter 0 (x) needs data, grad");
  p.t.grad = p.g;
  p.t.dtype = LK_I32;
  expect_error("sgd", p.params, 1, LK_EINVAL, "is i32");
  p.t.dtype = LK_F64;
  /* No config: sgd has no default rate, as torch's SGD. */
  expect_error("sgd", p.params, 1, LK_ECONFIG,
               "missing required option \"lr\"");
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_parse("bad", "[sgd]\nlr = -1\n", &cfg), 0);
  lk_optimizer *opt = NULL;
  assert_true(lk_optimizer_open("sgd", cfg, p.params, 1, &opt) < 0);
  assert_null(opt);
  if (!strstr(lk_last_error(), "lr"))
    fail_msg("bad lr: \"%s\"", lk_last_error());
  lk_config_free(cfg);
  lk_optimizer_close(NULL);
  lk_bound_free(p.bound);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lbfgs_minimises_a_bound_function),
      cmocka_unit_test(test_sgd_and_sam_with_defaults),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
