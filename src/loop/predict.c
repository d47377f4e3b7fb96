/* Using a trained model outside training (loopkit generate, test,
 * validate, predict): a checkpoint's parameters and the model's states
 * loaded into a run its config has built, kept aside and put back (the
 * test on best.ckpt at the end of training), and the step plugin's
 * predict_step (ABI 1.4), on one batch or on every batch of a split. */
#include <stdlib.h>
#include <string.h>

#include "loop.h"

static void shape_text(const lk_tensor *t, char *buf, size_t len) {
  const char *dt = lk_dtype_name(t->dtype);
  size_t used = (size_t)snprintf(buf, len, "%s[", dt ? dt : "?");
  for (size_t i = 0; i < t->ndim && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%zu", i ? "," : "",
                             t->shape[i]);
  if (used < len)
    snprintf(buf + used, len - used, "]");
}

static bool same_shape(const lk_tensor *a, const lk_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim)
    return false;
  for (size_t i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i])
      return false;
  return true;
}

/* Whether tensor NAME is one of the model's states (batch norm's running
 * statistics): a state of the step's or the backward's plugin, named
 * PLUGIN.NAME. The others (the optimizer's, callbacks') are not the
 * model's, and a prediction never reads them. */
static bool env_model_state(const lk__env *env, const char *name) {
  const lk__instance *who[2] = {env->reg.role[LK__KIND_STEP],
                                env->reg.role[LK__KIND_BACKWARD]};
  for (int i = 0; i < 2; i++) {
    size_t len = who[i] ? strlen(who[i]->name) : 0;
    if (len && strncmp(name, who[i]->name, len) == 0 && name[len] == '.')
      return true;
  }
  return false;
}

bool lk__model_state(const lk_run *run, const char *name) {
  return env_model_state(&run->env, name);
}

/* The model's tensors of ENV: every parameter, then the model's
 * states. *N gets their count; NULL when out of memory. */
static lk_tensor **model_tensors(const lk__env *env, size_t *n) {
  const lk__tensors *ts = &env->tensors;
  lk_tensor **all = calloc(ts->n_params + ts->n_states + 1, sizeof *all);
  if (!all)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < ts->n_params; i++)
    all[k++] = ts->params[i];
  for (size_t i = 0; i < ts->n_states; i++)
    if (env_model_state(env, ts->states[i]->name))
      all[k++] = ts->states[i];
  *n = k;
  return all;
}

/* CK's tensor of the kind and name of T, or NULL. */
static const lk_tensor *find(const lk__ckpt *ck, bool param, const char *name) {
  for (size_t k = 0; k < ck->n; k++)
    if ((ck->kinds[k] == LK__CKPT_PARAM) == param &&
        strcmp(ck->tensors[k].name, name) == 0)
      return &ck->tensors[k];
  return NULL;
}

/* The config checkpoint PATH was trained with, for a model that does not
 * fit it: "; it was trained with RUN/config.ini" (malloc'd) when PATH is
 * in a run directory, else NULL (the config is not known). */
static char *trained_with(const char *path) {
  char *dir = NULL;
  char *note = lk__ckpt_run_dir(path, &dir) == 0 && dir
                   ? lk__asprintf("; it was trained with %s/config.ini", dir)
                   : NULL;
  free(dir);
  return note;
}

/* The model's N tensors MINE (N_PARAMS parameters first) from CK, which
 * must hold each one (by name, dtype and shape) and no other parameter or
 * state of the model. MATCH[i]: CK's tensor for MINE[i]. The first of the
 * model's tensors (in its order) that differs is named, with both shapes,
 * and the config the checkpoint was trained with (TRAINED, "" when not
 * known), which is the one that fits it. */
static int match(const lk__env *env, const char *path, const char *trained,
                 const lk__ckpt *ck, lk_tensor *const *mine, size_t n,
                 size_t n_params, const lk_tensor **match) {
  const char *step = env->reg.role[LK__KIND_STEP]->label;
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *p = mine[i];
    const char *what = i < n_params ? "parameter" : "state";
    match[i] = find(ck, i < n_params, p->name);
    char a[96], b[96];
    shape_text(p, b, sizeof b);
    if (!match[i])
      return lk__err(LK_EFORMAT,
                     "%s has no %s %s, which this config's model (%s) has "
                     "as %s: is it a checkpoint of another model?%s",
                     path, what, p->name, step, b, trained);
    if (!same_shape(match[i], p)) {
      shape_text(match[i], a, sizeof a);
      return lk__err(LK_EFORMAT,
                     "%s: %s %s is %s there but %s in this config's model "
                     "(%s)%s",
                     path, what, p->name, a, b, step, trained);
    }
  }
  for (size_t k = 0; k < ck->n; k++) {
    bool param = ck->kinds[k] == LK__CKPT_PARAM;
    if (!param && !env_model_state(env, ck->tensors[k].name))
      continue;
    bool known = false;
    for (size_t i = 0; i < n && !known; i++)
      known = match[i] == &ck->tensors[k];
    if (!known) {
      char a[96];
      shape_text(&ck->tensors[k], a, sizeof a);
      return lk__err(LK_EFORMAT,
                     "%s holds %s %s, which this config's model (%s) does "
                     "not have (%s there): is it a checkpoint of another "
                     "model?%s",
                     path, param ? "parameter" : "state", ck->tensors[k].name,
                     step, a, trained);
    }
  }
  return 0;
}

/* The model's plugins check the values they now hold, as after a resume. */
static int check_model_state(const lk__env *env, const char *path) {
  const lk__instance *who[2] = {env->reg.role[LK__KIND_STEP],
                                env->reg.role[LK__KIND_BACKWARD]};
  int rc = 0;
  for (int i = 0; i < 2 && rc == 0; i++)
    if (who[i] && !(i == 1 && who[i] == who[0]))
      rc = lk__check_state(who[i], path);
  return rc;
}

int lk__env_load_params(lk__env *env, const char *path) {
  lk__ckpt *ck;
  int rc = lk__ckpt_read(path, &ck, NULL);
  if (rc != 0)
    return rc;
  size_t n = 0;
  lk_tensor **mine = model_tensors(env, &n);
  const lk_tensor **found = calloc(n + 1, sizeof *found);
  char *note = trained_with(path);
  rc = mine && found ? match(env, path, note ? note : "", ck, mine, n,
                             env->tensors.n_params, found)
                     : lk__err(LK_ENOMEM, "out of memory");
  free(note);
  for (size_t i = 0; rc == 0 && i < n; i++)
    memcpy(mine[i]->data, found[i]->data,
           mine[i]->numel * lk_dtype_size(mine[i]->dtype));
  if (rc == 0)
    rc = check_model_state(env, path);
  free(found);
  free(mine);
  lk__ckpt_free(ck);
  return rc;
}

int lk_run_load_params(lk_run *run, const char *path) {
  return lk__env_load_params(&run->env, path);
}

/* ---- the model's tensors kept aside (the test on best.ckpt) ------------- */

struct lk__model_copy {
  lk_tensor **tensors; /* the run's, n */
  void **data;         /* their values when kept */
  size_t n;
};

void lk__model_copy_free(lk__model_copy *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->n; i++)
    free(c->data[i]);
  free(c->data);
  free(c->tensors);
  free(c);
}

int lk__model_keep(const lk_run *run, lk__model_copy **out) {
  lk__model_copy *c = calloc(1, sizeof *c);
  if (!c || !(c->tensors = model_tensors(&run->env, &c->n)) ||
      !(c->data = calloc(c->n + 1, sizeof *c->data))) {
    if (c)
      c->n = 0;
    lk__model_copy_free(c);
    return lk__err(LK_ENOMEM, "out of memory keeping the model's tensors");
  }
  for (size_t i = 0; i < c->n; i++) {
    size_t bytes = c->tensors[i]->numel * lk_dtype_size(c->tensors[i]->dtype);
    if (!(c->data[i] = malloc(bytes ? bytes : 1))) {
      lk__model_copy_free(c);
      return lk__err(LK_ENOMEM, "out of memory keeping the model's tensors");
    }
    memcpy(c->data[i], c->tensors[i]->data, bytes);
  }
  *out = c;
  return 0;
}

void lk__model_restore(const lk__model_copy *c) {
  for (size_t i = 0; i < c->n; i++)
    memcpy(c->tensors[i]->data, c->data[i],
           c->tensors[i]->numel * lk_dtype_size(c->tensors[i]->dtype));
}

static void (*predict_entry(const lk_run *run))(void) {
  const lk__instance *step = lk__role(run, LK__KIND_STEP);
  return !step ? NULL
               : lk__entry_of(step, LK__KIND_STEP,
                              LK__ENTRY(lk_step_ops, predict_step));
}

int lk_run_predict(lk_run *run, const lk_batch *batch, lk_tensor *out) {
  const lk__instance *step = lk__role(run, LK__KIND_STEP);
  void (*fn)(void) = predict_entry(run);
  if (!fn)
    return lk__err(LK_EKIND,
                   "plugin %s (the step) has no predict_step (ABI 1.4): it "
                   "cannot predict",
                   step->label);
  int (*predict)(void *, const lk_batch *, lk_tensor *);
  memcpy(&predict, &fn, sizeof fn);
  *out = (lk_tensor){0};
  uint64_t mark = lk__err_mark();
  int rc = predict(step->self, batch, out);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "predict_step of plugin %s", step->label);
  /* The plugin's tensor: checked before anyone reads it. */
  size_t numel = 1;
  for (size_t i = 0; i < out->ndim && i < LK_MAX_DIMS; i++)
    numel *= out->shape[i];
  if (!out->data || lk_dtype_size(out->dtype) == 0 || out->ndim < 1 ||
      out->ndim > LK_MAX_DIMS || out->numel != numel ||
      out->shape[0] != batch->size)
    return lk__err(LK_EPLUGIN,
                   "predict_step of plugin %s gave no tensor of [%zu, ...] "
                   "values (dtype %d, %zu dimensions, numel %zu)",
                   step->label, batch->size, (int)out->dtype, out->ndim,
                   out->numel);
  return 0;
}

int lk_run_predict_split(lk_run *run, lk_split split, lk_predict_fn each,
                         void *user) {
  const lk__instance *data = lk__role(run, LK__KIND_DATA);
  if (!data)
    return lk__err(LK_ECONFIG, "the config names no data plugin: there is "
                               "no split to predict ([plugins] data)");
  if (split != LK_SPLIT_VAL && split != LK_SPLIT_TEST)
    return lk__err(LK_EINVAL, "predict: split %d is not val or test",
                   (int)split);
  size_t nb = 0;
  uint64_t mark = lk__err_mark();
  int rc = run->calls.data_epoch(data->self, split, 0, &nb);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "epoch of data plugin %s", data->name);
  for (size_t b = 0; b < nb; b++) {
    lk_batch batch = {0};
    mark = lk__err_mark();
    if ((rc = run->calls.data_batch(data->self, split, b, &batch)) != 0)
      return lk__entry_failed(rc, mark, "batch %zu of data plugin %s", b,
                              data->name);
    batch.split = split;
    batch.index = b;
    lk_tensor out;
    if ((rc = lk_run_predict(run, &batch, &out)) != 0 ||
        (rc = each(user, &batch, &out)) != 0)
      return rc;
  }
  return 0;
}
