/* The INI config parser (src/base/config.c).
 *
 * Input: the config text, then optionally a NUL and --set assignments
 * separated by NULs ("[loop]\nseed = 1\0loop.seed=2\0a.b=c").
 *
 * Checks, beyond "no crash, leak or hang":
 * - the whole input loaded as a file (lk_config_load, which sees the NULs)
 *   and the text before the first NUL parsed from memory (lk_config_parse)
 *   agree whenever the input has no NUL; a NUL in a file is an error that
 *   names FILE:LINE;
 * - every parse error is LK_ECONFIG and names "fuzz.ini:LINE: ", every
 *   --set error names the --set argument;
 * - lk__config_write's output parses again and writes the same bytes (a
 *   written config reads back identically, as config.c promises), after
 *   the --set assignments too;
 * - lk_config_find finds each entry lk__config_at lists. */
#include "../src/base/internal.h"
#include "fuzz_util.h"

#define NAME "fuzz.ini"

static fuzz_file file;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_file_open(&file, NAME);
  return 0;
}

/* lk__config_write's output, malloc'd and NUL-terminated. */
static char *written(const lk_config *cfg) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  FUZZ_CHECK(f != NULL, "open_memstream");
  int rc = lk__config_write(cfg, f);
  FUZZ_CHECK(rc == 0, "lk__config_write returned %d", rc);
  FUZZ_CHECK(fclose(f) == 0, "fclose");
  return text;
}

static void check_parse_error(int rc, const char *via) {
  const char *msg = lk_last_error();
  FUZZ_CHECK(rc == LK_ECONFIG || rc == LK_ENOMEM, "%s returned %d", via, rc);
  if (rc == LK_ECONFIG)
    FUZZ_CHECK(strncmp(msg, NAME ":", strlen(NAME ":")) == 0 &&
                   strchr("123456789", msg[strlen(NAME ":")]),
               "%s's message does not name %s:LINE: \"%s\"", via, NAME, msg);
}

/* Every entry is found where lk__config_at says it is, and the written
 * text is a fixed point of parse-then-write. */
static void check_config(const lk_config *cfg) {
  size_t n = lk__config_count(cfg);
  for (size_t i = 0; i < n; i++) {
    const lk_config_entry *e = lk__config_at(cfg, i);
    FUZZ_CHECK(e && e->section && e->key && e->value && e->where,
               "entry %zu incomplete", i);
    FUZZ_CHECK(lk_config_find(cfg, e->section, e->key) == e,
               "entry %zu (%s.%s) not found by lk_config_find", i, e->section,
               e->key);
    FUZZ_CHECK(lk__config_has_section(cfg, e->section), "no section %s",
               e->section);
  }
  FUZZ_CHECK(lk__config_at(cfg, n) == NULL, "an entry past the count");

  char *text = written(cfg);
  lk_config *again = NULL;
  int rc = lk_config_parse("written.ini", text, &again);
  FUZZ_CHECK(rc == 0, "written config does not parse: rc %d, text:\n%s", rc,
             text);
  FUZZ_CHECK(lk__config_count(again) == n, "%zu entries read back, %zu written",
             lk__config_count(again), n);
  for (size_t i = 0; i < n; i++) {
    const lk_config_entry *a = lk__config_at(cfg, i),
                          *b = lk__config_at(again, i);
    FUZZ_CHECK(strcmp(a->section, b->section) == 0 &&
                   strcmp(a->key, b->key) == 0 &&
                   strcmp(a->value, b->value) == 0,
               "entry %zu: %s.%s=\"%s\" read back as %s.%s=\"%s\"", i,
               a->section, a->key, a->value, b->section, b->key, b->value);
  }
  char *text2 = written(again);
  FUZZ_CHECK(strcmp(text, text2) == 0, "write is not a fixed point");
  free(text2);
  free(text);
  lk_config_free(again);
}

/* Same entries in the same order, with the same "where". */
static void check_same(const lk_config *a, const lk_config *b) {
  size_t n = lk__config_count(a);
  FUZZ_CHECK(lk__config_count(b) == n, "load and parse disagree on the count");
  for (size_t i = 0; i < n; i++) {
    const lk_config_entry *x = lk__config_at(a, i), *y = lk__config_at(b, i);
    FUZZ_CHECK(
        strcmp(x->section, y->section) == 0 && strcmp(x->key, y->key) == 0 &&
            strcmp(x->value, y->value) == 0 && strcmp(x->where, y->where) == 0,
        "load and parse disagree on entry %zu", i);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, '\0', size);
  size_t text_len = nul ? (size_t)(nul - data) : size;
  char *text = malloc(text_len + 1);
  FUZZ_CHECK(text != NULL, "malloc");
  memcpy(text, data, text_len);
  text[text_len] = '\0';

  lk_config *cfg = NULL;
  int rc = lk_config_parse(NAME, text, &cfg);
  fuzz_report(rc);
  if (rc != 0) {
    check_parse_error(rc, "lk_config_parse");
    FUZZ_CHECK(cfg == NULL, "out set on failure");
  }
  char *parse_msg = rc != 0 ? strdup(lk_last_error()) : NULL;

  /* The file holds the input whole, NULs included. */
  fuzz_file_set(&file, data, size);
  lk_config *loaded = NULL;
  int lrc = lk_config_load(file.path, &loaded);
  if (lrc != 0) {
    /* lk_config_load names the path it was given */
    const char *msg = lk_last_error();
    FUZZ_CHECK(lrc == LK_ECONFIG || lrc == LK_ENOMEM, "load returned %d", lrc);
    FUZZ_CHECK(strncmp(msg, file.path, strlen(file.path)) == 0,
               "load's message does not name the file: \"%s\"", msg);
  }
  if (!nul) {
    FUZZ_CHECK((rc == 0) == (lrc == 0), "parse %d but load %d", rc, lrc);
    if (rc != 0) /* the same line, and so the same ":LINE:" after it */
      FUZZ_CHECK(
          strncmp(parse_msg + strlen(NAME), lk_last_error() + strlen(file.path),
                  strcspn(parse_msg + strlen(NAME) + 1, ":") + 2) == 0,
          "parse said \"%s\", load said \"%s\"", parse_msg, lk_last_error());
  } else if (lrc == 0) {
    FUZZ_CHECK(0, "a file with a NUL byte loaded");
  }
  free(parse_msg);
  if (rc == 0 && lrc == 0) {
    /* load names entries by its path: compare against a parse under it */
    lk_config *same = NULL;
    FUZZ_CHECK(lk_config_parse(file.path, text, &same) == 0, "reparse");
    check_same(loaded, same);
    lk_config_free(same);
  }
  lk_config_free(loaded);

  if (rc == 0) {
    check_config(cfg);
    /* the --set assignments after the text */
    const char *p = nul ? (const char *)nul + 1 : NULL;
    const char *end = (const char *)data + size;
    int sets = 0;
    while (p && p < end && sets++ < 16) {
      const char *q = memchr(p, '\0', (size_t)(end - p));
      size_t len = q ? (size_t)(q - p) : (size_t)(end - p);
      char *arg = malloc(len + 1);
      FUZZ_CHECK(arg != NULL, "malloc");
      memcpy(arg, p, len);
      arg[len] = '\0';
      size_t before = lk__config_count(cfg);
      /* SECTION.KEY= (nothing after '=') removes the key: one entry fewer
       * at most; any other set adds one entry at most. */
      const char *eq = strchr(arg, '=');
      bool removes = eq && eq[1 + strspn(eq + 1, " \t")] == '\0';
      int src = lk_config_set(cfg, arg);
      if (src == 0) {
        size_t after = lk__config_count(cfg);
        if (removes)
          FUZZ_CHECK(after == before || after + 1 == before,
                     "a removing set changed %zu entries into %zu", before,
                     after);
        else
          FUZZ_CHECK(after == before || after == before + 1,
                     "set changed %zu entries into %zu", before, after);
        if (removes) {
          /* the key named is gone */
          char *copy = strdup(arg);
          FUZZ_CHECK(copy != NULL, "strdup");
          copy[eq - arg] = '\0';
          char *dot = strrchr(copy, '.'); /* a section may be OPT.GROUP */
          if (dot) {
            *dot = '\0';
            char *sec = copy, *key = dot + 1;
            sec += strspn(sec, " \t");
            size_t sl = strlen(sec), kl;
            while (sl && (sec[sl - 1] == ' ' || sec[sl - 1] == '\t'))
              sec[--sl] = '\0';
            key += strspn(key, " \t");
            kl = strlen(key);
            while (kl && (key[kl - 1] == ' ' || key[kl - 1] == '\t'))
              key[--kl] = '\0';
            FUZZ_CHECK(lk_config_find(cfg, sec, key) == NULL,
                       "--set %s left the key", arg);
          }
          free(copy);
        }
      } else {
        FUZZ_CHECK(src == LK_ECONFIG || src == LK_ENOMEM, "set returned %d",
                   src);
        FUZZ_CHECK(lk__config_count(cfg) == before, "failed set changed cfg");
        FUZZ_CHECK(
            src == LK_ENOMEM || strncmp(lk_last_error(), "--set \"", 7) == 0,
            "set's message does not name --set: \"%s\"", lk_last_error());
      }
      free(arg);
      p = q ? q + 1 : NULL;
    }
    check_config(cfg);
    lk_config_free(cfg);
  }
  free(text);
  return 0;
}
