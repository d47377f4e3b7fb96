/* tracecb: a callback plugin that writes each hook to a trace file,
 * "cb:HOOK", so tests can see that callbacks run before the model. */
#include <stdio.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

static int create(lk_host *host, const lk_options *o, void **self) {
  FILE *f = fopen(lk_opt_string(o, "trace"), "a");
  if (!f)
    return lk_fail(host, LK_EIO, "cannot open trace %s",
                   lk_opt_string(o, "trace"));
  *self = f;
  return 0;
}

static void destroy(void *self) {
  fclose(self);
}

static int hook(void *self, const char *name) {
  fprintf(self, "cb:%s\n", name);
  fflush(self);
  return 0;
}
static int on_train_start(void *s) {
  return hook(s, "on_train_start");
}
static int on_train_epoch_start(void *s, uint64_t e) {
  (void)e;
  return hook(s, "on_train_epoch_start");
}
static int on_train_batch_start(void *s, const lk_batch *b) {
  (void)b;
  return hook(s, "on_train_batch_start");
}
static int on_before_zero_grad(void *s) {
  return hook(s, "on_before_zero_grad");
}
static int on_before_backward(void *s, double loss) {
  (void)loss;
  return hook(s, "on_before_backward");
}
static int on_after_backward(void *s) {
  return hook(s, "on_after_backward");
}
static int on_before_optimizer_step(void *s) {
  return hook(s, "on_before_optimizer_step");
}
static int on_after_optimizer_step(void *s) {
  return hook(s, "on_after_optimizer_step");
}
static int on_train_batch_end(void *s, const lk_step_result *r) {
  (void)r;
  return hook(s, "on_train_batch_end");
}
static int on_validation_end(void *s, const lk_step_result *r) {
  (void)r;
  return hook(s, "on_validation_end");
}
static int on_train_epoch_end(void *s, uint64_t e) {
  (void)e;
  return hook(s, "on_train_epoch_end");
}
static int on_train_end(void *s) {
  return hook(s, "on_train_end");
}
static int on_validation_start(void *s) {
  return hook(s, "on_validation_start");
}

static const lk_callback_ops ops = {
    on_train_start,           on_train_epoch_start,    on_train_batch_start,
    on_before_zero_grad,      on_before_backward,      on_after_backward,
    on_before_optimizer_step, on_after_optimizer_step, on_train_batch_end,
    on_validation_end,        on_train_epoch_end,      on_train_end,
    on_validation_start};

static const lk_option options[] = {{"trace", LK_OPT_STRING, NULL,
                                     "file that receives one line per hook",
                                     NULL},
                                    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "tracecb",
    .version = "1.0",
    .summary = "test callback that traces every hook",
    .options = options,
    .create = create,
    .destroy = destroy,
    .callback = &ops,
};
