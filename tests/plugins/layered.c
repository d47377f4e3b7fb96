/* layered: a model that declares its layers (lk_host_add_layer) for
 * loopkit summary, and declares them wrongly when option mode says so:
 * twice the same name, a dimension of 0, an empty type. Its loss is the
 * sum of its parameters' squares; a.running is a buffer, extra.0.w a
 * parameter of no declared layer. */
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

typedef struct layered {
  lk_tensor *w, *v, *running;
} layered;

static int declare(lk_host *host, const char *mode) {
  size_t out[2] = {3, 4}, zero[2] = {3, 0};
  int rc = lk_host_add_layer(host, "a", "thing", 2, out);
  if (rc == 0)
    rc = lk_host_add_layer(host, strcmp(mode, "twice") ? "b" : "a", "relu", 2,
                           strcmp(mode, "zero") ? out : zero);
  if (rc == 0 && strcmp(mode, "empty") == 0)
    rc = lk_host_add_layer(host, "c", "", 0, NULL);
  return rc;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  layered *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  size_t ws[2] = {4, 3}, vs = 5, rs = 4;
  int rc = lk_host_add_param(host, "a.weight", LK_F32, 2, ws, &m->w);
  if (rc == 0)
    rc = lk_host_add_buffer(host, "a.running", LK_F32, 1, &rs, 0, &m->running);
  if (rc == 0)
    rc = lk_host_add_param(host, "extra.0.w", LK_F64, 1, &vs, &m->v);
  if (rc == 0)
    rc = declare(host, lk_opt_string(o, "mode"));
  if (rc != 0) {
    free(m);
    return rc;
  }
  *self = m;
  return 0;
}

static void destroy(void *self) {
  free(self);
}

static int training_step(void *self, const lk_batch *b, lk_step_result *out) {
  layered *m = self;
  (void)b;
  double s = 0;
  for (size_t i = 0; i < m->w->numel; i++)
    s += (double)((float *)m->w->data)[i] * ((float *)m->w->data)[i];
  for (size_t i = 0; i < m->v->numel; i++)
    s += ((double *)m->v->data)[i] * ((double *)m->v->data)[i];
  out->has_loss = true;
  out->loss = s;
  return 0;
}

static int backward(void *self, const lk_batch *b, double scale) {
  layered *m = self;
  (void)b;
  for (size_t i = 0; i < m->w->numel; i++)
    ((float *)m->w->grad)[i] += (float)(scale * 2 * ((float *)m->w->data)[i]);
  for (size_t i = 0; i < m->v->numel; i++)
    ((double *)m->v->grad)[i] += scale * 2 * ((double *)m->v->data)[i];
  return 0;
}

static const lk_option options[] = {
    {"mode", LK_OPT_STRING, "ok", "ok, twice, zero or empty", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step};
static const lk_backward_ops backward_ops = {.backward = backward};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "layered",
    .version = "1.0",
    .summary = "test model that declares its layers for loopkit summary",
    .options = options,
    .create = create,
    .destroy = destroy,
    .step = &step_ops,
    .backward = &backward_ops,
};
