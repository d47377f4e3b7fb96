/* A plugin that needs a symbol nobody defines: RTLD_NOW must refuse it at
 * load time instead of crashing in the middle of a run. */
#include <loopkit/loopkit.h>

extern int lk_no_such_function_anywhere(void);

static int zero_grad(void *self, lk_tensor *const *params, size_t n) {
  (void)self;
  (void)params;
  (void)n;
  return lk_no_such_function_anywhere();
}

static const lk_zero_grad_ops ops = {.zero_grad = zero_grad};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "undefsym",
    .version = "1.0",
    .summary = "has an undefined symbol",
    .zero_grad = &ops,
};
