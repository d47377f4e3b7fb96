/* zero: the default zero_grad, as torch's optimizer.zero_grad(
 * set_to_none=False): every parameter's gradient is set to 0. */
#include <string.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

static int zero_grad(void *self, lk_tensor *const *params, size_t n) {
  (void)self;
  for (size_t i = 0; i < n; i++) {
    lk_tensor *t = params[i];
    if (t->grad) /* all-zero bits are +0.0 in IEEE 754, f32 and f64 alike */
      memset(t->grad, 0, t->numel * lk_dtype_size(t->dtype));
  }
  return 0;
}

static const lk_zero_grad_ops zero_grad_ops = {.zero_grad = zero_grad};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_DESCRIPTOR(.name = "zero",
                       .summary = "sets every parameter's gradient to zero",
                       .zero_grad = &zero_grad_ops);
