/* Using a trained model outside training (loopkit generate): a
 * checkpoint's parameters loaded into a run its config has built, and the
 * step plugin's predict_step (ABI 1.4). */
#include <stdlib.h>
#include <string.h>

#include "run_private.h"

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

/* Every parameter of the run from CK, which must hold each one (by name,
 * dtype and shape) and no other; its state tensors are not looked at.
 * MATCH[i]: CK's tensor for the run's parameter i. */
static int match(const lk_run *run, const char *path, const lk__ckpt *ck,
                 const lk_tensor **match) {
  const lk__tensors *ts = &run->env.tensors;
  const char *step = lk__role(run, LK__KIND_STEP)->name;
  for (size_t i = 0; i < ts->n_params; i++) {
    const lk_tensor *p = ts->params[i];
    match[i] = NULL;
    for (size_t k = 0; k < ck->n && !match[i]; k++)
      if (ck->kinds[k] == LK__CKPT_PARAM &&
          strcmp(ck->tensors[k].name, p->name) == 0)
        match[i] = &ck->tensors[k];
    char a[96], b[96];
    if (!match[i])
      return lk__err(LK_EFORMAT,
                     "%s has no parameter %s, which this config's model "
                     "(%s) has: is it a checkpoint of another model?",
                     path, p->name, step);
    if (!same_shape(match[i], p)) {
      shape_text(match[i], a, sizeof a);
      shape_text(p, b, sizeof b);
      return lk__err(LK_EFORMAT,
                     "%s: parameter %s is %s there but %s in this config's "
                     "model (%s)",
                     path, p->name, a, b, step);
    }
  }
  for (size_t k = 0; k < ck->n; k++) {
    if (ck->kinds[k] != LK__CKPT_PARAM)
      continue;
    bool known = false;
    for (size_t i = 0; i < ts->n_params && !known; i++)
      known = match[i] == &ck->tensors[k];
    if (!known)
      return lk__err(LK_EFORMAT,
                     "%s holds parameter %s, which this config's model (%s) "
                     "does not have: is it a checkpoint of another model?",
                     path, ck->tensors[k].name, step);
  }
  return 0;
}

int lk_run_load_params(lk_run *run, const char *path) {
  lk__ckpt *ck;
  int rc = lk__ckpt_read(path, &ck, NULL);
  if (rc != 0)
    return rc;
  const lk__tensors *ts = &run->env.tensors;
  const lk_tensor **found =
      calloc(ts->n_params ? ts->n_params : 1, sizeof *found);
  rc =
      found ? match(run, path, ck, found) : lk__err(LK_ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < ts->n_params; i++)
    memcpy(ts->params[i]->data, found[i]->data,
           ts->params[i]->numel * lk_dtype_size(ts->params[i]->dtype));
  free(found);
  lk__ckpt_free(ck);
  return rc;
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
                   step->name);
  int (*predict)(void *, const lk_batch *, lk_tensor *);
  memcpy(&predict, &fn, sizeof fn);
  *out = (lk_tensor){0};
  uint64_t mark = lk__err_mark();
  int rc = predict(step->self, batch, out);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "predict_step of plugin %s", step->name);
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
                   step->name, batch->size, (int)out->dtype, out->ndim,
                   out->numel);
  return 0;
}
