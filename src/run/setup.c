/* Setting a run up from a config: [loop], the roles of [plugins] (loaded,
 * checked, given their options, created in order), the sections, the
 * strategy, the effective config, the calls and the closure chain, the
 * checkpoint to resume from, and the run directory. Everything that can be
 * wrong with a config is found here, before anything is trained. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "layertypes.h"
#include "setup.h"

/* ---- [plugins] ---------------------------------------------------------- */

static int known_keys(const lk_config *cfg) {
  for (size_t i = 0; i < lk__config_count(cfg); i++) {
    const lk_config_entry *e = lk__config_at(cfg, i);
    if (strcmp(e->section, "plugins") == 0 && !lk__kind_of_role(e->key)) {
      char accepted[512];
      lk__option_names(lk__plugin_keys, accepted, sizeof accepted);
      return lk__err(LK_ECONFIG,
                     "%s: unknown key \"%s\" in [plugins]; accepted: %s",
                     e->where, e->key, accepted);
    }
  }
  return 0;
}

/* callbacks = a, b (a key of several): each one instance, listed once. */
static int assign_listed(lk_run *run, lk__kind_id k, const lk_config_entry *e) {
  lk__listed *l = &run->env.reg.listed[k];
  char *list = lk__strdup(e->value), *save = NULL;
  if (!list)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = 0;
  for (char *t = strtok_r(list, ",", &save); t && rc == 0;
       t = strtok_r(NULL, ",", &save)) {
    while (*t == ' ' || *t == '\t')
      t++;
    char *end = t + strlen(t);
    while (end > t && (end[-1] == ' ' || end[-1] == '\t'))
      *--end = '\0';
    lk__instance *in = NULL;
    if (l->n == LK__MAX_LISTED)
      rc = lk__err(LK_ECONFIG, "%s: more than %d %s", e->where, LK__MAX_LISTED,
                   e->key);
    else
      rc = lk__registry_assign(&run->env, k, t, e->where, &in);
    /* One instance runs each entry once: listing it twice would run it
     * twice on the same state, silently; two instances need two names. */
    for (size_t i = 0; rc == 0 && i < l->n; i++)
      if (l->in[i] == in)
        rc = lk__err(LK_ECONFIG,
                     "%s: name %s is used twice in [plugins] %s: one "
                     "instance would run every %s twice on the same state; "
                     "name each instance (NAME:PLUGIN, e.g. a:%s, b:%s)",
                     e->where, in->name, e->key,
                     k == LK__KIND_CALLBACK ? "hook" : "entry", in->desc->name,
                     in->desc->name);
    if (rc == 0)
      l->in[l->n++] = in;
  }
  free(list);
  return rc;
}

/* "none": no plugin plays the role. Not a plugin name, so that a --set
 * can take out a role the config file fills. */
static bool is_none(const lk_config_entry *e) {
  return e && strcmp(e->value, "none") == 0;
}

/* A role none may leave empty: not one the loop cannot run without. */
static int check_none(const lk_run *run, lk__kind_id k,
                      const lk_config_entry *e) {
  const char *why = NULL;
  if (k == LK__KIND_STEP)
    why = "it computes the loss";
  else if (k == LK__KIND_BACKWARD)
    why = "left out, it is the step's plugin";
  else if (k == LK__KIND_ZERO_GRAD)
    why = "left out, it is zero";
  else if (k == LK__KIND_OPTIMIZER && !run->loop.manual)
    why = "unless manual_optimization = true";
  if (!why)
    return 0;
  return lk__err(LK_ECONFIG,
                 "%s: [plugins] %s cannot be none: the role is required (%s)",
                 e->where, e->key, why);
}

/* The --set that removed [plugins] ROLE with an empty value, or NULL. */
static const char *removed_by(const lk_config *cfg, const char *role) {
  const char *arg = NULL;
  for (size_t i = 0; i < lk__config_n_overrides(cfg); i++) {
    const lk__config_override *o = lk__config_override_at(cfg, i);
    if (!strcmp(o->section, "plugins") && !strcmp(o->key, role))
      arg = o->value ? NULL : o->arg;
  }
  return arg;
}

/* Where a required role's key should have been: the --set that removed
 * it, or the config. */
static const char *missing_where(const lk_config *cfg, const char *role,
                                 char *buf, size_t len) {
  const char *arg = removed_by(cfg, role);
  if (!arg)
    return lk__config_path(cfg);
  snprintf(buf, len, "--set %s", arg);
  return buf;
}

/* One role: the plugin its key names, or the kind's default. */
static int assign_role(lk_run *run, const lk_config *cfg, lk__kind_id k) {
  const lk__kind *kind = &lk__kinds[k];
  lk__instance **slot = &run->env.reg.role[k];
  const lk_config_entry *e = lk_config_find(cfg, "plugins", kind->role);
  if (is_none(e))
    return check_none(run, k, e);
  if (kind->many)
    return e ? assign_listed(run, k, e) : 0;
  if (e && (k == LK__KIND_OPTIMIZER || k == LK__KIND_SCHEDULER))
    return lk__optim_assign(run, k, e); /* one, or several named */
  const char *name = e ? e->value : kind->def;
  char where[128];
  snprintf(where, sizeof where, "[plugins] %s (default %s)", kind->role,
           kind->def ? kind->def : "none");
  if (k == LK__KIND_BACKWARD && !e) {
    /* The step's plugin, which a manual step may not implement. */
    lk__instance *step = run->env.reg.role[LK__KIND_STEP];
    if (lk__kind_has(step->desc, kind)) {
      *slot = step;
      step->roles |= 1u << k;
    } else if (!run->loop.manual)
      return lk__registry_assign(&run->env, k, step->spec,
                                 lk_config_find(cfg, "plugins", "step")->where,
                                 slot);
    return 0;
  }
  return name ? lk__registry_assign(&run->env, k, name, e ? e->where : where,
                                    slot)
              : 0;
}

/* What a role needs beyond its kind. */
static int check_roles(lk_run *run, const lk_config *cfg) {
  const lk__registry *reg = &run->env.reg;
  const lk_config_entry *e;
  char buf[256];
  if (!reg->role[LK__KIND_OPTIMIZER] && !run->loop.manual)
    return lk__err(LK_ECONFIG,
                   "%s: [plugins] optimizer is required unless "
                   "manual_optimization = true (e.g. optimizer = sgd)",
                   missing_where(cfg, "optimizer", buf, sizeof buf));
  if ((e = lk_config_find(cfg, "plugins", "scheduler")) && !is_none(e) &&
      !reg->role[LK__KIND_OPTIMIZER])
    return lk__err(LK_ECONFIG,
                   "%s: scheduler %s needs an optimizer with a learning rate; "
                   "there is no optimizer",
                   e->where, e->value);
  if (!reg->role[LK__KIND_DATA] && run->loop.val_check > 0) {
    e = lk_config_find(cfg, "loop", "val_check_interval");
    return lk__err(LK_ECONFIG,
                   "%s: val_check_interval = %lld without a data plugin: "
                   "there is no validation split to check",
                   e ? e->where : lk__config_path(cfg),
                   (long long)run->loop.val_check);
  }
  if (!reg->role[LK__KIND_DATA] && run->loop.max_steps < 0) {
    e = lk_config_find(cfg, "loop", "max_steps");
    return lk__err(LK_ECONFIG,
                   "%s: without a data plugin there are no epochs: set "
                   "[loop] max_steps",
                   e ? e->where : lk__config_path(cfg));
  }
  return 0;
}

/* Every role from its key, in creation order (data first: a model may
 * size itself from it); the model's own hooks after the callbacks'. */
static int parse_plugins(lk_run *run, const lk_config *cfg) {
  lk__registry *reg = &run->env.reg;
  int rc = known_keys(cfg);
  if (rc != 0)
    return rc;
  const lk_config_entry *step_e = lk_config_find(cfg, "plugins", "step");
  if (is_none(step_e))
    return check_none(run, LK__KIND_STEP, step_e);
  char buf[256];
  if (!step_e)
    return lk__err(LK_ECONFIG,
                   "%s: [plugins] step is required (the plugin that computes "
                   "the loss, e.g. step = rosenbrock)",
                   missing_where(cfg, "step", buf, sizeof buf));
  for (int rank = 0; rank < LK__N_KINDS && rc == 0; rank++)
    for (size_t k = 0; k < LK__N_KINDS && rc == 0; k++)
      if (lk__kinds[k].created == rank)
        rc = assign_role(run, cfg, (lk__kind_id)k);
  if (rc != 0)
    return rc;
  lk__instance *step = reg->role[LK__KIND_STEP];
  lk__listed *cbs = &reg->listed[LK__KIND_CALLBACK];
  bool listed = false;
  for (size_t i = 0; i < cbs->n; i++)
    listed = listed || cbs->in[i] == step;
  if (lk__kind_ops(step->desc, &lk__kinds[LK__KIND_CALLBACK]) && !listed)
    cbs->in[cbs->n++] = step;
  const lk_config_entry *layers = lk_config_find(cfg, "plugins", "layers");
  if (layers && (rc = lk__layers_check(reg, layers->where)) != 0)
    return rc;
  return check_roles(run, cfg);
}

/* Whether NAME, an item of a [plugins] value, names section SECTION: a
 * plugin's name, an instance's (NAME:PLUGIN), or a path whose file is
 * SECTION.so. */
static bool names_section(const char *name, size_t len, const char *section) {
  while (len && (*name == ' ' || *name == '\t'))
    name++, len--;
  while (len && (name[len - 1] == ' ' || name[len - 1] == '\t'))
    len--;
  const char *colon = memchr(name, ':', len);
  if (colon && !memchr(name, '/', (size_t)(colon - name)))
    len = (size_t)(colon - name);
  else if (memchr(name, '/', len)) {
    const char *base = name + len;
    while (base > name && base[-1] != '/')
      base--;
    len -= (size_t)(base - name);
    name = base;
    if (len > 3 && !memcmp(name + len - 3, ".so", 3))
      len -= 3;
  }
  return strlen(section) == len && !memcmp(name, section, len);
}

/* Whether VALUE, the comma list of KEY in section OWNER, names SECTION:
 * an item of [plugins] or of a composite's list (a scheduler's
 * `schedulers = warmup:linear_warmup, ...`), or, in an optimizer's
 * `groups`, the group's section OWNER.GROUP. */
static bool list_names(const char *value, const char *owner, const char *key,
                       const char *section) {
  size_t olen = strlen(owner);
  bool groups = strcmp(key, "groups") == 0;
  if (groups) {
    if (strncmp(section, owner, olen) != 0 || section[olen] != '.')
      return false;
    section += olen + 1;
  }
  for (const char *p = value; *p;) {
    size_t len = strcspn(p, ",");
    if (names_section(p, len, section))
      return true;
    p += len + (p[len] == ',');
  }
  return false;
}

static bool known_section(const lk__registry *reg, const char *section) {
  if (!strcmp(section, "loop") || !strcmp(section, "plugins"))
    return true;
  for (size_t k = 0; k < reg->n; k++)
    if (!reg->all[k]->replica && strcmp(reg->all[k]->name, section) == 0)
      return true;
  return false;
}

#define ORPHAN_DEPTH 8 /* sections naming sections: a composite's children */

/* The --set that left SECTION unused, or NULL: one whose replaced value
 * named it (it swapped a plugin, took one out with none or an empty
 * value, dropped a group or a composite's child), or named a section
 * that names it and is unused itself (a scheduler taken out leaves its
 * children's sections too; an optimizer taken out, its groups'). Such a
 * section is no mistake in the file. */
static const lk__config_override *orphaned_by(const lk__registry *reg,
                                              const lk_config *cfg,
                                              const char *section, int depth) {
  for (size_t i = 0; i < lk__config_n_overrides(cfg); i++) {
    const lk__config_override *o = lk__config_override_at(cfg, i);
    if (o->was && list_names(o->was, o->section, o->key, section))
      return o;
  }
  if (depth >= ORPHAN_DEPTH)
    return NULL;
  for (size_t i = 0; i < lk__config_count(cfg); i++) {
    const lk_config_entry *e = lk__config_at(cfg, i);
    if (strcmp(e->section, section) == 0 || known_section(reg, e->section) ||
        !list_names(e->value, e->section, e->key, section))
      continue;
    const lk__config_override *o = orphaned_by(reg, cfg, e->section, depth + 1);
    if (o)
      return o;
  }
  return NULL;
}

/* The keys plugins read of SECTION (lk_host_section_value), for a
 * message. */
static const char *claimed_keys(const lk__claims *c, const char *section) {
  static _Thread_local char buf[256];
  size_t used = 0;
  buf[0] = 0;
  for (size_t i = 0; i < c->n; i++) {
    if (strcmp(c->v[i].section, section))
      continue;
    int w = snprintf(buf + used, sizeof buf - used, "%s%s", used ? ", " : "",
                     c->v[i].key);
    if (w > 0 && (size_t)w < sizeof buf - used)
      used += (size_t)w;
  }
  return buf;
}

/* Every section must be [loop], [plugins], a named plugin's or one a
 * plugin read as its own (lk_host_section_value); one an
 * override left unused (orphaned_by) is noted. */
static int check_sections(const lk_run *run, const lk_config *cfg) {
  const lk__registry *reg = &run->env.reg;
  const char *noted = NULL;
  const lk__claims *claims = &run->env.claims;
  for (size_t i = 0; i < lk__config_count(cfg); i++) {
    const lk_config_entry *e = lk__config_at(cfg, i);
    if (known_section(reg, e->section) || (noted && !strcmp(noted, e->section)))
      continue;
    if (lk__claimed(claims, e->section, NULL)) { /* a plugin's (a block) */
      if (lk__claimed(claims, e->section, e->key))
        continue;
      return lk__err(LK_ECONFIG,
                     "%s: unknown key %s in section [%s], which a plugin "
                     "reads as its own: accepted keys: %s",
                     e->where, e->key, e->section,
                     claimed_keys(claims, e->section));
    }
    const lk__config_override *o = orphaned_by(reg, cfg, e->section, 0);
    if (o) {
      const char *where = lk__config_section_where(cfg, e->section);
      lk__log(&run->env, LK_LOG_INFO,
              "note: %s: section [%s] is unused: --set %s replaced %s = %s",
              where ? where : e->where, e->section, o->arg, o->key, o->was);
      noted = e->section; /* a section's entries are together */
      continue;
    }
    char names[1024] = "loop, plugins";
    size_t used = strlen(names);
    for (size_t k = 0; k < reg->n; k++) {
      if (reg->all[k]->replica)
        continue;
      int w = snprintf(names + used, sizeof names - used, ", %s",
                       reg->all[k]->name);
      if (w > 0 && (size_t)w < sizeof names - used)
        used += (size_t)w;
    }
    const char *where = lk__config_section_where(cfg, e->section);
    return lk__err(LK_ECONFIG,
                   "%s: unknown section [%s]: not a plugin named in "
                   "[plugins]; accepted sections: %s",
                   where ? where : e->where, e->section, names);
  }
  return 0;
}

/* ---- the effective config ---------------------------------------------- */

/* [loop] and [plugins] with every default filled in, then each
 * instance's options: what config.ini records and a rerun reads. */
static int effective_config(lk_run *run, const lk_config *cfg) {
  const lk__registry *reg = &run->env.reg;
  int rc = lk_config_new(&run->cfg);
  if (rc == 0)
    rc = lk__loop_config_export(cfg, run->cfg);
  for (size_t k = 0; k < LK__N_KINDS && rc == 0; k++) {
    const lk__kind *kind = &lk__kinds[k];
    const lk_config_entry *e = lk_config_find(cfg, "plugins", kind->role);
    const lk__instance *in = reg->role[k];
    bool list =
        kind->many || k == LK__KIND_OPTIMIZER || k == LK__KIND_SCHEDULER;
    if (list && e && !is_none(e))
      rc = lk_config_put(run->cfg, "plugins", kind->role, e->value, e->where);
    else if (!list && in)
      rc = lk_config_put(run->cfg, "plugins", kind->role, in->spec,
                         e ? e->where : lk__config_path(cfg));
  }
  for (size_t i = 0; i < reg->n && rc == 0; i++)
    if (!reg->all[i]->replica)
      rc = lk__options_export(reg->all[i]->opts, reg->all[i]->name, run->cfg);
  /* the sections plugins read as their own (a network's blocks) */
  for (size_t i = 0; i < run->env.claims.n && rc == 0; i++) {
    const lk__claim *c = &run->env.claims.v[i];
    const lk_config_entry *e = lk_config_find(cfg, c->section, c->key);
    if (e)
      rc = lk_config_put(run->cfg, c->section, c->key, e->value, e->where);
  }
  return rc == 0 ? lk__optim_export(run, cfg, run->cfg) : rc;
}

/* ---- lk_run_new ---------------------------------------------------------- */

/* [loop] threads = 0: the CPUs this process may use, divided among the
 * processes a launcher started on this node, each of which would
 * otherwise take them all (two ranks on two cores ran four threads, each
 * spinning for a core the other held). Under a launcher the count is
 * said, and how it was found. */
static void resolve_threads(lk_run *run) {
  lk__env *env = &run->env;
  env->threads = lk__threads_resolve(run->loop.threads);
  if (run->loop.threads > 0)
    return;
  const char *var;
  int cpus = env->threads, local = lk__launcher_local_ranks(&var);
  if (local > 1)
    env->threads = cpus / local > 1 ? cpus / local : 1;
  if (var && local > 1)
    lk__log(env, LK_LOG_INFO,
            "threads: %d, the %d CPU%s this process may use shared by the "
            "%d processes on this node (%s=%s); [loop] threads sets it",
            env->threads, cpus, cpus == 1 ? "" : "s", local, var, getenv(var));
  else if (var)
    lk__log(env, LK_LOG_INFO,
            "threads: %d, one per CPU this process may use, the only "
            "process on this node (%s=%s); [loop] threads sets it",
            env->threads, var, getenv(var));
}

/* The instances, created: options first, all of them (a bad value anywhere
 * is found before any plugin starts), then each in creation order. */
static int create(lk_run *run, const lk_config *cfg) {
  lk__env *env = &run->env;
  int rc = lk__optim_parse(run, cfg); /* their host keys, their groups */
  for (size_t i = 0; i < env->reg.n && rc == 0; i++)
    if (!env->reg.all[i]->opts)
      rc = lk__options_parse(env->reg.all[i]->desc, env->reg.all[i]->name, cfg,
                             &env->reg.all[i]->opts);
  if (rc != 0)
    return rc;
  lk_rng_seed(&env->rng, (uint64_t)run->loop.seed, 0);
  env->seed = (uint64_t)run->loop.seed;
  resolve_threads(run);
  env->src_cfg = cfg;
  env->prepare = lk__auto_options;
  rc = lk__registry_create_all(env, lk__optim_create);
  env->src_cfg = NULL;
  env->tensors.sealed = true;
  /* After creation: a wrapping optimizer may have added a plugin (and so a
   * section) of its own. */
  if (rc == 0)
    rc = check_sections(run, cfg);
  if (rc == 0 && env->tensors.n_params == 0)
    rc = lk__err(LK_ECONFIG,
                 "plugin %s (the step) created no parameters: nothing to "
                 "train",
                 lk__role(run, LK__KIND_STEP)->name);
  return rc;
}

static lk_run *run_alloc(const lk_run_options *opts) {
  lk_run *run = calloc(1, sizeof *run);
  if (!run)
    return NULL;
  if (opts)
    run->opts = *opts;
  else
    run->opts.verbosity = LK_LOG_INFO;
  run->env.log =
      (lk__logger){run->opts.log, run->opts.log_user, run->opts.verbosity};
  run->env.world = 1;
  run->env.run = run;
  run->rd.lock_fd = -1;
  return run;
}

/* Copies of RUN's parameters and states into OUT, a checkpoint's shape. */
static int copy_values(const lk_run *run, lk__ckpt *out) {
  const lk__tensors *ts = &run->env.tensors;
  size_t n = ts->n_params + ts->n_states;
  out->kinds = calloc(n ? n : 1, sizeof *out->kinds);
  out->tensors = calloc(n ? n : 1, sizeof *out->tensors);
  if (!out->kinds || !out->tensors)
    return lk__err(LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    bool param = i < ts->n_params;
    const lk_tensor *t = param ? ts->params[i] : ts->states[i - ts->n_params];
    size_t bytes = t->numel * lk_dtype_size(t->dtype);
    lk_tensor *c = &out->tensors[out->n];
    *c = *t;
    c->grad = NULL;
    c->name = lk__strdup(t->name);
    c->data = malloc(bytes ? bytes : 1);
    out->kinds[out->n++] = param ? LK__CKPT_PARAM : LK__CKPT_STATE;
    if (!c->name || !c->data)
      return lk__err(LK_ENOMEM, "out of memory");
    memcpy(c->data, t->data, bytes);
  }
  return 0;
}

int lk__start_values(const lk_config *cfg, lk__ckpt **out) {
  lk_run_options opts = {.no_run_dir = true, .verbosity = LK_LOG_ERROR};
  lk_run *run = run_alloc(&opts);
  lk__ckpt *ck = calloc(1, sizeof *ck);
  int rc = run && ck ? 0 : lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0)
    rc = lk__loop_config_parse(cfg, &run->loop);
  if (rc == 0)
    rc = parse_plugins(run, cfg);
  if (rc == 0)
    rc = create(run, cfg);
  if (rc == 0)
    rc = copy_values(run, ck);
  lk_run_free(run);
  if (rc != 0) {
    lk__ckpt_free(ck);
    return rc;
  }
  *out = ck;
  return 0;
}

/* The model's totals, as Lightning prints its ModelSummary at fit's start
 * (loopkit summary prints the layers). */
static void note_model(lk_run *run) {
  lk_model_summary s;
  char line[256];
  if (run->env.tensors.n_params == 0 || lk_run_model_summary(run, &s) != 0)
    return;
  lk__log(&run->env, LK_LOG_INFO, "model: %s",
          lk_model_summary_totals(&s, line, sizeof line));
  lk_model_summary_free(&s);
}

int lk_run_new(const lk_config *cfg, const lk_run_options *opts, lk_run **out) {
  lk_run *run = run_alloc(opts);
  if (!run)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = lk__loop_config_parse(cfg, &run->loop);
  if (rc == 0)
    rc = lk__launcher_check(run, cfg);
  if (rc == 0)
    rc = parse_plugins(run, cfg);
  if (rc == 0)
    rc = create(run, cfg);
  if (rc == 0)
    rc = lk__strategy_setup(run);
  if (rc == 0)
    rc = lk__ckpt_check(run, cfg);
  if (rc == 0)
    rc = effective_config(run, cfg);
  if (rc == 0)
    note_model(run);
  if (rc == 0)
    rc = lk__calls_build(run);
  if (rc == 0)
    rc = lk__chain_build(run);
  if (rc == 0)
    rc = lk__calls_profile_closure(run);
  struct stat ck_st;
  if (rc == 0 && run->opts.resume)
    rc = lk__resume(run, cfg, lk__start_values, run->opts.resume, &ck_st);
  run->resumed = rc == 0 && run->opts.resume;
  if (rc == 0 && !run->opts.no_run_dir && run->env.rank == 0)
    rc = lk__rundir_open(run, cfg, run->resumed ? &ck_st : NULL);
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
