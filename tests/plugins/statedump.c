/* statedump: a callback that writes every state tensor of the run (the
 * optimizer's buffers and counters among them) to the file `path` when
 * training ends, one element a line, NAME[INDEX] VALUE with %.17g (an f32
 * value is printed as the double it converts to exactly). For the tests
 * that compare an optimizer's state with torch's. */
#include <stdio.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

typedef struct statedump {
  lk_host *host;
  const char *path;
} statedump;

static int create(lk_host *host, const lk_options *o, void **self) {
  statedump *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->path = lk_opt_string(o, "path");
  *self = s;
  return 0;
}

static double element(const lk_tensor *t, size_t i) {
  switch (t->dtype) {
  case LK_F64: return ((const double *)t->data)[i];
  case LK_F32: return ((const float *)t->data)[i];
  default: return ((const int32_t *)t->data)[i];
  }
}

static int on_train_end(void *self) {
  statedump *s = self;
  FILE *f = fopen(s->path, "w");
  if (!f)
    return lk_fail(s->host, LK_EIO, "cannot write %s", s->path);
  size_t n;
  lk_tensor *const *states = lk_host_states(s->host, &n);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < states[i]->numel; k++)
      fprintf(f, "%s[%zu] %.17g\n", states[i]->name, k, element(states[i], k));
  return fclose(f) == 0 ? 0
                        : lk_fail(s->host, LK_EIO, "cannot write %s", s->path);
}

static const lk_callback_ops ops = {.on_train_end = on_train_end};

static const lk_option options[] = {
    {"path", LK_OPT_STRING, NULL, "file that receives the state", NULL},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "statedump",
    .version = "1.0",
    .summary = "writes every state tensor to a file when training ends",
    .options = options,
    .create = create,
    .destroy = free,
    .callback = &ops,
};
