/* gpt's forward in evaluation mode as ONNX nodes (loopkit/onnx.h), opset
 * 17, the weights as initializers under nanoGPT's names:
 *
 *   x = Gather(wte, input) + Slice(wpe, 0, T)       T from Shape(input)
 *   per block: x += c_proj(attention(c_attn(LayerNorm(x))))
 *              x += mlp.c_proj(gelu(mlp.c_fc(LayerNorm(x))))
 *   output = LayerNorm(x) wte^T                      the tied head
 *
 * attention: Q, K, V split from c_attn's output, each [N, NH, T, hs];
 * softmax(Q K^T / sqrt(hs) + M) V, M the causal mask, a constant
 * [block_size, block_size] (0 on and below the diagonal, -1e9 above,
 * whose exp is 0 in f32) sliced to [T, T]. GELU is the built-in layer's
 * lowering (its tanh formula, as the kit's). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/layer.h>

#include "onnx.h"

/* a fresh value, or a failed build */
#define TMP(g, v, hint)                                                        \
  const char *v = lk_onnx_tmp(g, hint);                                        \
  if (!v)                                                                      \
  return LK_ENOMEM

static int op(lk_onnx *g, const char *type, const char *a, const char *b,
              const char *out, const lk_onnx_attr *at, int n_at) {
  const char *in[2] = {a, b};
  return lk_onnx_node(g, type, in, b ? 2 : 1, &out, 1, at, n_at);
}

/* OUT = X W^T (+ B): nn.Linear over the last dimension */
static int linear(lk_onnx *g, const char *x, lk_tensor *w, lk_tensor *b,
                  const char *out) {
  static const int64_t perm[2] = {1, 0};
  lk_onnx_attr p = {.name = "perm", .type = LK_ONNX_INTS, .ints = perm, .n = 2};
  TMP(g, wt, "wt");
  TMP(g, xw, "xw");
  int rc = lk_onnx_initializer(g, NULL, w);
  if (rc == 0 && b)
    rc = lk_onnx_initializer(g, NULL, b);
  if (rc == 0)
    rc = op(g, "Transpose", w->name, NULL, wt, &p, 1);
  if (rc == 0)
    rc = op(g, "MatMul", x, wt, b ? xw : out, NULL, 0);
  return rc == 0 && b ? op(g, "Add", xw, b->name, out, NULL, 0) : rc;
}

/* OUT = LayerNorm(X) over C, eps 1e-5; without bias, none */
static int layernorm(lk_onnx *g, const char *x, lk_tensor *w, lk_tensor *b,
                     const char *out) {
  lk_onnx_attr a[2] = {{.name = "axis", .type = LK_ONNX_INT, .i = -1},
                       {.name = "epsilon", .type = LK_ONNX_FLOAT, .f = 1e-5f}};
  const char *in[3] = {x, w->name, b ? b->name : ""};
  int rc = lk_onnx_initializer(g, NULL, w);
  if (rc == 0 && b)
    rc = lk_onnx_initializer(g, NULL, b);
  return rc ? rc
            : lk_onnx_node(g, "LayerNormalization", in, b ? 3 : 2, &out, 1, a,
                           2);
}

/* OUT = the built-in gelu's lowering of X */
static int gelu(lk_onnx *g, const char *x, const char *out) {
  lk_layer l;
  const lk_layer_type *t = lk_layer_find("gelu", 4);
  if (!t || !t->onnx || lk_layer_parse(&l, "gelu", 4) != 0)
    return lk_layer_fail(LK_EINVAL, "no built-in gelu to lower");
  int rc = t->onnx(&l, g, &x, out, "");
  lk_layer_free(&l);
  return rc;
}

/* Q, K or V (K-th of the split QKV) as heads [N, NH, T, hs], or K's as
 * [N, NH, hs, T] */
static int heads(lk_onnx *g, const char *x, int k, const char *out) {
  static const int64_t qv[4] = {0, 2, 1, 3}, kt[4] = {0, 2, 3, 1};
  lk_onnx_attr p = {
      .name = "perm", .type = LK_ONNX_INTS, .ints = k == 1 ? kt : qv, .n = 4};
  TMP(g, r, "heads");
  int rc = op(g, "Reshape", x, "gpt_heads_shape", r, NULL, 0);
  return rc ? rc : op(g, "Transpose", r, NULL, out, &p, 1);
}

/* OUT [N, T, C] = causal self-attention of QKV [N, T, 3C] */
static int attention(lk_onnx *g, const char *qkv, const char *out) {
  static const int64_t perm[4] = {0, 2, 1, 3};
  lk_onnx_attr axis2 = {.name = "axis", .type = LK_ONNX_INT, .i = 2};
  lk_onnx_attr last = {.name = "axis", .type = LK_ONNX_INT, .i = -1};
  lk_onnx_attr p = {.name = "perm", .type = LK_ONNX_INTS, .ints = perm, .n = 4};
  const char *split[3], *h[3];
  for (int k = 0; k < 3; k++)
    if (!(split[k] = lk_onnx_tmp(g, "qkv")) || !(h[k] = lk_onnx_tmp(g, "h")))
      return LK_ENOMEM;
  const char *in[2] = {qkv, "gpt_split"};
  int rc = lk_onnx_node(g, "Split", in, 2, split, 3, &axis2, 1);
  for (int k = 0; rc == 0 && k < 3; k++)
    rc = heads(g, split[k], k, h[k]);
  TMP(g, s, "scores");
  TMP(g, ss, "scaled");
  TMP(g, sm, "masked");
  TMP(g, pr, "probs");
  TMP(g, o, "att");
  TMP(g, ot, "att_t");
  if (rc == 0)
    rc = op(g, "MatMul", h[0], h[1], s, NULL, 0);
  if (rc == 0)
    rc = op(g, "Mul", s, "gpt_scale", ss, NULL, 0);
  if (rc == 0)
    rc = op(g, "Add", ss, "gpt_mask_t", sm, NULL, 0);
  if (rc == 0)
    rc = op(g, "Softmax", sm, NULL, pr, &last, 1);
  if (rc == 0)
    rc = op(g, "MatMul", pr, h[2], o, NULL, 0);
  if (rc == 0)
    rc = op(g, "Transpose", o, NULL, ot, &p, 1);
  return rc ? rc : op(g, "Reshape", ot, "gpt_embd_shape", out, NULL, 0);
}

/* Block B's tensors T [GPT_BLOCK_TENSORS] on the residual X into OUT */
static int block(lk_onnx *g, lk_tensor *const *t, const char *x,
                 const char *out) {
  const char *v[9];
  static const char *const hints[9] = {
      "ln_1", "c_attn", "attn", "c_proj", "res", "ln_2", "c_fc", "gelu", "mlp"};
  for (int k = 0; k < 9; k++)
    if (!(v[k] = lk_onnx_tmp(g, hints[k])))
      return LK_ENOMEM;
  int rc = layernorm(g, x, t[0], t[1], v[0]);
  rc = rc ? rc : linear(g, v[0], t[2], t[3], v[1]);
  rc = rc ? rc : attention(g, v[1], v[2]);
  rc = rc ? rc : linear(g, v[2], t[4], t[5], v[3]);
  rc = rc ? rc : op(g, "Add", x, v[3], v[4], NULL, 0);
  rc = rc ? rc : layernorm(g, v[4], t[6], t[7], v[5]);
  rc = rc ? rc : linear(g, v[5], t[8], t[9], v[6]);
  rc = rc ? rc : gelu(g, v[6], v[7]);
  rc = rc ? rc : linear(g, v[7], t[10], t[11], v[8]);
  return rc ? rc : op(g, "Add", v[4], v[8], out, NULL, 0);
}

/* The causal mask [block_size, block_size] as initializer gpt_mask */
static int mask(lk_onnx *g, int T) {
  size_t n = (size_t)T * (size_t)T;
  float *m = malloc(n * sizeof *m);
  if (!m)
    return lk_layer_fail(LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++)
    m[i] = i % (size_t)T > i / (size_t)T ? -1e9f : 0.0f;
  lk_tensor t = {.name = "gpt_mask",
                 .dtype = LK_F32,
                 .ndim = 2,
                 .shape = {(size_t)T, (size_t)T},
                 .numel = n,
                 .data = m};
  int rc = lk_onnx_initializer(g, NULL, &t);
  free(m);
  return rc;
}

/* The constants every block uses, and T from the input: gpt_t [1], the
 * mask sliced to [T, T] (gpt_mask_t) */
static int constants(lk_onnx *g, const gpt_onnx_spec *s) {
  int64_t hs = s->C / s->NH, C = s->C;
  const int64_t split[3] = {C, C, C}, hshape[4] = {0, 0, s->NH, hs};
  const int64_t eshape[3] = {0, 0, C}, zero[2] = {0, 0}, one[1] = {1};
  const int64_t two[1] = {2}, axes[2] = {0, 1};
  float scale = (float)(1 / sqrt((double)hs));
  lk_onnx_attr axis0 = {.name = "axis", .type = LK_ONNX_INT, .i = 0};
  int rc = lk_onnx_const_i64(g, "gpt_split", split, 3);
  rc = rc ? rc : lk_onnx_const_i64(g, "gpt_heads_shape", hshape, 4);
  rc = rc ? rc : lk_onnx_const_i64(g, "gpt_embd_shape", eshape, 3);
  rc = rc ? rc : lk_onnx_const_i64(g, "gpt_zeros", zero, 2);
  rc = rc ? rc : lk_onnx_const_i64(g, "gpt_zero", zero, 1);
  rc = rc ? rc : lk_onnx_const_i64(g, "gpt_one", one, 1);
  rc = rc ? rc : lk_onnx_const_i64(g, "gpt_two", two, 1);
  rc = rc ? rc : lk_onnx_const_i64(g, "gpt_axes", axes, 2);
  rc = rc ? rc : lk_onnx_const_f32(g, "gpt_scale", &scale, 0);
  rc = rc ? rc : mask(g, s->maxT);
  rc = rc ? rc : op(g, "Shape", "input", NULL, "gpt_shape", NULL, 0);
  const char *t[5] = {"gpt_shape", "gpt_one", "gpt_two", "gpt_zero", "gpt_t"};
  const char *tt[2] = {"gpt_t", "gpt_t"}, *out = "gpt_tt";
  rc = rc ? rc : lk_onnx_node(g, "Slice", t, 4, &t[4], 1, NULL, 0);
  rc = rc ? rc : lk_onnx_node(g, "Concat", tt, 2, &out, 1, &axis0, 1);
  const char *m[5] = {"gpt_mask", "gpt_zeros", "gpt_tt", "gpt_axes",
                      "gpt_mask_t"};
  return rc ? rc : lk_onnx_node(g, "Slice", m, 4, &m[4], 1, NULL, 0);
}

/* the token and position embeddings' sum into OUT */
static int embeddings(lk_onnx *g, const gpt_onnx_spec *s, const char *out) {
  TMP(g, tok, "tok");
  TMP(g, pos, "pos");
  const char *p[4] = {s->wpe->name, "gpt_zero", "gpt_t", "gpt_zero"};
  int rc = lk_onnx_initializer(g, NULL, s->wte);
  rc = rc ? rc : lk_onnx_initializer(g, NULL, s->wpe);
  rc = rc ? rc : op(g, "Gather", s->wte->name, "input", tok, NULL, 0);
  /* wpe's first T rows: starts [0], ends [T], axes [0] */
  rc = rc ? rc : lk_onnx_node(g, "Slice", p, 4, &pos, 1, NULL, 0);
  return rc ? rc : op(g, "Add", tok, pos, out, NULL, 0);
}

int gpt_onnx(lk_onnx *g, const gpt_onnx_spec *s) {
  const int64_t in[2] = {-1, -1}, out[3] = {-1, -1, s->V};
  int rc = lk_onnx_input(g, LK_ONNX_I64, 2, in);
  rc = rc ? rc : constants(g, s);
  TMP(g, x, "x");
  rc = rc ? rc : embeddings(g, s, x);
  for (int l = 0; rc == 0 && l < s->L; l++) {
    const char *next = lk_onnx_tmp(g, "x");
    rc = next ? block(g, s->blocks + (size_t)l * GPT_BLOCK_TENSORS, x, next)
              : LK_ENOMEM;
    x = next;
  }
  TMP(g, lnf, "ln_f");
  rc = rc ? rc : layernorm(g, x, s->lnfw, s->lnfb, lnf);
  rc = rc ? rc : linear(g, lnf, s->wte, NULL, "output"); /* tied */
  return rc ? rc : lk_onnx_output(g, LK_ONNX_F32, 3, out);
}
