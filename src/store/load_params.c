/* lk_host_load_params: a plugin's parameters from a safetensors file (see
 * host.h). Everything is checked before any value is written: names both
 * ways, shapes, dtypes; then each tensor is converted straight from the
 * mapped file, read once. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "safetensors.h"

static bool ignored(const char *const *ignore, const char *name) {
  for (size_t i = 0; ignore && ignore[i]; i++)
    if (strcmp(ignore[i], name) == 0)
      return true;
  return false;
}

static void shape_text(char *buf, size_t len, size_t ndim,
                       const uint64_t *shape) {
  size_t o = (size_t)snprintf(buf, len, "[");
  for (size_t i = 0; i < ndim && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%" PRIu64, i ? ", " : "",
                          shape[i]);
  if (o < len)
    snprintf(buf + o, len - o, "]");
}

/* The parameter of TS named NAME, or SIZE_MAX. */
static size_t param_named(const lk__tensors *ts, const char *name) {
  for (size_t i = 0; i < ts->n_params; i++)
    if (strcmp(ts->params[i]->name, name) == 0)
      return i;
  return SIZE_MAX;
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) {
  return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Element I of file tensor T as a double. */
static double file_element(const lk__st_tensor *t, uint64_t i) {
  if (t->dtype == LK__ST_F32) {
    uint32_t u = le32(t->data + 4 * i);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  uint64_t u = le64(t->data + 8 * i);
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* Copies file tensor T into parameter P, converting; refuses what is not
 * finite, or not finite once made an f32. */
static int convert(const char *path, const lk__st_tensor *t, lk_tensor *p) {
  for (uint64_t i = 0; i < t->numel; i++) {
    double v = file_element(t, i);
    if (!isfinite(v))
      return lk__err(LK_ENONFINITE,
                     "%s: tensor \"%s\"[%" PRIu64 "] is %g: parameters must "
                     "be finite",
                     path, t->name, i, v);
    if (p->dtype == LK_F64)
      ((double *)p->data)[i] = v;
    else if (fabs(v) > FLT_MAX)
      return lk__err(LK_EINVAL,
                     "%s: tensor \"%s\"[%" PRIu64 "] = %.9g is beyond the "
                     "range of parameter %s (f32)",
                     path, t->name, i, v, p->name);
    else
      ((float *)p->data)[i] = (float)v;
  }
  return 0;
}

/* File tensor T has the shape of parameter P of plugin WHO. */
static int check_shape(const char *who, const char *path,
                       const lk__st_tensor *t, const lk_tensor *p) {
  bool same = p->ndim == t->ndim;
  for (size_t d = 0; same && d < p->ndim; d++)
    same = p->shape[d] == t->shape[d];
  if (same)
    return 0;
  char want[8 + LK_MAX_DIMS * 22], got[8 + LK__ST_MAX_DIMS * 22];
  uint64_t shape[LK_MAX_DIMS];
  for (size_t d = 0; d < p->ndim; d++)
    shape[d] = p->shape[d];
  shape_text(want, sizeof want, p->ndim, shape);
  shape_text(got, sizeof got, t->ndim, t->shape);
  return lk__err(LK_EINVAL,
                 "plugin %s: %s: tensor \"%s\" has shape %s, parameter %s "
                 "of plugin %s has shape %s",
                 who, path, t->name, got, p->name, who, want);
}

int lk_host_load_params(lk_host *host, const char *path,
                        const char *const *ignore) {
  if (!host || !host->inst)
    return lk__err(LK_EINVAL, "lk_host_load_params: no plugin host");
  const char *who = host->inst->label;
  lk__tensors *ts = &host->env->tensors;
  if (!path || !*path)
    return lk__err(LK_EINVAL, "plugin %s: lk_host_load_params: no path", who);
  if (ts->sealed)
    return lk__err(LK_ESTATE,
                   "plugin %s: lk_host_load_params after setup (call it in "
                   "create, after adding the parameters)",
                   who);
  lk__st_file *f;
  int rc = lk__st_read(path, &f);
  if (rc != 0)
    return lk__err_prefix(rc, "plugin %s", who);

  /* Every tensor of the file is a parameter of this plugin (or ignored),
   * with the parameter's shape and a dtype that converts. */
  for (size_t i = 0; i < f->n && rc == 0; i++) {
    const lk__st_tensor *t = &f->tensors[i];
    size_t k = param_named(ts, t->name);
    const lk__instance *owner = k != SIZE_MAX ? lk__tensors_owner(ts, k) : NULL;
    if (owner != host->inst) {
      if (ignored(ignore, t->name))
        continue;
      if (owner)
        rc = lk__err(LK_EINVAL,
                     "plugin %s: %s: tensor \"%s\" is a parameter of plugin "
                     "%s, not of %s",
                     who, path, t->name, owner->label, who);
      else
        rc = lk__err(LK_EINVAL,
                     "plugin %s: %s: tensor \"%s\" is no parameter of plugin "
                     "%s (a file of another model, or of another "
                     "configuration?)",
                     who, path, t->name, who);
      break;
    }
    const lk_tensor *p = ts->params[k];
    if ((rc = check_shape(who, path, t, p)) != 0)
      break;
    if (t->dtype != LK__ST_F32 && t->dtype != LK__ST_F64)
      rc = lk__err(LK_EINVAL,
                   "plugin %s: %s: tensor \"%s\" is %s: only F32 and F64 "
                   "convert to a parameter (%s)",
                   who, path, t->name, lk__st_dtype_name(t->dtype),
                   lk_dtype_name(p->dtype));
  }
  /* And every parameter of this plugin is in the file. */
  for (size_t k = 0; k < ts->n_params && rc == 0; k++)
    if (lk__tensors_owner(ts, k) == host->inst &&
        !lk__st_find(f, ts->params[k]->name))
      rc = lk__err(LK_EINVAL,
                   "plugin %s: %s has no tensor \"%s\" (a parameter of plugin "
                   "%s)",
                   who, path, ts->params[k]->name, who);
  for (size_t i = 0; i < f->n && rc == 0; i++) {
    size_t k = param_named(ts, f->tensors[i].name);
    if (k != SIZE_MAX && lk__tensors_owner(ts, k) == host->inst &&
        (rc = convert(path, &f->tensors[i], ts->params[k])))
      lk__err_prefix(rc, "plugin %s", who);
  }
  lk__st_free(f);
  return rc;
}
