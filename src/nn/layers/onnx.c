/* What the built-in layers' ONNX lowerings share (layers.h): their
 * parameters as initializers under their torch names, constants, and a
 * window's attributes. */
#include <stdio.h>

#include "layers.h"

int lk__layer_onnx_tensor(const lk_layer *l, lk_onnx *g, const char *prefix,
                          int k, char *name, size_t len) {
  lk_layer_tensor t[LK_LAYER_MAX_TENSORS];
  int n = l->type->tensors ? l->type->tensors(l, t) : 0;
  if (k >= n || k >= l->n_t || !l->t[k])
    return lk__err(LK_EINVAL, "%s: no tensor %d (it declares %d)",
                   l->type->name, k, n);
  int w = snprintf(name, len, "%s%s", prefix ? prefix : "", t[k].name);
  if (w < 0 || (size_t)w >= len)
    return lk__err(LK_EINVAL, "%s: the name %s%s is too long", l->type->name,
                   prefix, t[k].name);
  return lk_onnx_initializer(g, name, l->t[k]);
}

const char *lk__layer_onnx_const(lk_onnx *g, const char *hint, const float *v,
                                 float c, size_t n) {
  const char *name = lk_onnx_tmp(g, hint);
  float *fill = NULL;
  if (name && !v && !(v = fill = malloc((n ? n : 1) * sizeof *fill))) {
    lk__err(LK_ENOMEM, "out of memory");
    return NULL;
  }
  for (size_t i = 0; fill && i < (n ? n : 1); i++)
    fill[i] = c;
  int rc = name ? lk_onnx_const_f32(g, name, v, n) : LK_ENOMEM;
  free(fill);
  return rc == 0 ? name : NULL;
}

void lk__layer_onnx_window(const lk_nn_pool2d *p, lk_onnx_attr *a,
                           int64_t *ints) {
  int64_t v[8] = {p->kh,    p->kw,    p->stride_h, p->stride_w,
                  p->pad_h, p->pad_w, p->pad_h,    p->pad_w};
  memcpy(ints, v, sizeof v);
  a[0] = (lk_onnx_attr){
      .name = "kernel_shape", .type = LK_ONNX_INTS, .ints = ints, .n = 2};
  a[1] = (lk_onnx_attr){
      .name = "strides", .type = LK_ONNX_INTS, .ints = ints + 2, .n = 2};
  a[2] = (lk_onnx_attr){
      .name = "pads", .type = LK_ONNX_INTS, .ints = ints + 4, .n = 4};
}
