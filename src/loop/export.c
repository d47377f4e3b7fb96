/* lk_run_export: a checkpoint's parameters and its model's buffers as one
 * safetensors file, torch's state_dict() of the same network (run.h). The
 * checkpoint holds the buffers as state, as it always has; which states
 * are buffers, and their names and dtypes in the file, only the model
 * knows (lk_host_add_buffer), so the export needs the run. */
#include <stdlib.h>
#include <string.h>

#include "loop.h"
#include "safetensors.h"

static lk__st_dtype st_dtype(lk_dtype dtype, unsigned flags) {
  if (flags & LK_BUFFER_COUNT)
    return LK__ST_I64;
  return dtype == LK_F64 ? LK__ST_F64 : LK__ST_F32;
}

/* The model's buffers of RUN as items: ITEMS, SHAPES and (for counts, as
 * int64) DATA, each with room for every state; *N gets their count. */
static int buffer_items(const lk_run *run, lk__st_item *items, uint64_t *shapes,
                        int64_t **data, size_t *n) {
  const lk__tensors *ts = &run->env.tensors;
  *n = 0;
  for (size_t i = 0; i < ts->n_states; i++) {
    const lk_tensor *t = ts->states[i];
    unsigned fl = lk__tensors_state_flags(ts, i);
    if (!(fl & LK__BUFFER) || !lk__model_state(run, t->name))
      continue;
    const void *values = t->data;
    if (fl & LK_BUFFER_COUNT) {
      int64_t *c = malloc((t->numel ? t->numel : 1) * sizeof *c);
      if (!c)
        return lk__err(LK_ENOMEM, "out of memory exporting %s", t->name);
      for (size_t k = 0; k < t->numel; k++)
        c[k] = (int64_t)((const double *)t->data)[k];
      values = data[*n] = c;
    }
    uint64_t *shape = shapes + *n * LK_MAX_DIMS;
    for (size_t d = 0; d < t->ndim; d++)
      shape[d] = t->shape[d];
    items[(*n)++] = (lk__st_item){lk__buffer_name(t),
                                  st_dtype(t->dtype, fl),
                                  t->ndim,
                                  shape,
                                  values,
                                  true};
  }
  return 0;
}

int lk_run_export(lk_run *run, const char *ckpt, const char *path) {
  if (!run || !ckpt || !path || !*path)
    return lk__err(LK_EINVAL, "lk_run_export: NULL run, checkpoint or path");
  int rc = lk_run_load_params(run, ckpt);
  if (rc != 0)
    return rc;
  size_t m = run->env.tensors.n_states + 1, n = 0;
  lk__st_item *items = calloc(m, sizeof *items);
  uint64_t *shapes = calloc(m * LK_MAX_DIMS, sizeof *shapes);
  int64_t **data = calloc(m, sizeof *data);
  rc = items && shapes && data ? buffer_items(run, items, shapes, data, &n)
                               : lk__err(LK_ENOMEM, "out of memory");
  const lk__instance *step = lk__role(run, LK__KIND_STEP);
  if (rc == 0)
    rc = lk__ckpt_export(ckpt, path, step ? step->given : NULL, items, n);
  for (size_t i = 0; data && i < m; i++)
    free(data[i]);
  free(data);
  free(shapes);
  free(items);
  return rc;
}
