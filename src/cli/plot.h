/* loopkit plot: metrics.csv read into columns (plot_data.c), the panels
 * to draw chosen from them (plot_panels.c), drawn with cairo (plot.c). */
#ifndef LK_CLI_PLOT_H
#define LK_CLI_PLOT_H

#include <stdbool.h>
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

/* What a series of a panel is: a column logged while training (per step),
 * by the validation or by the test (one value at the end, drawn as a
 * level), or a value read from config.ini and drawn flat. */
typedef enum plot_role {
  ROLE_TRAIN,
  ROLE_VAL,
  ROLE_TEST,
  ROLE_CONSTANT
} plot_role;

typedef struct plot_series {
  plot_role role;
  long col;     /* the column; -1 for ROLE_CONSTANT */
  double value; /* ROLE_CONSTANT: the value */
  char label[96];
} plot_series;

/* One panel: a metric NAME with the columns NAME, val_NAME and test_NAME
 * that hold values. */
typedef struct plot_panel {
  char name[72];
  plot_series s[3];
  size_t n_series;
} plot_panel;

typedef struct plot_layout {
  plot_panel *panels;
  size_t n;
} plot_layout;

/* The panels for T: one per name of METRICS (a comma list, in its order)
 * or, when METRICS is NULL, one per metric with values, in the columns'
 * order, the rates last (plot_is_rate). Without an lr column the learning rate
 * is the run's optimizer's lr option in RUN_DIR/config.ini, if it has one. 0;
 * EXIT_USAGE after cli_error for a name with no values; EXIT_FAILED after
 * cli_error when memory runs out. */
int plot_panels_choose(const plot_table *t, const char *metrics,
                       const char *run_dir, plot_layout *out);

void plot_layout_free(plot_layout *l);
/* Whether panel NAME is a learning rate: lr, or a parameter group's or
 * another optimizer's lr_NAME (drawn as set, never smoothed; last). */
bool plot_is_rate(const char *name);

#endif
