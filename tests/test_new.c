/* loopkit new's templates (templates/, embedded as new_files.c) against
 * the kinds of plugin (src/plugin/kinds.h): every kind has its row and its
 * templates, every row is a kind (or model, step and backward in one),
 * each source implements its kinds and no other and carries the shared
 * preamble in place of its include, and each config gives the new plugin
 * its role. A kind added to LK__KINDS without a template fails here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../src/cli/new_templates.h"
#include "../src/plugin/kinds.h"

static const cli_new_kind *row(const char *kind) {
  for (const cli_new_kind *k = cli_new_kinds; k->kind; k++)
    if (strcmp(k->kind, kind) == 0)
      return k;
  return NULL;
}

/* Template NAME's text, its lines joined with newlines (a new string), or
 * NULL when there is no such template. */
static char *text_of(const char *name) {
  const cli_new_template *t = cli_new_template_find(name);
  if (!t)
    return NULL;
  size_t len = 1;
  for (const char *const *l = t->lines; *l; l++)
    len += strlen(*l) + 1;
  char *text = malloc(len), *p = text;
  assert_non_null(text);
  for (const char *const *l = t->lines; *l; l++)
    p += sprintf(p, "%s\n", *l);
  *p = '\0';
  return text;
}

static char *template_of(const cli_new_kind *k, const char *ext) {
  char name[64];
  snprintf(name, sizeof name, "%s.%s", k->kind, ext);
  char *text = text_of(name);
  if (!text)
    fail_msg("kind %s: no template %s (templates/%s, in NEW_TEMPLATES of "
             "Makefile.am)",
             k->kind, name, name);
  return text;
}

/* Whether row K's plugin implements KIND: its own, or step and backward
 * for model. */
static bool implements(const cli_new_kind *k, const lk__kind *kind) {
  if (strcmp(k->kind, "model") == 0)
    return strcmp(kind->name, "step") == 0 ||
           strcmp(kind->name, "backward") == 0;
  return strcmp(k->kind, kind->name) == 0;
}

static size_t count(const char *text, const char *what) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
    n++;
  return n;
}

static void test_every_kind_has_a_row(void **state) {
  (void)state;
  for (size_t i = 0; i < LK__N_KINDS; i++)
    if (!row(lk__kinds[i].name))
      fail_msg("kind %s (src/plugin/kinds.h) has no row in cli_new_kinds "
               "(src/cli/new_templates.c) and no templates/%s.c",
               lk__kinds[i].name, lk__kinds[i].name);
}

static void test_every_row_is_a_kind(void **state) {
  (void)state;
  size_t rows = 0;
  for (const cli_new_kind *k = cli_new_kinds; k->kind; k++, rows++) {
    bool known = strcmp(k->kind, "model") == 0;
    for (size_t i = 0; i < LK__N_KINDS && !known; i++)
      known = strcmp(k->kind, lk__kinds[i].name) == 0;
    if (!known)
      fail_msg("cli_new_kinds has %s, which is no kind of plugin", k->kind);
    assert_non_null(k->summary);
    assert_true(strlen(k->summary) > 0 && strlen(k->summary) <= 66);
    assert_ptr_equal(row(k->kind), k); /* no row twice */
  }
  assert_int_equal(rows, LK__N_KINDS + 1);
}

/* The shared files, and each template used by a row: nothing is embedded
 * that no project is written from. */
static void test_every_template_is_used(void **state) {
  (void)state;
  assert_non_null(cli_new_template_find("project.mk"));
  assert_non_null(cli_new_template_find("project.md"));
  for (const cli_new_template *t = cli_new_templates; t->name; t++) {
    bool used =
        !strcmp(t->name, "project.mk") || !strcmp(t->name, "project.md");
    for (const cli_new_kind *k = cli_new_kinds; k->kind && !used; k++) {
      size_t n = strlen(k->kind);
      used = (k->data && !strcmp(t->name, k->data)) ||
             (!strncmp(t->name, k->kind, n) &&
              (!strcmp(t->name + n, ".c") || !strcmp(t->name + n, ".ini")));
    }
    if (!used)
      fail_msg("template %s is embedded, and no kind writes it", t->name);
    assert_non_null(t->lines[0]); /* not empty */
  }
}

/* Each source has the preamble once, in place of its include, and its
 * descriptor points to the ops of exactly the kinds the row implements. */
static void test_sources_implement_their_kinds(void **state) {
  (void)state;
  for (const cli_new_kind *k = cli_new_kinds; k->kind; k++) {
    char *c = template_of(k, "c");
    assert_int_equal(count(c, "#include \"preamble.h\""), 0);
    assert_int_equal(count(c, "How a loopkit plugin works"), 1);
    assert_int_equal(count(c, "#include <loopkit/loopkit.h>"), 1);
    const char *d = strstr(c, "lk_plugin_descriptor = {");
    if (!d)
      fail_msg("%s.c has no descriptor", k->kind);
    assert_non_null(strstr(d, ".abi_version = LK_ABI_VERSION"));
    assert_non_null(strstr(d, ".name = \"@NAME@\""));
    for (size_t i = 0; i < LK__N_KINDS; i++) {
      char field[64];
      snprintf(field, sizeof field, ".%s = &", lk__kinds[i].name);
      bool has = strstr(d, field) != NULL;
      if (has != implements(k, &lk__kinds[i]))
        fail_msg("%s.c: the descriptor %s %s ops", k->kind,
                 has ? "has" : "lacks", lk__kinds[i].name);
    }
    free(c);
  }
}

/* Each config gives the new plugin, ./@NAME@.so, the role of its kind (a
 * model's backward is its step's by default), and names its data file. */
static void test_configs_load_the_new_plugin(void **state) {
  (void)state;
  for (const cli_new_kind *k = cli_new_kinds; k->kind; k++) {
    char *ini = template_of(k, "ini");
    const char *plugins = strstr(ini, "\n[plugins]\n");
    assert_non_null(plugins);
    for (size_t i = 0; i < LK__N_KINDS; i++) {
      char line[96];
      snprintf(line, sizeof line, "\n%s = ./@NAME@.so", lk__kinds[i].role);
      bool model_backward =
          !strcmp(k->kind, "model") && !strcmp(lk__kinds[i].name, "backward");
      bool has = strstr(plugins, line) != NULL;
      if (has != (implements(k, &lk__kinds[i]) && !model_backward))
        fail_msg("%s.ini: [plugins] %s %s = ./@NAME@.so", k->kind,
                 has ? "has" : "lacks", lk__kinds[i].role);
    }
    if (k->data) {
      assert_non_null(cli_new_template_find(k->data));
      char path[96];
      snprintf(path, sizeof path, "\npath = %s", k->data);
      if (!strstr(ini, path))
        fail_msg("%s.ini does not read %s", k->kind, k->data);
    }
    free(ini);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_kind_has_a_row),
      cmocka_unit_test(test_every_row_is_a_kind),
      cmocka_unit_test(test_every_template_is_used),
      cmocka_unit_test(test_sources_implement_their_kinds),
      cmocka_unit_test(test_configs_load_the_new_plugin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
