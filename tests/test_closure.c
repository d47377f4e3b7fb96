/* The closure's semantics (docs/architecture.md, "The life of one batch"): call order, the loss
 * divisor, zero_grad only when asked, the no-loss warning, terminate_on_nan
 * for the loss and for parameters, consume-once and its two errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>

/* What only the library and its tests use (linked from the objects). */
#include "../src/ffi/closures.h"

typedef struct world {
  char calls[32][32];
  int n;
  double loss; /* what the step reports */
  bool has_loss;
  bool fail_step;
  double scale; /* what backward received */
  int warnings;
  double w[2], g[2];
  lk_tensor param;
  lk_tensor *params[1];
} world;

static void record(world *w, const char *what) {
  if (w->n < 32)
    snprintf(w->calls[w->n++], sizeof w->calls[0], "%s", what);
}

static int step(void *self, const lk_batch *b, lk_step_result *out) {
  world *w = self;
  (void)b;
  record(w, "step");
  if (w->fail_step)
    return LK_EPLUGIN;
  out->has_loss = w->has_loss;
  out->loss = w->loss;
  out->metrics[out->n_metrics++] = (lk_metric){"acc", 0.5};
  return 0;
}

static int zero_grad(void *self, lk_tensor *const *params, size_t n) {
  (void)params;
  (void)n;
  record(self, "zero_grad");
  return 0;
}

static int backward(void *self, const lk_batch *b, double scale) {
  world *w = self;
  (void)b;
  record(w, "backward");
  w->scale = scale;
  return 0;
}

static int before_zero_grad(void *ctx) {
  record(ctx, "before_zero_grad");
  return 0;
}
static int before_backward(void *ctx, double loss) {
  (void)loss;
  record(ctx, "before_backward");
  return 0;
}
static int after_backward(void *ctx) {
  record(ctx, "after_backward");
  return 0;
}

static void on_log(void *user, lk_log_level level, const char *msg) {
  world *w = user;
  if (level == LK_LOG_WARN && strstr(msg, "no loss"))
    w->warnings++;
}

static lk_closure *make(world *w, bool hooks, bool nan_check) {
  memset(w, 0, sizeof *w);
  w->has_loss = true;
  w->loss = 6.0;
  w->param = (lk_tensor){.name = "w",
                         .dtype = LK_F64,
                         .ndim = 1,
                         .shape = {2},
                         .numel = 2,
                         .data = w->w,
                         .grad = w->g};
  w->params[0] = &w->param;
  lk_closure_parts p = {
      .step = step,
      .step_self = w,
      .zero_grad = zero_grad,
      .zero_grad_self = w,
      .backward = backward,
      .backward_self = w,
      .params = w->params,
      .n_params = 1,
      .terminate_on_nan = nan_check,
      .step_name = "stepper",
      .backward_name = "backer",
      .log = on_log,
      .log_user = w,
  };
  if (hooks) {
    p.before_zero_grad = before_zero_grad;
    p.before_backward = before_backward;
    p.after_backward = after_backward;
    p.hook_ctx = w;
  }
  lk_closure *c = NULL;
  assert_int_equal(lk_closure_new(&p, &c), 0);
  lk__closure_set_caller(c, "opt");
  lk_closure_prepare(c, NULL, 1.0, true, 0, 0);
  return c;
}

static void test_order(void **state) {
  (void)state;
  world w;
  lk_closure *c = make(&w, true, false);
  double loss = lk_closure_function(c)();
  assert_true(loss == 6.0);
  const char *want[] = {"step",      "before_zero_grad",
                        "zero_grad", "before_backward",
                        "backward",  "after_backward"};
  assert_int_equal(w.n, 6);
  for (int i = 0; i < 6; i++)
    assert_string_equal(w.calls[i], want[i]);
  lk_step_result r;
  assert_int_equal(lk_closure_consume(c, &r), 0);
  assert_true(r.has_loss && r.loss == 6.0);
  assert_int_equal(r.n_metrics, 1);
  assert_string_equal(r.metrics[0].name, "acc");
  lk_closure_free(c);
}

static void test_divisor_and_zero_grad_flag(void **state) {
  (void)state;
  world w;
  lk_closure *c = make(&w, false, false);
  lk_closure_prepare(c, NULL, 4.0, false, 0, 1);
  double loss = lk_closure_function(c)();
  assert_true(loss == 1.5);
  assert_true(w.scale == 0.25);
  assert_int_equal(w.n, 2); /* no zero_grad off a window's start */
  assert_string_equal(w.calls[0], "step");
  assert_string_equal(w.calls[1], "backward");
  lk_closure_free(c);
}

static void test_no_loss(void **state) {
  (void)state;
  world w;
  lk_closure *c = make(&w, false, false);
  w.has_loss = false;
  lk_closure_fn fn = lk_closure_function(c);
  assert_true(isnan(fn()));
  assert_true(isnan(fn()));
  /* zero_grad runs, backward does not; warned once. */
  assert_int_equal(w.n, 4);
  assert_string_equal(w.calls[1], "zero_grad");
  assert_string_equal(w.calls[3], "zero_grad");
  assert_int_equal(w.warnings, 1);
  assert_int_equal(lk__closure_calls(c), 2);
  lk_closure_free(c);
}

static void test_nan_loss_stops(void **state) {
  (void)state;
  world w;
  lk_closure *c = make(&w, false, true);
  w.loss = NAN;
  lk_closure_prepare(c, NULL, 1.0, true, 2, 5);
  assert_true(isnan(lk_closure_function(c)()));
  assert_int_equal(w.n, 1); /* zero_grad and backward skipped */
  assert_int_equal(lk_closure_consume(c, NULL), LK_ENONFINITE);
  assert_non_null(strstr(lk_last_error(), "non-finite loss nan"));
  assert_non_null(strstr(lk_last_error(), "epoch 2, batch 5"));
  lk_closure_free(c);
}

static void test_nan_loss_passes_without_check(void **state) {
  (void)state;
  world w;
  lk_closure *c = make(&w, false, false);
  w.loss = INFINITY;
  assert_true(isinf(lk_closure_function(c)()));
  assert_int_equal(w.n, 3);
  assert_int_equal(lk_closure_consume(c, NULL), 0);
  lk_closure_free(c);
}

static void test_nan_parameter_named(void **state) {
  (void)state;
  world w;
  lk_closure *c = make(&w, false, true);
  w.w[1] = NAN;
  assert_true(isnan(lk_closure_function(c)()));
  assert_int_equal(w.n, 3); /* checked after backward */
  assert_int_equal(lk_closure_consume(c, NULL), LK_ENONFINITE);
  assert_non_null(strstr(lk_last_error(), "non-finite parameter w[1]"));
  w.w[1] = 0;
  w.g[0] = INFINITY;
  lk_closure_prepare(c, NULL, 1.0, true, 0, 0);
  lk_closure_function(c)();
  assert_int_equal(lk_closure_consume(c, NULL), LK_ENONFINITE);
  assert_non_null(strstr(lk_last_error(), "gradient of parameter w[0]"));
  lk_closure_free(c);
}

static void test_consume_once(void **state) {
  (void)state;
  world w;
  lk_closure *c = make(&w, false, false);
  assert_int_equal(lk_closure_consume(c, NULL), LK_ESTATE);
  assert_non_null(
      strstr(lk_last_error(), "optimizer opt returned without calling"));
  lk_closure_function(c)();
  assert_int_equal(lk_closure_consume(c, NULL), 0);
  assert_int_equal(lk_closure_consume(c, NULL), LK_ESTATE);
  assert_non_null(strstr(lk_last_error(), "already consumed"));
  lk_closure_free(c);
}

static void test_many_calls_keep_last(void **state) {
  (void)state;
  world w;
  lk_closure *c = make(&w, false, false);
  lk_closure_fn fn = lk_closure_function(c);
  for (int i = 1; i <= 5; i++) {
    w.loss = i;
    fn();
  }
  lk_step_result r;
  assert_int_equal(lk_closure_consume(c, &r), 0);
  assert_true(r.loss == 5.0);
  assert_int_equal(lk__closure_calls(c), 5);
  lk_closure_free(c);
}

static void test_step_failure(void **state) {
  (void)state;
  world w;
  lk_closure *c = make(&w, false, false);
  w.fail_step = true;
  assert_true(isnan(lk_closure_function(c)()));
  assert_int_equal(w.n, 1);
  assert_int_equal(lk_closure_consume(c, NULL), LK_EPLUGIN);
  assert_non_null(strstr(lk_last_error(), "training_step of plugin stepper"));
  lk_closure_free(c);
}

static void test_no_step_refused(void **state) {
  (void)state;
  lk_closure_parts p = {0};
  lk_closure *c = NULL;
  assert_int_equal(lk_closure_new(&p, &c), LK_EINVAL);
  assert_null(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order),
      cmocka_unit_test(test_divisor_and_zero_grad_flag),
      cmocka_unit_test(test_no_loss),
      cmocka_unit_test(test_nan_loss_stops),
      cmocka_unit_test(test_nan_loss_passes_without_check),
      cmocka_unit_test(test_nan_parameter_named),
      cmocka_unit_test(test_consume_once),
      cmocka_unit_test(test_many_calls_keep_last),
      cmocka_unit_test(test_step_failure),
      cmocka_unit_test(test_no_step_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
