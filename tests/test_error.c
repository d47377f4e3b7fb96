/* The per-thread message (src/base/error.c): a failure that quotes the message
 * it replaces, lk_fail(host, code, "...: %s", lk_last_error()), as plugins
 * pass the layer kit's and the host's reasons on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "loopkit/error.h"
#include "loopkit/host.h"

/* What only the library and its tests use (linked from the objects). */
#include "../src/base/internal.h"

/* lk_fail does not read its host: the tests have none. */
#define NO_HOST ((lk_host *)NULL)

static void test_fail_quotes_the_last_error(void **state) {
  (void)state;
  lk__err(LK_EINVAL, "conv2d: input [1, 1, 2, 2]: the kernel is larger");
  assert_int_equal(
      lk_fail(NO_HOST, LK_ECONFIG, "layer 0 (conv2d): %s", lk_last_error()),
      LK_ECONFIG);
  assert_string_equal(lk_last_error(), "layer 0 (conv2d): conv2d: input [1, "
                                       "1, 2, 2]: the kernel is larger");
  /* twice more, each quoting the one before */
  lk_fail(NO_HOST, LK_EPLUGIN, "b: %s", lk_last_error());
  lk_fail(NO_HOST, LK_EPLUGIN, "a: %s (%d)", lk_last_error(), 7);
  assert_string_equal(lk_last_error(), "a: b: layer 0 (conv2d): conv2d: input "
                                       "[1, 1, 2, 2]: the kernel is larger "
                                       "(7)");
}

static void test_fail_quotes_itself_twice(void **state) {
  (void)state;
  lk__err(LK_EIO, "xyz");
  lk_fail(NO_HOST, LK_EIO, "%s and %s", lk_last_error(), lk_last_error());
  assert_string_equal(lk_last_error(), "xyz and xyz");
  /* a positive code is a plugin failure */
  assert_int_equal(lk_fail(NO_HOST, 3, "%s", lk_last_error()), LK_EPLUGIN);
  assert_string_equal(lk_last_error(), "xyz and xyz");
}

/* A message as long as the buffer is cut at its end, its start intact. */
static void test_fail_quotes_a_long_message(void **state) {
  (void)state;
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  big[0] = '<';
  lk__err(LK_EINVAL, "%s", big);
  size_t len = strlen(lk_last_error());
  assert_true(len > 1000 && len < sizeof big);
  lk_fail(NO_HOST, LK_EINVAL, "outer: %s", lk_last_error());
  const char *m = lk_last_error();
  assert_int_equal(strlen(m), len);
  assert_memory_equal(m, "outer: <xxx", 11);
  for (size_t i = 8; i < len; i++)
    if (m[i] != 'x')
      fail_msg("byte %zu of the message is '%c'", i, m[i]);
}

/* The library's own, lk__err and lk__err_prefix, the same. */
static void test_library_messages_quote_the_last_error(void **state) {
  (void)state;
  lk__err(LK_EFORMAT, "shape (2, 3)");
  lk__err(LK_ECONFIG, "data plugin npy: %s", lk_last_error());
  assert_string_equal(lk_last_error(), "data plugin npy: shape (2, 3)");
  lk__err_prefix(LK_ECONFIG, "[%s]", lk_last_error());
  assert_string_equal(lk_last_error(),
                      "[data plugin npy: shape (2, 3)]: data plugin npy: "
                      "shape (2, 3)");
  uint64_t mark = lk__err_mark();
  lk_fail(NO_HOST, LK_EINVAL, "bad value");
  assert_int_equal(lk__entry_failed(LK_EINVAL, mark, "create of %s", "p"),
                   LK_EINVAL);
  assert_string_equal(lk_last_error(), "create of p: bad value");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fail_quotes_the_last_error),
      cmocka_unit_test(test_fail_quotes_itself_twice),
      cmocka_unit_test(test_fail_quotes_a_long_message),
      cmocka_unit_test(test_library_messages_quote_the_last_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
