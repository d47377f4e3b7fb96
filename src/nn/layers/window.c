/* What the convolutions and the pools share: their geometry (a window over
 * a padded image or sequence, and the output it gives) and the pools'
 * arguments. A sequence [C, L] is an image [C, 1, L]. */
#include "layers.h"

const lk_layer_arg lk__layer_pool_args[] = {
    {"kernel_size", LK_LAYER_PAIR,
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED, NULL, 1, LAYER_SIZE_MAX,
     NULL, "the window, k or (kh, kw)"},
    {"stride", LK_LAYER_PAIR, LK_LAYER_ARG_POSITIONAL, NULL, 1, LAYER_SIZE_MAX,
     NULL, "the step of the window; default: its size"},
    {"padding", LK_LAYER_PAIR, LK_LAYER_ARG_POSITIONAL, "0", 0, LAYER_SIZE_MAX,
     NULL,
     "implicit padding on each side, at most half the "
     "window"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

const lk_layer_arg lk__layer_pool1d_args[] = {
    {"kernel_size", LK_LAYER_INT,
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED, NULL, 1, LAYER_SIZE_MAX,
     NULL, "the window"},
    {"stride", LK_LAYER_INT, LK_LAYER_ARG_POSITIONAL, NULL, 1, LAYER_SIZE_MAX,
     NULL, "the step of the window; default: its size"},
    {"padding", LK_LAYER_INT, LK_LAYER_ARG_POSITIONAL, "0", 0, LAYER_SIZE_MAX,
     NULL, "implicit padding on each side, at most half the window"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

/* C's geometry (n = 1; c, h, w from the input) checked, the output shape
 * [C', H', W'] or, ONE_D, [C', W'] into OUT. */
static int window(lk_layer *l, bool conv, lk_nn_conv2d *c, bool one_d,
                  lk_layer_shape *out) {
  const char *what = conv ? "kernel" : "window";
  char a[64];
  lk_layer_shape_text(&l->in, a, sizeof a);
  int dh = c->dilation_h ? c->dilation_h : 1,
      dw = c->dilation_w ? c->dilation_w : 1;
  long long ekh = (long long)dh * (c->kh - 1) + 1,
            ekw = (long long)dw * (c->kw - 1) + 1;
  if (!conv && (2 * c->pad_h > c->kh || 2 * c->pad_w > c->kw))
    return one_d ? lk__err(LK_ECONFIG,
                           "padding %d for a window of %d: at most half the "
                           "window (as torch requires)",
                           c->pad_w, c->kw)
                 : lk__err(LK_ECONFIG,
                           "padding %d x %d for a window of %d x %d: at most "
                           "half the window (as torch requires)",
                           c->pad_h, c->pad_w, c->kh, c->kw);
  if (c->h + 2LL * c->pad_h < ekh || c->w + 2LL * c->pad_w < ekw) {
    char dil[48] = ""; /* the pools have none */
    if (conv && one_d)
      snprintf(dil, sizeof dil, " and dilation %d", dw);
    else if (conv)
      snprintf(dil, sizeof dil, " and dilation %d x %d", dh, dw);
    return one_d
               ? lk__err(LK_ECONFIG,
                         "input %s, %s %d with padding %d%s: the %s is "
                         "larger than the padded sequence",
                         a, what, c->kw, c->pad_w, dil, what)
               : lk__err(LK_ECONFIG,
                         "input %s, %s %d x %d with padding %d x %d%s: the "
                         "%s is larger than the padded image",
                         a, what, c->kh, c->kw, c->pad_h, c->pad_w, dil, what);
  }
  int oh, ow, rc;
  if (conv)
    rc = lk_nn_conv2d_size(c, &oh, &ow);
  else {
    lk_nn_pool2d p = {.n = 1,
                      .c = c->c,
                      .h = c->h,
                      .w = c->w,
                      .kh = c->kh,
                      .kw = c->kw,
                      .stride_h = c->stride_h,
                      .stride_w = c->stride_w,
                      .pad_h = c->pad_h,
                      .pad_w = c->pad_w};
    rc = lk_nn_pool2d_size(&p, &oh, &ow);
  }
  if (rc != 0)
    return lk__err_prefix(rc, "input %s", a);
  int ch = conv ? c->oc : c->c;
  if (one_d)
    out->ndim = 2, out->d[0] = ch, out->d[1] = ow;
  else
    out->ndim = 3, out->d[0] = ch, out->d[1] = oh, out->d[2] = ow;
  return 0;
}

int lk__layer_window(lk_layer *l, bool conv, int oc, int kernel, int stride,
                     int padding, lk_nn_pool2d *g, lk_layer_shape *out) {
  const lk_layer_value *k = &l->args[kernel], *s = &l->args[stride],
                       *p = &l->args[padding];
  lk_nn_conv2d c = {.n = 1,
                    .c = l->in.d[0],
                    .h = l->in.d[1],
                    .w = l->in.d[2],
                    .oc = oc,
                    .kh = k->i,
                    .kw = k->j,
                    .stride_h = s->set ? s->i
                                : conv ? 1
                                       : k->i,
                    .stride_w = s->set ? s->j
                                : conv ? 1
                                       : k->j,
                    .pad_h = p->i,
                    .pad_w = p->j};
  *g = (lk_nn_pool2d){.n = 1,
                      .c = c.c,
                      .h = c.h,
                      .w = c.w,
                      .kh = c.kh,
                      .kw = c.kw,
                      .stride_h = c.stride_h,
                      .stride_w = c.stride_w,
                      .pad_h = c.pad_h,
                      .pad_w = c.pad_w};
  return window(l, conv, &c, false, out);
}

int lk__layer_conv(lk_layer *l, bool one_d, const int *arg, lk_nn_conv2d *c,
                   lk_layer_shape *out) {
  const lk_layer_value *k = &l->args[arg[WIN_KERNEL]],
                       *s = &l->args[arg[WIN_STRIDE]],
                       *p = &l->args[arg[WIN_PADDING]],
                       *d = &l->args[arg[WIN_DILATION]];
  int groups = l->args[arg[WIN_GROUPS]].i, oc = l->args[arg[WIN_OUT]].i;
  char a[64];
  if (l->in.d[0] % groups || oc % groups)
    return lk__err(LK_ECONFIG,
                   "groups = %d must divide the input's channels (%d, input "
                   "%s) and out_channels (%d)",
                   groups, l->in.d[0], lk_layer_shape_text(&l->in, a, sizeof a),
                   oc);
  *c = (lk_nn_conv2d){.n = 1,
                      .c = l->in.d[0],
                      .h = one_d ? 1 : l->in.d[1],
                      .w = one_d ? l->in.d[1] : l->in.d[2],
                      .oc = oc,
                      .kh = one_d ? 1 : k->i,
                      .kw = one_d ? k->i : k->j,
                      .stride_h = one_d ? 1 : s->i,
                      .stride_w = one_d ? s->i : s->j,
                      .pad_h = one_d ? 0 : p->i,
                      .pad_w = one_d ? p->i : p->j,
                      .dilation_h = one_d ? 1 : d->i,
                      .dilation_w = one_d ? d->i : d->j,
                      .groups = groups};
  return window(l, true, c, one_d, out);
}

int lk__layer_pool1d(lk_layer *l, lk_nn_pool2d *g, lk_layer_shape *out) {
  const lk_layer_value *k = &l->args[POOL_KERNEL], *s = &l->args[POOL_STRIDE],
                       *p = &l->args[POOL_PADDING];
  lk_nn_conv2d c = {.n = 1,
                    .c = l->in.d[0],
                    .h = 1,
                    .w = l->in.d[1],
                    .kh = 1,
                    .kw = k->i,
                    .stride_h = 1,
                    .stride_w = s->set ? s->i : k->i,
                    .pad_w = p->i};
  *g = (lk_nn_pool2d){.n = 1,
                      .c = c.c,
                      .h = 1,
                      .w = c.w,
                      .kh = 1,
                      .kw = c.kw,
                      .stride_h = 1,
                      .stride_w = c.stride_w,
                      .pad_w = c.pad_w};
  return window(l, false, &c, true, out);
}
