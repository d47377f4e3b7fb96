/* The parameters and the state of a run (see tensors.h). */
#include <stdlib.h>
#include <string.h>

#include "tensors.h"

static bool name_taken(lk_tensor **list, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i]->name, name) == 0)
      return true;
  return false;
}

static void free_tensor(lk_tensor *t) {
  if (!t)
    return;
  free((char *)t->name);
  free(t->data);
  free(t->grad);
  free(t);
}

int lk__tensors_add(lk__tensors *ts, const char *who, const void *owner,
                    const char *name, lk_dtype dtype, size_t ndim,
                    const size_t *shape, bool param, lk_tensor **out) {
  const char *what = param ? "parameter" : "state";
  if (ts->sealed)
    return lk__err(
        LK_ESTATE,
        "plugin %s: %s \"%s\" added after setup (add them in create)", who,
        what, name ? name : "");
  if (!name || !*name || ndim > LK_MAX_DIMS ||
      (dtype != LK_F32 && dtype != LK_F64))
    return lk__err(LK_EINVAL,
                   "plugin %s: bad %s \"%s\": needs a name, f32 or f64, at "
                   "most %d dimensions",
                   who, what, name ? name : "", LK_MAX_DIMS);
  size_t numel, bytes;
  if (!lk_shape_numel(shape, ndim, &numel) ||
      !lk_size_mul(numel, lk_dtype_size(dtype), &bytes)) {
    char dims[LK_MAX_DIMS * 22 + 3];
    return lk__err(LK_EINVAL,
                   "plugin %s: %s \"%s\" of shape %s: more bytes than memory "
                   "can address",
                   who, what, name,
                   lk__shape_text(shape, ndim, dims, sizeof dims));
  }
  char *full = param ? lk__strdup(name) : lk__asprintf("%s.%s", who, name);
  lk_tensor *t = calloc(1, sizeof *t);
  lk_tensor ***list = param ? &ts->params : &ts->states;
  size_t *n = param ? &ts->n_params : &ts->n_states;
  lk_tensor **grown = realloc(*list, (*n + 1) * sizeof **list);
  if (grown)
    *list = grown;
  if (param && grown) {
    const void **owners =
        realloc(ts->owners, (ts->n_params + 1) * sizeof *owners);
    if (owners)
      ts->owners = owners;
    else
      grown = NULL;
  }
  if (!full || !t || !grown) {
    free(full);
    free(t);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  if (name_taken(ts->params, ts->n_params, full) ||
      name_taken(ts->states, ts->n_states, full)) {
    int rc = lk__err(LK_EINVAL, "plugin %s: a tensor named \"%s\" exists", who,
                     full);
    free(full);
    free(t);
    return rc;
  }
  t->name = full;
  t->dtype = dtype;
  t->ndim = ndim;
  for (size_t i = 0; i < ndim; i++)
    t->shape[i] = shape[i];
  t->numel = numel;
  t->data = lk__aligned_calloc(numel, lk_dtype_size(dtype));
  t->grad = param ? lk__aligned_calloc(numel, lk_dtype_size(dtype)) : NULL;
  if (!t->data || (param && !t->grad)) {
    /* The message before the free: it names the tensor. */
    int rc = lk__err(LK_ENOMEM,
                     "plugin %s: out of memory for %s %s (%zu elements of %s)",
                     who, what, full, numel, lk_dtype_name(dtype));
    free_tensor(t);
    return rc;
  }
  if (param)
    ts->owners[ts->n_params] = owner;
  (*list)[(*n)++] = t;
  *out = t;
  return 0;
}

int lk__tensors_mark_buffer(lk__tensors *ts, size_t i, unsigned flags) {
  if (i >= ts->n_states)
    return lk__err(LK_EINVAL, "no state %zu to make a buffer", i);
  if (i >= ts->n_flags) {
    unsigned *grown = realloc(ts->state_flags, ts->n_states * sizeof *grown);
    if (!grown)
      return lk__err(LK_ENOMEM, "out of memory");
    memset(grown + ts->n_flags, 0,
           (ts->n_states - ts->n_flags) * sizeof *grown);
    ts->state_flags = grown;
    ts->n_flags = ts->n_states;
  }
  ts->state_flags[i] = LK__BUFFER | flags;
  return 0;
}

unsigned lk__tensors_state_flags(const lk__tensors *ts, size_t i) {
  return i < ts->n_flags ? ts->state_flags[i] : 0;
}

const char *lk__buffer_name(const lk_tensor *b) {
  const char *dot = strchr(b->name, '.');
  return dot ? dot + 1 : b->name;
}

const void *lk__tensors_owner(const lk__tensors *ts, size_t i) {
  return ts->owners && i < ts->n_params ? ts->owners[i] : NULL;
}

void lk__tensors_free(lk__tensors *ts) {
  for (size_t i = 0; !ts->borrowed && i < ts->n_params; i++)
    free_tensor(ts->params[i]);
  for (size_t i = 0; i < ts->n_states; i++)
    free_tensor(ts->states[i]);
  free(ts->params);
  free(ts->owners);
  free(ts->states);
  free(ts->state_flags);
  memset(ts, 0, sizeof *ts);
}
