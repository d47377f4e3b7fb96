/* What softmax.c and logsoftmax.c share: torch's dim argument (required,
 * counted with the batch as 0, negative from the end) and the
 * [outer, D, inner] geometry the kit's softmax takes from it. Private to
 * the layer tables. */
#ifndef LK_NN_LAYERS_SOFTMAX_H
#define LK_NN_LAYERS_SOFTMAX_H

#include <limits.h>

#include "layers.h"

/* torch warns when dim is left out and picks one by the input's rank (an
 * implicit choice it deprecated); here it is required. */
#define SOFTMAX_ARGS                                                           \
  {                                                                            \
    {"dim",                                                                    \
     LK_LAYER_INT,                                                             \
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED,                          \
     NULL,                                                                     \
     -(LK_MAX_DIMS + 1),                                                       \
     LK_MAX_DIMS,                                                              \
     NULL,                                                                     \
     "the dimension normalized, the batch's 0 (1: [N, C]'s C)"},               \
    {                                                                          \
      NULL, 0, 0, NULL, 0, 0, NULL, NULL                                       \
    }                                                                          \
  }

/* The sample's dimension dim names, in [0, ndim), or a message. */
static inline int softmax_axis(const lk_layer *l, int *axis) {
  char a[64];
  int dim = l->args[0].i, nd = l->in.ndim + 1;
  int k = dim < 0 ? dim + nd : dim;
  if (k < 0 || k >= nd)
    return lk__err(LK_ECONFIG,
                   "dim %d out of range for an input of %d dimensions with "
                   "the batch (%s per sample): expected -%d to %d",
                   dim, nd, lk_layer_shape_text(&l->in, a, sizeof a), nd,
                   nd - 1);
  if (k == 0)
    return lk__err(LK_ECONFIG,
                   "dim %d is the batch's: each sample would depend on "
                   "the others in its batch",
                   dim);
  *axis = k - 1;
  return 0;
}

static inline int softmax_infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                                lk_layer_shape *out) {
  (void)n_in, (void)in, (void)out;
  int axis = 0;
  return softmax_axis(l, &axis);
}

/* The ONNX Softmax's or LogSoftmax's axis attribute: dim, counted with
 * the batch as torch and ONNX count it (made non-negative). */
static inline int softmax_onnx_axis(const lk_layer *l, lk_onnx_attr *a) {
  int axis = 0;
  int rc = softmax_axis(l, &axis);
  if (rc == 0)
    *a = (lk_onnx_attr){.name = "axis", .type = LK_ONNX_INT, .i = axis + 1};
  return rc;
}

/* A batch of N as the kit's [outer, D, inner]. */
static inline int softmax_geometry(const lk_layer *l, int n, int *outer, int *D,
                                   int *inner) {
  int axis = 0;
  int rc = softmax_axis(l, &axis);
  if (rc != 0)
    return rc;
  size_t o = (size_t)n, q = 1;
  for (int i = 0; i < axis; i++)
    o *= (size_t)l->in.d[i];
  for (int i = axis + 1; i < l->in.ndim; i++)
    q *= (size_t)l->in.d[i];
  if (o > INT_MAX || q > INT_MAX)
    return lk__err(LK_EINVAL, "%s: a batch of %d is too large", l->type->name,
                   n);
  *outer = (int)o, *D = l->in.d[axis], *inner = (int)q;
  return 0;
}

#endif
