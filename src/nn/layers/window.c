/* What conv2d and the pools share: their geometry (a window over a padded
 * image, and the output it gives) and the pools' arguments. */
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

int lk__layer_window(lk_layer *l, bool conv, int oc, int kernel, int stride,
                     int padding, lk_nn_pool2d *g, lk_layer_shape *out) {
  const lk_layer_value *k = &l->args[kernel], *s = &l->args[stride],
                       *p = &l->args[padding];
  const char *what = conv ? "kernel" : "window";
  char a[64];
  lk_layer_shape_text(&l->in, a, sizeof a);
  *g = (lk_nn_pool2d){.n = 1,
                      .c = l->in.d[0],
                      .h = l->in.d[1],
                      .w = l->in.d[2],
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
  if (!conv && (2 * p->i > k->i || 2 * p->j > k->j))
    return lk__err(LK_ECONFIG,
                   "padding %d x %d for a window of %d x %d: at most half the "
                   "window (as torch requires)",
                   p->i, p->j, k->i, k->j);
  if (g->h + 2 * p->i < k->i || g->w + 2 * p->j < k->j)
    return lk__err(LK_ECONFIG,
                   "input %s, %s %d x %d with padding %d x %d: the %s is "
                   "larger than the padded image",
                   a, what, k->i, k->j, p->i, p->j, what);
  int oh, ow, rc;
  if (conv) {
    lk_nn_conv2d c = {g->n,  g->c,        g->h,        g->w,     oc,      g->kh,
                      g->kw, g->stride_h, g->stride_w, g->pad_h, g->pad_w};
    rc = lk_nn_conv2d_size(&c, &oh, &ow);
  } else
    rc = lk_nn_pool2d_size(g, &oh, &ow);
  if (rc != 0)
    return lk__err_prefix(rc, "input %s", a);
  out->ndim = 3;
  out->d[0] = conv ? oc : g->c, out->d[1] = oh, out->d[2] = ow;
  return 0;
}
