/* BatchNorm1d: torch.nn.BatchNorm1d on [C] or [C, L] samples; the rest is
 * BatchNorm2d's (batchnorm2d.c). */
#include "batchnorm.h"

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  (void)n_in, (void)in, (void)out;
  char a[64];
  if (l->in.ndim != 1 && l->in.ndim != 2)
    return lk__err(LK_ECONFIG, "input %s; expected [C] or [C, L]",
                   lk_layer_shape_text(&l->in, a, sizeof a));
  int c = l->in.d[0];
  return lk__batchnorm_infer(l, c, l->in.ndim == 1 ? 1 : l->in.d[1]);
}

const lk_layer_type lk__layer_batchnorm1d = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "batchnorm1d",
    .summary = "batch normalization of [C] or [C, L] per channel",
    .args = lk__batchnorm_args,
    .flags = LK_LAYER_TRAIN_DIFFERS,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = LK__BATCHNORM_STATE_SIZE,
    .infer = infer,
    .tensors = lk__batchnorm_tensors,
    .init = lk__batchnorm_init,
    .bind = lk__batchnorm_bind,
    .release = lk__batchnorm_release,
    .forward = lk__batchnorm_forward,
    .backward = lk__batchnorm_backward,
    .onnx = lk__batchnorm_onnx};
