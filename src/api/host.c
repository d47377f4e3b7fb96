/* The host API: what a plugin may call through its lk_host handle (the
 * manual-optimization calls are in manual.c). A handle reaches its
 * environment (env.h): instances, tensors, generator and processes, and,
 * inside a training run, the run; outside one (lk_optimizer_open) what
 * needs a run answers as a run that has not started would. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layertypes.h"
#include "loopkit/layer.h"
#include "loopkit/nn.h"
#include "manual.h"

int lk_result_metric(lk_step_result *result, const char *name, double value) {
  if (result->n_metrics >= LK_MAX_METRICS)
    return lk__err(LK_EINVAL, "more than %d metrics in one step result",
                   LK_MAX_METRICS);
  result->metrics[result->n_metrics].name = name;
  result->metrics[result->n_metrics].value = value;
  result->n_metrics++;
  return 0;
}

/* ---- parameters and state ----------------------------------------------- */

int lk_host_add_param(lk_host *host, const char *name, lk_dtype dtype,
                      size_t ndim, const size_t *shape, lk_tensor **out) {
  return lk__tensors_add(&host->env->tensors, host->inst->name, host->inst,
                         name, dtype, ndim, shape, true, out);
}

int lk_host_add_state(lk_host *host, const char *name, lk_dtype dtype,
                      size_t ndim, const size_t *shape, lk_tensor **out) {
  return lk__tensors_add(&host->env->tensors, host->inst->name, host->inst,
                         name, dtype, ndim, shape, false, out);
}

int lk_host_add_buffer(lk_host *host, const char *name, lk_dtype dtype,
                       size_t ndim, const size_t *shape, unsigned flags,
                       lk_tensor **out) {
  lk__tensors *ts = &host->env->tensors;
  if (flags & ~LK_BUFFER_COUNT ||
      ((flags & LK_BUFFER_COUNT) && dtype != LK_F64))
    return lk__err(LK_EINVAL,
                   "plugin %s: buffer \"%s\": flags %#x (a count, "
                   "LK_BUFFER_COUNT, is f64; no other flag exists)",
                   host->inst->label, name ? name : "", flags);
  int rc = lk__tensors_add(ts, host->inst->name, host->inst, name, dtype, ndim,
                           shape, false, out);
  return rc ? rc : lk__tensors_mark_buffer(ts, ts->n_states - 1, flags);
}

int lk_host_add_layer(lk_host *host, const char *name, const char *type,
                      size_t ndim, const size_t *out) {
  if (host->env->tensors.sealed)
    return lk__err(LK_ESTATE,
                   "plugin %s: layer \"%s\" declared after setup (declare "
                   "layers in create)",
                   host->inst->label, name ? name : "");
  return lk__model_layers_add(&host->env->layers, host->inst->label, name, type,
                              ndim, out);
}

/* Whether SECTION is the run's own or a plugin instance's. */
static bool owned_section(const lk__env *env, const char *section) {
  if (!strcmp(section, "loop") || !strcmp(section, "plugins"))
    return true;
  for (size_t k = 0; k < env->reg.n; k++)
    if (!strcmp(env->reg.all[k]->name, section))
      return true;
  return false;
}

int lk_host_section_value(lk_host *host, const char *section, const char *key,
                          const char **value, const char **where) {
  lk__env *env = host->env;
  if (env->tensors.sealed || !env->src_cfg)
    return lk__err(LK_ESTATE,
                   "plugin %s: lk_host_section_value is only for create",
                   host->inst->label);
  if (!section || !*section || !key || !*key || !value)
    return lk__err(LK_EINVAL,
                   "plugin %s: lk_host_section_value needs a section, a key "
                   "and somewhere to put the value",
                   host->inst->label);
  if (owned_section(env, section))
    return lk__err(LK_EINVAL,
                   "plugin %s: section [%s] is %s, not one to read as its own",
                   host->inst->label, section,
                   strcmp(section, "loop") && strcmp(section, "plugins")
                       ? "a plugin's options"
                       : "the run's");
  const lk_config_entry *e = lk_config_find(env->src_cfg, section, key);
  if (!e)
    return lk__err(LK_ENOTFOUND, "no key %s in section [%s]", key, section);
  int rc = lk__claims_add(&env->claims, section, key);
  if (rc != 0)
    return rc;
  *value = e->value;
  if (where)
    *where = e->where;
  return 0;
}

const lk_layer_type *lk_host_find_layer(lk_host *host, const char *name,
                                        size_t len) {
  return lk__layers_find(host && host->env ? &host->env->reg : NULL, name, len);
}

int lk_host_parse_layer(lk_host *host, lk_layer *l, const char *text,
                        size_t len) {
  if (!l || !text)
    return lk__err(LK_EINVAL, "lk_host_parse_layer: NULL argument");
  const char *end = text + len, *p = text;
  while (p < end && isspace((unsigned char)*p))
    p++;
  const char *e = p;
  while (e < end && (isalnum((unsigned char)*e) || *e == '_'))
    e++;
  const lk_layer_type *t = lk_host_find_layer(host, p, (size_t)(e - p));
  if (t)
    return lk_layer_parse_as(l, t, text, len);
  char known[1024];
  memset(l, 0, sizeof *l);
  return lk__err(LK_ECONFIG, "unknown layer %.*s; expected one of %s",
                 (int)(e - p), p,
                 lk__layers_names(host && host->env ? &host->env->reg : NULL,
                                  known, sizeof known));
}

int lk_host_add_param_states(lk_host *host, const char *prefix, lk_tensor **out,
                             size_t n) {
  lk__tensors *ts = &host->env->tensors;
  size_t mine;
  lk_tensor *const *params = lk_host_params(host, &mine);
  if (!prefix || !*prefix || !out || n > mine)
    return lk__err(LK_EINVAL,
                   "plugin %s: lk_host_add_param_states(\"%s\", %zu): it has "
                   "%zu parameters",
                   host->inst->label, prefix ? prefix : "(null)", n, mine);
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *p = params[i];
    char *name = lk__asprintf("%s.%s", prefix, p->name);
    if (!name)
      return lk__err(LK_ENOMEM, "out of memory");
    int rc = lk__tensors_add(ts, host->inst->name, host->inst, name, p->dtype,
                             p->ndim, p->shape, false, &out[i]);
    free(name);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* An optimizer of the run sees the parameters it steps (a group's, or
 * those its params select); every other plugin all of them. */
lk_tensor *const *lk_host_params(lk_host *host, size_t *n) {
  const lk__instance *in = host->inst;
  if (in && in->has_own_params) {
    *n = in->n_own_params;
    return in->own_params;
  }
  *n = host->env->tensors.n_params;
  return host->env->tensors.params;
}

lk_tensor *const *lk_host_states(lk_host *host, size_t *n) {
  *n = host->env->tensors.n_states;
  return host->env->tensors.states;
}

int lk_state_check(lk_host *host, const lk_tensor *t, double min, double max,
                   bool integer) {
  const char *who = host && host->inst ? host->inst->label : "host";
  if (!t || !t->data)
    return lk__err(LK_EINVAL, "plugin %s: lk_state_check of no tensor", who);
  for (size_t i = 0; i < t->numel; i++) {
    double v = lk__element(t->dtype, t->data, i);
    if (v >= min && v <= max && (!integer || v == floor(v)))
      continue;
    char range[96];
    snprintf(range, sizeof range, "%s in [%.17g, %.17g]",
             integer ? "a whole number" : "a number", min, max);
    return lk__err(LK_EFORMAT, "state %s[%zu] = %.17g: expected %s", t->name, i,
                   v, range);
  }
  return 0;
}

/* ---- processes and randomness ------------------------------------------- */

int lk_host_rank(lk_host *host) {
  return host->env->rank;
}

int lk_host_world_size(lk_host *host) {
  return host->env->world;
}

lk_rng *lk_host_rng(lk_host *host) {
  return &host->env->rng;
}

uint64_t lk_host_seed(lk_host *host) {
  return host->env->seed;
}

int lk_host_threads(lk_host *host) {
  return host->env->threads > 0 ? host->env->threads : 1;
}

/* ---- the data ----------------------------------------------------------- */

/* "x f32 [1, 28, 28], y i32 [] (10 classes)": the shape as declared,
 * dimensions past LK_MAX_DIMS and unknown dtypes included. */
static const char *sample_text(const lk_sample_shape *s, char *buf,
                               size_t len) {
  char x[LK_MAX_DIMS * 22 + 3], y[LK_MAX_DIMS * 22 + 3], xt[16], yt[16];
  const char *xn = lk_dtype_name(s->x_dtype), *yn = lk_dtype_name(s->y_dtype);
  snprintf(xt, sizeof xt, "dtype %d", (int)s->x_dtype);
  snprintf(yt, sizeof yt, "dtype %d", (int)s->y_dtype);
  if (s->x_ndim > LK_MAX_DIMS)
    snprintf(x, sizeof x, "of %zu dimensions", s->x_ndim);
  else
    lk__shape_text(s->x_shape, s->x_ndim, x, sizeof x);
  if (s->y_ndim > LK_MAX_DIMS)
    snprintf(y, sizeof y, "of %zu dimensions", s->y_ndim);
  else
    lk__shape_text(s->y_shape, s->y_ndim, y, sizeof y);
  if (s->y_dtype == 0)
    snprintf(buf, len, "x %s %s, no y", xn ? xn : xt, x);
  else
    snprintf(buf, len, "x %s %s, y %s %s", xn ? xn : xt, x, yn ? yn : yt, y);
  if (s->n_classes > 0)
    snprintf(buf + strlen(buf), len - strlen(buf), " (%zu classes)",
             s->n_classes);
  return buf;
}

/* Why a data plugin's sample shape cannot be (NULL: it can): a model
 * multiplies its sizes, and a product that wraps sizes it wrong. */
static const char *impossible(const lk_sample_shape *s) {
  if (s->x_ndim > LK_MAX_DIMS || s->y_ndim > LK_MAX_DIMS)
    return "more than " LK__STRING(LK_MAX_DIMS) " dimensions";
  if (lk_dtype_size(s->x_dtype) == 0 ||
      (s->y_dtype != 0 && lk_dtype_size(s->y_dtype) == 0))
    return "an unknown dtype";
  if (s->n_classes > 0 && (s->y_dtype != LK_I32 || s->y_ndim > 1))
    return "classes, but y is not i32 labels of 0 or 1 dimension";
  for (size_t i = 0; i < s->x_ndim; i++)
    if (s->x_shape[i] == 0)
      return "a dimension of 0 in x";
  for (size_t i = 0; s->y_dtype && i < s->y_ndim; i++)
    if (s->y_shape[i] == 0)
      return "a dimension of 0 in y";
  size_t n;
  if (!lk_shape_numel(s->x_shape, s->x_ndim, &n) ||
      !lk_size_mul(n, lk_dtype_size(s->x_dtype), &n))
    return "a sample of x holds more bytes than a size_t counts";
  if (s->y_dtype && (!lk_shape_numel(s->y_shape, s->y_ndim, &n) ||
                     !lk_size_mul(n, lk_dtype_size(s->y_dtype), &n)))
    return "a sample of y holds more bytes than a size_t counts";
  return NULL;
}

int lk_host_data_shape(lk_host *host, lk_sample_shape *out) {
  const lk__instance *d = host->env->reg.role[LK__KIND_DATA];
  if (!out)
    return lk__err(LK_EINVAL, "plugin %s: lk_host_data_shape: OUT is NULL",
                   host->inst->label);
  memset(out, 0, sizeof *out);
  if (!d && host->env->sample_shape) {
    *out = *host->env->sample_shape;
    return 0;
  }
  int (*shape)(void *, lk_sample_shape *) = NULL;
  void (*entry)(void) =
      d ? lk__entry_of(d, LK__KIND_DATA, LK__ENTRY(lk_data_ops, shape)) : NULL;
  memcpy(&shape, &entry, sizeof shape);
  if (!d)
    return lk__err(LK_ENOTFOUND, "plugin %s: this run has no data plugin",
                   host->inst->label);
  if (!shape)
    return lk__err(LK_ENOTFOUND,
                   "plugin %s: data plugin %s does not say what its samples "
                   "look like",
                   host->inst->label, d->name);
  if (!d->created)
    return lk__err(LK_ESTATE, "plugin %s: data plugin %s is not created yet",
                   host->inst->label, d->name);
  uint64_t mark = lk__err_mark();
  int rc = shape(d->self, out);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "shape of data plugin %s", d->name);
  const char *why = impossible(out);
  if (why) {
    char text[256];
    return lk__err(LK_EPLUGIN,
                   "shape of data plugin %s: an impossible sample shape, %s: "
                   "%s",
                   d->name, sample_text(out, text, sizeof text), why);
  }
  return 0;
}

int lk_host_data_batch_size(lk_host *host, size_t *out, const char **where) {
  const lk__instance *d = host->env->reg.role[LK__KIND_DATA];
  if (!out)
    return lk__err(LK_EINVAL, "plugin %s: lk_host_data_batch_size: OUT is NULL",
                   host->inst->label);
  *out = 0;
  if (where)
    *where = NULL;
  if (!d)
    return lk__err(LK_ENOTFOUND, "plugin %s: this run has no data plugin",
                   host->inst->label);
  const lk_option *o = d->desc->options;
  while (o && o->name && strcmp(o->name, "batch_size") != 0)
    o++;
  int64_t v = o && o->name && o->type == LK_OPT_INT
                  ? lk_opt_int(d->opts, "batch_size")
                  : 0;
  if (v < 1)
    return lk__err(LK_ENOTFOUND,
                   "plugin %s: data plugin %s has no integer option "
                   "batch_size",
                   host->inst->label, d->name);
  *out = (size_t)v;
  if (where)
    *where = lk_opt_where(d->opts, "batch_size");
  return 0;
}

/* ---- learning rates and wrapped optimizers ------------------------------ */

/* The optimizer a plugin's lk_host_lr and lk_host_momentum reach: the one
 * its instance is bound to (a scheduler created for another), else the
 * run's. */
static lk__instance *driven_optimizer(const lk_host *host) {
  lk__instance *bound = host->inst ? host->inst->driven : NULL;
  return bound ? bound : host->env->reg.role[LK__KIND_OPTIMIZER];
}

/* An optimizer's rate is read only once it exists: a plugin created
 * before it (one that is also the model) gets NaN, not a call on NULL. */
double lk_host_lr(lk_host *host) {
  const lk__instance *opt = driven_optimizer(host);
  const lk_optimizer_ops *ops = opt && opt->created ? lk__lr_ops(opt) : NULL;
  return ops ? ops->get_lr(opt->self) : NAN;
}

/* Why OPT cannot take a new value of WHAT yet, or 0. */
static int check_settable(const lk_host *host, const lk__instance *opt,
                          bool has, const char *what, double value) {
  if (!has)
    return lk__err(LK_ESTATE, "plugin %s: the optimizer has no %s to set",
                   host->inst->label, what);
  if (!isfinite(value) || value < 0)
    return lk__err(LK_EINVAL, "plugin %s: %s %g is not >= 0", host->inst->label,
                   what, value);
  if (!opt->created)
    return lk__err(LK_ESTATE,
                   "plugin %s: the optimizer is not created yet (schedulers "
                   "are created after it)",
                   host->inst->label);
  return 0;
}

int lk_host_set_lr(lk_host *host, double lr) {
  const lk__instance *opt = driven_optimizer(host);
  const lk_optimizer_ops *ops = opt ? lk__lr_ops(opt) : NULL;
  int rc = check_settable(host, opt, ops != NULL, "learning rate", lr);
  if (rc == 0)
    ops->set_lr(opt->self, lr);
  return rc;
}

double lk_host_momentum(lk_host *host) {
  const lk__instance *opt = driven_optimizer(host);
  const lk_optimizer_ops *ops =
      opt && opt->created ? lk__momentum_ops(opt) : NULL;
  return ops ? ops->get_momentum(opt->self) : NAN;
}

int lk_host_set_momentum(lk_host *host, double momentum) {
  const lk__instance *opt = driven_optimizer(host);
  const lk_optimizer_ops *ops = opt ? lk__momentum_ops(opt) : NULL;
  int rc = check_settable(host, opt, ops != NULL, "momentum", momentum);
  if (rc != 0)
    return rc;
  /* The optimizer may refuse a value outside its option's range (beta1 >=
   * 1), or fail to make the buffers the momentum needs. */
  uint64_t mark = lk__err_mark();
  if (!lk__abi_has(opt->minor, LK__ABI_MOMENTUM_STATUS)) { /* ABI 1.5's */
    ((void (*)(void *, double))(void (*)(void))ops->set_momentum)(opt->self,
                                                                  momentum);
    return 0;
  }
  rc = ops->set_momentum(opt->self, momentum);
  return rc ? lk__entry_failed(rc, mark, "set_momentum of optimizer %s",
                               opt->label)
            : 0;
}

double lk_host_initial_lr(lk_host *host) {
  lk__instance *opt = driven_optimizer(host);
  if (opt && !opt->has_initial_lr) {
    double lr = lk_host_lr(host);
    if (!isfinite(lr))
      return NAN;
    opt->initial_lr = lr;
    opt->has_initial_lr = true;
  }
  return opt ? opt->initial_lr : NAN;
}

int lk_host_set_initial_lr(lk_host *host, double lr) {
  lk__instance *opt = driven_optimizer(host);
  int rc =
      check_settable(host, opt, opt && lk__lr_ops(opt), "initial rate", lr);
  if (rc == 0) {
    opt->initial_lr = lr;
    opt->has_initial_lr = true;
  }
  return rc;
}

int lk_host_optimizer_new(lk_host *host, const char *name, lk_optimizer **out) {
  lk__env *env = host->env;
  if (env->tensors.sealed || !env->src_cfg)
    return lk__err(LK_ESTATE,
                   "plugin %s: lk_host_optimizer_new is only for create",
                   host->inst->label);
  char where[256];
  snprintf(where, sizeof where, "option of plugin %s", host->inst->label);
  lk__instance *in;
  int rc = lk__registry_find(env, name, where, &in);
  if (rc != 0)
    return rc;
  if (in == host->inst ||
      !lk__kind_has(in->desc, &lk__kinds[LK__KIND_OPTIMIZER]))
    return lk__err(LK_EKIND, "plugin %s: %s (%s) cannot be its optimizer",
                   host->inst->label, name, lk_plugin_path(in->plugin));
  /* A wrapped optimizer (sam's base) steps what its wrapper steps. */
  if (!in->created && host->inst->has_own_params && !in->has_own_params) {
    size_t n = host->inst->n_own_params;
    if (!(in->own_params = malloc((n ? n : 1) * sizeof *in->own_params)))
      return lk__err(LK_ENOMEM, "out of memory");
    memcpy(in->own_params, host->inst->own_params, n * sizeof *in->own_params);
    in->n_own_params = n;
    in->has_own_params = true;
  }
  if ((rc = lk__registry_create(env, in)) != 0)
    return rc;
  *out = (lk_optimizer *)in;
  return 0;
}

/* In manual optimization every optimizer step the step plugin takes is a
 * step of the run, as Lightning's global_step counts the steps of all
 * optimizers; so max_steps ends a run whose plugin steps only optimizers of
 * its own. A step inside another optimizer's (sam's base) is part of that
 * one. */
int lk_optimizer_step(lk_optimizer *opt, lk_tensor *const *params, size_t n,
                      lk_closure_fn closure) {
  if (lk__is_run_optimizer(opt))
    return lk__manual_step(opt, params, n, closure);
  lk__instance *in = (lk__instance *)opt;
  lk_run *run = in->host.env->run;
  bool outer = run && run->chain.in_optimizer_step;
  bool counts =
      run && run->loop.manual && run->chain.in_training_step && !outer;
  if (run)
    run->chain.in_optimizer_step = true;
  uint64_t mark = lk__err_mark();
  int rc = in->desc->optimizer->step(in->self, params, n, closure);
  if (run)
    run->chain.in_optimizer_step = outer;
  if (rc == 0 && counts)
    run->state.progress.global_step++;
  return rc ? lk__entry_failed(rc, mark, "step of optimizer %s", in->name) : 0;
}

double lk_optimizer_lr(lk_optimizer *opt) {
  const lk__instance *in = (const lk__instance *)opt;
  const lk_optimizer_ops *ops = lk__lr_ops(in);
  return ops ? ops->get_lr(in->self) : NAN;
}

void lk_optimizer_set_lr(lk_optimizer *opt, double lr) {
  const lk__instance *in = (const lk__instance *)opt;
  const lk_optimizer_ops *ops = lk__lr_ops(in);
  if (ops)
    ops->set_lr(in->self, lr);
}

/* ---- schedulers made of schedulers -------------------------------------- */

/* Where the config names child NAME of PARENT: the line of the parent's
 * option whose value holds it (its schedulers list). */
static void child_where(const lk_config *cfg, const lk__instance *parent,
                        const char *name, char *buf, size_t len) {
  for (size_t i = 0; i < lk__config_count(cfg); i++) {
    const lk_config_entry *e = lk__config_at(cfg, i);
    if (!strcmp(e->section, parent->name) && strstr(e->value, name)) {
      snprintf(buf, len, "%s: option %s.%s", e->where, parent->name, e->key);
      return;
    }
  }
  snprintf(buf, len, "option of plugin %s", parent->label);
}

/* The [plugins] role IN plays, or NULL. */
static const char *role_of(const lk__instance *in) {
  for (size_t k = 0; k < LK__N_KINDS; k++)
    if (in->roles & (1u << k))
      return lk__kinds[k].role;
  return NULL;
}

/* A child steps when its parent does: it takes the parent's interval
 * unless its section gives one, which must then be the same. */
static int inherit_interval(lk__env *env, const lk__instance *parent,
                            lk__instance *child) {
  /* A group's copy takes the options of the instance it copies. */
  const char *section = child->original ? child->original->name : child->name;
  int rc = child->opts ? 0
                       : lk__options_parse(child->desc, section, env->src_cfg,
                                           &child->opts);
  const char *mine = lk_opt_string(parent->opts, "interval");
  const char *its = rc == 0 ? lk_opt_string(child->opts, "interval") : NULL;
  if (rc != 0 || !mine || !its)
    return rc; /* one of them has no interval to agree on */
  const lk_config_entry *e = lk_config_find(env->src_cfg, section, "interval");
  if (e)
    return strcmp(its, mine) == 0
               ? 0
               : lk__err(LK_ECONFIG,
                         "%s: option %s.interval = %s: scheduler %s steps "
                         "when its parent %s does, at interval = %s; leave "
                         "the line out or make it %s",
                         e->where, child->name, its, child->label,
                         parent->label, mine, mine);
  char from[512];
  snprintf(from, sizeof from, "%s.interval (%s), its parent's", parent->name,
           lk_opt_where(parent->opts, "interval"));
  return lk__options_replace(child->desc, child->opts, "interval", mine, from);
}

/* A group's copy of a composite scheduler (its parent, a replica) creates
 * copies of its original's children in the same order, named CHILD.GROUP
 * and driving the group's rate. */
static int copy_child(lk__env *env, lk__instance *parent, lk__instance **out) {
  size_t k = parent->n_children++, seen = 0;
  const lk__instance *orig = NULL;
  for (size_t i = 0; i < env->reg.n && !orig; i++)
    if (env->reg.all[i]->parent == parent->original && seen++ == k)
      orig = env->reg.all[i];
  if (!orig)
    return lk__err(LK_ESTATE,
                   "plugin %s: its copy for group %s created a scheduler its "
                   "original did not",
                   parent->original->label, parent->suffix);
  char *spec =
      lk__asprintf("%s.%s:%s", orig->name, parent->suffix, orig->given);
  if (!spec)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = lk__registry_clone(env, orig, spec, out);
  free(spec);
  if (rc == 0) {
    (*out)->replica = true;
    (*out)->original = (lk__instance *)orig;
    (*out)->suffix = parent->suffix;
    (*out)->parent = parent;
    (*out)->driven = parent->driven;
    rc = inherit_interval(env, parent, *out);
  }
  return rc ? rc : lk__registry_create(env, *out);
}

int lk_host_scheduler_new(lk_host *host, const char *name, lk_scheduler **out) {
  lk__env *env = host->env;
  lk__instance *parent = host->inst, *in;
  if (env->tensors.sealed || !env->src_cfg)
    return lk__err(LK_ESTATE,
                   "plugin %s: lk_host_scheduler_new is only for create",
                   parent->label);
  if (!name || !*name || !out)
    return lk__err(LK_EINVAL, "plugin %s: lk_host_scheduler_new of no name",
                   parent->label);
  if (parent->replica) {
    int rc = copy_child(env, parent, &in);
    if (rc == 0)
      *out = (lk_scheduler *)in;
    return rc;
  }
  char where[512];
  child_where(env->src_cfg, parent, name, where, sizeof where);
  parent->n_children++;
  int rc = lk__registry_find(env, name, where, &in);
  if (rc != 0)
    return rc;
  char kinds[128];
  if (in == parent)
    return lk__err(LK_ECONFIG, "%s: %s cannot be a scheduler of itself", where,
                   name);
  if (!lk__kind_has(in->desc, &lk__kinds[LK__KIND_SCHEDULER]))
    return lk__err(
        LK_EKIND, "%s: %s (%s) cannot be a scheduler of %s: it implements %s",
        where, name, lk_plugin_path(in->plugin), parent->label,
        *lk_plugin_kinds(in->plugin, kinds, sizeof kinds) ? kinds : "no kind");
  const char *role = role_of(in);
  if (in->parent || in->created || role)
    return lk__err(LK_ECONFIG,
                   "%s: scheduler %s is used twice: it is already %s%s%s; "
                   "give each instance its own name (NAME:PLUGIN)",
                   where, in->label,
                   in->parent ? "a scheduler of " : "the [plugins] ",
                   in->parent ? in->parent->label
                   : role     ? role
                              : "",
                   in->parent || role ? "" : " (created)");
  in->parent = parent;
  in->driven = parent->driven;
  if ((rc = inherit_interval(env, parent, in)) != 0 ||
      (rc = lk__registry_create(env, in)) != 0)
    return rc;
  *out = (lk_scheduler *)in;
  return 0;
}

int lk_scheduler_step(lk_scheduler *s, lk_interval when,
                      const lk_metric *metrics, size_t n) {
  lk__instance *in = (lk__instance *)s;
  uint64_t mark = lk__err_mark();
  int rc = in->desc->scheduler->step(in->self, when, metrics, n);
  return rc ? lk__entry_failed(rc, mark, "step of scheduler %s", in->label) : 0;
}

/* restart of IN, or NULL (a plugin built before ABI 1.5, or one that
 * cannot start again). */
static int (*restart_of(const lk__instance *in))(void *, bool) {
  int (*fn)(void *, bool) = NULL;
  void (*entry)(void) = lk__entry_of(in, LK__KIND_SCHEDULER,
                                     LK__ENTRY(lk_scheduler_ops, restart));
  memcpy(&fn, &entry, sizeof fn);
  return fn;
}

bool lk_scheduler_can_restart(const lk_scheduler *s) {
  return restart_of((const lk__instance *)s) != NULL;
}

int lk_scheduler_restart(lk_scheduler *s, bool closed_form) {
  lk__instance *in = (lk__instance *)s;
  int (*restart)(void *, bool) = restart_of(in);
  if (!restart)
    return lk__err(LK_EKIND, "scheduler %s (%s) cannot restart", in->label,
                   lk_plugin_path(in->plugin));
  uint64_t mark = lk__err_mark();
  int rc = restart(in->self, closed_form);
  return rc ? lk__entry_failed(rc, mark, "restart of scheduler %s", in->label)
            : 0;
}

const lk_tensor *lk_scheduler_state(const lk_scheduler *s, const char *name) {
  const lk__instance *in = (const lk__instance *)s;
  if (!in || !name)
    return NULL;
  const lk__tensors *ts = &in->host.env->tensors;
  size_t len = strlen(in->name);
  for (size_t i = 0; i < ts->n_states; i++) {
    const char *full = ts->states[i]->name; /* INSTANCE.NAME */
    if (strncmp(full, in->name, len) == 0 && full[len] == '.' &&
        strcmp(full + len + 1, name) == 0)
      return ts->states[i];
  }
  return NULL;
}

int lk_host_evaluate(lk_host *host, const lk_batch *batch, double *loss) {
  const lk__instance *step = host->env->reg.role[LK__KIND_STEP];
  if (!step || !step->created)
    return lk__err(LK_ESTATE, "plugin %s: there is no step to evaluate yet",
                   host->inst->label);
  lk_step_result r = {0};
  uint64_t mark = lk__err_mark();
  int rc = step->desc->step->training_step(step->self, batch, &r);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "training_step of plugin %s", step->name);
  *loss = r.has_loss ? r.loss : NAN;
  return 0;
}

/* ---- the loop: metrics, progress, checkpoints, stopping ----------------- */

int lk_host_metric(lk_host *host, const char *name, double *value) {
  const lk_run *run = host->env->run;
  const lk__loop_state *st = run ? &run->state : NULL;
  for (size_t i = 0; st && name && i < st->n_latest; i++)
    if (strcmp(st->latest[i].name, name) == 0) {
      *value = st->latest[i].value;
      return 0;
    }
  return lk__err(LK_ENOTFOUND, "plugin %s: no metric \"%s\" logged yet",
                 host->inst->label, name ? name : "(null)");
}

int lk_host_log_metric(lk_host *host, const char *name, double value) {
  lk_run *run = host->env->run;
  if (!run)
    return lk__err(LK_ESTATE, "plugin %s: no training run to log %s in",
                   host->inst->label, name ? name : "(null)");
  return lk__rows_extra(run, host->inst->label, name, value);
}

int lk_host_reduce_sum(lk_host *host, double *values, size_t n) {
  lk_run *run = host->env->run;
  if (n && !values)
    return lk__err(LK_EINVAL, "plugin %s: lk_host_reduce_sum of no values",
                   host->inst->label);
  return run ? lk__reduce_sum(run, values, n) : 0; /* one process */
}

void lk_host_progress(lk_host *host, uint64_t *epoch, uint64_t *global_step) {
  const lk_run *run = host->env->run;
  if (epoch)
    *epoch = run ? run->state.progress.epoch : 0;
  if (global_step)
    *global_step = run ? run->state.progress.global_step : 0;
}

int lk_host_save_checkpoint(lk_host *host, const char *file) {
  lk_run *run = host->env->run;
  if (!run)
    return lk__err(LK_ESTATE, "plugin %s: no run directory to save %s in",
                   host->inst->label, file ? file : "(null)");
  return lk__rundir_request(run, host->inst->label, NULL, file);
}

int lk_host_save_checkpoint_in(lk_host *host, const char *dir,
                               const char *file) {
  lk_run *run = host->env->run;
  if (!run)
    return lk__err(LK_ESTATE, "plugin %s: no run directory to save %s in",
                   host->inst->label, file ? file : "(null)");
  return lk__rundir_request(run, host->inst->label, dir, file);
}

int lk_host_keep_checkpoints(lk_host *host, const char *dir, bool best) {
  lk__instance *in = host->inst;
  if (in->created)
    return lk__err(LK_ESTATE,
                   "plugin %s: lk_host_keep_checkpoints after its create",
                   in->label);
  if (dir && !*dir)
    return lk__err(LK_EINVAL, "plugin %s: lk_host_keep_checkpoints in \"\"",
                   in->label);
  char *copy = dir ? lk__strdup(dir) : NULL;
  if (dir && !copy)
    return lk__err(LK_ENOMEM, "out of memory");
  free(in->keeps.dir);
  in->keeps.dir = copy;
  in->keeps.declared = in->keeps.files = true;
  in->keeps.best = best;
  return 0;
}

const char *lk_host_name(lk_host *host) {
  return host->inst->name;
}

bool lk_host_plays(lk_host *host, const char *role) {
  const lk__instance *in = host->inst;
  const lk__registry *reg = &host->env->reg;
  const lk__kind *k = lk__kind_of_role(role);
  if (!k)
    return false;
  if (k == &lk__kinds[LK__KIND_SCHEDULER] && in->parent)
    return true;
  (void)reg;
  return (in->roles & (1u << (k - lk__kinds))) != 0;
}

const char *lk_host_run_dir(lk_host *host) {
  return host->env->run ? host->env->run->rd.dir : NULL;
}

const char *lk_host_previous_run_dir(lk_host *host) {
  const lk_run *run = host->env->run;
  return run && !run->rd.in_place ? run->rd.source : NULL;
}

void lk_host_request_stop(lk_host *host) {
  if (host->env->run)
    host->env->run->state.stopped = true;
}
