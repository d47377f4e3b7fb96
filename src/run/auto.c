/* auto: the value an option takes from the run rather than from the
 * config, so that it follows the run when the run changes.
 *
 * - A scheduler's length (cosine's T_max, linear_warmup's, constant's and
 *   polynomial's total_iters, onecycle's total_steps: an integer option
 *   whose range ends with " or auto") is the number of times it will step:
 *   the run's optimizer steps, or its epochs at interval = epoch, as
 *   Lightning's estimated_stepping_batches counts them; for a child of a
 *   composite, its part of its parent's: between its milestones under a
 *   parent that has them (sequential: from its milestone to the next, the
 *   last to the run's end), the whole of it otherwise (chained).
 * - A data plugin's size that the model fixes (text's block_size) is the
 *   model's option of the same name (gpt's block_size, sequential's), when
 *   the model declares one (0: none, it takes the data's).
 *
 * Resolved before the instance's create (registry.c calls this through
 * env->prepare), into the number the effective config records, so that
 * config.ini and a resumed run have the number; each is logged. A
 * scheduler's length given past the run's is noted: its schedule would
 * not end.
 *
 * Counting a run's steps needs the training split's batches: the data
 * plugin's epoch entry is asked for epoch 0 (data plugins draw their
 * order from a stream of their own, so asking changes nothing). */
#include <stdio.h>
#include <string.h>

#include "setup.h"

typedef struct span {
  int64_t len;   /* how many times the scheduler steps */
  char why[256]; /* what that is, for the log */
} span;

static bool plays(const lk__instance *in, lk__kind_id k) {
  return (in->roles & (1u << k)) != 0;
}

static lk_interval interval_of(const lk__instance *in) {
  const char *v = lk_opt_string(in->opts, "interval");
  return v && strcmp(v, "epoch") == 0 ? LK_INTERVAL_EPOCH : LK_INTERVAL_STEP;
}

static int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/* The training batches of an epoch, for this process. */
static int epoch_batches(lk_run *run, int64_t *out) {
  const lk__instance *data = lk__role(run, LK__KIND_DATA);
  const lk__instance *s = lk__role(run, LK__KIND_STRATEGY);
  size_t nb = 0;
  if (!data->created)
    return lk__err(LK_ESTATE, "auto: data plugin %s is not created yet",
                   data->label);
  uint64_t mark = lk__err_mark();
  int rc = data->desc->data->epoch(data->self, LK_SPLIT_TRAIN, 0, &nb);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "epoch of data plugin %s", data->label);
  /* The strategy is created before anything that can be auto. */
  int world = s && s->created && s->desc->strategy->world_size
                  ? s->desc->strategy->world_size(s->self)
                  : 1;
  nb = lk__shard_train(nb, world, 0).count;
  *out = nb > 0 ? (int64_t)nb : 1;
  return 0;
}

/* The run's length at interval WHEN: the scheduler steps once a window
 * (every optimizer of several steps in it, each counted by max_steps),
 * and once an epoch that trains at least a batch. */
static int run_span(lk_run *run, lk_interval when, span *out) {
  const lk__loop_config *l = &run->loop;
  int64_t k = run->optim.n > 0 ? (int64_t)run->optim.n : 1;
  int64_t by_steps = l->max_steps >= 0 ? ceil_div(l->max_steps, k) : -1;
  bool data = lk__role(run, LK__KIND_DATA) != NULL;
  const char *unit = when == LK_INTERVAL_EPOCH ? "epochs" : "optimizer steps";
  if (!data) {
    if (when == LK_INTERVAL_EPOCH)
      return lk__err(LK_ECONFIG,
                     "the run has no epochs (no data plugin): a scheduler at "
                     "interval = epoch would never step");
    out->len = by_steps;
    snprintf(out->why, sizeof out->why, "the run's %s: max_steps", unit);
    return 0;
  }
  if (l->max_epochs < 0 && by_steps < 0)
    return lk__err(LK_ECONFIG, "the run has no end (max_epochs = -1 and no "
                               "max_steps): it has no length to take");
  int64_t nb = 1, per_epoch;
  int rc = epoch_batches(run, &nb);
  if (rc != 0)
    return rc;
  per_epoch = l->manual ? nb : ceil_div(nb, l->accumulate);
  int64_t steps = l->max_epochs < 0 ? by_steps : l->max_epochs * per_epoch;
  if (by_steps >= 0 && by_steps < steps)
    steps = by_steps;
  out->len = when == LK_INTERVAL_EPOCH ? ceil_div(steps, per_epoch) : steps;
  snprintf(out->why, sizeof out->why,
           "the run's %s: %lld batches an epoch%s, max_epochs = %lld, "
           "max_steps = %lld",
           unit, (long long)nb, l->accumulate > 1 ? " accumulated" : "",
           (long long)l->max_epochs, (long long)l->max_steps);
  return 0;
}

/* IN's position among its parent's children: the ones created before it. */
static size_t child_index(const lk__env *env, const lk__instance *in) {
  size_t i = 0;
  for (size_t k = 0; k < env->reg.n; k++) {
    const lk__instance *o = env->reg.all[k];
    i += o != in && o->parent == in->parent && o->created;
  }
  return i;
}

/* How often scheduler IN steps: the run's length, or its part of its
 * parent's (recursively: a composite may be a child too). */
static int sched_span(lk_run *run, const lk__instance *in, span *out) {
  if (!in->parent)
    return run_span(run, interval_of(in), out);
  const lk__instance *p = in->parent;
  span whole;
  int rc = sched_span(run, p, &whole);
  if (rc != 0)
    return rc;
  size_t n_m = 0, i = child_index(&run->env, in);
  const double *m = lk_opt_doubles(p->opts, "milestones", &n_m);
  int64_t from = 0, to = whole.len;
  if (n_m > 0 && i > 0)
    from = (int64_t)m[(i <= n_m ? i : n_m) - 1];
  if (i < n_m)
    to = (int64_t)m[i];
  /* A child before the last runs to its milestone, which the config
   * gives, even where the run ends first; the last runs to the end. */
  out->len = to > from ? to - from : 1;
  if (n_m == 0)
    snprintf(out->why, sizeof out->why, "all of %s's: %.160s", p->label,
             whole.why);
  else
    snprintf(out->why, sizeof out->why,
             "its part of %s's %lld, from %lld to "
             "%lld%s",
             p->label, (long long)whole.len, (long long)from, (long long)to,
             to > from ? "" : " (the run ends before it starts)");
  return 0;
}

/* A data plugin's OPTION = auto: the model's option of that name. */
static int model_value(const lk__env *env, const lk__instance *in,
                       const char *option, int64_t *v, char *why, size_t len) {
  const lk__instance *model = env->reg.role[LK__KIND_STEP];
  for (size_t k = 0; model && k < lk__options_count(model->opts); k++) {
    const lk_option *o = lk__options_decl(model->opts, k);
    if (o->type == LK_OPT_INT && strcmp(o->name, option) == 0 &&
        !lk__options_is_auto(model->opts, k)) {
      *v = lk_opt_int(model->opts, option);
      snprintf(why, len, "the model %s's %s", model->label, option);
      if (*v > 0)
        return 0;
      /* sequential's block_size = 0: the data's length, none of its own */
      return lk__err(LK_ECONFIG,
                     "%s: option %s.%s = auto: the model (step plugin %s) "
                     "declares none (%s = %lld, its default: the data's); "
                     "give %s.%s or %s.%s a number",
                     lk_opt_where(in->opts, option), in->name, option,
                     model->label, option, (long long)*v, model->name, option,
                     in->name, option);
    }
  }
  return lk__err(LK_ECONFIG,
                 "%s: option %s.%s = auto: the model (step plugin %s) has "
                 "no integer option %s to take it from; give %s a number",
                 lk_opt_where(in->opts, option), in->name, option,
                 model ? model->label : "none", option, option);
}

/* Option K of IN, auto: its number, as if the config gave it. */
static int resolve(lk_run *run, lk__instance *in, size_t k) {
  const char *name = lk__options_decl(in->opts, k)->name;
  span s = {0};
  int rc;
  if (plays(in, LK__KIND_SCHEDULER) || in->parent)
    rc = sched_span(run, in, &s);
  else if (plays(in, LK__KIND_DATA))
    rc = model_value(&run->env, in, name, &s.len, s.why, sizeof s.why);
  else
    rc = lk__err(LK_ECONFIG,
                 "%s: option %s.%s = auto: auto is a scheduler's length or a "
                 "data plugin's size that the model gives; plugin %s is "
                 "neither here: give a number",
                 lk_opt_where(in->opts, name), in->name, name, in->label);
  if (rc != 0)
    return lk__err_prefix(rc, "%s: option %s.%s = auto",
                          lk_opt_where(in->opts, name), in->name, name);
  char text[32], where[320];
  snprintf(text, sizeof text, "%lld", (long long)s.len);
  snprintf(where, sizeof where, "auto (%s)", s.why);
  if (!in->replica)
    lk__log(&run->env, LK_LOG_INFO, "%s: %s = auto = %s (%s)", in->label, name,
            text, s.why);
  return lk__options_replace(in->desc, in->opts, name, text, where);
}

/* A scheduler's length given past the run's: its schedule would not end
 * by the run's end. Noted, not refused: it may be meant. */
static int note_past(lk_run *run, const lk__instance *in, size_t k) {
  const char *name = lk__options_decl(in->opts, k)->name;
  int64_t v = lk_opt_int(in->opts, name);
  const lk__loop_config *l = &run->loop;
  bool data = lk__role(run, LK__KIND_DATA) != NULL;
  /* A run without epochs or without an end has no length to compare. */
  if ((!data && interval_of(in) == LK_INTERVAL_EPOCH) ||
      (data && l->max_epochs < 0 && l->max_steps < 0))
    return 0;
  span s;
  int rc = sched_span(run, in, &s);
  if (rc == 0 && v > s.len)
    lk__log(&run->env, LK_LOG_INFO,
            "note: %s: %s.%s = %lld is past the run's length: the scheduler "
            "steps %lld times (%s); %s = auto follows the run",
            lk_opt_where(in->opts, name), in->name, name, (long long)v,
            (long long)s.len, s.why, name);
  return rc;
}

/* Outside a run (lk_model_open): a data plugin's auto sizes only, from
 * the model's options, which must be parsed already. */
int lk__auto_data_options(lk__env *env, lk__instance *in) {
  int rc = 0;
  for (size_t k = 0; rc == 0 && k < lk__options_count(in->opts); k++) {
    if (!lk__options_is_auto(in->opts, k) || !plays(in, LK__KIND_DATA))
      continue;
    const char *name = lk__options_decl(in->opts, k)->name;
    span s = {0};
    rc = model_value(env, in, name, &s.len, s.why, sizeof s.why);
    if (rc != 0)
      return lk__err_prefix(rc, "%s: option %s.%s = auto",
                            lk_opt_where(in->opts, name), in->name, name);
    char text[32], where[320];
    snprintf(text, sizeof text, "%lld", (long long)s.len);
    snprintf(where, sizeof where, "auto (%s)", s.why);
    rc = lk__options_replace(in->desc, in->opts, name, text, where);
  }
  return rc;
}

int lk__auto_options(lk__env *env, lk__instance *in) {
  lk_run *run = env->run;
  if (!run)
    return 0;
  int rc = 0;
  bool sched = plays(in, LK__KIND_SCHEDULER) || in->parent;
  for (size_t k = 0; rc == 0 && k < lk__options_count(in->opts); k++) {
    if (lk__options_is_auto(in->opts, k))
      rc = resolve(run, in, k);
    else if (sched && !in->replica &&
             lk__option_takes_auto(lk__options_decl(in->opts, k)))
      rc = note_past(run, in, k);
  }
  return rc;
}
