/* The entries the loop calls, direct or profiled (see calls.h). */
#include <stdio.h>
#include <string.h>

#include "loop.h"

/* The entries the loop calls, unwrapped. */
static void direct_calls(lk_run *run) {
  lk__calls *c = &run->calls;
  const lk__instance *step = lk__role(run, LK__KIND_STEP);
  const lk__instance *zg = lk__role(run, LK__KIND_ZERO_GRAD);
  const lk__instance *bw = lk__role(run, LK__KIND_BACKWARD);
  const lk__instance *data = lk__role(run, LK__KIND_DATA);
  c->training_step = step->desc->step->training_step;
  c->validation_step = step->desc->step->validation_step;
  c->test_step = step->desc->step->test_step
                     ? step->desc->step->test_step
                     : step->desc->step->validation_step;
  c->zero_grad = zg->desc->zero_grad->zero_grad;
  c->backward = bw ? bw->desc->backward->backward : NULL;
  c->data_epoch = data ? data->desc->data->epoch : NULL;
  c->data_batch = data ? data->desc->data->batch : NULL;
  c->train_epoch = lk__train_epoch;
  c->validate = lk__evaluate;
  c->test = lk__evaluate;
  c->save = lk__rundir_save;
  lk__optim *o = &run->optim;
  for (size_t i = 0; i < o->n; i++)
    for (size_t g = 0; g < o->opt[i].n_parts; g++)
      o->opt[i].parts[g].step = o->opt[i].parts[g].in->desc->optimizer->step;
  for (size_t i = 0; i < o->n_sched; i++)
    o->sched[i].step = o->sched[i].in->desc->scheduler->step;
  const lk__listed *loggers = &run->env.reg.listed[LK__KIND_LOGGER];
  for (size_t i = 0; i < loggers->n; i++)
    c->log_metrics[i] = loggers->in[i]->desc->logger->log_metrics;
}

static int action(lk_run *run, const char *name, int *id) {
  const lk__instance *p = lk__role(run, LK__KIND_PROFILER);
  uint64_t mark = lk__err_mark();
  *id = p->desc->profiler->action(p->self, name);
  if (*id < 0)
    return lk__entry_failed(*id, mark, "profiler %s refused action %s",
                            p->label, name);
  return 0;
}

/* Replaces the function at SLOT (of type SIG) by a wrapper that times it as
 * the profiler's action ID. */
static int profile_as(lk_run *run, int id, lk__signature sig, void *slot) {
  const lk__instance *p = lk__role(run, LK__KIND_PROFILER);
  lk__profiling *pr = &run->prof;
  void (*real)(void);
  memcpy(&real, slot, sizeof real);
  if (pr->n == LK__MAX_PROFILED)
    return lk__err(LK_ESTATE, "more than %d profiled entries",
                   LK__MAX_PROFILED);
  void *fn;
  int rc = lk__profile_wrap(sig, real, p->desc->profiler, p->self, id,
                            &pr->wrapped[pr->n], &fn);
  if (rc != 0)
    return rc;
  pr->n++;
  memcpy(slot, &fn, sizeof fn);
  return 0;
}

/* The same for action NAME; an absent entry stays absent. */
static int profile(lk_run *run, const char *name, lk__signature sig,
                   void *slot) {
  void (*real)(void);
  memcpy(&real, slot, sizeof real);
  int id, rc = real ? action(run, name, &id) : 0;
  return real && rc == 0 ? profile_as(run, id, sig, slot) : rc;
}

/* The optimizers' and schedulers' steps: each plugin's function wrapped
 * once, as the role's ("optimizer_step", "lr_scheduler_step"). REAL and
 * WRAPPED are the functions wrapped so far. */
static int profile_step(lk_run *run, int id, lk__signature sig, void *slot,
                        void (**real)(void), void (**wrapped)(void),
                        size_t *n) {
  void (*fn)(void);
  memcpy(&fn, slot, sizeof fn);
  for (size_t i = 0; i < *n; i++)
    if (real[i] == fn) {
      memcpy(slot, &wrapped[i], sizeof fn);
      return 0;
    }
  int rc = profile_as(run, id, sig, slot);
  if (rc == 0) {
    real[*n] = fn;
    memcpy(&wrapped[(*n)++], slot, sizeof fn);
  }
  return rc;
}

static int profile_optim(lk_run *run) {
  lk__optim *o = &run->optim;
  void (*real[LK__MAX_PARTS + LK__MAX_SCHEDULERS])(void);
  void (*wrapped[LK__MAX_PARTS + LK__MAX_SCHEDULERS])(void);
  size_t n = 0;
  int id = -1, rc = 0;
  if (o->n)
    rc = action(run, "optimizer_step", &id);
  for (size_t i = 0; i < o->n && rc == 0; i++)
    for (size_t g = 0; g < o->opt[i].n_parts && rc == 0; g++)
      rc = profile_step(run, id, LK__SIG_OPTIMIZER, &o->opt[i].parts[g].step,
                        real, wrapped, &n);
  size_t first_sched = n;
  if (rc == 0 && o->n_sched)
    rc = action(run, "lr_scheduler_step", &id);
  for (size_t i = 0; i < o->n_sched && rc == 0; i++) {
    size_t m = n - first_sched;
    rc = profile_step(run, id, LK__SIG_SCHEDULER, &o->sched[i].step,
                      real + first_sched, wrapped + first_sched, &m);
    n = first_sched + m;
  }
  return rc;
}

/* Lightning's action names where it has one. */
static int profile_calls(lk_run *run) {
  lk__calls *c = &run->calls;
  const struct {
    const char *name;
    lk__signature sig;
    void *slot;
  } wrapped[] = {
      {"run_training_epoch", LK__SIG_PHASE, &c->train_epoch},
      {"get_batch", LK__SIG_DATA_BATCH, &c->data_batch},
      {"data_epoch", LK__SIG_DATA_EPOCH, &c->data_epoch},

      {"training_step", LK__SIG_STEP, &c->training_step},
      {"zero_grad", LK__SIG_ZERO_GRAD, &c->zero_grad},
      {"backward", LK__SIG_BACKWARD, &c->backward},

      {"validation", LK__SIG_EVALUATE, &c->validate},
      {"validation_step", LK__SIG_STEP, &c->validation_step},
      {"test", LK__SIG_EVALUATE, &c->test},
  };
  int rc = 0;
  for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0] && rc == 0; i++)
    rc = profile(run, wrapped[i].name, wrapped[i].sig, wrapped[i].slot);
  const lk__instance *step = lk__role(run, LK__KIND_STEP);
  if (rc == 0 && step->desc->step->test_step)
    rc = profile(run, "test_step", LK__SIG_STEP, &c->test_step);
  else if (rc == 0)
    c->test_step = c->validation_step; /* timed as validation_step */
  if (rc == 0)
    rc = profile(run, "checkpoint_save", LK__SIG_PHASE, &c->save);
  /* Each logger apart, named as Lightning's profiler names a callback's
   * hooks: [Logger]NAME.log_metrics. */
  const lk__listed *loggers = &run->env.reg.listed[LK__KIND_LOGGER];
  for (size_t i = 0; i < loggers->n && rc == 0; i++) {
    char name[96];
    snprintf(name, sizeof name, "[Logger]%s.log_metrics", loggers->in[i]->name);
    rc = profile(run, name, LK__SIG_LOGGER, &c->log_metrics[i]);
  }
  return rc == 0 ? profile_optim(run) : rc;
}

int lk__calls_build(lk_run *run) {
  direct_calls(run);
  return lk__role(run, LK__KIND_PROFILER) ? profile_calls(run) : 0;
}

int lk__calls_profile_closure(lk_run *run) {
  if (!lk__role(run, LK__KIND_PROFILER))
    return 0;
  /* The closure as a whole: what the optimizer calls, and what the loop
   * calls between steps of an accumulation window, one action. */
  int id, rc = action(run, "closure", &id);
  if (rc == 0)
    rc = profile_as(run, id, LK__SIG_CLOSURE, &run->chain.opt_closure);
  return rc ? rc
            : profile_as(run, id, LK__SIG_CLOSURE, &run->chain.plain_closure);
}

void lk__calls_free(lk__profiling *p) {
  for (size_t i = 0; i < p->n; i++)
    lk__profiled_free(p->wrapped[i]);
  p->n = 0;
}
