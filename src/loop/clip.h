/* Gradient clipping, as torch.nn.utils.clip_grad_norm_ and
 * clip_grad_value_: after backward, before the update. */
#ifndef LK_CLIP_H
#define LK_CLIP_H

#include "tensors.h"

enum { LK__CLIP_NORM, LK__CLIP_VALUE };

/* Clips the gradients of the N parameters PARAMS to VALUE by ALGORITHM. */
int lk__clip_gradients(lk_tensor *const *params, size_t n, double value,
                       int algorithm);

#endif
