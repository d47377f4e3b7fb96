/* INI config: syntax, errors with their line, --set, put, write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "loopkit/config.h"
#include "loopkit/error.h"

/* What only the library and its tests use (linked from the objects). */
#include "../src/base/internal.h"

static lk_config *parse_ok(const char *text) {
  lk_config *cfg = NULL;
  int rc = lk_config_parse("t.ini", text, &cfg);
  if (rc != 0)
    fail_msg("parse failed: %s", lk_last_error());
  assert_non_null(cfg);
  return cfg;
}

static void assert_entry(const lk_config_entry *e, const char *section,
                         const char *key, const char *value,
                         const char *where) {
  assert_non_null(e);
  assert_string_equal(e->section, section);
  assert_string_equal(e->key, key);
  assert_string_equal(e->value, value);
  assert_string_equal(e->where, where);
}

/* Writes LEN bytes of TEXT to a new temporary file; returns its path. */
static char *temp_file(const char *text, size_t len) {
  char *path = strdup("/tmp/test_config_XXXXXX");
  assert_non_null(path);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, len), (ssize_t)len);
  close(fd);
  return path;
}

static void test_parse_good(void **state) {
  (void)state;
  lk_config *cfg = parse_ok("# a comment\n"
                            "; another\n"
                            "   # indented comment\n"
                            "\n"
                            "[loop]\n"
                            "max_epochs = 1   # default 1\n"
                            "  seed=42;not a comment\n"
                            "\tname\t=\ta b  c\t; trailing comment\n"
                            "expr = x=1#y\n"
                            "[sgd]                 # options of sgd\n"
                            "lr = 0.01\n"
                            "[ empty ]\n");
  assert_string_equal(lk__config_path(cfg), "t.ini");
  assert_int_equal(lk__config_count(cfg), 5);
  assert_entry(lk__config_at(cfg, 0), "loop", "max_epochs", "1", "t.ini:6");
  assert_entry(lk__config_at(cfg, 1), "loop", "seed", "42;not a comment",
               "t.ini:7");
  assert_entry(lk__config_at(cfg, 2), "loop", "name", "a b  c", "t.ini:8");
  assert_entry(lk__config_at(cfg, 3), "loop", "expr", "x=1#y", "t.ini:9");
  assert_entry(lk__config_at(cfg, 4), "sgd", "lr", "0.01", "t.ini:11");
  assert_null(lk__config_at(cfg, 5));
  assert_entry(lk_config_find(cfg, "sgd", "lr"), "sgd", "lr", "0.01",
               "t.ini:11");
  assert_null(lk_config_find(cfg, "sgd", "momentum"));
  assert_null(lk_config_find(cfg, "loop", "lr"));
  assert_true(lk__config_has_section(cfg, "empty"));
  assert_false(lk__config_has_section(cfg, "adam"));
  assert_string_equal(lk__config_section_where(cfg, "loop"), "t.ini:5");
  assert_string_equal(lk__config_section_where(cfg, "sgd"), "t.ini:10");
  assert_string_equal(lk__config_section_where(cfg, "empty"), "t.ini:12");
  assert_null(lk__config_section_where(cfg, "adam"));
  lk_config_free(cfg);
}

static void test_crlf_and_no_final_newline(void **state) {
  (void)state;
  lk_config *cfg = parse_ok("[a]\r\nx = 1\r\n\r\ny = two words\r\nz = 3");
  assert_int_equal(lk__config_count(cfg), 3);
  assert_entry(lk__config_at(cfg, 0), "a", "x", "1", "t.ini:2");
  assert_entry(lk__config_at(cfg, 1), "a", "y", "two words", "t.ini:4");
  assert_entry(lk__config_at(cfg, 2), "a", "z", "3", "t.ini:5");
  lk_config_free(cfg);

  /* CRLF without a final newline, and a byte order mark. */
  cfg = parse_ok("\xEF\xBB\xBF[a]\r\nx = 1 # c\r");
  assert_entry(lk__config_at(cfg, 0), "a", "x", "1", "t.ini:2");
  lk_config_free(cfg);
}

static void test_empty_and_comment_only(void **state) {
  (void)state;
  lk_config *cfg = parse_ok("");
  assert_int_equal(lk__config_count(cfg), 0);
  assert_false(lk__config_has_section(cfg, "loop"));
  lk_config_free(cfg);
  cfg = parse_ok("# only\n;comments\n\n   \n");
  assert_int_equal(lk__config_count(cfg), 0);
  lk_config_free(cfg);
}

/* A section that reappears keeps its place: entries come grouped by section
 * in order of first appearance, file order within a section. */
static void test_sections_grouped(void **state) {
  (void)state;
  lk_config *cfg = parse_ok("[a]\nx = 1\n[b]\ny = 2\n[a]\nz = 3\n");
  assert_int_equal(lk__config_count(cfg), 3);
  assert_entry(lk__config_at(cfg, 0), "a", "x", "1", "t.ini:2");
  assert_entry(lk__config_at(cfg, 1), "a", "z", "3", "t.ini:6");
  assert_entry(lk__config_at(cfg, 2), "b", "y", "2", "t.ini:4");
  assert_string_equal(lk__config_section_where(cfg, "a"), "t.ini:1");
  lk_config_free(cfg);
}

typedef struct bad_case {
  const char *text;
  const char *message; /* the whole message, "t.ini:LINE: ..." */
} bad_case;

static void test_syntax_errors(void **state) {
  (void)state;
  static const bad_case cases[] = {
      {"[a]\nx = 1\nfoo\n",
       "t.ini:3: expected \"key = value\", \"[section]\" or a comment, got "
       "\"foo\""},
      {"[a]\n\n  foo bar # c\n",
       "t.ini:3: expected \"key = value\", \"[section]\" or a comment, got "
       "\"foo bar\""},
      {"[a\n", "t.ini:1: expected \"[section]\", got \"[a\""},
      {"[a]x\n", "t.ini:1: expected \"[section]\", got \"[a]x\""},
      {"[a]#c\n", "t.ini:1: expected \"[section]\", got \"[a]#c\""},
      {"# c\n[]\n", "t.ini:2: empty section name; expected \"[section]\""},
      {"[a.b.c]\n", "t.ini:1: invalid section name \"a.b.c\": expected "
                    "letters, digits, '_' or '-' (NAME.GROUP for a parameter "
                    "group)"},
      {"[.b]\n", "t.ini:1: invalid section name \".b\": expected letters, "
                 "digits, '_' or '-' (NAME.GROUP for a parameter group)"},
      {"[a.]\n", "t.ini:1: invalid section name \"a.\": expected letters, "
                 "digits, '_' or '-' (NAME.GROUP for a parameter group)"},
      {"[a b]\n", "t.ini:1: invalid section name \"a b\": expected letters, "
                  "digits, '_' or '-' (NAME.GROUP for a parameter group)"},
      {"[a]\n= 1\n",
       "t.ini:2: missing key before '='; expected \"key = value\""},
      {"[a]\nb.c = 1\n", "t.ini:2: invalid key \"b.c\": expected letters, "
                         "digits, '_' or '-'"},
      {"[a]\nb c = 1\n", "t.ini:2: invalid key \"b c\": expected letters, "
                         "digits, '_' or '-'"},
      {"[a]\nx =\n",
       "t.ini:2: missing value for key \"x\"; expected \"key = value\""},
      {"[a]\nx =    # nothing\n",
       "t.ini:2: missing value for key \"x\"; expected \"key = value\""},
      {"\n# c\nx = 1\n[a]\n", "t.ini:3: key \"x\" before any section; "
                              "expected a \"[section]\" line first"},
      {"[a]\nx = a\x01"
       "b\n",
       "t.ini:2: control character 0x01 at column 6; expected text"},
      {"[a]\nx = a\rb\n",
       "t.ini:2: control character 0x0d at column 6; expected text"},
      {"[a]\r\nx = 1\r\r\n",
       "t.ini:2: control character 0x0d at column 6; expected text"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lk_config *cfg = (lk_config *)1;
    int rc = lk_config_parse("t.ini", cases[i].text, &cfg);
    if (rc != LK_ECONFIG)
      fail_msg("case %zu: rc %d", i, rc);
    assert_ptr_equal(cfg, (lk_config *)1); /* untouched on failure */
    assert_string_equal(lk_last_error(), cases[i].message);
  }
}

static void test_long_lines(void **state) {
  (void)state;
  /* "[a]\n" then "x = vvv...": exactly 4096 characters is fine. */
  size_t len = 4 + 4096 + 2;
  char *text = malloc(len + 2);
  assert_non_null(text);
  memcpy(text, "[a]\nx = ", 8);
  memset(text + 8, 'v', 4096 - 4);
  strcpy(text + 4 + 4096, "\r\n");
  lk_config *cfg = parse_ok(text);
  assert_int_equal(strlen(lk__config_at(cfg, 0)->value), 4092);
  lk_config_free(cfg);

  /* One more is an error. */
  memset(text + 8, 'v', 4096 - 3);
  strcpy(text + 4 + 4097, "\n");
  assert_int_equal(lk_config_parse("t.ini", text, &cfg), LK_ECONFIG);
  assert_string_equal(lk_last_error(),
                      "t.ini:2: line longer than 4096 characters");
  free(text);

  /* A long bad line is quoted in part only. */
  char junk[200];
  memset(junk, 'j', sizeof junk - 1);
  junk[sizeof junk - 1] = '\0';
  assert_int_equal(lk_config_parse("t.ini", junk, &cfg), LK_ECONFIG);
  assert_non_null(strstr(lk_last_error(), "got \"jjjjjjjjjj"));
  assert_non_null(strstr(lk_last_error(), "jjj...\""));
  assert_true(strlen(lk_last_error()) < 150);
}

static void test_duplicate_key(void **state) {
  (void)state;
  lk_config *cfg = NULL;
  int rc = lk_config_parse("dup.ini", "[a]\nx = 1\n[b]\nx = 2\n[a]\n\nx = 3\n",
                           &cfg);
  assert_int_equal(rc, LK_ECONFIG);
  assert_null(cfg);
  assert_string_equal(lk_last_error(), "dup.ini:7: duplicate key \"x\" in "
                                       "[a], first set at dup.ini:2");
}

static void test_load_file(void **state) {
  (void)state;
  const char text[] = "[loop]\nmax_epochs = 3\n[sgd]\nlr = 0.1\n";
  char *path = temp_file(text, sizeof text - 1);
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_load(path, &cfg), 0);
  assert_string_equal(lk__config_path(cfg), path);
  char where[64];
  snprintf(where, sizeof where, "%s:4", path);
  assert_entry(lk_config_find(cfg, "sgd", "lr"), "sgd", "lr", "0.1", where);
  snprintf(where, sizeof where, "%s:3", path);
  assert_string_equal(lk__config_section_where(cfg, "sgd"), where);
  lk_config_free(cfg);
  unlink(path);
  free(path);
}

static void test_load_nul_byte(void **state) {
  (void)state;
  const char text[] = "[a]\nx = 1\ny = a\0b\n";
  char *path = temp_file(text, sizeof text - 1);
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_load(path, &cfg), LK_ECONFIG);
  assert_null(cfg);
  char expect[128];
  snprintf(expect, sizeof expect, "%s:3: NUL byte; expected text", path);
  assert_string_equal(lk_last_error(), expect);
  unlink(path);
  free(path);
}

static void test_load_missing(void **state) {
  (void)state;
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_load("/nonexistent/dir/x.ini", &cfg),
                   LK_ENOTFOUND);
  assert_null(cfg);
  assert_string_equal(lk_last_error(), "cannot open config "
                                       "/nonexistent/dir/x.ini: No such file "
                                       "or directory");
  /* A directory opens but cannot be read. */
  assert_int_equal(lk_config_load("/tmp", &cfg), LK_EIO);
  assert_non_null(strstr(lk_last_error(), "/tmp"));
}

static void test_set(void **state) {
  (void)state;
  lk_config *cfg = parse_ok("[loop]\nmax_epochs = 1\nseed = 0\n[sgd]\nlr = "
                            "0.01\n");
  /* Replacing keeps the entry's place and takes the new where. */
  assert_int_equal(lk_config_set(cfg, "loop.max_epochs=3"), 0);
  assert_int_equal(lk__config_count(cfg), 3);
  assert_entry(lk__config_at(cfg, 0), "loop", "max_epochs", "3",
               "--set loop.max_epochs=3");
  /* A new key of an existing section goes after that section's keys. */
  assert_int_equal(lk_config_set(cfg, "loop.terminate_on_nan=true"), 0);
  assert_entry(lk__config_at(cfg, 2), "loop", "terminate_on_nan", "true",
               "--set loop.terminate_on_nan=true");
  assert_entry(lk__config_at(cfg, 3), "sgd", "lr", "0.01", "t.ini:5");
  /* A new section comes last and is located by the --set. */
  assert_int_equal(lk_config_set(cfg, " adam . betas = 0.9,0.999 "), 0);
  assert_int_equal(lk__config_count(cfg), 5);
  assert_entry(lk__config_at(cfg, 4), "adam", "betas", "0.9,0.999",
               "--set  adam . betas = 0.9,0.999 ");
  assert_true(lk__config_has_section(cfg, "adam"));
  assert_string_equal(lk__config_section_where(cfg, "adam"),
                      "--set  adam . betas = 0.9,0.999 ");
  /* The value may hold '=' and '.'. */
  assert_int_equal(lk_config_set(cfg, "sgd.lr=1e-3=x.y"), 0);
  assert_string_equal(lk_config_find(cfg, "sgd", "lr")->value, "1e-3=x.y");
  /* A parameter group's section: the key is after the last dot. */
  assert_int_equal(lk_config_set(cfg, "adamw.no_decay.weight_decay=0"), 0);
  assert_string_equal(
      lk_config_find(cfg, "adamw.no_decay", "weight_decay")->value, "0");
  lk_config_free(cfg);
}

/* An empty value removes the key (its default then applies), and every
 * --set is remembered with the value it replaced, for the run to record
 * and for a section a swap left unused. */
static void test_set_remove_and_record(void **state) {
  (void)state;
  lk_config *cfg = parse_ok("[loop]\nseed = 0\nmax_epochs = 2\n[plugins]\n"
                            "profiler = simple\n");
  assert_int_equal(lk__config_n_overrides(cfg), 0);
  assert_int_equal(lk_config_set(cfg, "plugins.profiler="), 0);
  assert_null(lk_config_find(cfg, "plugins", "profiler"));
  assert_true(lk__config_has_section(cfg, "plugins"));
  assert_int_equal(lk_config_set(cfg, "loop.seed=  "), 0);
  assert_null(lk_config_find(cfg, "loop", "seed"));
  assert_entry(lk__config_at(cfg, 0), "loop", "max_epochs", "2", "t.ini:3");
  /* Removing what is not there is no error, and is recorded too. */
  assert_int_equal(lk_config_set(cfg, "sgd.lr="), 0);
  assert_int_equal(lk_config_set(cfg, "loop.max_epochs=3"), 0);
  assert_int_equal(lk_config_set(cfg, "loop.max_epochs=4"), 0);
  assert_int_equal(lk__config_count(cfg), 1);
  assert_int_equal(lk__config_n_overrides(cfg), 5);
  const lk__config_override *o = lk__config_override_at(cfg, 0);
  assert_string_equal(o->section, "plugins");
  assert_string_equal(o->key, "profiler");
  assert_string_equal(o->was, "simple");
  assert_null(o->value);
  assert_string_equal(o->arg, "plugins.profiler=");
  o = lk__config_override_at(cfg, 1);
  assert_string_equal(o->was, "0");
  assert_string_equal(o->arg, "loop.seed=  ");
  o = lk__config_override_at(cfg, 2);
  assert_null(o->was);
  assert_null(o->value);
  o = lk__config_override_at(cfg, 3);
  assert_string_equal(o->was, "2");
  assert_string_equal(o->value, "3");
  o = lk__config_override_at(cfg, 4);
  assert_string_equal(o->was, "3");
  assert_string_equal(o->value, "4");
  assert_null(lk__config_override_at(cfg, 5));
  /* A refused --set is not recorded. */
  assert_int_equal(lk_config_set(cfg, "loop.seed=1 # c"), LK_ECONFIG);
  assert_int_equal(lk__config_n_overrides(cfg), 5);
  /* Written back, the removed keys are gone and the file reads. */
  char buf[256] = "";
  FILE *f = fmemopen(buf, sizeof buf, "w");
  assert_non_null(f);
  assert_int_equal(lk__config_write(cfg, f), 0);
  fclose(f);
  assert_string_equal(buf, "[loop]\nmax_epochs = 4\n\n[plugins]\n");
  lk_config_free(cfg);
}

static void test_set_malformed(void **state) {
  (void)state;
  static const bad_case cases[] = {
      {"abc", "--set \"abc\": expected SECTION.KEY=VALUE"},
      {"", "--set \"\": expected SECTION.KEY=VALUE"},
      {"loop.seed", "--set \"loop.seed\": expected SECTION.KEY=VALUE"},
      {"seed=1.5", "--set \"seed=1.5\": expected SECTION.KEY=VALUE"},
      {".seed=1", "--set \".seed=1\": missing section name \"\" (letters, "
                  "digits, '_' or '-'); expected SECTION.KEY=VALUE"},
      {"loop.=1", "--set \"loop.=1\": missing key \"\" (letters, digits, "
                  "'_' or '-'); expected SECTION.KEY=VALUE"},
      {"loop.a.b.c=1", "--set \"loop.a.b.c=1\": invalid section name "
                       "\"loop.a.b\" (letters, digits, '_' or '-'); expected "
                       "SECTION.KEY=VALUE"},
      {"lo op.a=1", "--set \"lo op.a=1\": invalid section name \"lo op\" "
                    "(letters, digits, '_' or '-'); expected "
                    "SECTION.KEY=VALUE"},
      {"loop.seed=1 # c", "--set \"loop.seed=1 # c\": value contains a "
                          "comment ('#' or ';' after white space); expected "
                          "SECTION.KEY=VALUE"},
      {"loop.seed=a\nb", "--set \"loop.seed=a\nb\": value contains a control "
                         "character; expected SECTION.KEY=VALUE"},
  };
  lk_config *cfg = parse_ok("[loop]\nseed = 0\n");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = lk_config_set(cfg, cases[i].text);
    if (rc != LK_ECONFIG)
      fail_msg("case %zu: rc %d", i, rc);
    assert_string_equal(lk_last_error(), cases[i].message);
  }
  /* Nothing changed. */
  assert_int_equal(lk__config_count(cfg), 1);
  assert_entry(lk__config_at(cfg, 0), "loop", "seed", "0", "t.ini:2");
  assert_false(lk__config_has_section(cfg, "lo op"));
  lk_config_free(cfg);
}

static void test_put(void **state) {
  (void)state;
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_new(&cfg), 0);
  assert_null(lk__config_path(cfg));
  assert_int_equal(lk__config_count(cfg), 0);
  assert_int_equal(lk_config_put(cfg, "sgd", "lr", "0.1", "default"), 0);
  assert_int_equal(lk_config_put(cfg, "loop", "seed", "1", "here"), 0);
  assert_int_equal(lk_config_put(cfg, "sgd", "momentum", "0", "default"), 0);
  assert_int_equal(lk__config_count(cfg), 3);
  assert_entry(lk__config_at(cfg, 0), "sgd", "lr", "0.1", "default");
  assert_entry(lk__config_at(cfg, 1), "sgd", "momentum", "0", "default");
  assert_entry(lk__config_at(cfg, 2), "loop", "seed", "1", "here");
  assert_string_equal(lk__config_section_where(cfg, "loop"), "here");

  /* Re-putting with the strings of the entry itself (as filling in
   * defaults does) must not read freed memory. */
  const lk_config_entry *e = lk_config_find(cfg, "sgd", "lr");
  assert_int_equal(lk_config_put(cfg, e->section, e->key, "0.2", e->where), 0);
  assert_int_equal(lk__config_count(cfg), 3);
  assert_entry(lk__config_at(cfg, 0), "sgd", "lr", "0.2", "default");

  assert_int_equal(lk_config_put(cfg, "a.b.c", "k", "v", "w"), LK_ECONFIG);
  assert_string_equal(lk_last_error(), "w: invalid section name \"a.b.c\": "
                                       "expected letters, digits, '_' or '-'");
  /* A parameter group's section: OPT.GROUP. */
  assert_int_equal(lk_config_put(cfg, "adamw.no_decay", "lr", "0", "w"), 0);
  assert_entry(lk__config_at(cfg, 3), "adamw.no_decay", "lr", "0", "w");
  assert_int_equal(lk_config_put(cfg, "a", "", "v", "w"), LK_ECONFIG);
  assert_string_equal(lk_last_error(), "w: invalid key \"\": expected "
                                       "letters, digits, '_' or '-'");
  assert_int_equal(lk_config_put(cfg, "a", "k", "", "w"), LK_ECONFIG);
  assert_string_equal(lk_last_error(), "w: missing value for a.k");
  assert_int_equal(lk_config_put(cfg, "a", "k", " v", "w"), LK_ECONFIG);
  assert_string_equal(lk_last_error(), "w: value has leading or trailing "
                                       "white space for a.k");
  assert_int_equal(lk_config_put(cfg, "a", "k", NULL, "w"), LK_EINVAL);
  assert_int_equal(lk_config_put(NULL, "a", "k", "v", "w"), LK_EINVAL);
  assert_false(lk__config_has_section(cfg, "a"));
  assert_int_equal(lk__config_count(cfg), 4);
  lk_config_free(cfg);
}

static char *write_to_string(const lk_config *cfg) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  assert_int_equal(lk__config_write(cfg, f), 0);
  fclose(f);
  return buf;
}

static void test_write_round_trip(void **state) {
  (void)state;
  lk_config *cfg = parse_ok("; header\n"
                            "[loop]\n"
                            "max_epochs = 1   # default 1\n"
                            "[plugins]\n"
                            "step = rosenbrock\n"
                            "[empty]\n"
                            "[loop]\n"
                            "seed=7\n"
                            "[sgd]\n"
                            "lr = 0.01\n"
                            "name = a#b;c =d\n");
  assert_int_equal(lk_config_set(cfg, "adam.betas=0.9,0.999"), 0);
  assert_int_equal(lk_config_set(cfg, "loop.max_epochs=3"), 0);
  assert_int_equal(lk_config_put(cfg, "plugins", "optimizer", "sgd", "x"), 0);
  char *text = write_to_string(cfg);
  assert_string_equal(text, "[loop]\n"
                            "max_epochs = 3\n"
                            "seed = 7\n"
                            "\n"
                            "[plugins]\n"
                            "step = rosenbrock\n"
                            "optimizer = sgd\n"
                            "\n"
                            "[empty]\n"
                            "\n"
                            "[sgd]\n"
                            "lr = 0.01\n"
                            "name = a#b;c =d\n"
                            "\n"
                            "[adam]\n"
                            "betas = 0.9,0.999\n");
  lk_config *back = parse_ok(text);
  assert_int_equal(lk__config_count(back), lk__config_count(cfg));
  for (size_t i = 0; i < lk__config_count(cfg); i++) {
    const lk_config_entry *a = lk__config_at(cfg, i),
                          *b = lk__config_at(back, i);
    assert_string_equal(a->section, b->section);
    assert_string_equal(a->key, b->key);
    assert_string_equal(a->value, b->value);
  }
  assert_true(lk__config_has_section(back, "empty"));
  char *again = write_to_string(back);
  assert_string_equal(again, text);
  free(again);
  free(text);
  lk_config_free(back);
  lk_config_free(cfg);
}

/* Values that lk__config_write could not write back so that they read the
 * same (found by fuzz/fuzz_config.c): a value that starts with a comment
 * character, and a line that only fits without the spaces around '='. */
static void test_unwritable_values(void **state) {
  (void)state;
  lk_config *cfg = (lk_config *)1;
  assert_int_equal(lk_config_parse("t.ini", "[a]\nx =#v\n", &cfg), LK_ECONFIG);
  assert_string_equal(lk_last_error(),
                      "t.ini:2: key \"x\": value contains a comment ('#' or "
                      "';' after white space), once written as \"key = "
                      "value\"");
  assert_int_equal(lk_config_parse("t.ini", "[a]\nx=;v", &cfg), LK_ECONFIG);
  assert_non_null(
      strstr(lk_last_error(), "t.ini:2: key \"x\": value contains"));
  assert_ptr_equal(cfg, (lk_config *)1);

  /* "x=vvv..." of exactly 4096 characters would be written as 4098. */
  char *text = malloc(4 + 4096 + 1);
  assert_non_null(text);
  memcpy(text, "[a]\nx=", 6);
  memset(text + 6, 'v', 4094);
  text[4 + 4096] = '\0';
  assert_int_equal(lk_config_parse("t.ini", text, &cfg), LK_ECONFIG);
  assert_string_equal(lk_last_error(),
                      "t.ini:2: key \"x\": value too long for one line, once "
                      "written as \"key = value\"");
  text[4 + 4096 - 2] = '\0'; /* two shorter: fits as "x = vvv..." */
  cfg = parse_ok(text);
  char *written = write_to_string(cfg);
  lk_config *back = parse_ok(written);
  assert_string_equal(lk__config_at(back, 0)->value, text + 6);
  lk_config_free(back);
  free(written);

  /* --set and put refuse a leading comment character as they refuse one
   * after white space. */
  assert_int_equal(lk_config_set(cfg, "a.b=# a [lmo"), LK_ECONFIG);
  assert_string_equal(lk_last_error(),
                      "--set \"a.b=# a [lmo\": value contains a comment ('#' "
                      "or ';' after white space); expected SECTION.KEY=VALUE");
  assert_int_equal(lk_config_put(cfg, "a", "k", ";v", "w"), LK_ECONFIG);
  assert_string_equal(lk_last_error(),
                      "w: value contains a comment ('#' or ';' after white "
                      "space) for a.k");
  assert_int_equal(lk_config_set(cfg, "a.b=a#b"), 0); /* not a comment */
  assert_int_equal(lk__config_count(cfg), 2);
  lk_config_free(cfg);
  free(text);
}

/* lk__config_text: the text lk__config_write gives, for config.ini and
 * the loggers alike (one owner). */
static void test_text(void **state) {
  (void)state;
  lk_config *cfg = parse_ok("[loop]\nmax_steps = 3\n[sgd]\nlr = 0.1\n");
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(lk__config_text(cfg, &text, &len), 0);
  assert_string_equal(text, "[loop]\nmax_steps = 3\n\n[sgd]\nlr = 0.1\n");
  assert_int_equal(len, strlen(text));
  free(text);
  assert_int_equal(lk__config_text(cfg, &text, NULL), 0);
  assert_string_equal(text, "[loop]\nmax_steps = 3\n\n[sgd]\nlr = 0.1\n");
  free(text);
  lk_config_free(cfg);
}

static void test_write_error(void **state) {
  (void)state;
  FILE *f = fopen("/dev/full", "w");
  if (!f)
    skip();
  lk_config *cfg = parse_ok("[a]\nx = 1\n");
  assert_int_equal(lk__config_write(cfg, f), LK_EIO);
  assert_non_null(strstr(lk_last_error(), "cannot write config"));
  fclose(f);
  lk_config_free(cfg);
}

static void test_null_arguments(void **state) {
  (void)state;
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_parse("t.ini", NULL, &cfg), LK_EINVAL);
  assert_int_equal(lk_config_load(NULL, &cfg), LK_EINVAL);
  assert_int_equal(lk_config_new(NULL), LK_EINVAL);
  assert_int_equal(lk_config_set(NULL, "a.b=c"), LK_EINVAL);
  assert_int_equal(lk__config_write(NULL, stdout), LK_EINVAL);
  assert_int_equal(lk__config_count(NULL), 0);
  assert_null(lk__config_at(NULL, 0));
  assert_null(lk_config_find(NULL, "a", "b"));
  assert_false(lk__config_has_section(NULL, "a"));
  assert_null(lk__config_section_where(NULL, "a"));
  assert_null(lk__config_path(NULL));
  lk_config_free(NULL);
}

/* Enough keys to make the arrays grow several times. */
static void test_many_keys(void **state) {
  (void)state;
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_new(&cfg), 0);
  char sec[16], key[16], val[16];
  for (int i = 0; i < 300; i++) {
    snprintf(sec, sizeof sec, "s%d", i % 7);
    snprintf(key, sizeof key, "k%d", i);
    snprintf(val, sizeof val, "%d", i);
    assert_int_equal(lk_config_put(cfg, sec, key, val, "loop"), 0);
  }
  assert_int_equal(lk__config_count(cfg), 300);
  /* Grouped by section: s0's keys first, in the order they were added. */
  assert_string_equal(lk__config_at(cfg, 0)->key, "k0");
  assert_string_equal(lk__config_at(cfg, 1)->key, "k7");
  assert_string_equal(lk__config_at(cfg, 299)->section, "s6");
  assert_string_equal(lk_config_find(cfg, "s3", "k150")->value, "150");
  lk_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_good),
      cmocka_unit_test(test_crlf_and_no_final_newline),
      cmocka_unit_test(test_empty_and_comment_only),
      cmocka_unit_test(test_sections_grouped),
      cmocka_unit_test(test_syntax_errors),
      cmocka_unit_test(test_long_lines),
      cmocka_unit_test(test_duplicate_key),
      cmocka_unit_test(test_load_file),
      cmocka_unit_test(test_load_nul_byte),
      cmocka_unit_test(test_load_missing),
      cmocka_unit_test(test_set),
      cmocka_unit_test(test_set_remove_and_record),
      cmocka_unit_test(test_set_malformed),
      cmocka_unit_test(test_put),
      cmocka_unit_test(test_write_round_trip),
      cmocka_unit_test(test_unwritable_values),
      cmocka_unit_test(test_write_error),
      cmocka_unit_test(test_text),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_many_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
