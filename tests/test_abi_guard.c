/* The ABI guard (src/plugin/kinds.c): the host's copy of a descriptor has
 * exactly what the plugin's minor defines, so that a field or an ops
 * entry newer than it reads as NULL wherever the host looks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../src/plugin/kinds.h"

static int epoch(void *self, lk_split split, uint64_t e, size_t *n) {
  (void)self, (void)split, (void)e;
  *n = 1;
  return 0;
}
static int batch(void *self, lk_split split, size_t i, lk_batch *b) {
  (void)self, (void)split, (void)i, (void)b;
  return 0;
}
static int shape(void *self, lk_sample_shape *out) {
  (void)self, (void)out;
  return 0;
}

/* The sizes loader.c once listed, minor by minor. */
static void test_desc_sizes(void **state) {
  (void)state;
  const size_t p = sizeof(void *);
  size_t want[] = {offsetof(lk_descriptor, callback) + p,
                   offsetof(lk_descriptor, scheduler) + p,
                   offsetof(lk_descriptor, scheduler) + p,
                   offsetof(lk_descriptor, precision) + p,
                   offsetof(lk_descriptor, check_state) + p,
                   offsetof(lk_descriptor, logger) + p,
                   offsetof(lk_descriptor, layers) + p,
                   offsetof(lk_descriptor, layers) + p};
  assert_int_equal(sizeof want / sizeof want[0], LK_ABI_MINOR + 1);
  for (unsigned m = 0; m <= LK_ABI_MINOR; m++)
    assert_int_equal(lk__abi_desc_size(m), want[m]);
  assert_int_equal(lk__abi_desc_size(LK_ABI_MINOR), sizeof(lk_descriptor));
}

static void test_features(void **state) {
  (void)state;
  assert_false(lk__abi_has(3, LK__ABI_OPT_PATH));
  assert_true(lk__abi_has(4, LK__ABI_OPT_PATH));
  assert_true(lk__abi_has(4, LK__ABI_OPT_RANGE));
  assert_false(lk__abi_has(5, LK__ABI_OPT_PATHS));
  assert_false(lk__abi_has(5, LK__ABI_MOMENTUM_STATUS));
  assert_true(lk__abi_has(6, LK__ABI_MOMENTUM_STATUS));
  assert_false(lk__abi_has(LK_ABI_MINOR, LK__N_ABI_FEATURES));
  /* the step's onnx is 1.7's: a 1.6 table ends before it */
  assert_int_equal(lk__abi_entries(LK__KIND_STEP, 6), 5);
  assert_int_equal(lk__abi_entries(LK__KIND_STEP, 7), 6);
  lk_descriptor d = {.abi_version = (1u << 16) | 3};
  assert_int_equal(lk__abi_minor(&d), 3);
}

/* A data plugin of ABI 1.3, whose ops end before shape (1.4): what follows
 * its table in memory (here a shape that is not its) is never read. */
static void test_copy_ops(void **state) {
  (void)state;
  struct {
    lk_data_ops ops;
  } mem = {{.epoch = epoch, .batch = batch, .shape = shape}};
  lk_descriptor d = {.abi_version = (1u << 16) | 3, .data = &mem.ops};
  lk__ops_copy copy;
  const lk__kind *k = &lk__kinds[LK__KIND_DATA];
  assert_int_equal(lk__abi_entries(LK__KIND_DATA, 3), 2);
  assert_int_equal(lk__abi_entries(LK__KIND_DATA, 4), 3);
  lk__abi_copy_ops(&d, 3, &copy);
  assert_ptr_equal(d.data, &copy.data);
  assert_ptr_equal(d.data->epoch, epoch);
  assert_ptr_equal(d.data->batch, batch);
  assert_null(d.data->shape);
  assert_null(lk__kind_entry(&d, k, LK__ENTRY(lk_data_ops, shape)));
  assert_true(lk__kind_has(&d, k));
  assert_null(d.step);
  assert_false(lk__kind_has(&d, &lk__kinds[LK__KIND_STEP]));
  /* The same table at 1.4 has it. */
  lk_descriptor d4 = {.abi_version = (1u << 16) | 4, .data = &mem.ops};
  lk__abi_copy_ops(&d4, 4, &copy);
  assert_ptr_equal(d4.data->shape, shape);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_desc_sizes),
      cmocka_unit_test(test_features),
      cmocka_unit_test(test_copy_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
