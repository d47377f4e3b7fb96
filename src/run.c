/* Setting a run up: the [loop] and [plugins] sections, loading and creating
 * the plugins, composing the closures, the run directory. Everything that
 * can be wrong with a config is found here, before anything is trained. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile.h"
#include "run_private.h"

/* ---- [loop] ------------------------------------------------------------- */

/* Declared as plugins declare their options, so that lk_run_loop_keys can
 * give hosts (and loopkit.ini(5)) the same table the checks below use.
 * loop_min[k] is the smallest value integer key k accepts. */
static const lk_option loop_keys[] = {
    {"max_epochs", LK_OPT_INT, "1", "epochs to train (with a data plugin)",
     NULL},
    {"max_steps", LK_OPT_INT, "-1",
     "optimizer steps to take; -1: no limit (required without a data "
     "plugin)",
     NULL},
    {"accumulate_grad_batches", LK_OPT_INT, "1",
     "batches whose gradients are summed (the loss divided by their number) "
     "before one optimizer step",
     NULL},
    {"gradient_clip_val", LK_OPT_DOUBLE, "0",
     "clip the gradients to this after backward, before the update; 0: off",
     NULL},
    {"gradient_clip_algorithm", LK_OPT_ENUM, "norm",
     "norm: scale the whole gradient to this norm; value: clamp each element",
     "norm|value"},
    {"terminate_on_nan", LK_OPT_BOOL, "false",
     "stop with an error (exit 1) at a non-finite loss, parameter or "
     "gradient",
     NULL},
    {"manual_optimization", LK_OPT_BOOL, "false",
     "the step plugin drives the optimizer itself through the host", NULL},
    {"seed", LK_OPT_INT, "0", "seed of the run's random generator", NULL},
    {"val_every_n_epochs", LK_OPT_INT, "1",
     "validate after every N-th epoch (and after the last)", NULL},
    {"checkpoint_every_n_steps", LK_OPT_INT, "0",
     "also write last.ckpt every N optimizer steps; 0: at each epoch's end "
     "and at the end of training",
     NULL},
    {"keep_last", LK_OPT_INT, "0",
     "also keep the N newest step-N.ckpt files; 0: last.ckpt only", NULL},
    {"log_every_n_steps", LK_OPT_INT, "50",
     "a progress line every N steps when stderr is not a terminal", NULL},
    {NULL, 0, NULL, NULL, NULL}};
static const int64_t loop_min[] = {1, -1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1};
#define N_LOOP_KEYS (sizeof loop_keys / sizeof loop_keys[0] - 1)
_Static_assert(sizeof loop_min / sizeof loop_min[0] == N_LOOP_KEYS,
               "a minimum for every [loop] key");

/* The roles of [plugins]. A NULL default: the role is optional (or, for
 * step and optimizer, required as the checks below say). */
static const lk_option plugin_keys[] = {
    {"step", LK_OPT_STRING, NULL,
     "the model: computes the loss and metrics of a batch (required)", NULL},
    {"backward", LK_OPT_STRING, NULL,
     "computes the gradients (default: the step's plugin)", NULL},
    {"zero_grad", LK_OPT_STRING, "zero", "clears the gradients", NULL},
    {"optimizer", LK_OPT_STRING, NULL,
     "updates the parameters, calling the closure (required unless "
     "manual_optimization)",
     NULL},
    {"scheduler", LK_OPT_STRING, NULL,
     "changes the optimizer's learning rate (default: none)", NULL},
    {"profiler", LK_OPT_STRING, NULL,
     "times every plugin entry and loop phase (default: none; simple, "
     "trace)",
     NULL},
    {"data", LK_OPT_STRING, NULL,
     "the batches; without one each step works on the whole problem and "
     "there are no epochs",
     NULL},
    {"strategy", LK_OPT_STRING, NULL,
     "how the run spreads over processes (default: single; mpi)", NULL},
    {"callbacks", LK_OPT_STRING, NULL,
     "comma-separated callback plugins, called in this order, before the "
     "model's own hooks",
     NULL},
    {"precision", LK_OPT_STRING, NULL,
     "scales the loss for backward and unscales the gradients (default: "
     "none)",
     NULL},
    {NULL, 0, NULL, NULL, NULL}};
#define N_ROLES (sizeof plugin_keys / sizeof plugin_keys[0] - 1)

const lk_option *lk_run_loop_keys(void) {
  return loop_keys;
}

const lk_option *lk_run_plugin_keys(void) {
  return plugin_keys;
}

static const char *where_of(const lk_config *cfg, const char *section,
                            const char *key) {
  const lk_config_entry *e = lk_config_find(cfg, section, key);
  return e ? e->where : lk_config_path(cfg);
}

/* Every key of [SECTION] must be one of KEYS. */
static int known_keys(const lk_config *cfg, const char *section,
                      const lk_option *keys) {
  for (size_t i = 0; i < lk_config_count(cfg); i++) {
    const lk_config_entry *e = lk_config_at(cfg, i);
    if (strcmp(e->section, section) != 0)
      continue;
    const lk_option *k = keys;
    while (k->name && strcmp(k->name, e->key) != 0)
      k++;
    if (!k->name) {
      char accepted[512];
      lk__option_names(keys, accepted, sizeof accepted);
      return lk__err(LK_ECONFIG, "%s: unknown key \"%s\" in [%s]; accepted: %s",
                     e->where, e->key, section, accepted);
    }
  }
  return 0;
}

static int loop_value(const lk_config *cfg, size_t index, int64_t *i, double *d,
                      bool *b) {
  const lk_option *k = &loop_keys[index];
  int64_t min = loop_min[index];
  const lk_config_entry *e = lk_config_find(cfg, "loop", k->name);
  const char *v = e ? e->value : k->def;
  const char *where = e ? e->where : "default";
  switch (k->type) {
  case LK_OPT_INT:
    if (lk__parse_int(v, i) != 0 || *i < min ||
        (min == -1 && *i == 0 && strcmp(k->name, "max_steps") == 0))
      return lk__err(LK_ECONFIG, "%s: loop.%s = \"%s\": expected an integer %s",
                     where, k->name, v,
                     min == -1  ? "-1 (no limit) or >= 1"
                     : min == 0 ? ">= 0"
                                : ">= 1");
    return 0;
  case LK_OPT_DOUBLE:
    if (lk__parse_double(v, d) != 0 || !isfinite(*d) || *d < 0)
      return lk__err(LK_ECONFIG, "%s: loop.%s = \"%s\": expected a number >= 0",
                     where, k->name, v);
    return 0;
  case LK_OPT_BOOL:
    if (lk__parse_bool(v, b) != 0)
      return lk__err(LK_ECONFIG, "%s: loop.%s = \"%s\": expected true or false",
                     where, k->name, v);
    return 0;
  case LK_OPT_ENUM:
    if (strcmp(v, "norm") != 0 && strcmp(v, "value") != 0)
      return lk__err(LK_ECONFIG, "%s: loop.%s = \"%s\": expected one of %s",
                     where, k->name, v, k->choices);
    *i = strcmp(v, "norm") == 0 ? LK__CLIP_NORM : LK__CLIP_VALUE;
    return 0;
  default: break;
  }
  return LK_EINVAL;
}

static int parse_loop(lk_run *run, const lk_config *cfg) {
  int rc = known_keys(cfg, "loop", loop_keys);
  if (rc != 0)
    return rc;
  lk__loop_config *l = &run->loop;
  int64_t iv[N_LOOP_KEYS] = {0};
  double dv[N_LOOP_KEYS] = {0};
  bool bv[N_LOOP_KEYS] = {0};
  for (size_t k = 0; k < N_LOOP_KEYS; k++)
    if ((rc = loop_value(cfg, k, &iv[k], &dv[k], &bv[k])) != 0)
      return rc;
  l->max_epochs = iv[0];
  l->max_steps = iv[1];
  l->accumulate = iv[2];
  l->clip_val = dv[3];
  l->clip_algorithm = (int)iv[4];
  l->terminate_on_nan = bv[5];
  l->manual = bv[6];
  l->seed = (uint64_t)iv[7];
  l->val_every = iv[8];
  l->ckpt_every = iv[9];
  l->keep_last = iv[10];
  l->log_every = iv[11];
  if (l->manual && l->accumulate != 1)
    return lk__err(LK_ECONFIG,
                   "%s: accumulate_grad_batches = %lld with "
                   "manual_optimization = true: accumulate in the step "
                   "plugin instead",
                   where_of(cfg, "loop", "accumulate_grad_batches"),
                   (long long)l->accumulate);
  if (l->manual && l->clip_val != 0)
    return lk__err(LK_ECONFIG,
                   "%s: gradient_clip_val with manual_optimization = true: "
                   "call lk_host_clip_gradients from the step plugin instead",
                   where_of(cfg, "loop", "gradient_clip_val"));
  return 0;
}

/* ---- [plugins] ----------------------------------------------------------- */

static void free_instance(lk__instance *in) {
  if (!in)
    return;
  if (in->created && in->desc->destroy)
    in->desc->destroy(in->self);
  lk__options_free(in->opts);
  lk_plugin_close(in->plugin);
  free(in->name);
  free(in->given);
  free(in);
}

/* The instance for plugin NAME, loaded the first time a role names it. */
int lk__instance_for(lk_run *run, const char *name, const char *where,
                     lk__instance **out) {
  for (size_t i = 0; i < run->n_instances; i++)
    if (strcmp(run->instances[i]->name, name) == 0 ||
        (run->instances[i]->given &&
         strcmp(run->instances[i]->given, name) == 0)) {
      *out = run->instances[i];
      return 0;
    }
  lk__instance *in = calloc(1, sizeof *in);
  lk__instance **grown =
      realloc(run->instances, (run->n_instances + 1) * sizeof *grown);
  if (grown)
    run->instances = grown;
  if (!in || !grown || !(in->name = lk__strdup(name))) {
    free(in);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  int rc = lk_plugin_open(name, &in->plugin);
  if (rc != 0) {
    free(in->name);
    free(in);
    return lk__err_prefix(rc, "%s", where);
  }
  in->desc = lk_plugin_desc(in->plugin);
  if (strchr(name, '/')) { /* a path: its section is the plugin's name */
    in->given = in->name;
    if (!(in->name = lk__strdup(in->desc->name))) {
      lk_plugin_close(in->plugin);
      free(in->given);
      free(in);
      return lk__err(LK_ENOMEM, "out of memory");
    }
  }
  in->host.run = run;
  in->host.inst = in;
  run->instances[run->n_instances++] = in;
  *out = in;
  return 0;
}

bool lk__has_kind(const lk__instance *in, const char *role) {
  const lk_descriptor *d = in->desc;
  if (!strcmp(role, "step"))
    return d->step && d->step->training_step;
  if (!strcmp(role, "backward"))
    return d->backward && d->backward->backward;
  if (!strcmp(role, "zero_grad"))
    return d->zero_grad && d->zero_grad->zero_grad;
  if (!strcmp(role, "optimizer"))
    return d->optimizer && d->optimizer->step;
  if (!strcmp(role, "profiler"))
    return d->profiler && d->profiler->action && d->profiler->start &&
           d->profiler->stop;
  if (!strcmp(role, "data"))
    return d->data && d->data->epoch && d->data->batch;
  if (!strcmp(role, "strategy"))
    return d->strategy != NULL;
  if (!strcmp(role, "callbacks"))
    return d->callback != NULL;
  if (!strcmp(role, "scheduler"))
    return d->scheduler && d->scheduler->step;
  if (!strcmp(role, "precision"))
    return d->precision && d->precision->loss_scale &&
           d->precision->unscale_gradients;
  return false;
}

static int assign(lk_run *run, const char *role, const char *name,
                  const char *where, lk__instance **slot) {
  lk__instance *in = NULL;
  int rc = lk__instance_for(run, name, where, &in);
  if (rc != 0)
    return rc;
  if (!lk__has_kind(in, role)) {
    char kinds[128];
    return lk__err(
        LK_EKIND, "%s: plugin %s (%s) cannot be the %s: it implements %s",
        where, name, lk_plugin_path(in->plugin),
        strcmp(role, "callbacks") ? role : "callback",
        *lk_plugin_kinds(in->plugin, kinds, sizeof kinds) ? kinds : "no kind");
  }
  *slot = in;
  return 0;
}

static int parse_plugins(lk_run *run, const lk_config *cfg) {
  int rc = known_keys(cfg, "plugins", plugin_keys);
  if (rc != 0)
    return rc;
  const lk_config_entry *step = lk_config_find(cfg, "plugins", "step");
  if (!step)
    return lk__err(LK_ECONFIG,
                   "%s: [plugins] step is required (the plugin that computes "
                   "the loss, e.g. step = rosenbrock)",
                   lk_config_path(cfg));
  const lk_config_entry *e;
  /* Creation order: data first (a model may size itself from it), then
   * the model, then what works on the model's parameters. */
  if ((e = lk_config_find(cfg, "plugins", "data")) &&
      (rc = assign(run, "data", e->value, e->where, &run->data)) != 0)
    return rc;
  if ((rc = assign(run, "step", step->value, step->where, &run->step)) != 0)
    return rc;
  e = lk_config_find(cfg, "plugins", "backward");
  if (!run->loop.manual || e) {
    rc = assign(run, "backward", e ? e->value : step->value,
                e ? e->where : step->where, &run->backward);
    if (rc != 0 && !e && run->loop.manual)
      rc = 0; /* a manual step may have no backward of its own */
    if (rc != 0)
      return rc;
  } else if (lk__has_kind(run->step, "backward"))
    run->backward = run->step;
  e = lk_config_find(cfg, "plugins", "zero_grad");
  if ((rc = assign(run, "zero_grad", e ? e->value : "zero",
                   e ? e->where : "[plugins] zero_grad (default zero)",
                   &run->zero_grad)) != 0)
    return rc;
  e = lk_config_find(cfg, "plugins", "optimizer");
  if (e &&
      (rc = assign(run, "optimizer", e->value, e->where, &run->optimizer)) != 0)
    return rc;
  if (!e && !run->loop.manual)
    return lk__err(LK_ECONFIG,
                   "%s: [plugins] optimizer is required unless "
                   "manual_optimization = true (e.g. optimizer = sgd)",
                   lk_config_path(cfg));
  if ((e = lk_config_find(cfg, "plugins", "scheduler"))) {
    if ((rc = assign(run, "scheduler", e->value, e->where, &run->scheduler)) !=
        0)
      return rc;
    if (!run->optimizer || !lk__optimizer_lr_ops(run->optimizer))
      return lk__err(LK_ECONFIG,
                     "%s: scheduler %s needs an optimizer with a learning "
                     "rate; %s",
                     e->where, e->value,
                     run->optimizer ? "this optimizer has no get_lr/set_lr"
                                    : "there is no optimizer");
  }
  if ((e = lk_config_find(cfg, "plugins", "profiler")) &&
      (rc = assign(run, "profiler", e->value, e->where, &run->profiler)) != 0)
    return rc;
  if ((e = lk_config_find(cfg, "plugins", "precision"))) {
    if ((rc = assign(run, "precision", e->value, e->where, &run->precision)) !=
        0)
      return rc;
    if (run->loop.manual)
      return lk__err(LK_ECONFIG,
                     "%s: precision %s with manual_optimization = true: a "
                     "precision plugin works with automatic optimization",
                     e->where, e->value);
  }
  if ((e = lk_config_find(cfg, "plugins", "strategy")) &&
      (rc = assign(run, "strategy", e->value, e->where, &run->strategy)) != 0)
    return rc;
  if ((e = lk_config_find(cfg, "plugins", "callbacks"))) {
    char *list = lk__strdup(e->value), *save = NULL;
    if (!list)
      return lk__err(LK_ENOMEM, "out of memory");
    for (char *t = strtok_r(list, ",", &save); t && rc == 0;
         t = strtok_r(NULL, ",", &save)) {
      while (*t == ' ' || *t == '\t')
        t++;
      char *end = t + strlen(t);
      while (end > t && (end[-1] == ' ' || end[-1] == '\t'))
        *--end = '\0';
      if (run->n_callbacks == LK__MAX_CALLBACKS)
        rc = lk__err(LK_ECONFIG, "%s: more than %d callbacks", e->where,
                     LK__MAX_CALLBACKS);
      else
        rc = assign(run, "callbacks", t, e->where,
                    &run->callbacks[run->n_callbacks++]);
      /* One instance runs each hook once: listing it twice would run it
       * twice on the same state, silently. */
      for (size_t k = 0; rc == 0 && k + 1 < run->n_callbacks; k++)
        if (run->callbacks[k] == run->callbacks[run->n_callbacks - 1])
          rc = lk__err(LK_ECONFIG,
                       "%s: callback %s is listed twice in [plugins] "
                       "callbacks: a plugin is one instance, which would "
                       "run every hook twice on the same state",
                       e->where, t);
    }
    free(list);
    if (rc != 0)
      return rc;
  }
  /* The model's own hooks run after the callbacks'. */
  bool listed = false;
  for (size_t i = 0; i < run->n_callbacks; i++)
    listed = listed || run->callbacks[i] == run->step;
  if (run->step->desc->callback && !listed)
    run->callbacks[run->n_callbacks++] = run->step;
  if (!run->data && run->loop.max_steps < 0)
    return lk__err(LK_ECONFIG,
                   "%s: without a data plugin there are no epochs: set "
                   "[loop] max_steps",
                   where_of(cfg, "loop", "max_steps"));
  return 0;
}

/* Every section must be [loop], [plugins] or a named plugin's. */
static int check_sections(lk_run *run, const lk_config *cfg) {
  for (size_t i = 0; i < lk_config_count(cfg); i++) {
    const lk_config_entry *e = lk_config_at(cfg, i);
    if (!strcmp(e->section, "loop") || !strcmp(e->section, "plugins"))
      continue;
    bool known = false;
    for (size_t k = 0; k < run->n_instances; k++)
      known = known || strcmp(run->instances[k]->name, e->section) == 0;
    if (known)
      continue;
    char names[1024] = "loop, plugins";
    size_t used = strlen(names);
    for (size_t k = 0; k < run->n_instances; k++) {
      int w = snprintf(names + used, sizeof names - used, ", %s",
                       run->instances[k]->name);
      if (w > 0 && (size_t)w < sizeof names - used)
        used += (size_t)w;
    }
    const char *where = lk_config_section_where(cfg, e->section);
    return lk__err(LK_ECONFIG,
                   "%s: unknown section [%s]: not a plugin named in "
                   "[plugins]; accepted sections: %s",
                   where ? where : e->where, e->section, names);
  }
  return 0;
}

/* ---- the effective config and the run directory ------------------------- */

static int effective_config(lk_run *run, const lk_config *cfg) {
  int rc = lk_config_new(&run->cfg);
  for (size_t k = 0; k < N_LOOP_KEYS && rc == 0; k++) {
    const lk_config_entry *e = lk_config_find(cfg, "loop", loop_keys[k].name);
    rc = lk_config_put(run->cfg, "loop", loop_keys[k].name,
                       e ? e->value : loop_keys[k].def,
                       e ? e->where : "default");
  }
  struct {
    const char *role;
    lk__instance *in;
  } roles[] = {{"step", run->step},           {"backward", run->backward},
               {"zero_grad", run->zero_grad}, {"optimizer", run->optimizer},
               {"scheduler", run->scheduler}, {"profiler", run->profiler},
               {"data", run->data},           {"strategy", run->strategy},
               {"precision", run->precision}};
  for (size_t r = 0; r < sizeof roles / sizeof roles[0] && rc == 0; r++)
    if (roles[r].in)
      rc = lk_config_put(run->cfg, "plugins", roles[r].role,
                         roles[r].in->given ? roles[r].in->given
                                            : roles[r].in->name,
                         where_of(cfg, "plugins", roles[r].role));
  const lk_config_entry *cb = lk_config_find(cfg, "plugins", "callbacks");
  if (cb && rc == 0)
    rc = lk_config_put(run->cfg, "plugins", "callbacks", cb->value, cb->where);
  for (size_t i = 0; i < run->n_instances && rc == 0; i++)
    rc = lk__options_export(run->instances[i]->opts, run->instances[i]->name,
                            run->cfg);
  return rc;
}

/* ---- closures ------------------------------------------------------------ */

static void closure_log(void *user, lk_log_level level, const char *msg) {
  lk__log(user, level, "%s", msg);
}

static int hook_before_zero_grad(void *ctx) {
  return lk__hook(ctx, offsetof(lk_callback_ops, on_before_zero_grad),
                  "on_before_zero_grad");
}

static int hook_before_backward(void *ctx, double loss) {
  return lk__hook_before_backward(ctx, loss);
}

static int hook_after_backward(void *ctx) {
  return lk__after_backward(ctx);
}

/* Backward through a precision plugin: the loss scaled by its factor. */
static int scaled_backward(void *self, const lk_batch *batch, double scale) {
  lk_run *run = self;
  lk__instance *p = run->precision;
  double s = p->desc->precision->loss_scale(p->self);
  if (!(s > 0) || !isfinite(s))
    return lk__err(LK_EINVAL,
                   "loss_scale of precision %s is %g: expected a "
                   "finite number > 0",
                   p->name, s);
  return run->calls.backward(run->backward->self, batch, scale * s);
}

/* The optimizer sees NaN for an evaluation whose gradients overflowed
 * (lk__after_backward decided): it then leaves the parameters alone. */
static double skip_overflow(void *ctx, double loss) {
  lk_run *run = ctx;
  run->step_skipped = run->precision_skip;
  run->precision_skip = false;
  return run->step_skipped ? NAN : loss;
}

/* After each evaluation the optimizer asks for: on_before_optimizer_step,
 * then clipping, so that every evaluation's gradients are clipped. */
static int after_closure(void *ctx, double loss) {
  lk_run *run = ctx;
  (void)loss;
  if (run->step_skipped)
    return 0; /* nothing will be updated: the gradients are zero */
  int rc = lk__hook(run, offsetof(lk_callback_ops, on_before_optimizer_step),
                    "on_before_optimizer_step");
  if (rc == 0 && run->loop.clip_val > 0)
    rc = lk__clip_gradients(run, run->loop.clip_val, run->loop.clip_algorithm);
  if (rc != 0) {
    run->hook_rc = rc;
    snprintf(run->hook_msg, sizeof run->hook_msg, "%s", lk_last_error());
  }
  return rc;
}

/* The entries the loop calls, unwrapped. */
static void direct_calls(lk_run *run) {
  lk__calls *c = &run->calls;
  const lk_step_ops *step = run->step->desc->step;
  c->training_step = step->training_step;
  c->validation_step = step->validation_step;
  c->test_step = step->test_step ? step->test_step : step->validation_step;
  c->zero_grad = run->zero_grad->desc->zero_grad->zero_grad;
  c->backward = run->backward ? run->backward->desc->backward->backward : NULL;
  c->optimizer_step =
      run->optimizer ? run->optimizer->desc->optimizer->step : NULL;
  c->data_epoch = run->data ? run->data->desc->data->epoch : NULL;
  c->data_batch = run->data ? run->data->desc->data->batch : NULL;
  c->scheduler_step =
      run->scheduler ? run->scheduler->desc->scheduler->step : NULL;
  c->train_epoch = lk__train_epoch;
  c->validate = lk__evaluate;
  c->test = lk__evaluate;
  c->save = lk__save_checkpoint;
}

/* Replaces the function at SLOT (of type SIG) by a wrapper that times it as
 * the profiler's action ID. */
static int profile_as(lk_run *run, int id, lk__signature sig, void *slot) {
  void (*real)(void);
  memcpy(&real, slot, sizeof real);
  if (run->n_profiled == LK__MAX_PROFILED)
    return lk__err(LK_ESTATE, "more than %d profiled entries",
                   LK__MAX_PROFILED);
  void *fn;
  int rc = lk__profile_wrap(sig, real, run->profiler->desc->profiler,
                            run->profiler->self, id,
                            &run->profiled[run->n_profiled], &fn);
  if (rc != 0)
    return rc;
  run->n_profiled++;
  memcpy(slot, &fn, sizeof fn);
  return 0;
}

/* Several processes: the optimizer sees the loss averaged over them, as
 * it sees the gradients, so that every process takes the same decisions
 * (a line search's, a NaN's) and they stay in step. */
static double mean_loss(void *ctx, double loss) {
  lk_run *run = ctx;
  /* A failed evaluation may have skipped the gradients' reduction: this
   * process leaves the collectives and fails, and its abort stops the
   * others. */
  if (lk__closure_error(run->closure) != 0 || run->hook_rc != 0)
    return NAN;
  double sum = loss;
  int rc = lk__reduce_sum(run, &sum, 1);
  if (rc != 0) {
    run->hook_rc = rc;
    snprintf(run->hook_msg, sizeof run->hook_msg, "%s", lk_last_error());
    return NAN;
  }
  return sum / run->world;
}

static int action(lk_run *run, const char *name, int *id) {
  *id = run->profiler->desc->profiler->action(run->profiler->self, name);
  if (*id < 0)
    return lk__err_prefix(*id, "profiler %s refused action %s",
                          run->profiler->name, name);
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

/* Lightning's action names where it has one. */
static int profile_calls(lk_run *run) {
  lk__calls *c = &run->calls;
  int rc = 0;
  if (rc == 0)
    rc = profile(run, "run_training_epoch", LK__SIG_PHASE, &c->train_epoch);
  if (rc == 0)
    rc = profile(run, "get_batch", LK__SIG_DATA_BATCH, &c->data_batch);
  if (rc == 0)
    rc = profile(run, "data_epoch", LK__SIG_DATA_EPOCH, &c->data_epoch);
  if (rc == 0)
    rc = profile(run, "optimizer_step", LK__SIG_OPTIMIZER, &c->optimizer_step);
  if (rc == 0)
    rc = profile(run, "training_step", LK__SIG_STEP, &c->training_step);
  if (rc == 0)
    rc = profile(run, "zero_grad", LK__SIG_ZERO_GRAD, &c->zero_grad);
  if (rc == 0)
    rc = profile(run, "backward", LK__SIG_BACKWARD, &c->backward);
  if (rc == 0)
    rc = profile(run, "lr_scheduler_step", LK__SIG_SCHEDULER,
                 &c->scheduler_step);
  if (rc == 0)
    rc = profile(run, "validation", LK__SIG_EVALUATE, &c->validate);
  if (rc == 0)
    rc = profile(run, "validation_step", LK__SIG_STEP, &c->validation_step);
  if (rc == 0)
    rc = profile(run, "test", LK__SIG_EVALUATE, &c->test);
  if (rc == 0 && run->step->desc->step->test_step)
    rc = profile(run, "test_step", LK__SIG_STEP, &c->test_step);
  else if (rc == 0)
    c->test_step = c->validation_step; /* timed as validation_step */
  if (rc == 0)
    rc = profile(run, "checkpoint_save", LK__SIG_PHASE, &c->save);
  return rc;
}

static int build_closures(lk_run *run) {
  direct_calls(run);
  int rc = run->profiler ? profile_calls(run) : 0;
  if (rc != 0)
    return rc;
  lk_closure_parts parts = {
      .step = run->calls.training_step,
      .step_self = run->step->self,
      .params = run->params,
      .n_params = run->n_params,
      .terminate_on_nan = run->loop.terminate_on_nan,
      .step_name = run->step->name,
      .zero_grad_name = run->zero_grad->name,
      .backward_name = run->backward ? run->backward->name : "none",
      .log = closure_log,
      .log_user = run,
  };
  if (!run->loop.manual) {
    parts.zero_grad = run->calls.zero_grad;
    parts.zero_grad_self = run->zero_grad->self;
    parts.backward = run->calls.backward;
    parts.backward_self = run->backward->self;
    if (run->precision) {
      parts.backward = scaled_backward;
      parts.backward_self = run;
    }
  }
  bool reduce =
      run->strategy && run->strategy->desc->strategy->reduce_gradients;
  if (run->n_callbacks > 0 || reduce || run->precision) {
    parts.before_zero_grad = hook_before_zero_grad;
    parts.before_backward = hook_before_backward;
    parts.after_backward = hook_after_backward;
    parts.hook_ctx = run;
  }
  if ((rc = lk_closure_new(&parts, &run->closure)) != 0)
    return rc;
  lk_closure_set_caller(run->closure,
                        run->optimizer ? run->optimizer->name : "(manual)");
  lk_closure_prepare(run->closure, &run->no_data_batch, 1.0, true, 0, 0);
  lk_closure_fn fn = lk_closure_function(run->closure);
  run->plain_closure = fn;
  if (run->precision) {
    if ((rc = lk__closure_map(fn, skip_overflow, run, &run->skip_wrap)) != 0)
      return rc;
    fn = lk_wrap_function(run->skip_wrap);
  }
  bool has_before_step = false;
  for (size_t i = 0; i < run->n_callbacks; i++)
    has_before_step =
        has_before_step ||
        run->callbacks[i]->desc->callback->on_before_optimizer_step;
  if (!run->loop.manual && (run->loop.clip_val > 0 || has_before_step)) {
    if ((rc = lk_closure_then(fn, after_closure, run, &run->after_wrap)) != 0)
      return rc;
    fn = lk_wrap_function(run->after_wrap);
  }
  if (run->world > 1 && !run->loop.manual) {
    if ((rc = lk__closure_map(fn, mean_loss, run, &run->mean_wrap)) != 0)
      return rc;
    fn = lk_wrap_function(run->mean_wrap);
  }
  /* The closure as a whole: what the optimizer calls, and what the loop
   * calls between steps of an accumulation window. */
  int id;
  if (run->profiler &&
      ((rc = action(run, "closure", &id)) != 0 ||
       (rc = profile_as(run, id, LK__SIG_CLOSURE, &fn)) != 0 ||
       (rc = profile_as(run, id, LK__SIG_CLOSURE, &run->plain_closure)) != 0))
    return rc;
  run->opt_closure = fn;
  return 0;
}

/* ---- lk_run_new ------------------------------------------------------------
 */

/* The strategy's view of the processes, then its setup. Every process but
 * rank 0 logs only errors: rank 0 speaks for the run. */
static int strategy_setup(lk_run *run) {
  const lk_strategy_ops *ops = run->strategy->desc->strategy;
  run->rank = ops->rank ? ops->rank(run->strategy->self) : 0;
  run->world = ops->world_size ? ops->world_size(run->strategy->self) : 1;
  if (run->world < 1 || run->rank < 0 || run->rank >= run->world)
    return lk__err(LK_EPLUGIN, "strategy %s says rank %d of %d processes",
                   run->strategy->name, run->rank, run->world);
  if (run->world > 1 && !ops->reduce_metrics)
    return lk__err(LK_EKIND,
                   "strategy %s runs %d processes but has no reduce_metrics",
                   run->strategy->name, run->world);
  if (run->rank != 0 && run->opts.verbosity > LK_LOG_ERROR)
    run->opts.verbosity = LK_LOG_ERROR;
  if (run->rank != 0)
    run->opts.progress = NULL;
  int rc = ops->setup
               ? ops->setup(run->strategy->self, run->params, run->n_params)
               : 0;
  return rc ? lk__err_prefix(rc, "setup of strategy %s", run->strategy->name)
            : 0;
}

/* Creates IN (once), with its options from the source config. Instances
 * are destroyed in the reverse of this order. */
int lk__instance_create(lk_run *run, lk__instance *in) {
  if (in->created)
    return 0;
  int rc = in->opts
               ? 0
               : lk__options_parse(in->desc, in->name, run->src_cfg, &in->opts);
  if (rc != 0)
    return rc;
  if (run->n_created == run->n_instances)
    return lk__err(LK_ESTATE, "plugin %s created twice", in->name);
  if (in->desc->create) {
    rc = in->desc->create(&in->host, in->opts, &in->self);
    if (rc != 0)
      return lk__err_prefix(rc < 0 ? rc : LK_EPLUGIN,
                            "plugin %s (%s) failed to start", in->name,
                            lk_plugin_path(in->plugin));
  }
  in->created = true;
  run->created[run->n_created++] = in;
  return 0;
}

static int create_instances(lk_run *run) {
  lk__instance *order[] = {run->data,      run->step,      run->backward,
                           run->zero_grad, run->optimizer, run->scheduler,
                           run->precision, run->profiler,  run->strategy};
  size_t n = sizeof order / sizeof order[0];
  for (size_t i = 0; i < n + run->n_callbacks; i++) {
    lk__instance *in = i < n ? order[i] : run->callbacks[i - n];
    int rc = in ? lk__instance_create(run, in) : 0;
    if (rc != 0)
      return rc;
  }
  return 0;
}

int lk_run_new(const lk_config *cfg, const lk_run_options *opts, lk_run **out) {
  lk_run *run = calloc(1, sizeof *run);
  if (!run)
    return lk__err(LK_ENOMEM, "out of memory");
  if (opts)
    run->opts = *opts;
  else
    run->opts.verbosity = LK_LOG_INFO;
  run->world = 1;
  run->rd.lock_fd = -1;
  int rc = parse_loop(run, cfg);
  if (rc == 0)
    rc = parse_plugins(run, cfg);
  /* Options first, all of them: a bad value anywhere is found before any
   * plugin starts. */
  for (size_t i = 0; i < run->n_instances && rc == 0; i++)
    rc = lk__options_parse(run->instances[i]->desc, run->instances[i]->name,
                           cfg, &run->instances[i]->opts);
  if (rc == 0 && !(run->created = calloc(run->n_instances + LK__MAX_NESTED,
                                         sizeof *run->created)))
    rc = lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0) {
    lk_rng_seed(&run->rng, run->loop.seed, 0);
    run->no_data_batch.split = LK_SPLIT_TRAIN;
    run->src_cfg = cfg;
    rc = create_instances(run);
    run->src_cfg = NULL;
  }
  run->setup_done = true;
  /* After creation: a wrapping optimizer may have added a plugin (and so a
   * section) of its own. */
  if (rc == 0)
    rc = check_sections(run, cfg);
  if (rc == 0 && run->n_params == 0)
    rc = lk__err(LK_ECONFIG,
                 "plugin %s (the step) created no parameters: nothing to "
                 "train",
                 run->step->name);
  if (rc == 0 && run->strategy)
    rc = strategy_setup(run);
  if (rc == 0)
    rc = effective_config(run, cfg);
  if (rc == 0)
    rc = build_closures(run);
  struct stat ck_st;
  if (rc == 0 && run->opts.resume)
    rc = lk__resume(run, run->opts.resume, &ck_st);
  run->resumed = rc == 0 && run->opts.resume;
  if (rc == 0 && !run->opts.no_run_dir && run->rank == 0)
    rc =
        lk__rundir_open(run, lk_config_path(cfg), run->resumed ? &ck_st : NULL);
  if (rc != 0) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    lk__abort_others(run, 2, msg);
    lk_run_free(run);
    return lk__err(rc, "%s", msg);
  }
  *out = run;
  return 0;
}

const char *lk_run_dir(const lk_run *run) {
  return run->rd.dir;
}

uint64_t lk_run_steps(const lk_run *run) {
  return run->state.progress.global_step;
}

int lk_run_rank(const lk_run *run) {
  return run->rank;
}

lk_closure_fn lk_run_closure(lk_run *run) {
  return run->opt_closure;
}

lk_tensor *const *lk_run_params(lk_run *run, size_t *n) {
  *n = run->n_params;
  return run->params;
}

void *lk_run_instance(lk_run *run, const char *role,
                      const lk_descriptor **desc) {
  lk__instance *in = NULL;
  if (!strcmp(role, "step"))
    in = run->step;
  else if (!strcmp(role, "backward"))
    in = run->backward;
  else if (!strcmp(role, "zero_grad"))
    in = run->zero_grad;
  else if (!strcmp(role, "optimizer"))
    in = run->optimizer;
  else if (!strcmp(role, "scheduler"))
    in = run->scheduler;
  else if (!strcmp(role, "profiler"))
    in = run->profiler;
  else if (!strcmp(role, "data"))
    in = run->data;
  else if (!strcmp(role, "strategy"))
    in = run->strategy;
  else if (!strcmp(role, "precision"))
    in = run->precision;
  if (desc)
    *desc = in ? in->desc : NULL;
  return in ? in->self : NULL;
}

int lk_run_summary(const lk_run *run, char *buf, size_t len) {
  char epochs[48] = "", loss[64] = "";
  const lk__loop_state *st = &run->state;
  if (run->data)
    snprintf(epochs, sizeof epochs, " (%llu epochs)",
             (unsigned long long)st->progress.epoch);
  if (st->has_last_loss)
    snprintf(loss, sizeof loss, "; last loss %.9g", st->last_loss);
  const char *dir = run->rd.dir ? run->rd.dir : "(none: rank 0 writes it)";
  if (run->complete)
    snprintf(buf, len,
             "the run was complete already: %llu steps%s%s; run directory %s",
             (unsigned long long)st->progress.global_step, epochs, loss, dir);
  else
    snprintf(buf, len, "trained %llu steps%s in %.3f s%s; run directory %s",
             (unsigned long long)st->progress.global_step, epochs, run->seconds,
             loss, dir);
  return 0;
}

void lk_run_free(lk_run *run) {
  if (!run)
    return;
  lk__metrics_close(run->metrics);
  /* Closures point into plugin code: free them before any dlclose. */
  lk_wrap_free(run->after_wrap);
  lk_wrap_free(run->mean_wrap);
  lk_wrap_free(run->skip_wrap);
  for (size_t i = 0; i < run->n_profiled; i++)
    lk__profiled_free(run->profiled[i]);
  lk_closure_free(run->closure);
  /* Destroy in reverse creation order, then unload. */
  for (size_t i = run->n_created; i-- > 0;) {
    lk__instance *in = run->created[i];
    if (in->desc->destroy)
      in->desc->destroy(in->self);
    in->created = false;
  }
  free(run->created);
  for (size_t i = 0; i < run->n_instances; i++)
    free_instance(run->instances[i]);
  free(run->instances);
  lk__free_tensors(run);
  lk_config_free(run->cfg);
  lk__rundir_close(&run->rd);
  free(run);
}

void lk_run_interrupt(lk_run *run) {
  run->interrupted = 1;
}

const char *lk_run_checkpoint(const lk_run *run) {
  return run->rd.last_ckpt;
}
