/* The monitor of early_stopping and checkpoint (monitor.h). */
#include "monitor.h"

void monitor_free(monitor *m) {
  free(m->name);
  m->name = NULL;
}

int monitor_init(monitor *m, lk_host *host, const lk_options *o,
                 int (*check)(void *self, const lk_step_result *val)) {
  const char *name = lk_opt_string(o, "monitor");
  memset(m, 0, sizeof *m);
  if (!name || !*name || strchr(name, ',') || strchr(name, '\n'))
    return lk_fail(host, LK_ECONFIG,
                   "option monitor = \"%s\": name a metrics.csv column such "
                   "as val_loss, loss or accuracy",
                   name ? name : "");
  if (strncmp(name, "test_", 5) == 0)
    return lk_fail(host, LK_ECONFIG,
                   "option monitor = %s: test metrics are logged after "
                   "training ends; watch val_* or a training metric",
                   name);
  size_t len = strlen(name) + 1;
  if (!(m->name = malloc(len)))
    return lk_fail(host, LK_ENOMEM, "out of memory");
  memcpy(m->name, name, len);
  m->max = strcmp(lk_opt_string(o, "mode"), "max") == 0;
  m->at_validation = strncmp(name, "val_", 4) == 0;
  m->check = check;
  return 0;
}

int monitor_on_validation_end(void *self, const lk_step_result *result) {
  monitor *m = self;
  return m->at_validation ? m->check(self, result) : 0;
}

int monitor_on_train_epoch_end(void *self, uint64_t epoch) {
  monitor *m = self;
  (void)epoch;
  return m->at_validation ? 0 : m->check(self, NULL);
}

bool monitor_better(const monitor *m, double current, double best) {
  if (!isfinite(current))
    return false;
  return m->max ? current > best + m->min_delta : current < best - m->min_delta;
}

/* Appends ", NAME" to BUF (for the list of logged validation metrics). */
static void monitor_list_add(char *buf, size_t len, const char *name) {
  size_t used = strlen(buf);
  if (used < len)
    snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
}

int monitor_read(const monitor *m, lk_host *host, const lk_step_result *val,
                 double *value) {
  if (lk_host_metric(host, m->name, value) == 0)
    return 0;
  if (!val)
    return lk_fail(host, LK_ECONFIG,
                   "monitor %s was never logged: expected loss or a metric "
                   "that the model's training_step reports (or val_* for a "
                   "validation metric)",
                   m->name);
  char logged[512] = "";
  if (val->has_loss)
    monitor_list_add(logged, sizeof logged, "val_loss");
  for (size_t i = 0; i < val->n_metrics; i++) {
    char full[80];
    snprintf(full, sizeof full, "val_%s", val->metrics[i].name);
    monitor_list_add(logged, sizeof logged, full);
  }
  return lk_fail(host, LK_ECONFIG,
                 "monitor %s was never logged: the validation logged %s",
                 m->name, *logged ? logged : "nothing");
}

void monitor_warn_unchecked(const monitor *m, lk_host *host, bool checked) {
  if (checked)
    return;
  if (m->at_validation)
    lk_log(host, LK_LOG_WARN,
           "%s was never checked: no validation ran (is there a validation "
           "split? is val_every_n_epochs more than max_epochs?)",
           m->name);
  else
    lk_log(host, LK_LOG_WARN,
           "%s was never checked: no training epoch ended (a run without a "
           "data plugin has no epochs)",
           m->name);
}
