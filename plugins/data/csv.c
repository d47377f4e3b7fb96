/* csv: numeric CSV files, one sample a line: the label (or regression
 * target) in label_column, every other column a feature. Plain numbers
 * only (no quoting); blank lines are skipped, and so are the first
 * skip_rows lines whatever they hold (scikit-learn's files start with a
 * line of counts and class names). The test file may lack the label
 * column (one column fewer than the training file): its samples are then
 * to be predicted (loopkit predict), their labels 0, and a warning says
 * that its test metrics mean nothing. Every cell is checked at
 * create and a bad one is an error that names FILE:LINE:COLUMN and the text
 * found, so that a broken file never reaches training. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <stdio.h>
#include <unistd.h>

#include "bundled.h"
#include "data_common.h"

typedef struct reader {
  lk_host *host;
  char delim;
  bool header, int_labels;
  int64_t label_option;
  size_t skip_rows;    /* lines before the header (or the first row) */
  size_t ncols, label; /* known after the first line of the training file */
  int32_t max_label;
  const char *path; /* the file being parsed */
  bool unlabeled;   /* it is a test file without the label column */
} reader;

/* The whole file, NUL-terminated. */
static int slurp(lk_host *host, const char *path, char **out, size_t *len) {
  int fd;
  int rc = lk_open_input(path, "data file", &fd);
  if (rc != 0)
    return rc; /* the host's message names the file */
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return lk_fail(host, LK_EIO, "cannot open %s: %s", path, strerror(errno));
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = NULL;
  for (;;) {
    if (!buf || n == cap - 1) {
      size_t grown = buf ? 2 * cap : cap;
      char *more = realloc(buf, grown);
      if (!more) {
        rc = lk_fail(host, LK_ENOMEM, "out of memory reading %s", path);
        break;
      }
      buf = more;
      cap = grown;
    }
    n += fread(buf + n, 1, cap - 1 - n, f);
    if (ferror(f)) {
      rc = lk_fail(host, LK_EIO, "cannot read %s: %s", path, strerror(errno));
      break;
    }
    if (feof(f))
      break;
  }
  fclose(f);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

static bool is_space(const reader *r, char c) {
  return c == ' ' || (c == '\t' && r->delim != '\t');
}

/* The first line of the training file (its header, or its first row) sets
 * the columns; the test file must have as many, or one fewer (no label). */
static int set_columns(reader *r, size_t cols, size_t line, bool test) {
  if (r->ncols) {
    if (test && cols == r->ncols - 1) {
      r->unlabeled = true;
      return 0;
    }
    if (cols != r->ncols)
      return lk_fail(r->host, LK_EFORMAT,
                     "%s:%zu: %zu columns, the training file has %zu (or %zu "
                     "without the label column)",
                     r->path, line, cols, r->ncols, r->ncols - 1);
    return 0;
  }
  if (cols < 2)
    return lk_fail(r->host, LK_EFORMAT,
                   "%s:%zu: 1 column: a sample needs at least one feature "
                   "and the label (delimiter '%c')",
                   r->path, line, r->delim);
  int64_t l =
      r->label_option < 0 ? (int64_t)cols + r->label_option : r->label_option;
  if (l < 0 || l >= (int64_t)cols)
    return lk_fail(r->host, LK_ECONFIG,
                   "label_column = %lld is out of range: %s has %zu columns "
                   "(0 to %zu, or -1 to -%zu from the end)",
                   (long long)r->label_option, r->path, cols, cols - 1, cols);
  r->ncols = cols;
  r->label = (size_t)l;
  return 0;
}

/* One cell, trimmed, as a finite f32 value (and a class label if it is
 * the label column with labels = int). */
static int cell(reader *r, size_t line, size_t col, char *s, double *v) {
  while (is_space(r, *s))
    s++;
  size_t len = strlen(s);
  while (len && is_space(r, s[len - 1]))
    s[--len] = '\0';
  if (!len)
    return lk_fail(r->host, LK_EFORMAT,
                   "%s:%zu:%zu: empty cell, expected a number", r->path, line,
                   col + 1);
  char *end;
  *v = strtod(s, &end);
  const char *more = len > 40 ? "..." : "";
  if (end == s || *end)
    return lk_fail(r->host, LK_EFORMAT,
                   "%s:%zu:%zu: \"%.40s%s\" is not a number", r->path, line,
                   col + 1, s, more);
  if (!isfinite(*v) || fabs(*v) > FLT_MAX)
    return lk_fail(r->host, LK_EFORMAT,
                   "%s:%zu:%zu: \"%.40s%s\" is not a finite f32 number",
                   r->path, line, col + 1, s, more);
  if (!r->unlabeled && col == r->label && r->int_labels &&
      (*v != floor(*v) || *v < 0 || *v > INT32_MAX))
    return lk_fail(r->host, LK_EFORMAT,
                   "%s:%zu:%zu: label \"%.40s%s\" is not an integer >= 0 "
                   "(labels = int)",
                   r->path, line, col + 1, s, more);
  return 0;
}

/* Parses TEXT, the LEN bytes of the file PATH followed by a NUL, into file
 * K of D: at most LIMIT rows if LIMIT (the rest is not looked at). TEXT is
 * cut up in place. Apart from slurping, this is all of parse: the fuzz
 * target in fuzz/ calls it on memory. */
static int parse_text(reader *r, data_set *d, const char *path, char *text,
                      size_t len, int k, size_t limit) {
  int rc = 0;
  r->path = path;
  r->unlabeled = false;
  bool header = r->header, first = true;
  size_t rows = 0, cap = 0, line = 0;
  char *end = text + len;
  for (char *p = text; rc == 0 && p < end && !(limit && rows == limit);) {
    line++;
    char *eol = memchr(p, '\n', (size_t)(end - p)), *next;
    eol = eol ? eol : end;
    next = eol < end ? eol + 1 : end;
    if (eol > p && eol[-1] == '\r')
      eol--;
    *eol = '\0';
    if (line <= r->skip_rows) {
      p = next;
      continue;
    }
    char *q = p;
    while (is_space(r, *q))
      q++;
    if (!*q) { /* blank line */
      p = next;
      continue;
    }
    size_t cols = 1;
    for (q = p; (q = strchr(q, r->delim)); q++)
      cols++;
    if (header || first) {
      first = false;
      if ((rc = set_columns(r, cols, line, k != 0)) != 0)
        break;
      d->features = r->ncols - 1;
      if (header) {
        header = false;
        p = next;
        continue;
      }
    }
    size_t want = r->ncols - r->unlabeled;
    if (cols < want) {
      rc = lk_fail(r->host, LK_EFORMAT,
                   "%s:%zu:%zu: missing cell: %zu columns, expected %zu", path,
                   line, cols + 1, cols, want);
      break;
    }
    if (rows == cap) {
      cap = cap ? 2 * cap : 1024;
      if ((rc = data_alloc(d, k, cap)) != 0)
        break;
    }
    float *x = d->file[k].x + rows * d->features;
    for (size_t col = 0; rc == 0 && col < cols; col++) {
      char *cut = strchr(p, r->delim);
      if (cut)
        *cut = '\0';
      double v = 0;
      if (col == want) {
        rc = lk_fail(r->host, LK_EFORMAT,
                     "%s:%zu:%zu: extra cell \"%.40s%s\": %zu columns, "
                     "expected %zu",
                     path, line, col + 1, p, strlen(p) > 40 ? "..." : "", cols,
                     want);
      } else if ((rc = cell(r, line, col, p, &v)) == 0 && !r->unlabeled &&
                 col == r->label) {
        if (r->int_labels) {
          int32_t c = (int32_t)v;
          ((int32_t *)d->file[k].y)[rows] = c;
          r->max_label = c > r->max_label ? c : r->max_label;
        } else {
          ((float *)d->file[k].y)[rows] = (float)v;
        }
      } else if (rc == 0) {
        *x++ = (float)v;
      }
      p = cut ? cut + 1 : p;
    }
    if (r->unlabeled) { /* nothing to learn from: a placeholder */
      if (r->int_labels)
        ((int32_t *)d->file[k].y)[rows] = 0;
      else
        ((float *)d->file[k].y)[rows] = 0;
    }
    rows++;
    p = next;
  }
  if (rc == 0 && rows == 0)
    rc = lk_fail(r->host, LK_EFORMAT, "%s has no data rows%s", path,
                 r->skip_rows ? " after the lines skip_rows skips" : "");
  if (rc == 0)
    d->file[k].n = rows;
  d->file[k].path = path;
  return rc;
}

/* Parses the file at PATH into file K of D (see parse_text). */
static int parse(reader *r, data_set *d, const char *path, int k,
                 size_t limit) {
  char *text = NULL;
  size_t len = 0;
  int rc = slurp(r->host, path, &text, &len);
  if (rc != 0)
    return rc;
  rc = parse_text(r, d, path, text, len, k, limit);
  free(text);
  return rc;
}

/* One character; a few by name, since an INI value cannot hold a tab, and
 * ';' or '#' after white space starts a comment. */
static int delimiter_of(lk_host *host, const char *s, char *out) {
  static const struct {
    const char *name;
    char c;
  } names[] = {{"tab", '\t'},  {"\\t", '\t'}, {"semicolon", ';'},
               {"comma", ','}, {"pipe", '|'}, {"hash", '#'}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(s, names[i].name) == 0) {
      *out = names[i].c;
      return 0;
    }
  if (strlen(s) != 1 || isalnum((unsigned char)s[0]) || strchr(".+-\"", s[0]))
    return lk_fail(host, LK_ECONFIG,
                   "delimiter = \"%s\": must be one character that is not a "
                   "letter, digit, '.', '+', '-' or '\"', or one of tab, "
                   "semicolon, comma, pipe, hash",
                   s);
  *out = s[0];
  return 0;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  reader r = {.host = host,
              .header = lk_opt_bool(o, "header"),
              .label_option = lk_opt_int(o, "label_column"),
              .skip_rows = (size_t)lk_opt_int(o, "skip_rows"),
              .int_labels = strcmp(lk_opt_string(o, "labels"), "int") == 0};
  const char *path = lk_opt_string(o, "path"), *test = lk_opt_string(o, "test");
  int rc = delimiter_of(host, lk_opt_string(o, "delimiter"), &r.delim);
  if (rc == 0 && !*path)
    rc = lk_fail(host, LK_ECONFIG, "path is empty: name the training CSV file");
  data_set *d = NULL;
  if (rc == 0)
    rc = data_new(host, o, &d);
  if (rc != 0)
    return rc;
  d->y_dtype = r.int_labels ? LK_I32 : LK_F32;
  d->test_split = lk_opt_double(o, "test_split");
  if (d->test_split > 0 && *test)
    rc = lk_fail(host, LK_ECONFIG,
                 "test_split = %g and test = %s: the test split comes from "
                 "one or the other",
                 d->test_split, test);
  if (rc == 0)
    rc = parse(&r, d, path, 0, d->limit);
  if (rc == 0 && *test)
    rc = parse(&r, d, test, 1, 0);
  if (rc == 0 && *test && r.unlabeled)
    lk_log(host, LK_LOG_WARN,
           "%s has no label column (%zu columns, the training file %zu): its "
           "samples are for loopkit predict; test metrics on them mean "
           "nothing (every label is taken as 0)",
           test, r.ncols - 1, r.ncols);
  if (rc == 0)
    rc = data_setup(d, d->normalize);
  if (rc == 0 && r.int_labels)
    lk_log(host, LK_LOG_INFO,
           "%zu training, %zu validation and %zu test samples of %zu "
           "features, %ld classes, from %s",
           d->n[LK_SPLIT_TRAIN], d->n[LK_SPLIT_VAL], d->n[LK_SPLIT_TEST],
           d->features, (long)r.max_label + 1, path);
  else if (rc == 0)
    lk_log(host, LK_LOG_INFO,
           "%zu training, %zu validation and %zu test samples of %zu "
           "features from %s",
           d->n[LK_SPLIT_TRAIN], d->n[LK_SPLIT_VAL], d->n[LK_SPLIT_TEST],
           d->features, path);
  if (rc != 0) {
    data_destroy(d);
    return rc;
  }
  *self = d;
  return 0;
}

static const lk_option options[] = {
    {"path", LK_OPT_PATH, NULL, "the training CSV file", NULL},
    {"test", LK_OPT_PATH, "",
     "the test CSV file (empty: no test split); without the label column "
     "its samples are for loopkit predict",
     NULL},
    {"header", LK_OPT_BOOL, "true",
     "the first line (after skip_rows) names the columns", NULL},
    {"skip_rows", LK_OPT_INT, "0",
     "lines skipped at the start of each file, before the header or the "
     "first row",
     "[0, inf)"},
    {"test_split", LK_OPT_DOUBLE, "0",
     "fraction of the training file's samples held out as the test split, "
     "the same ones every run (drawn from [loop] seed; apart from "
     "val_split's); 0: the test file, if any",
     "[0, 1)"},
    {"label_column", LK_OPT_INT, "-1",
     "the label's column, from 0; negative counts from the end (-1: last)",
     NULL},
    {"delimiter", LK_OPT_STRING, ",",
     "the cell separator: one character, or tab, semicolon, comma, pipe, hash",
     NULL},
    {"labels", LK_OPT_ENUM, "int",
     "int: class labels >= 0 (y i32); float: a regression target (y f32)",
     "int|float"},
    DATA_COMMON_OPTIONS("none", "(x - min) / (max - min) per feature"),
    {NULL, 0, NULL, NULL, NULL}};

static const lk_data_ops data_ops = {
    .epoch = data_epoch, .batch = data_batch, .shape = data_shape};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_PLUGIN("csv", "numeric CSV files: features and a label column",
                   data_destroy, NULL, .data = &data_ops);
