/* scheduler_common.c: what the learning-rate scheduler plugins share
 * (scheduler_common.h says what), built once into
 * plugins/lib/libplugincommon.la. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#include "scheduler_common.h"

lk_interval sched_interval(const lk_options *o) {
  const char *interval = lk_opt_string(o, "interval");
  return interval && strcmp(interval, "step") == 0 ? LK_INTERVAL_STEP
                                                   : LK_INTERVAL_EPOCH;
}

int sched_init(sched_common *c, lk_host *host, const lk_options *o) {
  c->host = host;
  c->interval = sched_interval(o);
  double lr = lk_host_initial_lr(host);
  if (!isfinite(lr))
    return lk_fail(host, LK_ECONFIG,
                   "the optimizer has no learning rate to schedule");
  size_t one = 1;
  int rc =
      lk_host_add_state(host, "last_epoch", LK_F64, 1, &one, &c->last_epoch);
  if (rc == 0)
    rc = lk_host_add_state(host, "base_lr", LK_F64, 1, &one, &c->base_lr);
  if (rc != 0)
    return rc;
  *(double *)c->last_epoch->data = 0;
  *(double *)c->base_lr->data = lr;
  return 0;
}

int sched_new(lk_host *host, const lk_options *o, size_t size, void **out) {
  sched_common *c = calloc(1, size);
  if (!c)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  int rc = sched_init(c, host, o);
  if (rc != 0) {
    free(c);
    return rc;
  }
  *out = c;
  return 0;
}

int sched_create(lk_host *host, const lk_options *o, const sched_kind *kind,
                 void **out) {
  void *mem = NULL;
  int rc = sched_new(host, o, kind->size, &mem);
  if (rc != 0)
    return rc;
  sched_common *c = mem;
  c->kind = kind;
  for (const sched_field *f = kind->fields;
       f < kind->fields + SCHED_MAX_FIELDS && f->name; f++) {
    char *at = (char *)mem + f->offset;
    if (f->type == LK_OPT_INT)
      *(int64_t *)(void *)at = lk_opt_int(o, f->name);
    else
      *(double *)(void *)at = lk_opt_double(o, f->name);
  }
  if (kind->init)
    rc = kind->init(mem, host, o);
  if (rc == 0)
    rc = kind->apply(mem, 0);
  if (rc != 0) {
    sched_destroy(mem);
    return rc;
  }
  *out = mem;
  return 0;
}

void sched_destroy(void *self) {
  sched_common *c = self;
  if (c && c->kind && c->kind->fini)
    c->kind->fini(self);
  free(self);
}

static int sched_step(void *self, lk_interval when, const lk_metric *metrics,
                      size_t n) {
  sched_common *c = self;
  int64_t epoch;
  (void)metrics;
  (void)n;
  return sched_tick(c, when, &epoch) ? c->kind->apply(self, epoch) : 0;
}

static int sched_restart(void *self, bool closed_form) {
  sched_common *c = self;
  sched_rewind(c);
  return closed_form && c->kind->closed ? sched_set_lr(c, c->kind->closed(self))
                                        : c->kind->apply(self, 0);
}

const lk_scheduler_ops sched_ops = {.step = sched_step,
                                    .restart = sched_restart};

int sched_check_state(void *self) {
  sched_common *c = self;
  int rc = lk_state_check(c->host, c->last_epoch, 0, LK_STATE_MAX_COUNT, true);
  return rc ? rc : lk_state_check(c->host, c->base_lr, 0, 1e308, false);
}

bool sched_mine(const sched_common *c, lk_interval when) {
  return when == c->interval;
}

int64_t sched_advance(sched_common *c) {
  double *e = c->last_epoch->data;
  *e += 1;
  return (int64_t)*e;
}

bool sched_tick(sched_common *c, lk_interval when, int64_t *epoch) {
  if (!sched_mine(c, when))
    return false;
  *epoch = sched_advance(c);
  return true;
}

void sched_rewind(sched_common *c) {
  *(double *)c->last_epoch->data = 0;
}

double sched_base_lr(const sched_common *c) {
  return *(const double *)c->base_lr->data;
}

double sched_lr(const sched_common *c) {
  return lk_host_lr(c->host);
}

int sched_set_lr(sched_common *c, double lr) {
  return lk_host_set_lr(c->host, lr);
}

const char *sched_interval_name(lk_interval when) {
  return when == LK_INTERVAL_STEP ? "an optimizer step" : "an epoch";
}

bool sched_metric(const lk_metric *metrics, size_t n, const char *name,
                  double *value) {
  for (size_t i = 0; i < n; i++)
    if (metrics[i].name && strcmp(metrics[i].name, name) == 0) {
      *value = metrics[i].value;
      return true;
    }
  return false;
}

int sched_missing_metric(const sched_common *c, lk_interval when,
                         const char *option, const char *name,
                         const lk_metric *metrics, size_t n) {
  char have[512] = "none";
  size_t used = 0;
  for (size_t i = 0; i < n && used < sizeof have; i++)
    used += (size_t)snprintf(have + used, sizeof have - used, "%s%s",
                             i ? ", " : "", metrics[i].name);
  return lk_fail(c->host, LK_EPLUGIN,
                 "%s = %s: no such metric after %s (available: %s)", option,
                 name, sched_interval_name(when), have);
}

int sched_need_momentum(lk_host *host) {
  if (isfinite(lk_host_momentum(host)))
    return 0;
  return lk_fail(host, LK_ECONFIG,
                 "optimizer must support momentum with `cycle_momentum` "
                 "option enabled (torch's ValueError): this optimizer has no "
                 "momentum or betas; set cycle_momentum = false");
}

int sched_int_list(lk_host *host, const lk_options *o, const char *name,
                   int64_t min, bool increasing, int64_t **out, size_t *n) {
  size_t len;
  const double *v = lk_opt_doubles(o, name, &len);
  *out = NULL;
  *n = 0;
  if (len == 0)
    return 0;
  int64_t *list = malloc(len * sizeof *list);
  if (!list)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < len; i++) {
    const char *why = NULL;
    if (!(v[i] == floor(v[i]) && v[i] >= (double)min &&
          v[i] <= LK_STATE_MAX_COUNT))
      why = "a whole number";
    else if (increasing && i > 0 && (int64_t)v[i] <= list[i - 1])
      why = "larger than the one before";
    if (why) {
      int rc =
          lk_fail(host, LK_ECONFIG,
                  "%s: option %s.%s = %s: value %zu (%.17g) must be %s "
                  "(%s of whole numbers >= %lld)",
                  lk_opt_where(o, name), lk_host_name(host), name,
                  lk_opt_string(o, name), i + 1, v[i], why,
                  increasing ? "an increasing list" : "a list", (long long)min);
      free(list);
      return rc;
    }
    list[i] = (int64_t)v[i];
  }
  *out = list;
  *n = len;
  return 0;
}
