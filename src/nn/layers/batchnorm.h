/* What BatchNorm1d and BatchNorm2d share (batchnorm2d.c). Private. */
#ifndef LK_NN_LAYERS_BATCHNORM_H
#define LK_NN_LAYERS_BATCHNORM_H

#include "layers.h"

typedef struct bn_state {
  int c, hw;
  float *mean, *rstd; /* [C]: the statistics the last forward used */
} bn_state;

#define LK__BATCHNORM_STATE_SIZE sizeof(bn_state)

extern const lk_layer_arg lk__batchnorm_args[];
int lk__batchnorm_infer(lk_layer *l, int c, int hw);
int lk__batchnorm_tensors(const lk_layer *l, lk_layer_tensor *t);
void lk__batchnorm_init(lk_layer *l, lk_rng *rng);
int lk__batchnorm_bind(lk_layer *l);
void lk__batchnorm_release(lk_layer *l);
int lk__batchnorm_forward(lk_layer *l, lk_nn *nn, float *y,
                          const float *const *x, int n, bool training,
                          lk_rng *rng);
int lk__batchnorm_backward(lk_layer *l, lk_nn *nn, float *const *dx,
                           const float *dy, const float *const *x,
                           const float *y, int n);
int lk__batchnorm_onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                       const char *out, const char *prefix);

#endif
