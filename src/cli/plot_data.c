/* loopkit plot: metrics.csv into columns of doubles. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "cli.h"
#include "plot.h"

static const char expected[] = "step,epoch,loss";

/* Strips the line end: loopkit writes \n, a file that went through another
 * tool may have \r\n. */
static void chomp(char *line) {
  line[strcspn(line, "\r\n")] = '\0';
}

/* The next comma-separated cell of *P, terminated in place; NULL after the
 * last. Empty cells are cells (strtok would skip them). */
static char *next_cell(char **p) {
  char *cell = *p;
  if (!cell)
    return NULL;
  char *comma = strchr(cell, ',');
  if (comma) {
    *comma = '\0';
    *p = comma + 1;
  } else
    *p = NULL;
  return cell;
}

/* An empty cell or one that is not a number is a missing value: a plot
 * shows what it can rather than refusing a whole run for one cell. */
static double cell_value(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s)
    return NAN;
  while (isspace((unsigned char)*end))
    end++;
  return *end ? NAN : v;
}

/* The start of a foreign header, safe to print. */
static void printable(char *dst, size_t size, const char *src) {
  size_t i = 0;
  for (; src[i] && i + 1 < size; i++)
    dst[i] = isprint((unsigned char)src[i]) ? src[i] : '?';
  dst[i] = '\0';
}

static int out_of_memory(plot_table *t) {
  plot_table_free(t);
  cli_error("plot: out of memory");
  return EXIT_FAILED;
}

static int read_header(plot_table *t, char *line, const char *path) {
  const char *bom = "\xEF\xBB\xBF";
  if (!strncmp(line, bom, 3))
    line += 3;
  size_t n = strlen(expected);
  if (strncmp(line, expected, n) != 0 || (line[n] && line[n] != ',')) {
    char shown[48];
    printable(shown, sizeof shown, line);
    cli_error("plot: %s is not a loopkit metrics file: its header is \"%s\", "
              "expected \"%s\" then the metric names",
              path, shown, expected);
    return EXIT_USAGE;
  }
  for (char *p = line, *name; (name = next_cell(&p));) {
    char **names = realloc(t->names, (t->n_cols + 1) * sizeof *names);
    if (!names)
      return out_of_memory(t);
    t->names = names;
    if (!(names[t->n_cols] = strdup(name)))
      return out_of_memory(t);
    t->n_cols++;
  }
  if (!(t->cols = calloc(t->n_cols, sizeof *t->cols)))
    return out_of_memory(t);
  return 0;
}

/* Room for one more row: every column doubles, so a run of any length
 * costs amortised constant time per row. */
static int grow(plot_table *t) {
  if (t->n_rows < t->cap)
    return 0;
  size_t cap = t->cap ? t->cap * 2 : 1024;
  if (cap > SIZE_MAX / sizeof(double))
    return -1;
  for (size_t c = 0; c < t->n_cols; c++) {
    double *v = realloc(t->cols[c], cap * sizeof *v);
    if (!v)
      return -1;
    t->cols[c] = v;
  }
  t->cap = cap;
  return 0;
}

/* A short row's missing cells are missing values; a long row's extra
 * cells are ignored. */
static int read_row(plot_table *t, char *line) {
  if (grow(t) != 0)
    return -1;
  char *p = line;
  for (size_t c = 0; c < t->n_cols; c++) {
    char *cell = next_cell(&p);
    t->cols[c][t->n_rows] = cell ? cell_value(cell) : NAN;
  }
  t->n_rows++;
  return 0;
}

static int read_lines(plot_table *t, FILE *f, const char *path) {
  char *line = NULL;
  size_t size = 0;
  int rc = 0;
  bool header = true;
  errno = 0;
  while (rc == 0 && getline(&line, &size, f) >= 0) {
    chomp(line);
    if (header)
      rc = read_header(t, line, path);
    else if (*line && read_row(t, line) != 0)
      rc = out_of_memory(t);
    header = false;
  }
  free(line);
  if (rc == 0 && ferror(f)) {
    cli_error("plot: cannot read %s: %s", path, strerror(errno));
    rc = EXIT_USAGE;
  } else if (rc == 0 && header) {
    cli_error("plot: %s is empty: expected a loopkit metrics file, header "
              "\"%s\" then the metric names",
              path, expected);
    rc = EXIT_USAGE;
  }
  return rc;
}

int plot_table_read(const char *path, plot_table *t) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "r");
  if (!f) {
    cli_error("plot: cannot read %s: %s", path, strerror(errno));
    return EXIT_USAGE;
  }
  int rc = read_lines(t, f, path);
  fclose(f);
  if (rc != 0)
    plot_table_free(t);
  return rc;
}

long plot_table_find(const plot_table *t, const char *name) {
  for (size_t c = 0; c < t->n_cols; c++)
    if (!strcmp(t->names[c], name))
      return (long)c;
  return -1;
}

const double *plot_table_column(const plot_table *t, long col) {
  if (col < 0 || (size_t)col >= t->n_cols)
    return NULL;
  for (size_t r = 0; r < t->n_rows; r++)
    if (isfinite(t->cols[col][r]))
      return t->cols[col];
  return NULL;
}

void plot_table_free(plot_table *t) {
  for (size_t c = 0; c < t->n_cols; c++) {
    free(t->names[c]);
    if (t->cols)
      free(t->cols[c]);
  }
  free(t->names);
  free(t->cols);
  memset(t, 0, sizeof *t);
}
