/* The run's optimizers, their parameter groups and the schedulers that
 * drive them: from the config to created instances (optim_step.c steps
 * them).
 *
 *   [plugins]
 *   optimizer = gen:adam, disc:adamw     # one, or several named instances
 *   scheduler = cosine                   # drives the first, or [cosine]
 *                                        # optimizer = disc
 *   [disc]
 *   params = disc.*                      # what it steps; without params,
 *   weight_decay = 0.1                   # what no other optimizer takes
 *   groups = no_decay
 *   [disc.no_decay]
 *   params = *.bias, ndim<2              # the first group that matches
 *   weight_decay = 0                     # over [disc]'s options
 *
 * A parameter group is a second instance of the optimizer's plugin, named
 * disc.no_decay (its state is checkpointed under that name), which sees
 * only its parameters: every optimizer plugin has groups without knowing of
 * them, as every torch optimizer has param_groups. One step of an
 * optimizer steps its default group, then each group, all on one
 * evaluation of the closure, as torch's step() evaluates the closure once
 * and updates group after group. A scheduler drives every group of its
 * optimizer from each group's own initial rate: it gets a copy per group
 * (cosine.no_decay) whose lk_host_lr reaches that group's instance.
 *
 * Selectors: a shell pattern over parameter names (fnmatch), or ndim<N /
 * ndim>=N over their dimensions (ndim<2: biases and norms' weights, the
 * parameters nanoGPT's configure_optimizers does not decay). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "setup.h"

/* The keys of the host's own in these sections; never the plugin's. */
static const char *const optimizer_keys[] = {"params", "groups", NULL};
static const char *const group_keys[] = {"params", NULL};
static const char *const scheduler_keys[] = {"optimizer", NULL};

static char *trim_copy(const char *s, size_t len) {
  while (len && (*s == ' ' || *s == '\t'))
    s++, len--;
  while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
    len--;
  char *out = malloc(len + 1);
  if (out) {
    memcpy(out, s, len);
    out[len] = '\0';
  }
  return out;
}

/* ---- [plugins] optimizer and scheduler -------------------------------- */

/* Each item of E, a comma list, as an instance of kind K into OUT[]. */
static int assign_list(lk_run *run, lk__kind_id k, const lk_config_entry *e,
                       lk__instance **out, size_t max, size_t *n) {
  int rc = 0;
  for (const char *p = e->value; *p && rc == 0;) {
    size_t len = strcspn(p, ",");
    char *item = trim_copy(p, len);
    if (!item)
      return lk__err(LK_ENOMEM, "out of memory");
    lk__instance *in = NULL;
    if (*n == max)
      rc = lk__err(LK_ECONFIG, "%s: more than %zu in [plugins] %s", e->where,
                   max, lk__kinds[k].role);
    else if (!*item)
      rc = lk__err(LK_ECONFIG, "%s: [plugins] %s = %s: an empty item", e->where,
                   lk__kinds[k].role, e->value);
    else
      rc = lk__registry_assign(&run->env, k, item, e->where, &in);
    for (size_t i = 0; rc == 0 && i < *n; i++)
      if (out[i] == in)
        rc = lk__err(LK_ECONFIG,
                     "%s: name %s is used twice in [plugins] %s: two "
                     "instances need two names (NAME:PLUGIN, e.g. a:%s, "
                     "b:%s)",
                     e->where, in->name, lk__kinds[k].role, in->desc->name,
                     in->desc->name);
    if (rc == 0)
      out[(*n)++] = in;
    free(item);
    p += len + (p[len] == ',');
  }
  return rc;
}

int lk__optim_assign(lk_run *run, lk__kind_id k, const lk_config_entry *e) {
  lk__optim *o = &run->optim;
  lk__instance *list[LK__MAX_OPTIMIZERS];
  size_t n = 0;
  size_t max =
      k == LK__KIND_OPTIMIZER ? LK__MAX_OPTIMIZERS : LK__MAX_SCHEDULERS;
  int rc = assign_list(run, k, e, list, max, &n);
  for (size_t i = 0; i < n && rc == 0; i++) {
    if (k == LK__KIND_OPTIMIZER) {
      o->opt[i].index = i;
      o->opt[i].in = list[i];
      list[i]->optimizer = &o->opt[i];
    } else {
      o->sched[i].in = list[i];
    }
  }
  if (k == LK__KIND_OPTIMIZER)
    o->n = n;
  else
    o->n_sched = n;
  if (rc == 0 && n)
    run->env.reg.role[k] = list[0];
  return rc;
}

/* ---- sections ---------------------------------------------------------- */

static int bad_name(const lk_config_entry *e, const char *what,
                    const char *name) {
  return lk__err(LK_ECONFIG,
                 "%s: %s \"%s\": a name is letters, digits, _ and -", e->where,
                 what, name);
}

static bool plain_name(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
      return false;
  return true;
}

/* A second instance of BASE's plugin named BASE.SUFFIX. */
static int clone(lk_run *run, lk__instance *base, const char *suffix,
                 lk__instance **out) {
  char *spec = lk__asprintf("%s.%s:%s", base->name, suffix, base->given);
  if (!spec)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = lk__registry_clone(&run->env, base, spec, out);
  free(spec);
  return rc;
}

/* One group of [OPT] groups: its instance, with [OPT]'s options under its
 * section's. */
static int add_group(lk_run *run, lk__optimizer *o, const lk_config *cfg,
                     char *name) {
  const lk_config_entry *ge = o->groups;
  int rc = 0;
  if (!plain_name(name))
    rc = bad_name(ge, "group name", name);
  for (size_t i = 1; rc == 0 && i < o->n_parts; i++)
    if (!strcmp(o->parts[i].group, name))
      rc = lk__err(LK_ECONFIG, "%s: %s.groups names group %s twice", ge->where,
                   o->in->name, name);
  if (rc == 0 && o->n_parts == LK__MAX_GROUPS + 1)
    rc = lk__err(LK_ECONFIG, "%s: %s.groups: more than %d groups", ge->where,
                 o->in->name, LK__MAX_GROUPS);
  lk__instance *in = NULL;
  if (rc == 0)
    rc = clone(run, o->in, name, &in);
  if (rc != 0)
    return rc;
  lk__opt_part *part = &o->parts[o->n_parts++];
  part->in = in;
  part->group = in->name + strlen(o->in->name) + 1;
  in->optimizer = o;
  const lk_config_entry *pe = lk_config_find(cfg, in->name, "params");
  if (!pe)
    return lk__err(LK_ECONFIG,
                   "%s: group %s of %s.groups has no params: give its "
                   "parameters in [%s] params = PATTERN, ... (shell patterns "
                   "over parameter names, or ndim<N)",
                   ge->where, name, o->in->name, in->name);
  part->params = pe->value;
  return lk__options_parse_in(in->desc, in->name, o->in->name, group_keys, cfg,
                              &in->opts);
}

static int parse_optimizer(lk_run *run, lk__optimizer *o,
                           const lk_config *cfg) {
  o->parts[0].in = o->in;
  o->n_parts = 1;
  o->claims = lk_config_find(cfg, o->in->name, "params");
  o->groups = lk_config_find(cfg, o->in->name, "groups");
  o->loss_column =
      o->index ? lk__asprintf("loss_%s", o->in->name) : lk__strdup("loss");
  if (!o->loss_column)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = lk__options_parse_in(o->in->desc, o->in->name, NULL, optimizer_keys,
                                cfg, &o->in->opts);
  for (const char *p = o->groups ? o->groups->value : ""; *p && rc == 0;) {
    size_t len = strcspn(p, ",");
    char *name = trim_copy(p, len);
    if (!name)
      return lk__err(LK_ENOMEM, "out of memory");
    rc = add_group(run, o, cfg, name);
    free(name);
    p += len + (p[len] == ',');
  }
  return rc;
}

/* [SCHED] optimizer = NAME: which optimizer it drives (the first). */
static int parse_scheduler(lk_run *run, lk__sched *s, const lk_config *cfg) {
  lk__optim *o = &run->optim;
  const lk_config_entry *e = lk_config_find(cfg, s->in->name, "optimizer");
  s->opt = o->n ? &o->opt[0] : NULL;
  for (size_t i = 0; e && i < o->n; i++)
    if (!strcmp(o->opt[i].in->name, e->value))
      s->opt = &o->opt[i];
  if (e && (!s->opt || strcmp(s->opt->in->name, e->value) != 0)) {
    char names[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < o->n && used < sizeof names; i++)
      used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                               i ? ", " : "", o->opt[i].in->name);
    return lk__err(LK_ECONFIG,
                   "%s: %s.optimizer = %s: no such optimizer in [plugins] "
                   "optimizer (%s)",
                   e->where, s->in->name, e->value, *names ? names : "none");
  }
  if (s->opt && !lk__lr_ops(s->opt->in)) {
    const lk_config_entry *pe = lk_config_find(cfg, "plugins", "scheduler");
    return lk__err(LK_ECONFIG,
                   "%s: scheduler %s needs an optimizer with a learning rate; "
                   "optimizer %s has no get_lr/set_lr",
                   pe ? pe->where : s->in->where, s->in->label,
                   s->opt->in->label);
  }
  s->in->driven = s->opt ? s->opt->in : NULL;
  return lk__options_parse_in(s->in->desc, s->in->name, NULL, scheduler_keys,
                              cfg, &s->in->opts);
}

/* The lr column of each part: lr for the first optimizer's default
 * group, lr_GROUP for its groups, lr_OPT and lr_OPT.GROUP for the other
 * optimizers'. Two that would share a column are refused. */
static int name_columns(lk_run *run) {
  lk__optim *o = &run->optim;
  const lk__opt_part *seen[LK__MAX_PARTS];
  size_t n_seen = 0;
  for (size_t i = 0; i < o->n; i++)
    for (size_t j = 0; j < o->opt[i].n_parts; j++) {
      lk__opt_part *p = &o->opt[i].parts[j];
      if (i > 0)
        p->lr_column = lk__asprintf("lr_%s", p->in->name);
      else
        p->lr_column =
            p->group ? lk__asprintf("lr_%s", p->group) : lk__strdup("lr");
      if (!p->lr_column)
        return lk__err(LK_ENOMEM, "out of memory");
      for (size_t k = 0; k < n_seen; k++)
        if (!strcmp(seen[k]->lr_column, p->lr_column))
          return lk__err(LK_ECONFIG,
                         "%s: %s and %s would both log their rate as %s in "
                         "metrics.csv: rename the group",
                         o->opt[i].groups ? o->opt[i].groups->where
                                          : o->opt[i].in->where,
                         p->in->name, seen[k]->in->name, p->lr_column);
      seen[n_seen++] = p;
    }
  return 0;
}

int lk__optim_parse(lk_run *run, const lk_config *cfg) {
  lk__optim *o = &run->optim;
  int rc = 0;
  for (size_t i = 0; i < o->n && rc == 0; i++)
    rc = parse_optimizer(run, &o->opt[i], cfg);
  for (size_t i = 0; i < o->n_sched && rc == 0; i++)
    rc = parse_scheduler(run, &o->sched[i], cfg);
  return rc ? rc : name_columns(run);
}

/* ---- which parameters ---------------------------------------------------- */

/* Whether selector SEL takes parameter P. *BAD: it is neither a pattern
 * nor a well-formed ndim selector. */
static bool selects(const char *sel, const lk_tensor *p, bool *bad) {
  if (strncmp(sel, "ndim", 4) != 0 || (sel[4] != '<' && sel[4] != '>'))
    return fnmatch(sel, p->name, 0) == 0;
  bool less = sel[4] == '<';
  const char *num = sel + 5;
  if (!less && *num++ != '=') {
    *bad = true;
    return false;
  }
  char *end;
  long n = strtol(num, &end, 10);
  if (end == num || *end || n < 0) {
    *bad = true;
    return false;
  }
  return less ? (long)p->ndim < n : (long)p->ndim >= n;
}

/* A short list of the parameter names, for a message. */
static void some_names(const lk__tensors *ts, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < ts->n_params && i < 6 && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                             ts->params[i]->name);
  if (ts->n_params > 6 && used < len)
    snprintf(buf + used, len - used, ", ... (%zu)", ts->n_params);
}

/* Each selector of VALUE (from WHERE, of section WHO) takes into OWNER[] =
 * MARK the parameters it selects among those whose OWNER[i] == FREE; each
 * must select one. With EXCLUSIVE, selecting one already taken is an
 * error (two optimizers' params). */
static int take(const lk__tensors *ts, int *owner, int free_mark, int mark,
                const char *value, const char *where, const char *who,
                bool exclusive, const char *const *names) {
  for (const char *s = value; *s;) {
    size_t len = strcspn(s, ",");
    char *sel = trim_copy(s, len);
    if (!sel)
      return lk__err(LK_ENOMEM, "out of memory");
    bool bad = false, any = false;
    int rc = 0;
    for (size_t i = 0; i < ts->n_params && !bad && rc == 0; i++) {
      if (!*sel || !selects(sel, ts->params[i], &bad))
        continue;
      any = true;
      if (owner[i] == free_mark)
        owner[i] = mark;
      else if (exclusive && owner[i] != mark)
        rc = lk__err(LK_ECONFIG,
                     "%s: %s.params: \"%s\" selects parameter %s, which "
                     "optimizer %s steps already: a parameter has one "
                     "optimizer",
                     where, who, sel, ts->params[i]->name, names[owner[i]]);
    }
    char list[256];
    some_names(ts, list, sizeof list);
    if (rc == 0 && bad)
      rc = lk__err(LK_ECONFIG,
                   "%s: %s.params: \"%s\" is not ndim<N or ndim>=N (N a whole "
                   "number)",
                   where, who, sel);
    else if (rc == 0 && !any)
      rc = lk__err(LK_ECONFIG,
                   "%s: %s.params: \"%s\" matches no parameter (the model's: "
                   "%s)",
                   where, who, sel, list);
    free(sel);
    if (rc != 0)
      return rc;
    s += len + (s[len] == ',');
  }
  return 0;
}

/* LIST gets the parameters whose OWNER is MARK, in the run's order. */
static int collect(const lk__tensors *ts, const int *owner, int mark,
                   bool or_free, lk_tensor ***list, size_t *n) {
  *n = 0;
  *list = calloc(ts->n_params ? ts->n_params : 1, sizeof **list);
  if (!*list)
    return lk__err(LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < ts->n_params; i++)
    if (owner[i] == mark || (or_free && owner[i] < 0))
      (*list)[(*n)++] = ts->params[i];
  return 0;
}

/* Which optimizer steps each parameter: each one's params, then what is
 * left to the one without params (at most one has none); what nobody
 * takes stays as it is (noted). */
static int split_optimizers(lk_run *run, int *owner) {
  lk__optim *o = &run->optim;
  const lk__tensors *ts = &run->env.tensors;
  const char *names[LK__MAX_OPTIMIZERS];
  lk__optimizer *rest = NULL;
  for (size_t i = 0; i < o->n; i++)
    names[i] = o->opt[i].in->name;
  for (size_t i = 0; i < ts->n_params; i++)
    owner[i] = -1;
  for (size_t i = 0; i < o->n; i++) {
    const lk_config_entry *c = o->opt[i].claims;
    if (!c) {
      if (rest)
        return lk__err(LK_ECONFIG,
                       "%s: optimizers %s and %s both have no params: give "
                       "all but one of them params = PATTERN, ... (the one "
                       "without takes the rest)",
                       o->opt[i].in->where, rest->in->name, names[i]);
      rest = &o->opt[i];
      continue;
    }
    int rc =
        take(ts, owner, -1, (int)i, c->value, c->where, names[i], true, names);
    if (rc != 0)
      return rc;
  }
  for (size_t i = 0; rest && i < ts->n_params; i++)
    if (owner[i] < 0)
      owner[i] = (int)rest->index;
  size_t frozen = 0;
  for (size_t i = 0; i < ts->n_params; i++)
    frozen += owner[i] < 0;
  if (frozen) {
    char list[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < ts->n_params && used < sizeof list; i++)
      if (owner[i] < 0)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                 used ? ", " : "", ts->params[i]->name);
    lk__log(&run->env, LK_LOG_INFO,
            "note: %zu parameters are in no optimizer's params and stay as "
            "they are: %s",
            frozen, list);
  }
  for (size_t i = 0; i < o->n; i++) {
    size_t mine = 0;
    for (size_t k = 0; k < ts->n_params; k++)
      mine += owner[k] == (int)i;
    if (mine == 0)
      return lk__err(LK_ECONFIG,
                     "%s: optimizer %s has no parameters to step (the "
                     "others' params took them all)",
                     o->opt[i].in->where, names[i]);
  }
  return 0;
}

/* Within optimizer O (its parameters have OWNER == O's index): each
 * group takes the parameters its params select that no earlier group took,
 * the default group the rest. Group g is marked BASE + g. */
static int split_groups(lk_run *run, lk__optimizer *o, int *owner, int base) {
  const lk__tensors *ts = &run->env.tensors;
  int mine = (int)o->index;
  for (size_t g = 1; g < o->n_parts; g++) {
    lk__opt_part *p = &o->parts[g];
    const lk_config_entry *pe =
        lk_config_find(run->env.src_cfg, p->in->name, "params");
    int rc = take(ts, owner, mine, base + (int)g, p->params, pe->where,
                  p->in->name, false, NULL);
    if (rc != 0)
      return rc;
    size_t n = 0;
    for (size_t i = 0; i < ts->n_params; i++)
      n += owner[i] == base + (int)g;
    if (n == 0)
      return lk__err(LK_ECONFIG,
                     "%s: group %s has no parameter: each one its params "
                     "match is in an earlier group or another optimizer",
                     pe->where, p->in->name);
  }
  size_t n = 0;
  for (size_t i = 0; i < ts->n_params; i++)
    n += owner[i] == mine;
  if (n == 0 && o->n_parts > 1)
    return lk__err(LK_ECONFIG,
                   "%s: every parameter of %s is in one of its groups, so "
                   "its default group ([%s]'s own options) is empty: leave "
                   "the parameters of one group to the default group",
                   o->groups->where, o->in->name, o->in->name);
  return 0;
}

/* The parameters each part steps, and each optimizer's lists. */
static int partition(lk_run *run) {
  lk__optim *o = &run->optim;
  const lk__tensors *ts = &run->env.tensors;
  int *owner = malloc((ts->n_params ? ts->n_params : 1) * sizeof *owner);
  int *part = malloc((ts->n_params ? ts->n_params : 1) * sizeof *part);
  int rc = owner && part ? 0 : lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0)
    rc = split_optimizers(run, owner);
  for (size_t i = 0; i < o->n && rc == 0; i++) {
    lk__optimizer *op = &o->opt[i];
    bool first_or_only = i == 0;
    rc = collect(ts, owner, (int)i, false, &op->params, &op->n_params);
    if (rc == 0)
      rc =
          collect(ts, owner, (int)i, first_or_only, &op->zero_set, &op->n_zero);
    memcpy(part, owner, ts->n_params * sizeof *part);
    int base = 1000 * (int)(i + 1);
    if (rc == 0)
      rc = split_groups(run, op, part, base);
    for (size_t g = 0; g < op->n_parts && rc == 0; g++) {
      lk__instance *in = op->parts[g].in;
      rc = collect(ts, part, g ? base + (int)g : (int)i, false, &in->own_params,
                   &in->n_own_params);
      in->has_own_params = true;
    }
  }
  free(owner);
  free(part);
  return rc;
}

/* ---- creation ------------------------------------------------------------ */

/* A copy of scheduler S for each group of its optimizer, driving that
 * group's rate with S's options. */
static int copy_scheduler(lk_run *run, lk__sched *s) {
  lk__optimizer *o = s->opt;
  int rc = 0;
  for (size_t g = 1; o && g < o->n_parts && rc == 0; g++) {
    lk__instance *c = NULL;
    rc = clone(run, s->in, o->parts[g].group, &c);
    if (rc != 0)
      break;
    c->replica = true;
    c->original = s->in;
    c->suffix = c->name + strlen(s->in->name) + 1;
    c->driven = o->parts[g].in;
    s->copies[s->n_copies++] = c;
    rc = lk__options_parse_in(c->desc, s->in->name, NULL, scheduler_keys,
                              run->env.src_cfg, &c->opts);
    if (rc == 0)
      rc = lk__registry_create(&run->env, c);
  }
  return rc;
}

bool lk__optim_create(lk__env *env, lk__kind_id k, int *status) {
  lk_run *run = env->run;
  if (!run || (k != LK__KIND_OPTIMIZER && k != LK__KIND_SCHEDULER))
    return false;
  lk__optim *o = &run->optim;
  int rc = 0;
  if (k == LK__KIND_OPTIMIZER) {
    if (o->n)
      rc = partition(run);
    for (size_t i = 0; i < o->n && rc == 0; i++)
      for (size_t g = 0; g < o->opt[i].n_parts && rc == 0; g++)
        rc = lk__registry_create(env, o->opt[i].parts[g].in);
  } else {
    for (size_t i = 0; i < o->n_sched && rc == 0; i++) {
      rc = lk__registry_create(env, o->sched[i].in);
      if (rc == 0)
        rc = copy_scheduler(run, &o->sched[i]);
    }
  }
  *status = rc;
  return true;
}

/* ---- the effective config and the end ------------------------------------ */

static int put_entry(lk_config *out, const lk_config_entry *e) {
  return e ? lk_config_put(out, e->section, e->key, e->value, e->where) : 0;
}

int lk__optim_export(const lk_run *run, const lk_config *src, lk_config *out) {
  const lk__optim *o = &run->optim;
  int rc = 0;
  for (size_t i = 0; i < o->n && rc == 0; i++) {
    const lk__optimizer *op = &o->opt[i];
    rc = put_entry(out, op->claims);
    if (rc == 0)
      rc = put_entry(out, op->groups);
    for (size_t g = 1; g < op->n_parts && rc == 0; g++)
      rc = put_entry(out, lk_config_find(src, op->parts[g].in->name, "params"));
  }
  for (size_t i = 0; i < o->n_sched && rc == 0; i++)
    rc = put_entry(out, lk_config_find(src, o->sched[i].in->name, "optimizer"));
  return rc;
}

void lk__optim_free(lk__optim *o) {
  for (size_t i = 0; i < o->n; i++) {
    lk__optimizer *op = &o->opt[i];
    for (size_t g = 0; g < op->n_parts; g++)
      free(op->parts[g].lr_column);
    free(op->params);
    free(op->zero_set);
    free(op->loss_column);
  }
  if (o->once_ready)
    lk__thunk_free(&o->once);
  for (size_t i = 0; i < o->n_stash; i++)
    free(o->stash[i]);
  free(o->stash);
  memset(o, 0, sizeof *o);
}
