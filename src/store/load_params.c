/* lk_host_load_params: a plugin's parameters and buffers from a safetensors
 * file (see host.h). Everything is checked before any value is written:
 * names both ways, shapes, dtypes; then each tensor is converted straight
 * from the mapped file, read once. A file holding none of the plugin's
 * buffers (its named_parameters(), as loopkit exported before buffers)
 * leaves them as they are; one holding any must hold all, as torch's
 * load_state_dict(strict=True) demands. */
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

/* What a file's tensor fills: parameter INDEX, or the plugin's buffer
 * (state) INDEX; none when INDEX is SIZE_MAX. */
typedef struct target {
  size_t index;
  bool buffer;
  unsigned flags; /* the buffer's */
} target;

/* The parameter of TS named NAME (whoever owns it), else the buffer of
 * instance IN whose file name is NAME. */
static target find_target(const lk__tensors *ts, const lk__instance *in,
                          const char *name) {
  for (size_t i = 0; i < ts->n_params; i++)
    if (strcmp(ts->params[i]->name, name) == 0)
      return (target){i, false, 0};
  size_t len = strlen(in->name);
  for (size_t i = 0; i < ts->n_states; i++) {
    unsigned fl = lk__tensors_state_flags(ts, i);
    const char *sn = ts->states[i]->name;
    if ((fl & LK__BUFFER) && strncmp(sn, in->name, len) == 0 &&
        sn[len] == '.' && strcmp(sn + len + 1, name) == 0)
      return (target){i, true, fl};
  }
  return (target){SIZE_MAX, false, 0};
}

static lk_tensor *target_tensor(const lk__tensors *ts, target t) {
  return t.buffer ? ts->states[t.index] : ts->params[t.index];
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) {
  return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Element I of file tensor T (F32, F64 or I64) as a double. */
static double file_element(const lk__st_tensor *t, uint64_t i) {
  if (t->dtype == LK__ST_F32) {
    uint32_t u = le32(t->data + 4 * i);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  uint64_t u = le64(t->data + 8 * i);
  if (t->dtype == LK__ST_I64)
    return (double)(int64_t)u;
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* A count buffer's element V of file tensor T, index I, named as P: a
 * whole number in [0, 2^53]. */
static int check_count(const char *path, const lk__st_tensor *t, uint64_t i,
                       double v, const lk_tensor *p) {
  if (v >= 0 && v <= LK_STATE_MAX_COUNT && v == floor(v))
    return 0;
  return lk__err(LK_EINVAL,
                 "%s: tensor \"%s\"[%" PRIu64 "] is %.17g: buffer %s counts, "
                 "a whole number in [0, 2^53]",
                 path, t->name, i, v, p->name);
}

/* Copies file tensor T into parameter or buffer P, converting; refuses
 * what is not finite, or not finite once made an f32, and a count that
 * is no whole number. */
static int convert(const char *path, const lk__st_tensor *t, lk_tensor *p,
                   unsigned flags) {
  for (uint64_t i = 0; i < t->numel; i++) {
    double v = file_element(t, i);
    if (!isfinite(v))
      return lk__err(LK_ENONFINITE,
                     "%s: tensor \"%s\"[%" PRIu64 "] is %g: parameters must "
                     "be finite",
                     path, t->name, i, v);
    int rc = flags & LK_BUFFER_COUNT ? check_count(path, t, i, v, p) : 0;
    if (rc != 0)
      return rc;
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

/* File tensor T has the shape of parameter or buffer P of plugin WHO. */
static int check_shape(const char *who, const char *path,
                       const lk__st_tensor *t, const lk_tensor *p,
                       bool buffer) {
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
                 "plugin %s: %s: tensor \"%s\" has shape %s, %s %s of plugin "
                 "%s has shape %s",
                 who, path, t->name, got, buffer ? "buffer" : "parameter",
                 buffer ? lk__buffer_name(p) : p->name, who, want);
}

/* File tensor T, which is no parameter or buffer of plugin IN: refused
 * unless IGNORE lists it. */
static int stranger(const lk__tensors *ts, const lk__instance *in,
                    const char *path, const lk__st_tensor *t, target k,
                    const char *const *ignore) {
  const lk__instance *owner =
      k.index != SIZE_MAX && !k.buffer ? lk__tensors_owner(ts, k.index) : NULL;
  const char *who = in->label;
  if (ignored(ignore, t->name))
    return 0;
  if (owner)
    return lk__err(LK_EINVAL,
                   "plugin %s: %s: tensor \"%s\" is a parameter of plugin %s, "
                   "not of %s",
                   who, path, t->name, owner->label, who);
  return lk__err(LK_EINVAL,
                 "plugin %s: %s: tensor \"%s\" is no parameter of plugin %s "
                 "and none of its buffers (a file of another model, or of "
                 "another configuration?)",
                 who, path, t->name, who);
}

/* File tensor T fills K, of plugin IN: the shape is K's and the dtype
 * converts. */
static int check_one(const lk__tensors *ts, const lk__instance *in,
                     const char *path, const lk__st_tensor *t, target k) {
  const lk_tensor *p = target_tensor(ts, k);
  int rc = check_shape(in->label, path, t, p, k.buffer);
  bool count = k.buffer && (k.flags & LK_BUFFER_COUNT);
  if (rc == 0 && t->dtype != LK__ST_F32 && t->dtype != LK__ST_F64 &&
      !(count && t->dtype == LK__ST_I64))
    rc = lk__err(LK_EINVAL,
                 "plugin %s: %s: tensor \"%s\" is %s: only F32 and F64%s "
                 "convert to a %s (%s)",
                 in->label, path, t->name, lk__st_dtype_name(t->dtype),
                 count ? " and I64" : "", k.buffer ? "buffer" : "parameter",
                 lk_dtype_name(p->dtype));
  return rc;
}

/* Every tensor of file F fills a parameter or buffer of plugin IN, or is
 * ignored; *BUFFERS counts the buffers it fills. */
static int check_file(const lk__tensors *ts, const lk__instance *in,
                      const lk__st_file *f, const char *const *ignore,
                      size_t *buffers) {
  *buffers = 0;
  for (size_t i = 0; i < f->n; i++) {
    const lk__st_tensor *t = &f->tensors[i];
    target k = find_target(ts, in, t->name);
    bool mine = k.index != SIZE_MAX &&
                (k.buffer || lk__tensors_owner(ts, k.index) == in);
    int rc = mine ? check_one(ts, in, f->path, t, k)
                  : stranger(ts, in, f->path, t, k, ignore);
    if (rc != 0)
      return rc;
    *buffers += mine && k.buffer;
  }
  return 0;
}

/* And every parameter of plugin IN is in file F, and every buffer too when
 * F holds any (BUFFERS of them). */
static int check_missing(const lk__tensors *ts, const lk__instance *in,
                         const lk__st_file *f, size_t buffers) {
  const char *who = in->label;
  for (size_t k = 0; k < ts->n_params; k++)
    if (lk__tensors_owner(ts, k) == in && !lk__st_find(f, ts->params[k]->name))
      return lk__err(LK_EINVAL,
                     "plugin %s: %s has no tensor \"%s\" (a parameter of "
                     "plugin %s)",
                     who, f->path, ts->params[k]->name, who);
  size_t len = strlen(in->name);
  for (size_t k = 0; k < ts->n_states && buffers; k++) {
    const char *name = ts->states[k]->name;
    if ((lk__tensors_state_flags(ts, k) & LK__BUFFER) &&
        strncmp(name, in->name, len) == 0 && name[len] == '.' &&
        !lk__st_find(f, name + len + 1))
      return lk__err(LK_EINVAL,
                     "plugin %s: %s has no tensor \"%s\" (a buffer of plugin "
                     "%s; the file holds %zu of its buffers: all of them or "
                     "none)",
                     who, f->path, name + len + 1, who, buffers);
  }
  return 0;
}

int lk_host_load_params(lk_host *host, const char *path,
                        const char *const *ignore) {
  if (!host || !host->inst)
    return lk__err(LK_EINVAL, "lk_host_load_params: no plugin host");
  const lk__instance *in = host->inst;
  lk__tensors *ts = &host->env->tensors;
  if (!path || !*path)
    return lk__err(LK_EINVAL, "plugin %s: lk_host_load_params: no path",
                   in->label);
  if (ts->sealed)
    return lk__err(LK_ESTATE,
                   "plugin %s: lk_host_load_params after setup (call it in "
                   "create, after adding the parameters)",
                   in->label);
  lk__st_file *f;
  int rc = lk__st_read(path, &f);
  if (rc != 0)
    return lk__err_prefix(rc, "plugin %s", in->label);
  size_t buffers;
  rc = check_file(ts, in, f, ignore, &buffers);
  if (rc == 0)
    rc = check_missing(ts, in, f, buffers);
  for (size_t i = 0; i < f->n && rc == 0; i++) {
    target k = find_target(ts, in, f->tensors[i].name);
    if (k.index != SIZE_MAX &&
        (k.buffer || lk__tensors_owner(ts, k.index) == in) &&
        (rc = convert(path, &f->tensors[i], target_tensor(ts, k), k.flags)))
      lk__err_prefix(rc, "plugin %s", in->label);
  }
  lk__st_free(f);
  return rc;
}
