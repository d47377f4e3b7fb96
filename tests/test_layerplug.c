/* Layer plugins (kind layers, ABI 1.6): every table the host refuses at
 * load, each message naming the plugin, its path, the layer and the field
 * (tests/broken/badlayer.c, built once per fault); and a good table whose
 * size is smaller than today's, copied with the rest zero. Runs with
 * LK_BROKEN_DIR from the test environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <loopkit/layer.h>
#include <loopkit/loopkit.h>

static char broken[4096];

static const char *broken_path(const char *name) {
  const char *dir = getenv("LK_BROKEN_DIR");
  snprintf(broken, sizeof broken, "%s/%s.so", dir ? dir : "tests/broken/.libs",
           name);
  return broken;
}

static void test_bad_tables_refused(void **state) {
  (void)state;
  const char *cases[][2] = {
      {"badlayer1", "layer 0: size 8 is smaller than a layer table's"},
      {"badlayer2", "layer 0 (my layer): name: not an identifier"},
      {"badlayer3", "layer 0 (ident): forward is NULL"},
      {"badlayer4", "layer 0 (ident): backward is NULL"},
      {"badlayer5", "layer 0 (ident): min_inputs 3, max_inputs 2: expected 1 "
                    "<= min_inputs <= max_inputs <= 8"},
      {"badlayer6", "layer 0 (ident): argument mode: type 99 is not an "
                    "lk_layer_arg_type"},
      {"badlayer7", "layer 0 (ident): argument scale: ident: the default of "
                    "scale: scale = -1: must be > 0"},
      {"badlayer8", "layer 0 (ident): argument mode: a word with no choices"},
      {"badlayer9", "layer 0 (ident): argument scale: in the table twice"},
      {"badlayer10", "layer 0: onnx points outside any loaded code"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lk_plugin *p = NULL;
    const char *path = broken_path(cases[i][0]);
    char want[16384];
    snprintf(want, sizeof want, "plugin %s (%s): %s", path, path, cases[i][1]);
    assert_int_equal(lk_plugin_open(path, &p), LK_ELOAD);
    assert_null(p);
    if (!strstr(lk_last_error(), want))
      fail_msg("message \"%s\" lacks \"%s\"", lk_last_error(), want);
  }
}

/* A table of an older, smaller size: loaded, its fields past the size read
 * as 0 in the host's copy, which is what the host hands out. */
static void test_small_table_copied(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open(broken_path("badlayer0"), &p), 0);
  const lk_layer_type *t = lk_plugin_layer(p, 0);
  assert_non_null(t);
  assert_string_equal(t->name, "ident");
  assert_non_null(t->forward);
  assert_non_null(t->backward);
  assert_null(t->onnx);
  assert_null(lk_plugin_layer(p, 1));
  assert_ptr_not_equal(t, lk_plugin_desc(p)->layers->types[0]);
  char kinds[64];
  assert_string_equal(lk_plugin_kinds(p, kinds, sizeof kinds), "layers");
  /* parsed as the built-ins are, with its argument table */
  lk_layer l;
  assert_int_equal(lk_layer_parse_as(&l, t, "Ident(scale=2)", 14), 0);
  assert_ptr_equal(l.type, t);
  assert_true(l.args[0].given && l.args[0].r == 2);
  lk_layer_free(&l);
  assert_int_equal(lk_layer_parse_as(&l, t, "relu", 4), LK_EINVAL);
  lk_plugin_close(p);
}

/* Not a plugin's: lk_plugin_layer of a plugin of no layers is NULL. */
static void test_no_layers(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("sgd", &p), 0);
  assert_null(lk_plugin_layer(p, 0));
  lk_plugin_close(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_tables_refused),
      cmocka_unit_test(test_small_table_copied),
      cmocka_unit_test(test_no_layers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
