/* Closure composition: lk_closure_then and lk__closure_around run their
 * functions in order around the inner closure, a failing AFTER turns the
 * loss into NaN, wraps nest, and the result is a plain function pointer. */
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

/* What ran, in order. */
static char trace[64][16];
static int n_trace;
static double inner_loss = 3.5;
static int inner_calls;

static void record(const char *what) {
  if (n_trace < 64)
    snprintf(trace[n_trace++], sizeof trace[0], "%s", what);
}

static int reset(void **state) {
  (void)state;
  n_trace = 0;
  inner_calls = 0;
  inner_loss = 3.5;
  return 0;
}

static double inner(void) {
  record("inner");
  inner_calls++;
  return inner_loss;
}

typedef struct ctx {
  const char *name;
  double seen; /* the loss AFTER received */
  int fail;    /* what AFTER returns */
} ctx;

static int then_after(void *p, double loss) {
  ctx *c = p;
  c->seen = loss;
  record(c->name);
  return c->fail;
}

static void before(void *p) {
  char what[16];
  snprintf(what, sizeof what, "before:%s", ((ctx *)p)->name);
  record(what);
}

static void after(void *p) {
  char what[16];
  snprintf(what, sizeof what, "after:%s", ((ctx *)p)->name);
  record(what);
}

/* An optimizer: sees only the pointer and may call it many times. */
static double call_n(lk_closure_fn f, int n) {
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += f();
  return sum;
}

static void test_then_order_and_loss(void **state) {
  (void)state;
  ctx c = {"then", 0, 0};
  lk_wrap *w = NULL;
  assert_int_equal(lk_closure_then(inner, then_after, &c, &w), 0);
  lk_closure_fn f = lk_wrap_function(w);
  assert_non_null(f);
  assert_true(f != inner);
  assert_true(f() == 3.5);
  assert_true(c.seen == 3.5);
  assert_int_equal(n_trace, 2);
  assert_string_equal(trace[0], "inner");
  assert_string_equal(trace[1], "then");
  lk_wrap_free(w);
}

static void test_then_failure_gives_nan(void **state) {
  (void)state;
  ctx c = {"then", 0, LK_EPLUGIN};
  lk_wrap *w = NULL;
  assert_int_equal(lk_closure_then(inner, then_after, &c, &w), 0);
  double loss = lk_wrap_function(w)();
  assert_true(isnan(loss));
  assert_int_equal(inner_calls, 1);
  assert_true(c.seen == 3.5); /* AFTER still saw the real loss */
  c.fail = 0;                 /* the same wrap recovers when AFTER does */
  assert_true(lk_wrap_function(w)() == 3.5);
  lk_wrap_free(w);
}

static void test_then_passes_nan_through(void **state) {
  (void)state;
  ctx c = {"then", 0, 0};
  lk_wrap *w = NULL;
  inner_loss = NAN;
  assert_int_equal(lk_closure_then(inner, then_after, &c, &w), 0);
  assert_true(isnan(lk_wrap_function(w)()));
  assert_true(isnan(c.seen));
  lk_wrap_free(w);
}

static void test_around_order(void **state) {
  (void)state;
  ctx c = {"p", 0, 0};
  lk_wrap *w = NULL;
  inner_loss = -2.25;
  assert_int_equal(lk__closure_around(inner, before, after, &c, &w), 0);
  assert_true(lk_wrap_function(w)() == -2.25);
  assert_int_equal(n_trace, 3);
  assert_string_equal(trace[0], "before:p");
  assert_string_equal(trace[1], "inner");
  assert_string_equal(trace[2], "after:p");
  lk_wrap_free(w);
}

/* A profiler around clipping around the model, as the loop builds it. */
static void test_nesting(void **state) {
  (void)state;
  ctx clip = {"clip", 0, 0}, prof = {"prof", 0, 0}, outer = {"out", 0, 0};
  lk_wrap *w1 = NULL, *w2 = NULL, *w3 = NULL;
  assert_int_equal(lk_closure_then(inner, then_after, &clip, &w1), 0);
  assert_int_equal(
      lk__closure_around(lk_wrap_function(w1), before, after, &prof, &w2), 0);
  assert_int_equal(
      lk__closure_around(lk_wrap_function(w2), before, after, &outer, &w3), 0);
  assert_true(lk_wrap_function(w3)() == 3.5);
  const char *want[] = {"before:out", "before:prof", "inner",
                        "clip",       "after:prof",  "after:out"};
  assert_int_equal(n_trace, 6);
  for (int i = 0; i < 6; i++)
    assert_string_equal(trace[i], want[i]);

  /* The failure of the innermost AFTER reaches the outermost caller. */
  clip.fail = 1;
  assert_true(isnan(lk_wrap_function(w3)()));
  lk_wrap_free(w3);
  lk_wrap_free(w2);
  lk_wrap_free(w1);
}

static void test_then_of_then(void **state) {
  (void)state;
  ctx a = {"a", 0, 0}, b = {"b", 0, 0};
  lk_wrap *wa = NULL, *wb = NULL;
  assert_int_equal(lk_closure_then(inner, then_after, &a, &wa), 0);
  assert_int_equal(lk_closure_then(lk_wrap_function(wa), then_after, &b, &wb),
                   0);
  assert_true(lk_wrap_function(wb)() == 3.5);
  assert_int_equal(n_trace, 3);
  assert_string_equal(trace[1], "a");
  assert_string_equal(trace[2], "b");
  /* The inner AFTER fails: the outer one sees NaN and passes it on. */
  a.fail = 1;
  assert_true(isnan(lk_wrap_function(wb)()));
  assert_true(isnan(b.seen));
  lk_wrap_free(wb);
  lk_wrap_free(wa);
}

static void test_plain_pointer_many_calls(void **state) {
  (void)state;
  ctx c = {"p", 0, 0};
  lk_wrap *w = NULL;
  inner_loss = 0.5;
  assert_int_equal(lk__closure_around(inner, before, after, &c, &w), 0);
  lk_closure_fn f = lk_wrap_function(w);
  double (*plain)(void) = f; /* no cast: it is the C type */
  assert_true(call_n(plain, 10000) == 5000.0);
  assert_int_equal(inner_calls, 10000);
  /* The pointer does not change between calls. */
  assert_true(lk_wrap_function(w) == f);
  lk_wrap_free(w);
}

static void test_errors(void **state) {
  (void)state;
  ctx c = {"c", 0, 0};
  lk_wrap *w = (lk_wrap *)&c; /* must be reset to NULL on failure */
  assert_int_equal(lk_closure_then(NULL, then_after, &c, &w), LK_EINVAL);
  assert_null(w);
  assert_non_null(strstr(lk_last_error(), "lk_closure_then"));
  assert_non_null(strstr(lk_last_error(), "inner closure is NULL"));
  assert_int_equal(lk_closure_then(inner, NULL, &c, &w), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "after function is NULL"));
  assert_int_equal(lk_closure_then(inner, then_after, &c, NULL), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "OUT is NULL"));

  assert_int_equal(lk__closure_around(NULL, before, after, &c, &w), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "lk__closure_around"));
  assert_non_null(strstr(lk_last_error(), "inner closure is NULL"));
  assert_int_equal(lk__closure_around(inner, NULL, after, &c, &w), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "before function is NULL"));
  assert_int_equal(lk__closure_around(inner, before, NULL, &c, &w), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "after function is NULL"));
  assert_int_equal(n_trace, 0); /* nothing ran */

  lk_wrap_free(NULL);
  assert_null(lk_wrap_function(NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_then_order_and_loss, reset),
      cmocka_unit_test_setup(test_then_failure_gives_nan, reset),
      cmocka_unit_test_setup(test_then_passes_nan_through, reset),
      cmocka_unit_test_setup(test_around_order, reset),
      cmocka_unit_test_setup(test_nesting, reset),
      cmocka_unit_test_setup(test_then_of_then, reset),
      cmocka_unit_test_setup(test_plain_pointer_many_calls, reset),
      cmocka_unit_test_setup(test_errors, reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
