/* loopkit plot: which panels a figure has. A panel is one metric: its
 * training column, its val_ and test_ columns overlaid, so that a model's
 * fit and its generalisation are read off one axis. Only what holds values
 * gets a panel; the learning rate of a run without a scheduler (no lr
 * column) is the optimizer's lr option from config.ini, drawn flat. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plot.h"

static const char *const prefixes[] = {"val_", "test_"};

/* What a column's name says it is. */
static plot_role role_of(const char *name) {
  if (!strncmp(name, "val_", 4))
    return ROLE_VAL;
  if (!strncmp(name, "test_", 5))
    return ROLE_TEST;
  return ROLE_TRAIN;
}

/* The metric a column belongs to: its name without val_ or test_. */
static const char *metric_of(const char *name) {
  for (size_t k = 0; k < 2; k++) {
    size_t n = strlen(prefixes[k]);
    if (!strncmp(name, prefixes[k], n) && name[n])
      return name + n;
  }
  return name;
}

static double last_value(const plot_table *t, long col) {
  for (size_t r = t->n_rows; r-- > 0;)
    if (isfinite(t->cols[col][r]))
      return t->cols[col][r];
  return NAN;
}

static void add_column(const plot_table *t, plot_panel *p, const char *name) {
  long col = plot_table_find(t, name);
  if (!plot_table_column(t, col) || col == PLOT_STEP || col == PLOT_EPOCH)
    return;
  plot_series *s = &p->s[p->n_series++];
  *s = (plot_series){role_of(name), col, NAN, ""};
  if (s->role == ROLE_TEST) {
    s->value = last_value(t, col);
    snprintf(s->label, sizeof s->label, "%s %.6g", name, s->value);
  } else
    snprintf(s->label, sizeof s->label, "%s", name);
}

/* The run's learning rate when it never changed: [plugins] optimizer's lr
 * in RUN_DIR/config.ini. False when there is none to be had (a
 * hand-written metrics.csv, an optimizer without lr). */
static bool config_lr(const char *run_dir, double *lr, char *label,
                      size_t size) {
  size_t n = strlen(run_dir) + sizeof "/config.ini";
  char *path = malloc(n);
  if (!path)
    return false;
  snprintf(path, n, "%s/config.ini", run_dir);
  lk_config *cfg = NULL;
  int rc = lk_config_load(path, &cfg);
  free(path);
  if (rc != 0)
    return false;
  const lk_config_entry *opt = lk_config_find(cfg, "plugins", "optimizer");
  const lk_config_entry *e = opt ? lk_config_find(cfg, opt->value, "lr") : NULL;
  char *end = NULL;
  double v = e ? strtod(e->value, &end) : NAN;
  bool ok = e && end != e->value && !*end && isfinite(v);
  if (ok) {
    *lr = v;
    snprintf(label, size, "lr %.6g ([%s] in config.ini)", v, opt->value);
  }
  lk_config_free(cfg);
  return ok;
}

/* Panel NAME with whatever it has; false when that is nothing. */
static bool fill_panel(const plot_table *t, const char *run_dir,
                       const char *name, plot_panel *p) {
  *p = (plot_panel){.n_series = 0};
  snprintf(p->name, sizeof p->name, "%s", name);
  add_column(t, p, name);
  for (size_t k = 0; k < 2; k++) {
    char full[80];
    snprintf(full, sizeof full, "%s%s", prefixes[k], name);
    add_column(t, p, full);
  }
  if (p->n_series == 0 && !strcmp(name, "lr")) {
    plot_series *s = &p->s[0];
    *s = (plot_series){ROLE_CONSTANT, -1, NAN, ""};
    if (config_lr(run_dir, &s->value, s->label, sizeof s->label))
      p->n_series = 1;
  }
  return p->n_series > 0;
}

static bool has_panel(const plot_layout *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->panels[i].name, name))
      return true;
  return false;
}

/* The metrics with values, for a message: "loss, val_loss, mae". */
static void column_list(const plot_table *t, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t c = PLOT_LOSS; c < t->n_cols && used < size; c++)
    if (plot_table_column(t, (long)c))
      used += (size_t)snprintf(buf + used, size - used, "%s%s",
                               used ? ", " : "", t->names[c]);
  if (!used)
    snprintf(buf, size, "none");
}

static int add_named(const plot_table *t, const char *run_dir, const char *name,
                     plot_layout *l) {
  plot_panel *p = &l->panels[l->n];
  if (fill_panel(t, run_dir, name, p)) {
    l->n++;
    return 0;
  }
  char have[512];
  column_list(t, have, sizeof have);
  cli_error("plot: --metrics %s: no column %s, val_%s or test_%s with values "
            "in metrics.csv; the columns with values are: %s",
            name, name, name, name, have);
  return EXIT_USAGE;
}

/* Each name of the comma list METRICS. */
static int choose_named(const plot_table *t, const char *metrics,
                        const char *run_dir, plot_layout *l) {
  const char *p = metrics;
  for (;;) {
    size_t n = strcspn(p, ",");
    if (n == 0 || n >= sizeof l->panels[0].name) {
      cli_error("plot: --metrics \"%s\": expected a comma list of metric "
                "names (1 to %zu characters each)",
                metrics, sizeof l->panels[0].name - 1);
      return EXIT_USAGE;
    }
    char name[sizeof l->panels[0].name];
    memcpy(name, p, n);
    name[n] = '\0';
    int rc = add_named(t, run_dir, name, l);
    if (rc != 0)
      return rc;
    if (!p[n])
      return 0;
    p += n + 1;
  }
}

bool plot_is_rate(const char *name) {
  return !strcmp(name, "lr") || !strncmp(name, "lr_", 3);
}

/* Every metric with values, the rates last: lr, then each parameter
 * group's or other optimizer's lr_NAME. */
static void choose_all(const plot_table *t, const char *run_dir,
                       plot_layout *l) {
  for (int rates = 0; rates < 2; rates++) {
    if (rates && fill_panel(t, run_dir, "lr", &l->panels[l->n]))
      l->n++;
    for (size_t c = PLOT_LOSS; c < t->n_cols; c++) {
      const char *name = metric_of(t->names[c]);
      if (!plot_table_column(t, (long)c) || !strcmp(name, "lr") ||
          plot_is_rate(name) != (rates == 1) ||
          strlen(name) >= sizeof l->panels[0].name || has_panel(l, name))
        continue;
      if (fill_panel(t, run_dir, name, &l->panels[l->n]))
        l->n++;
    }
  }
}

int plot_panels_choose(const plot_table *t, const char *metrics,
                       const char *run_dir, plot_layout *out) {
  *out = (plot_layout){NULL, 0};
  /* At most a panel per column, or per name of the list, and lr. */
  size_t cap = t->n_cols + 1;
  for (const char *p = metrics; p && *p; p++)
    cap += *p == ',';
  if (!(out->panels = calloc(cap, sizeof *out->panels))) {
    cli_error("plot: out of memory");
    return EXIT_FAILED;
  }
  int rc = 0;
  if (metrics)
    rc = choose_named(t, metrics, run_dir, out);
  else
    choose_all(t, run_dir, out);
  if (rc != 0)
    plot_layout_free(out);
  return rc;
}

void plot_layout_free(plot_layout *l) {
  free(l->panels);
  *l = (plot_layout){NULL, 0};
}
