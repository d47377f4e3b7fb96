/* The loader: names refused before the file system is touched, the search
 * path, and each way a shared object can fail to be a plugin. Runs with
 * LOOPKIT_PLUGIN_PATH and LK_BROKEN_DIR from the test environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>

static char broken[4096];

static const char *broken_path(const char *name) {
  const char *dir = getenv("LK_BROKEN_DIR");
  snprintf(broken, sizeof broken, "%s/%s.so", dir ? dir : "tests/broken/.libs",
           name);
  return broken;
}

static void test_bad_names(void **state) {
  (void)state;
  const char *bad[] = {"", "a b", "x.so", "..", "sgd;rm", "tab\t"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lk_plugin *p = NULL;
    int rc = lk_plugin_open(bad[i], &p);
    assert_int_equal(rc, LK_EINVAL);
    assert_null(p);
    if (*bad[i])
      assert_non_null(strstr(lk_last_error(), "[A-Za-z0-9_-]+"));
  }
}

static void test_not_found_lists_paths(void **state) {
  (void)state;
  const char *saved = getenv("LOOPKIT_PLUGIN_PATH");
  char *copy = saved ? strdup(saved) : NULL;
  setenv("LOOPKIT_PLUGIN_PATH", "/nonexistent/one:/nonexistent/two", 1);
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("nosuchplugin", &p), LK_ENOTFOUND);
  const char *msg = lk_last_error();
  assert_non_null(strstr(msg, "plugin nosuchplugin not found"));
  assert_non_null(strstr(msg, "/nonexistent/one/nosuchplugin.so"));
  assert_non_null(strstr(msg, "/nonexistent/two/nosuchplugin.so"));
  assert_non_null(strstr(msg, lk_plugin_dir()));
  if (copy) {
    setenv("LOOPKIT_PLUGIN_PATH", copy, 1);
    free(copy);
  }
}

static void test_missing_descriptor(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  const char *path = broken_path("nodesc");
  assert_int_equal(lk_plugin_open(path, &p), LK_ELOAD);
  assert_non_null(strstr(lk_last_error(), "has no descriptor"));
  assert_non_null(strstr(lk_last_error(), LK_PLUGIN_SYMBOL));
  assert_non_null(strstr(lk_last_error(), path));
}

static void test_abi_mismatch(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open(broken_path("badabi"), &p), LK_EABI);
  assert_non_null(strstr(lk_last_error(), "ABI 99.3"));
  assert_non_null(strstr(lk_last_error(), "ABI 1.1"));
  assert_int_equal(lk_plugin_open(broken_path("badsize"), &p), LK_EABI);
  assert_non_null(strstr(lk_last_error(), "descriptor size 8"));
}

/* A plugin built for an older minor version loads; what its minor did not
 * define reads as absent. */
static void test_older_minor_loads(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("abi10", &p), 0);
  assert_int_equal(lk_plugin_desc(p)->abi_version, 1u << 16);
  assert_null(lk_plugin_desc(p)->scheduler);
  char kinds[128];
  assert_string_equal(lk_plugin_kinds(p, kinds, sizeof kinds), "optimizer");
  lk_plugin_close(p);
}

static void test_undefined_symbol(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  const char *path = broken_path("undefsym");
  assert_int_equal(lk_plugin_open(path, &p), LK_ELOAD);
  /* dlerror's own text, copied */
  assert_non_null(strstr(lk_last_error(), "lk_no_such_function_anywhere"));
  assert_non_null(strstr(lk_last_error(), path));
}

static void test_missing_file_by_path(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("/nonexistent/x.so", &p), LK_ELOAD);
  assert_non_null(strstr(lk_last_error(), "/nonexistent/x.so"));
}

static void test_open_by_name(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("probe", &p), 0);
  char kinds[128];
  assert_string_equal(lk_plugin_kinds(p, kinds, sizeof kinds),
                      "step,backward,zero_grad,optimizer,callback");
  assert_string_equal(lk_plugin_desc(p)->name, "probe");
  assert_non_null(strstr(lk_plugin_path(p), "/probe.so"));
  lk_plugin_close(p);
}

typedef struct seen {
  int probe, zero, total;
} seen;

static int count(void *user, const char *name, const char *path) {
  seen *s = user;
  (void)path;
  s->total++;
  s->probe += strcmp(name, "probe") == 0;
  s->zero += strcmp(name, "zero") == 0;
  return 0;
}

static void test_scan_first_wins(void **state) {
  (void)state;
  const char *path = getenv("LOOPKIT_PLUGIN_PATH");
  assert_non_null(path);
  char twice[8192];
  snprintf(twice, sizeof twice, "%s:%s", path, path);
  char *saved = strdup(path);
  setenv("LOOPKIT_PLUGIN_PATH", twice, 1);
  seen s = {0};
  assert_int_equal(lk_plugin_scan(count, &s), 0);
  assert_int_equal(s.probe, 1);
  assert_int_equal(s.zero, 1);
  assert_true(s.total >= 4);
  setenv("LOOPKIT_PLUGIN_PATH", saved, 1);
  free(saved);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_names),
      cmocka_unit_test(test_not_found_lists_paths),
      cmocka_unit_test(test_missing_descriptor),
      cmocka_unit_test(test_abi_mismatch),
      cmocka_unit_test(test_older_minor_loads),
      cmocka_unit_test(test_undefined_symbol),
      cmocka_unit_test(test_missing_file_by_path),
      cmocka_unit_test(test_open_by_name),
      cmocka_unit_test(test_scan_first_wins),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
