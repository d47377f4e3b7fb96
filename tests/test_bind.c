/* lk_bind: partial application of functions of many signatures, result
 * conversion to double, argument values copied at bind time, and the
 * messages for signatures it refuses. */
/* lk_bind itself is tested here: its deprecation is for programs. */
#define LK_NO_DEPRECATION_WARNINGS
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>

typedef void (*any_fn)(void);

/* Binds FN with SIG and ARGS, calls the closure once, frees it. */
static double call_once(any_fn fn, const char *sig, const void *const *args) {
  lk_bound *b = NULL;
  int rc = lk_bind(fn, sig, args, &b);
  if (rc != 0)
    fail_msg("lk_bind(\"%s\"): %s", sig, lk_last_error());
  double v = lk_bound_function(b)();
  lk_bound_free(b);
  return v;
}

/* Expects lk_bind to refuse SIG with LK_EINVAL and a message with WANT. */
static void refuse(const char *sig, const void *const *args, const char *want) {
  static int dummy;
  lk_bound *b = (lk_bound *)&dummy;
  assert_int_equal(lk_bind((any_fn)abs, sig, args, &b), LK_EINVAL);
  assert_null(b);
  if (!strstr(lk_last_error(), want))
    fail_msg("\"%s\": message \"%s\" lacks \"%s\"", sig, lk_last_error(), want);
}

static double sum(const double *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += x[i];
  return s;
}

static void test_sum_array(void **state) {
  (void)state;
  double x[] = {1.5, 2.5, 3.0, -1.0};
  const double *p = x;
  size_t n = 4;
  const void *args[] = {&p, &n};
  lk_bound *b = NULL;
  assert_int_equal(
      lk_bind((any_fn)sum, "double (const double *, size_t)", args, &b), 0);
  lk_closure_fn f = lk_bound_function(b);
  assert_true(f() == 6.0);
  /* The pointer is copied, not the array: the closure sees new values. */
  x[0] = 10.5;
  assert_true(f() == 15.0);
  for (int i = 0; i < 1000; i++)
    assert_true(f() == 15.0);
  lk_bound_free(b);
}

static int add(int a, int b) {
  return a - 2 * b;
}

static void test_int_int(void **state) {
  (void)state;
  int a = 7, b = 20;
  const void *args[] = {&a, &b};
  assert_true(call_once((any_fn)add, "int (int, int)", args) == -33.0);
  assert_true(call_once((any_fn)add, "int(int,int)", args) == -33.0);
}

static float halve(float x) {
  return x / 2;
}

static void test_float(void **state) {
  (void)state;
  float x = 3.0f;
  const void *args[] = {&x};
  assert_true(call_once((any_fn)halve, "float(float)", args) == 1.5);
}

static void increment(int *p) {
  (*p)++;
}

static void test_void_increment(void **state) {
  (void)state;
  int counter = 0, other = 0;
  int *p = &counter;
  const void *args[] = {&p};
  lk_bound *b = NULL;
  assert_int_equal(lk_bind((any_fn)increment, "void(int*)", args, &b), 0);
  p = &other; /* the bound pointer value was copied */
  lk_closure_fn f = lk_bound_function(b);
  assert_true(isnan(f()));
  assert_true(isnan(f()));
  assert_true(isnan(f()));
  assert_int_equal(counter, 3);
  assert_int_equal(other, 0);
  lk_bound_free(b);
}

static double forty_two(void) {
  return 42.0;
}

static void test_no_args(void **state) {
  (void)state;
  assert_true(call_once((any_fn)forty_two, "double(void)", NULL) == 42.0);
  assert_true(call_once((any_fn)forty_two, "double()", NULL) == 42.0);
  assert_true(call_once((any_fn)forty_two, " double ( void ) ", NULL) == 42.0);
  const void *unused[] = {NULL};
  assert_true(call_once((any_fn)forty_two, "double ( )", unused) == 42.0);
}

/* Narrow integer results come back widened into an ffi_arg. */
static uint8_t u8_ret(int x) {
  return (uint8_t)(250 + x);
}
static int16_t s16_ret(int x) {
  return (int16_t)(-1234 - x);
}
static int8_t s8_ret(void) {
  return -5;
}
static uint32_t u32_ret(void) {
  return 0xFFFFFFFFu;
}
static unsigned short us_ret(void) {
  return 65535;
}
static bool bool_ret(int x) {
  return x > 0;
}
static char char_ret(void) {
  return 'A';
}

static void test_narrow_returns(void **state) {
  (void)state;
  int zero = 0, one = 1, minus = -1;
  const void *z[] = {&zero}, *o[] = {&one}, *m[] = {&minus};
  assert_true(call_once((any_fn)u8_ret, "uint8_t (int)", z) == 250.0);
  assert_true(call_once((any_fn)u8_ret, "unsigned char (int)", o) == 251.0);
  assert_true(call_once((any_fn)s16_ret, "int16_t (int)", z) == -1234.0);
  assert_true(call_once((any_fn)s16_ret, "short (int)", o) == -1235.0);
  assert_true(call_once((any_fn)s8_ret, "int8_t(void)", NULL) == -5.0);
  assert_true(call_once((any_fn)s8_ret, "signed char(void)", NULL) == -5.0);
  assert_true(call_once((any_fn)u32_ret, "uint32_t(void)", NULL) ==
              4294967295.0);
  assert_true(call_once((any_fn)u32_ret, "unsigned(void)", NULL) ==
              4294967295.0);
  assert_true(call_once((any_fn)us_ret, "unsigned short int(void)", NULL) ==
              65535.0);
  assert_true(call_once((any_fn)bool_ret, "bool (int)", o) == 1.0);
  assert_true(call_once((any_fn)bool_ret, "_Bool (int)", m) == 0.0);
  assert_true(call_once((any_fn)char_ret, "char (void)", NULL) == 65.0);
}

static size_t count_char(const char *s, char c) {
  size_t n = 0;
  for (; *s; s++)
    n += *s == c;
  return n;
}

static const char *find(const char *s, char c) {
  return strchr(s, c);
}

static void test_char_pointer(void **state) {
  (void)state;
  char text[] = "banana";
  const char *s = text;
  char c = 'a';
  const void *args[] = {&s, &c};
  assert_true(call_once((any_fn)count_char, "size_t (const char *, char)",
                        args) == 3.0);
  /* A pointer result is its address; NULL is 0. */
  assert_true(call_once((any_fn)find, "const char *(const char*, char)",
                        args) == (double)(uintptr_t)(text + 1));
  c = 'z';
  assert_true(call_once((any_fn)find, "char* (char *, char)", args) == 0.0);
}

static long long big(long long a, unsigned long long b) {
  return a - (long long)b;
}

static void test_long_long(void **state) {
  (void)state;
  long long a = -(1LL << 40);
  unsigned long long b = 3;
  const void *args[] = {&a, &b};
  assert_true(call_once((any_fn)big,
                        "long long (long long, unsigned long "
                        "long)",
                        args) == -1099511627779.0);
  assert_true(call_once((any_fn)big, "int64_t (int64_t, uint64_t)", args) ==
              -1099511627779.0);
}

static size_t twice(size_t n) {
  return 2 * n;
}

static void test_size_t(void **state) {
  (void)state;
  size_t n = (size_t)1 << 33;
  const void *args[] = {&n};
  assert_true(call_once((any_fn)twice, "size_t(size_t)", args) ==
              (double)((size_t)1 << 34));
}

/* More arguments than registers of either kind (x86-64: 6 integer, 8
 * floating point), so some are passed on the stack. Each is weighted by
 * its position so that an argument in the wrong place changes the sum. */
static double ten(double a, int b, double c, long long d, float e, double f,
                  int8_t g, double h, uint16_t i, double j) {
  return 1 * a + 2 * b + 3 * c + 4 * (double)d + 5 * e + 6 * f + 7 * g + 8 * h +
         9 * i + 10 * j;
}

static double seventeen(double a0, int a1, double a2, long a3, double a4,
                        short a5, double a6, unsigned a7, double a8, int8_t a9,
                        double a10, size_t a11, double a12, bool a13,
                        double a14, int a15, float a16) {
  double v[] = {a0, a1,  a2,          (double)a3, a4,  a5,  a6,  a7, a8,
                a9, a10, (double)a11, a12,        a13, a14, a15, a16};
  double s = 0;
  for (int i = 0; i < 17; i++)
    s += (i + 1) * v[i];
  return s;
}

static void test_many_mixed_args(void **state) {
  (void)state;
  double a = 1.5, c = -2.0, f = 0.25, h = 8.0, j = 100.0;
  int b = 3;
  long long d = 1000;
  float e = 0.5f;
  int8_t g = -4;
  uint16_t i = 60000;
  const void *args[] = {&a, &b, &c, &d, &e, &f, &g, &h, &i, &j};
  double want = ten(a, b, c, d, e, f, g, h, i, j);
  assert_true(call_once((any_fn)ten,
                        "double (double, int, double, long long, float, "
                        "double, int8_t, double, uint16_t, double)",
                        args) == want);

  double d0 = 0.5, d2 = 1, d4 = 2, d6 = 3, d8 = 4, d10 = 5, d12 = 6, d14 = 7;
  int i1 = -1, i15 = 15;
  long l3 = 300;
  short s5 = -5;
  unsigned u7 = 7;
  int8_t c9 = 9;
  size_t z11 = 11;
  bool b13 = true;
  float f16 = 16.5f;
  const void *many[] = {&d0, &i1,  &d2,  &l3,  &d4,  &s5,  &d6,  &u7, &d8,
                        &c9, &d10, &z11, &d12, &b13, &d14, &i15, &f16};
  want = seventeen(d0, i1, d2, l3, d4, s5, d6, u7, d8, c9, d10, z11, d12, b13,
                   d14, i15, f16);
  assert_true(call_once((any_fn)seventeen,
                        "double (double, int, double, long, double, short, "
                        "double, unsigned int, double, int8_t, double, "
                        "size_t, double, bool, double, signed, float)",
                        many) == want);
}

static void test_values_copied(void **state) {
  (void)state;
  int a = 2, b = 1;
  const void *args[] = {&a, &b};
  lk_bound *bd = NULL;
  assert_int_equal(lk_bind((any_fn)add, "int (int, int)", args, &bd), 0);
  a = 100;
  b = 100;
  args[0] = NULL;
  assert_true(lk_bound_function(bd)() == 0.0); /* 2 - 2 * 1 */
  lk_bound_free(bd);

  /* Values on a stack frame that is gone. */
  lk_bound *later = NULL;
  {
    int x = 9, y = 4;
    const void *scoped[] = {&x, &y};
    assert_int_equal(lk_bind((any_fn)add, "int(int,int)", scoped, &later), 0);
  }
  assert_true(lk_bound_function(later)() == 1.0);
  lk_bound_free(later);
}

/* What people paste: declarations with names and qualifiers. */
static int apply(int (*g)(int), int x) {
  return g(x);
}

static void test_spellings(void **state) {
  (void)state;
  double x[] = {1, 2};
  const double *p = x;
  size_t n = 2;
  const void *args[] = {&p, &n};
  assert_true(call_once((any_fn)sum,
                        "double sum(const double *restrict_is_a_name, "
                        "size_t n)",
                        args) == 3.0);
  assert_true(call_once((any_fn)sum,
                        "const double (volatile double const*, const size_t)",
                        args) == 3.0);
  assert_true(call_once((any_fn)sum,
                        "double\t(\n struct foo *, unsigned "
                        "long)",
                        args) == 3.0);

  int (*g)(int) = abs;
  int v = -8;
  const void *fargs[] = {&g, &v};
  assert_true(call_once((any_fn)apply, "int (int (*)(int), int)", fargs) ==
              8.0);
}

static void test_bad_signatures(void **state) {
  (void)state;
  int v = 1;
  const void *args[] = {&v, &v, &v};
  refuse("double (int, complex)", args,
         "bind: unknown type \"complex\" in argument 2 of \"double (int, "
         "complex)\"");
  refuse("complex (int)", args,
         "bind: unknown type \"complex\" in the return type of \"complex "
         "(int)\"");
  refuse("long double (int)", args, "unknown type \"long double\"");
  refuse("int (int[3])", args, "unknown type \"int[3]\" in argument 1");
  refuse("double (int", args,
         "bind: unbalanced parentheses in \"double (int\"");
  refuse("double (int))", args,
         "bind: unbalanced parentheses in \"double (int))\"");
  refuse("double ((int)", args, "unbalanced parentheses");
  refuse("double) (int)", args, "unbalanced parentheses");
  refuse("double (int) x", args,
         "bind: unexpected \"x\" after the argument list of \"double (int) "
         "x\"");
  refuse("double (int);", args, "unexpected \";\"");
  refuse("double (int) (int)", args,
         "unexpected \"(int)\" after the argument list");
  refuse("double (int) (", args, "unbalanced parentheses");
  refuse("double (int) )(", args, "unbalanced parentheses");
  refuse("(int)", args, "bind: missing return type in \"(int)\"");
  refuse("  (void)", args, "missing return type");
  refuse("double", args, "bind: no argument list \"(...)\" in \"double\"");
  refuse("", args, "no argument list");
  refuse("int (int,)", args, "argument 2 of \"int (int,)\" is empty");
  refuse("int (, int)", args, "argument 1 of \"int (, int)\" is empty");
  refuse("int (int, void)", args, "argument 2 of \"int (int, void)\" is void");
}

static void test_bad_calls(void **state) {
  (void)state;
  refuse("int (int, int)", NULL,
         "bind: \"int (int, int)\" takes 2 arguments but args is NULL");
  refuse("int (int)", NULL, "takes 1 argument but");
  int v = 1;
  const void *holes[] = {&v, NULL};
  refuse("int (int, int)", holes,
         "args[1] is NULL but \"int (int, int)\" needs argument 2");

  lk_bound *b = NULL;
  assert_int_equal(lk_bind(NULL, "int (int)", holes, &b), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "function of \"int (int)\""));
  assert_int_equal(lk_bind((any_fn)abs, NULL, holes, &b), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "signature is NULL"));
  assert_int_equal(lk_bind((any_fn)abs, "int (int)", holes, NULL), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "OUT is NULL"));

  lk_bound_free(NULL);
  assert_null(lk_bound_function(NULL));
}

/* lk_bind_n knows how many values it was given: fewer (or more) than the
 * signature declares is refused, naming both counts, before any is read. */
static void test_counted(void **state) {
  (void)state;
  int a = 7, b = 20;
  const void *one[] = {&a};
  static int dummy;
  lk_bound *bd = (lk_bound *)&dummy;
  assert_int_equal(lk_bind_n((any_fn)add, "int (int, int)", 1, one, &bd),
                   LK_EINVAL);
  assert_null(bd);
  assert_string_equal(lk_last_error(),
                      "bind: \"int (int, int)\" takes 2 arguments but 1 is "
                      "given");
  const void *three[] = {&a, &b, &b};
  assert_int_equal(lk_bind_n((any_fn)add, "int (int, int)", 3, three, &bd),
                   LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "takes 2 arguments but 3 are given"));
  assert_int_equal(lk_bind_n((any_fn)add, "int (int, int)", 0, NULL, &bd),
                   LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "takes 2 arguments but 0 are given"));
  assert_int_equal(
      lk_bind_n((any_fn)add, "int (int, int)", SIZE_MAX, three, &bd),
      LK_EINVAL);
  assert_null(bd);

  const void *two[] = {&a, &b};
  assert_int_equal(lk_bind_n((any_fn)add, "int (int, int)", 2, two, &bd), 0);
  assert_true(lk_bound_function(bd)() == -33.0);
  lk_bound_free(bd);
}

static double answer(void) {
  return 42;
}

/* LK_BIND counts the addresses it is given at compile time. */
static void test_bind_macro(void **state) {
  (void)state;
  int a = 7, b = 20;
  lk_bound *bd = NULL;
  assert_int_equal(LK_BIND(add, "int (int, int)", &bd, &a, &b), 0);
  a = 1000; /* copied at bind time */
  assert_true(lk_bound_function(bd)() == -33.0);
  lk_bound_free(bd);
  assert_int_equal(LK_BIND(add, "int (int, int)", &bd, &a), LK_EINVAL);
  assert_null(bd);
  assert_non_null(strstr(lk_last_error(), "takes 2 arguments but 1 is given"));
  assert_int_equal(lk_bind_n((any_fn)answer, "double (void)", 0, NULL, &bd), 0);
  assert_true(lk_bound_function(bd)() == 42.0);
  lk_bound_free(bd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sum_array),
      cmocka_unit_test(test_int_int),
      cmocka_unit_test(test_float),
      cmocka_unit_test(test_void_increment),
      cmocka_unit_test(test_no_args),
      cmocka_unit_test(test_narrow_returns),
      cmocka_unit_test(test_char_pointer),
      cmocka_unit_test(test_long_long),
      cmocka_unit_test(test_size_t),
      cmocka_unit_test(test_many_mixed_args),
      cmocka_unit_test(test_values_copied),
      cmocka_unit_test(test_spellings),
      cmocka_unit_test(test_bad_signatures),
      cmocka_unit_test(test_bad_calls),
      cmocka_unit_test(test_counted),
      cmocka_unit_test(test_bind_macro),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
