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

int lk__layer_onnx_conv(const lk_layer *l, lk_onnx *g, const char *const *in,
                        const char *out, const char *prefix,
                        const lk_nn_conv2d *c, bool one_d, bool bias) {
  /* the 2-d values, or the 1-d ones (the width's) of a [N, C, L] input */
  int64_t v[10] = {c->kh,
                   c->kw,
                   c->stride_h ? c->stride_h : 1,
                   c->stride_w ? c->stride_w : 1,
                   c->pad_h,
                   c->pad_w,
                   c->pad_h,
                   c->pad_w,
                   c->dilation_h ? c->dilation_h : 1,
                   c->dilation_w ? c->dilation_w : 1};
  int64_t d1[10] = {v[1], v[3], v[5], v[7], v[9]};
  const int64_t *ints = one_d ? d1 : v;
  size_t n = one_d ? 1 : 2;
  lk_onnx_attr a[5] = {
      {.name = "kernel_shape", .type = LK_ONNX_INTS, .ints = ints, .n = n},
      {.name = "strides", .type = LK_ONNX_INTS, .ints = ints + n, .n = n},
      {.name = "pads", .type = LK_ONNX_INTS, .ints = ints + 2 * n, .n = 2 * n},
      {.name = "dilations", .type = LK_ONNX_INTS, .ints = ints + 4 * n, .n = n},
      {.name = "group", .type = LK_ONNX_INT, .i = c->groups ? c->groups : 1}};
  char w[128], b[128];
  int rc = lk__layer_onnx_tensor(l, g, prefix, 0, w, sizeof w);
  if (rc == 0 && bias)
    rc = lk__layer_onnx_tensor(l, g, prefix, 1, b, sizeof b);
  const char *x[3] = {in[0], w, b};
  return rc ? rc : layer_onnx_op(g, "Conv", x, bias ? 3 : 2, out, a, 5);
}

void lk__layer_onnx_window1d(const lk_nn_pool2d *p, lk_onnx_attr *a,
                             int64_t *ints) {
  int64_t v[4] = {p->kw, p->stride_w ? p->stride_w : p->kw, p->pad_w, p->pad_w};
  memcpy(ints, v, sizeof v);
  a[0] = (lk_onnx_attr){
      .name = "kernel_shape", .type = LK_ONNX_INTS, .ints = ints, .n = 1};
  a[1] = (lk_onnx_attr){
      .name = "strides", .type = LK_ONNX_INTS, .ints = ints + 1, .n = 1};
  a[2] = (lk_onnx_attr){
      .name = "pads", .type = LK_ONNX_INTS, .ints = ints + 2, .n = 2};
}

int lk__layer_onnx_adaptive(const lk_nn_adaptivepool2d *p, bool one_d,
                            lk_onnx *g, const char *const *in,
                            const char *out) {
  const char *name = one_d ? "adaptiveavgpool1d" : "adaptiveavgpool2d";
  if (p->oh == 1 && p->ow == 1)
    return layer_onnx_op(g, "GlobalAveragePool", in, 1, out, NULL, 0);
  if (p->h % p->oh || p->w % p->ow)
    return one_d ? lk__err(LK_EINVAL,
                           "%s: output_size %d over a length of %d: ONNX has "
                           "no adaptive pool, and these bins are uneven (no "
                           "AveragePool makes them); make the length a "
                           "multiple of output_size",
                           name, p->ow, p->w)
                 : lk__err(LK_EINVAL,
                           "%s: output_size %d x %d over %d x %d: ONNX has no "
                           "adaptive pool, and these bins are uneven (no "
                           "AveragePool makes them); make the input a "
                           "multiple of output_size",
                           name, p->oh, p->ow, p->h, p->w);
  int64_t v[4] = {p->h / p->oh, p->w / p->ow, p->h / p->oh, p->w / p->ow};
  int64_t z[4] = {0, 0, 0, 0};
  size_t n = one_d ? 1 : 2;
  lk_onnx_attr a[3] = {
      {.name = "kernel_shape", .type = LK_ONNX_INTS, .ints = v + 2 - n, .n = n},
      {.name = "strides", .type = LK_ONNX_INTS, .ints = v + 4 - n, .n = n},
      {.name = "pads", .type = LK_ONNX_INTS, .ints = z, .n = 2 * n}};
  return layer_onnx_op(g, "AveragePool", in, 1, out, a, 3);
}
