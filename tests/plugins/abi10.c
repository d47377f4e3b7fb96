/* abi10: an optimizer as a plugin built for ABI 1.0 saw it — its ops table
 * ends after step and its descriptor after callback. A 1.1 host must load
 * it and must not read the entries 1.1 added (get_lr, set_lr, scheduler). */
#include <stddef.h>

#include <loopkit/loopkit.h>

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  (void)self;
  if (closure && closure() != closure())
    return 0; /* NaN: leave the parameters alone */
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < params[i]->numel; k++)
      ((double *)params[i]->data)[k] -= 0.01 * ((double *)params[i]->grad)[k];
  return 0;
}

/* The 1.0 layout of lk_optimizer_ops: step alone. */
static const struct {
  int (*step)(void *, lk_tensor *const *, size_t, lk_closure_fn);
} ops_1_0 = {step};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = 1u << 16,
    .size = offsetof(lk_descriptor, scheduler),
    .name = "abi10",
    .version = "1.0",
    .summary = "test optimizer built for ABI 1.0 (f64 gradient descent)",
    .optimizer = (const lk_optimizer_ops *)&ops_1_0,
};
