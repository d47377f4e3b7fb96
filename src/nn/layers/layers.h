/* Private to the built-in layer tables (src/nn/layers): what several of
 * them share. Nothing here is exported. */
#ifndef LK_NN_LAYERS_H
#define LK_NN_LAYERS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/internal.h"
#include "loopkit/layer.h"

#define LAYER_SIZE_MAX 16777216.0 /* a size argument's largest */

/* An argument's table row, as most layers write them. */
#define ARG_SIZE(name, flags, help)                                            \
  { name, LK_LAYER_INT, flags, NULL, 1, LAYER_SIZE_MAX, NULL, help }
#define ARG_INPUT(name, help)                                                  \
  ARG_SIZE(name, LK_LAYER_ARG_INPUT,                                           \
           help " (inferred from the input; "                                  \
                "given, it is checked)")

/* "NAME = V, but its input is [..]" unless argument ARG (the input's size)
 * is not given or is GOT. */
static inline int layer_check_input(const lk_layer *l, int arg, int got) {
  char a[64];
  const lk_layer_value *v = &l->args[arg];
  if (!v->given || v->i == got)
    return 0;
  return lk__err(LK_ECONFIG, "%s = %d, but its input is %s",
                 l->type->args[arg].name, v->i,
                 lk_layer_shape_text(&l->in, a, sizeof a));
}

/* An image [C, H, W] or a message. */
static inline int layer_need_image(const lk_layer *l) {
  char a[64];
  if (l->in.ndim == 3)
    return 0;
  return lk__err(LK_ECONFIG,
                 "input %s; expected an image [C, H, W] (the data's samples, "
                 "or a conv2d's or a pool's output)",
                 lk_layer_shape_text(&l->in, a, sizeof a));
}

/* torch's kaiming_uniform_(a = sqrt(5)) of t[0] and the bias t[1], when
 * there: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) both. */
static inline void layer_init_kaiming(lk_layer *l, lk_rng *rng) {
  lk_tensor *w = l->t[0];
  double bound = 1 / sqrt((double)(w->numel / w->shape[0]));
  for (int j = 0; j < 2 && j < l->n_t; j++)
    for (size_t k = 0; k < l->t[j]->numel; k++)
      ((float *)l->t[j]->data)[k] =
          (float)((2 * lk_rng_uniform(rng) - 1) * bound);
}

/* A declared tensor. */
static inline void layer_tensor(lk_layer_tensor *t, const char *name,
                                unsigned flags, lk_dtype dtype, int ndim,
                                size_t d0, size_t d1, size_t d2, size_t d3) {
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->flags = flags, t->dtype = dtype, t->ndim = ndim;
  t->shape[0] = d0, t->shape[1] = d1, t->shape[2] = d2, t->shape[3] = d3;
}

static inline float *layer_data(const lk_layer *l, int k) {
  return k < l->n_t && l->t[k] ? l->t[k]->data : NULL;
}
static inline float *layer_grad(const lk_layer *l, int k) {
  return k < l->n_t && l->t[k] ? l->t[k]->grad : NULL;
}

/* ---- ONNX lowerings (onnx.c) ---- */

/* Layer L's declared tensor K added as the initializer PREFIX then its
 * declared name ("3." "weight"), that name into NAME [LEN]. */
int lk__layer_onnx_tensor(const lk_layer *l, lk_onnx *g, const char *prefix,
                          int k, char *name, size_t len);

/* One node OP from IN [N_IN] to OUT with the N_A attributes A. */
static inline int layer_onnx_op(lk_onnx *g, const char *op,
                                const char *const *in, int n_in,
                                const char *out, const lk_onnx_attr *a,
                                int n_a) {
  return lk_onnx_node(g, op, in, n_in, &out, 1, a, n_a);
}

/* The f32 constant of N values V, each C when V is NULL, under a fresh
 * name (HINT_k): its name, or NULL (the message set). */
const char *lk__layer_onnx_const(lk_onnx *g, const char *hint, const float *v,
                                 float c, size_t n);

/* The pools' and conv2d's attributes kernel_shape, strides and pads from
 * the geometry G into A [3], the values into INTS [8]. */
void lk__layer_onnx_window(const lk_nn_pool2d *p, lk_onnx_attr *a,
                           int64_t *ints);

/* Conv from C (conv1d's, ONE_D, on [N, C, L]; conv2d's on [N, C, H, W]):
 * kernel_shape, strides, pads, dilations and group; weight and, BIAS, bias
 * as L's tensors 0 and 1. */
int lk__layer_onnx_conv(const lk_layer *l, lk_onnx *g, const char *const *in,
                        const char *out, const char *prefix,
                        const lk_nn_conv2d *c, bool one_d, bool bias);
/* The adaptive pools' lowering (ONE_D on [N, C, L]): GlobalAveragePool
 * for an output of 1, AveragePool when the bins are uniform (the input a
 * multiple of the output), else a message naming the layer. */
int lk__layer_onnx_adaptive(const lk_nn_adaptivepool2d *p, bool one_d,
                            lk_onnx *g, const char *const *in, const char *out);
/* The 1-d pools' kernel_shape, strides and pads (their width's) */
void lk__layer_onnx_window1d(const lk_nn_pool2d *p, lk_onnx_attr *a,
                             int64_t *ints);

/* conv2d's and the pools' geometry (window.c): the output [C', H', W'] in
 * *OUT from the input image, *G the kit's; CONV: a kernel (OC output
 * channels, stride 1 by default), else a window (stride its size). The
 * args KERNEL, STRIDE, PADDING are indices in l->args. */
int lk__layer_window(lk_layer *l, bool conv, int oc, int kernel, int stride,
                     int padding, lk_nn_pool2d *g, lk_layer_shape *out);

/* The pools' arguments (window.c) */
extern const lk_layer_arg lk__layer_pool_args[];
enum { POOL_KERNEL, POOL_STRIDE, POOL_PADDING };
/* ... of the 1-d pools: ints, not pairs, in the same order */
extern const lk_layer_arg lk__layer_pool1d_args[];

/* A sequence [C, L] or a message. */
static inline int layer_need_sequence(const lk_layer *l) {
  char a[64];
  if (l->in.ndim == 2)
    return 0;
  return lk__err(LK_ECONFIG,
                 "input %s; expected a sequence [C, L] (the data's samples, "
                 "or a conv1d's or a 1-d pool's output)",
                 lk_layer_shape_text(&l->in, a, sizeof a));
}

/* conv1d's and conv2d's geometry (window.c): ARG[WIN_*] the indices of
 * their arguments; ONE_D: the input is [C, L] and the arguments ints, else
 * [C, H, W] and pairs. C receives the kernel's sizes (n = 1), OUT the
 * output's shape; groups not dividing both channel counts is an error. */
enum { WIN_OUT, WIN_KERNEL, WIN_STRIDE, WIN_PADDING, WIN_DILATION, WIN_GROUPS };
int lk__layer_conv(lk_layer *l, bool one_d, const int *arg, lk_nn_conv2d *c,
                   lk_layer_shape *out);
/* The 1-d pools' geometry: G the pool over [C, 1, L], OUT [C, L']. */
int lk__layer_pool1d(lk_layer *l, lk_nn_pool2d *g, lk_layer_shape *out);

/* ReLU's table, which max-pool fuses */
extern const lk_layer_type lk__layer_relu;

#endif
