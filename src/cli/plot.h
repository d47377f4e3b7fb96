/* loopkit plot: metrics.csv read into columns (plot_data.c), drawn with
 * cairo (plot.c). */
#ifndef LK_CLI_PLOT_H
#define LK_CLI_PLOT_H

#include <stddef.h>

/* A metrics.csv in memory: one array of doubles per column, NaN where the
 * cell was empty, missing or not a number. Columns 0, 1 and 2 are step,
 * epoch and loss. */
typedef struct plot_table {
  size_t n_cols;
  char **names;  /* n_cols names, from the header */
  double **cols; /* cols[c][row] */
  size_t n_rows;
  size_t cap; /* rows allocated in each column */
} plot_table;

enum { PLOT_STEP, PLOT_EPOCH, PLOT_LOSS };

/* Reads PATH into T (zeroed first). 0, or EXIT_USAGE after cli_error when
 * the file cannot be read or is not a loopkit metrics file, EXIT_FAILED
 * after cli_error when memory runs out. T is empty after a failure. */
int plot_table_read(const char *path, plot_table *t);

/* The index of the column named NAME, or -1. */
long plot_table_find(const plot_table *t, const char *name);

/* A column holding at least one finite value, or NULL. */
const double *plot_table_column(const plot_table *t, long col);

void plot_table_free(plot_table *t);

#endif
