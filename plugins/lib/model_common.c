/* What the model plugins share besides their products (model_common.h). */
#include "model_common.h"

#include <errno.h>
#include <unistd.h>

/* The first of the largest of Z [C]. */
static size_t argmax(const float *z, size_t c) {
  size_t arg = 0;
  for (size_t j = 1; j < c; j++)
    if (z[j] > z[arg])
      arg = j;
  return arg;
}

double model_xent(const float *z, const int32_t *y, size_t n, size_t c,
                  float *d, size_t *correct) {
  double loss = 0;
  size_t hits = 0;
  for (size_t i = 0; i < n; i++) {
    const float *zi = z + i * c;
    size_t arg = argmax(zi, c);
    float mx = zi[arg];
    double sum = 0;
    for (size_t j = 0; j < c; j++)
      sum += exp((double)zi[j] - mx);
    loss += (double)mx + log(sum) - zi[y[i]];
    hits += arg == (size_t)y[i];
    if (d) {
      float *di = d + i * c;
      float inv = (float)(1 / sum);
      for (size_t j = 0; j < c; j++)
        di[j] = expf(zi[j] - mx) * inv;
      di[y[i]] -= 1;
    }
  }
  *correct = hits;
  return loss;
}

void model_classify(const float *logits, const lk_batch *b, size_t classes,
                    float *d, lk_step_result *out) {
  size_t n = b->size, correct;
  double loss = model_xent(logits, b->y.data, n, classes, d, &correct);
  out->has_loss = true;
  out->loss = loss / (double)n;
  lk_result_metric(out, "acc", (double)correct / (double)n);
}

int model_scores_init(lk_host *host, const lk_options *o, size_t classes,
                      model_scores *s) {
  *s = (model_scores){.classes = classes};
  int64_t k = lk_opt_int(o, "top_k");
  if (k > (int64_t)classes)
    return lk_fail(host, LK_ECONFIG,
                   "%s: top_k = %lld, but the model has %zu classes",
                   lk_opt_where(o, "top_k"), (long long)k, classes);
  if (k > 1) {
    s->top_k = (size_t)k;
    snprintf(s->top_name, sizeof s->top_name, "acc_top%lld", (long long)k);
  }
  s->f1 = lk_opt_bool(o, "f1");
  if (s->f1 && !(s->counts = calloc(3 * classes, sizeof *s->counts)))
    return lk_fail(host, LK_ENOMEM, "out of memory");
  return 0;
}

void model_scores_free(model_scores *s) {
  free(s->counts);
  s->counts = NULL;
}

void model_scores_batch(model_scores *s, const float *logits, const lk_batch *b,
                        bool evaluating, lk_step_result *out) {
  const int32_t *y = b->y.data;
  size_t n = b->size, c = s->classes, hits = 0;
  for (size_t i = 0; s->top_k && i < n; i++) {
    const float *zi = logits + i * c;
    size_t above = 0;
    for (size_t j = 0; j < c; j++)
      above += zi[j] > zi[y[i]];
    hits += above < s->top_k;
  }
  if (s->top_k)
    lk_result_metric(out, s->top_name, (double)hits / (double)n);
  for (size_t i = 0; s->f1 && evaluating && i < n; i++) {
    const float *zi = logits + i * c;
    size_t arg = argmax(zi, c);
    if (arg == (size_t)y[i])
      s->counts[arg] += 1; /* TP */
    else {
      s->counts[c + arg] += 1;      /* FP of the prediction */
      s->counts[2 * c + y[i]] += 1; /* FN of the label */
    }
  }
}

int model_scores_end(model_scores *s, lk_host *host, lk_step_result *out) {
  if (!s->f1)
    return 0;
  size_t c = s->classes;
  int rc = lk_host_reduce_sum(host, s->counts, 3 * c);
  double sum = 0;
  size_t present = 0;
  for (size_t k = 0; rc == 0 && k < c; k++) {
    double tp = s->counts[k], fp = s->counts[c + k], fn = s->counts[2 * c + k];
    if (tp + fp + fn == 0)
      continue; /* neither a label nor a prediction: not averaged */
    sum += 2 * tp / (2 * tp + fp + fn);
    present++;
  }
  memset(s->counts, 0, 3 * c * sizeof *s->counts);
  if (rc == 0)
    lk_result_metric(out, "f1", present ? sum / (double)present : 0);
  return rc;
}

/* "784 (1x28x28)" */
static void model_dims(const size_t *shape, size_t ndim, size_t numel,
                       char *buf, size_t len) {
  int used = snprintf(buf, len, "%zu", numel);
  for (size_t i = 0; ndim > 1 && i < ndim && used > 0 && (size_t)used < len;
       i++)
    used += snprintf(buf + used, len - (size_t)used, "%s%zu%s", i ? "x" : " (",
                     shape[i], i + 1 == ndim ? ")" : "");
}

/* "f32 [1, 28, 28]": DTYPE and SHAPE [NDIM] into BUF [LEN]. */
static const char *shape_text(lk_dtype dtype, const size_t *shape, size_t ndim,
                              char *buf, size_t len) {
  const char *dt = lk_dtype_name(dtype);
  int used = snprintf(buf, len, "%s [", dt ? dt : "?");
  for (size_t i = 0;
       i < ndim && i < LK_MAX_DIMS && used > 0 && (size_t)used < len; i++)
    used += snprintf(buf + used, len - (size_t)used, "%s%zu", i ? ", " : "",
                     shape[i]);
  if (used > 0 && (size_t)used < len)
    snprintf(buf + used, len - (size_t)used, "]");
  return buf;
}

const char *model_sample_text(const lk_sample_shape *s, char *buf, size_t len) {
  return shape_text(s->x_dtype, s->x_shape, s->x_ndim, buf, len);
}

int model_check_data(lk_host *host, const char *inputs_option, size_t inputs,
                     size_t classes, size_t outputs) {
  lk_sample_shape s;
  int rc = lk_host_data_shape(host, &s);
  if (rc == LK_ENOTFOUND)
    return 0;  /* no data plugin, or it does not say: checked per batch */
  if (rc != 0) /* the host's message names the plugin and the shape */
    return lk_fail(host, LK_ECONFIG, "the data's sample shape: %s",
                   lk_last_error());
  size_t numel, ynum; /* the host has checked that they fit */
  if (!lk_shape_numel(s.x_shape, s.x_ndim, &numel) ||
      !lk_shape_numel(s.y_shape, s.y_ndim, &ynum))
    return lk_fail(host, LK_ECONFIG, "the data's samples are too large");
  char dims[96];
  model_dims(s.x_shape, s.x_ndim, numel, dims, sizeof dims);
  if (numel != inputs)
    return lk_fail(host, LK_ECONFIG,
                   "%s = %zu, but the data's samples have %s features",
                   inputs_option, inputs, dims);
  if (classes && s.n_classes == 0)
    return lk_fail(host, LK_ECONFIG,
                   "the model classifies, but the data's targets are not "
                   "class labels");
  if (classes && s.n_classes > classes)
    return lk_fail(host, LK_ECONFIG,
                   "the model has %zu classes, but the data's labels go up to "
                   "%zu",
                   classes, s.n_classes - 1);
  if (outputs && (s.n_classes > 0 || s.y_dtype == 0 || ynum != outputs))
    return lk_fail(host, LK_ECONFIG,
                   "outputs = %zu, but the data's samples have %s", outputs,
                   s.n_classes > 0  ? "class labels, not real targets"
                   : s.y_dtype == 0 ? "no targets"
                                    : "another number of targets");
  return 0;
}

/* Little-endian f32 from bytes, whatever the host's order. */
static float le_f32(const unsigned char *p) {
  uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
               (uint32_t)p[3] << 24;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The raw form of the init option into the N parameters P. */
static int load_raw(lk_host *host, const char *path, lk_tensor *const *p,
                    size_t n, const char *layout, int code) {
  size_t want = 0;
  for (size_t i = 0; i < n; i++) { /* the tensors exist: no wrap */
    if (p[i]->dtype != LK_F32)
      return lk_fail(host, LK_EINVAL, "init \"%s\": parameter %s is not f32",
                     path, p[i]->name);
    want += p[i]->numel * sizeof(float);
  }
  int fd;
  int rc = lk_open_input(path, "init file", &fd);
  if (rc != 0)
    return rc;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return lk_fail(host, LK_EIO, "init \"%s\": cannot open: %s", path,
                   strerror(errno));
  }
  unsigned char *buf = malloc(want + 1);
  size_t got = buf ? fread(buf, 1, want + 1, f) : 0;
  int err = ferror(f);
  fclose(f);
  if (!buf)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  if (err || got != want) {
    free(buf);
    return err ? lk_fail(host, LK_EIO, "init \"%s\": read error", path)
               : lk_fail(host, code,
                         "init \"%s\": expected %zu bytes (%s), the file has "
                         "%s%zu",
                         path, want, layout, got > want ? "more than " : "",
                         got > want ? want : got);
  }
  const unsigned char *at = buf;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < p[i]->numel; k++, at += 4)
      ((float *)p[i]->data)[k] = le_f32(at);
  free(buf);
  return 0;
}

int model_load_init(lk_host *host, const lk_options *o, const char *layout,
                    int code, bool *loaded) {
  const char *init = lk_opt_string(o, "init");
  size_t len = strlen(init), ext = strlen(".safetensors"), n;
  *loaded = init[0] != 0;
  if (len > ext && strcmp(init + len - ext, ".safetensors") == 0)
    return lk_host_load_params(host, init, NULL);
  lk_tensor *const *p = lk_host_params(host, &n);
  return init[0] ? load_raw(host, init, p, n, layout, code) : 0;
}

const char *model_shape(const lk_tensor *t, char *buf, size_t len) {
  return shape_text(t->dtype, t->shape, t->ndim, buf, len);
}

int model_check_x(lk_host *host, const lk_batch *b, size_t inputs) {
  const lk_tensor *x = &b->x;
  if (b->size >= 1 && x->data && x->dtype == LK_F32 && x->ndim == 2 &&
      x->shape[0] == b->size && x->shape[1] == inputs)
    return 0;
  char got[96];
  if (b->size == 0 || !x->data)
    return lk_fail(host, LK_EINVAL,
                   "needs batches: x f32 [B, %zu] (is [plugins] data set?)",
                   inputs);
  return lk_fail(host, LK_EINVAL, "x: expected f32 [%zu, %zu], got %s", b->size,
                 inputs, model_shape(x, got, sizeof got));
}

int model_check_labels(lk_host *host, const lk_batch *b, size_t classes) {
  const lk_tensor *y = &b->y;
  char got[96];
  if (!y->data || y->dtype != LK_I32 || y->ndim != 1 || y->shape[0] != b->size)
    return lk_fail(host, LK_EINVAL,
                   "y: expected i32 [%zu] class labels, got %s", b->size,
                   model_shape(y, got, sizeof got));
  const int32_t *v = y->data;
  for (size_t i = 0; i < b->size; i++)
    if (v[i] < 0 || (size_t)v[i] >= classes)
      return lk_fail(host, LK_EINVAL,
                     "label %d of sample %zu is out of range: the model has "
                     "%zu classes (0 to %zu)",
                     (int)v[i], i, classes, classes - 1);
  return 0;
}

lk_tensor model_output(const char *name, float *data, size_t n, size_t width) {
  return (lk_tensor){.name = name,
                     .dtype = LK_F32,
                     .ndim = 2,
                     .shape = {n, width},
                     .numel = n * width,
                     .data = data};
}

float *model_alloc(size_t rows, size_t width) {
  size_t bytes;
  if (!lk_size_mul(rows, width, &bytes) ||
      !lk_size_mul(bytes, sizeof(float), &bytes) || bytes > SIZE_MAX - 63)
    return NULL;
  bytes = (bytes + 63) / 64 * 64;
  return aligned_alloc(64, bytes ? bytes : 64);
}

int model_check_ready(lk_host *host, size_t ready, size_t n) {
  if (ready == 0 || ready != n)
    return lk_fail(host, LK_ESTATE,
                   "backward without a training step on this batch");
  return 0;
}
