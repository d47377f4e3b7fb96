/* Gradient clipping (see clip.h). */
#include <math.h>

#include "clip.h"

/* As torch.nn.utils.clip_grad_norm_ (coefficient max / (norm + 1e-6),
 * applied when below 1) and clip_grad_value_. */
int lk__clip_gradients(lk_tensor *const *params, size_t n, double value,
                       int algorithm) {
  if (algorithm == LK__CLIP_VALUE) {
    for (size_t i = 0; i < n; i++) {
      lk_tensor *t = params[i];
      if (t->dtype == LK_F64) {
        double *g = t->grad;
        for (size_t k = 0; k < t->numel; k++)
          g[k] = g[k] > value ? value : g[k] < -value ? -value : g[k];
      } else {
        float *g = t->grad, v = (float)value;
        for (size_t k = 0; k < t->numel; k++)
          g[k] = g[k] > v ? v : g[k] < -v ? -v : g[k];
      }
    }
    return 0;
  }
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *t = params[i];
    for (size_t k = 0; k < t->numel; k++) {
      double g = lk__element(t->dtype, t->grad, k);
      sum += g * g;
    }
  }
  double norm = sqrt(sum);
  double coef = value / (norm + 1e-6);
  if (!isfinite(norm))
    return lk__err(LK_ENONFINITE,
                   "gradient norm is %g: cannot clip (use terminate_on_nan "
                   "to find where it started)",
                   norm);
  if (coef >= 1.0)
    return 0;
  for (size_t i = 0; i < n; i++) {
    lk_tensor *t = params[i];
    if (t->dtype == LK_F64) {
      double *g = t->grad;
      for (size_t k = 0; k < t->numel; k++)
        g[k] *= coef;
    } else {
      float *g = t->grad, c = (float)coef;
      for (size_t k = 0; k < t->numel; k++)
        g[k] *= c;
    }
  }
  return 0;
}
