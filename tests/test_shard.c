/* Which batches each process takes (src/loop/shard.c): training's equal
 * shares, the remainder left out; an evaluation's, the remainder in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../src/loop/shard.h"

/* The batches SH takes, into OUT; their count. */
static size_t taken(const lk__shard *sh, size_t *out) {
  for (size_t i = 0; i < sh->count; i++)
    out[i] = lk__shard_batch(sh, i);
  return sh->count;
}

static void test_one_process(void **state) {
  (void)state;
  size_t b[8];
  lk__shard t = lk__shard_train(7, 1, 0), e = lk__shard_eval(7, 1, 0);
  assert_int_equal(taken(&t, b), 7);
  assert_int_equal(b[6], 6);
  assert_int_equal(taken(&e, b), 7);
  assert_int_equal(b[0], 0);
}

/* 10 batches over 3 processes: training takes 3 each (9 is left out),
 * interleaved as b * world + rank; an evaluation takes 4, 3 and 3. */
static void test_three_processes(void **state) {
  (void)state;
  size_t b[8];
  lk__shard t = lk__shard_train(10, 3, 1);
  assert_int_equal(taken(&t, b), 3);
  assert_int_equal(b[0], 1);
  assert_int_equal(b[1], 4);
  assert_int_equal(b[2], 7);
  lk__shard e0 = lk__shard_eval(10, 3, 0), e2 = lk__shard_eval(10, 3, 2);
  assert_int_equal(taken(&e0, b), 4);
  assert_int_equal(b[3], 9);
  assert_int_equal(taken(&e2, b), 3);
  assert_int_equal(b[2], 8);
}

/* Fewer batches than processes: none to train (the loop refuses it),
 * all of them to evaluate, for each. */
static void test_fewer_batches(void **state) {
  (void)state;
  size_t b[8];
  lk__shard t = lk__shard_train(2, 4, 3), e = lk__shard_eval(2, 4, 3);
  assert_int_equal(t.count, 0);
  assert_int_equal(taken(&e, b), 2);
  assert_int_equal(b[0], 0);
  assert_int_equal(b[1], 1);
  assert_int_equal(e.stride, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_process),
      cmocka_unit_test(test_three_processes),
      cmocka_unit_test(test_fewer_batches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
