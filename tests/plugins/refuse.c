/* refuse: a zero_grad plugin whose create fails unless ok = true, for the
 * "plugin refuses its options" error. */
#include <loopkit/loopkit.h>

static int create(lk_host *host, const lk_options *o, void **self) {
  *self = NULL;
  if (!lk_opt_bool(o, "ok"))
    return lk_fail(host, LK_ECONFIG, "option ok = false: refusing to start");
  return 0;
}

static int zero_grad(void *self, lk_tensor *const *params, size_t n) {
  (void)self;
  (void)params;
  (void)n;
  return 0;
}

static const lk_option options[] = {
    {"ok", LK_OPT_BOOL, "false", "start only when true", NULL},
    {NULL, 0, NULL, NULL, NULL}};
static const lk_zero_grad_ops ops = {.zero_grad = zero_grad};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "refuse",
    .version = "1.0",
    .summary = "test plugin that refuses to start",
    .options = options,
    .create = create,
    .zero_grad = &ops,
};
