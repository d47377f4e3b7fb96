/* lk_checkpoint_export: a checkpoint's parameters as a safetensors file,
 * for torch and the Hugging Face tools (see run.h); lk__ckpt_export adds
 * the model's buffers, which only the model knows (lk_run_export). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "safetensors.h"

static lk__st_dtype st_dtype(lk_dtype dtype) {
  return dtype == LK_F32   ? LK__ST_F32
         : dtype == LK_F64 ? LK__ST_F64
         : dtype == LK_I32 ? LK__ST_I32
                           : 0;
}

int lk_checkpoint_export(const char *ckpt, const char *path,
                         const char *plugin) {
  if (!ckpt || !path || !*path)
    return lk__err(LK_EINVAL, "lk_checkpoint_export: NULL checkpoint or path");
  return lk__ckpt_export(ckpt, path, plugin, NULL, 0);
}

int lk__ckpt_export(const char *ckpt, const char *path, const char *plugin,
                    const lk__st_item *extra, size_t n_extra) {
  struct stat in, out;
  lk__ckpt *ck;
  int rc = lk__ckpt_read(ckpt, &ck, &in);
  if (rc != 0)
    return rc;
  /* The same file by another name too: a rename over it would lose the
   * checkpoint. ("-" is the standard output, whatever file has that name.) */
  if (strcmp(path, "-") != 0 && stat(path, &out) == 0 &&
      out.st_dev == in.st_dev && out.st_ino == in.st_ino) {
    lk__ckpt_free(ck);
    return lk__err(LK_EINVAL,
                   "%s is the checkpoint %s: refusing to overwrite it", path,
                   ckpt);
  }
  size_t n = 0;
  lk__st_item *items = calloc(ck->n + n_extra + 1, sizeof *items);
  uint64_t *shapes = calloc(ck->n ? ck->n * LK_MAX_DIMS : 1, sizeof *shapes);
  if (!items || !shapes) {
    free(items);
    free(shapes);
    lk__ckpt_free(ck);
    return lk__err(LK_ENOMEM, "out of memory exporting %s", ckpt);
  }
  /* The parameters, in the checkpoint's order (the order they were
   * added), then EXTRA: optimizer and host state stay in the checkpoint. */
  for (size_t i = 0; i < ck->n; i++) {
    const lk_tensor *t = &ck->tensors[i];
    if (ck->kinds[i] != LK__CKPT_PARAM)
      continue;
    uint64_t *shape = shapes + n * LK_MAX_DIMS;
    for (size_t d = 0; d < t->ndim; d++)
      shape[d] = t->shape[d];
    items[n++] = (lk__st_item){
        t->name, st_dtype(t->dtype), t->ndim, shape, t->data, true};
  }
  for (size_t i = 0; i < n_extra; i++)
    items[n++] = extra[i];
  char step[24], epoch[24];
  snprintf(step, sizeof step, "%" PRIu64, ck->state.progress.global_step);
  snprintf(epoch, sizeof epoch, "%" PRIu64, ck->state.progress.epoch);
  /* "format": "pt" is what torch's and transformers' loaders look for. */
  lk__st_meta meta[4] = {{"format", "pt"},
                         {"step", step},
                         {"epoch", epoch},
                         {"plugin", (char *)plugin}};
  rc = lk__st_write(path, items, n, meta, plugin && *plugin ? 4 : 3);
  free(items);
  free(shapes);
  lk__ckpt_free(ck);
  return rc;
}
