/* The recurrent layers' shared part (rnn.h): torch's nn.LSTM and nn.GRU
 * with batch_first=True, zero initial states, the whole output sequence.
 * A layer of num_layers layers, each of one or two directions (the
 * reverse's output beside the forward's, [T, 2H]); dropout on every
 * layer's output but the last's, in training only, as torch's. */
#include "rnn.h"

const lk_layer_arg lk__rnn_args[] = {
    ARG_SIZE("hidden_size", LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED,
             "the state's size, H"),
    {"num_layers", LK_LAYER_INT, LK_LAYER_ARG_POSITIONAL, "1", 1, 8, NULL,
     "recurrent layers stacked"},
    {"bias", LK_LAYER_BOOL, LK_LAYER_ARG_POSITIONAL, "true", 0, 0, NULL,
     "the biases b_ih and b_hh"},
    {"dropout", LK_LAYER_REAL, LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_MAX_OPEN,
     "0", 0, 1, NULL, "dropout on each layer's output but the last's"},
    {"bidirectional", LK_LAYER_BOOL, LK_LAYER_ARG_POSITIONAL, "false", 0, 0,
     NULL, "a reverse direction too; the output [T, 2H]"},
    ARG_INPUT("input_size", "the input's last dimension, C"),
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

/* per direction of a layer: weight_ih, weight_hh, and the biases */
static int per_direction(const lk_layer *l) {
  return l->args[RNN_BIAS].i ? 4 : 2;
}

int lk__rnn_infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                  lk_layer_shape *out) {
  (void)n_in;
  char a[64];
  rnn_state *s = l->state;
  if (in->dtype != LK_F32 || in->ndim != 2)
    return lk__err(LK_ECONFIG,
                   "input %s; expected a sequence [T, C] (npy data [N, T, C], "
                   "or an embedding's output)",
                   lk_layer_shape_text(in, a, sizeof a));
  s->T = in->d[0], s->C = in->d[1], s->H = l->args[RNN_HIDDEN].i;
  s->L = l->args[RNN_LAYERS].i, s->D = l->args[RNN_BIDI].i ? 2 : 1;
  int n = s->L * s->D * per_direction(l);
  if (n > LK_LAYER_MAX_TENSORS)
    return lk__err(LK_ECONFIG,
                   "num_layers = %d%s%s makes %d parameters; a layer holds at "
                   "most %d: stack layers of fewer num_layers instead",
                   s->L, s->D == 2 ? ", bidirectional" : "",
                   l->args[RNN_BIAS].i ? ", with biases" : "", n,
                   LK_LAYER_MAX_TENSORS);
  if ((double)s->D * s->H > LAYER_SIZE_MAX)
    return lk__err(LK_ECONFIG, "hidden_size = %d: too large", s->H);
  out->d[1] = s->D * s->H;
  return layer_check_input(l, RNN_IN, s->C);
}

int lk__rnn_tensors(const lk_layer *l, lk_layer_tensor *t) {
  const rnn_state *s = l->state;
  size_t G = (size_t)s->gates * (size_t)s->H;
  int k = 0;
  for (int i = 0; i < s->L; i++)
    for (int d = 0; d < s->D; d++) {
      char sfx[16], name[32];
      /* num_layers <= 8: one digit */
      snprintf(sfx, sizeof sfx, "_l%c%s", (char)('0' + i % 10),
               d ? "_reverse" : "");
      size_t in = i == 0 ? (size_t)s->C : (size_t)(s->D * s->H);
      snprintf(name, sizeof name, "weight_ih%s", sfx);
      layer_tensor(&t[k++], name, LK_LAYER_PARAM, LK_F32, 2, G, in, 0, 0);
      snprintf(name, sizeof name, "weight_hh%s", sfx);
      layer_tensor(&t[k++], name, LK_LAYER_PARAM, LK_F32, 2, G, (size_t)s->H, 0,
                   0);
      if (!l->args[RNN_BIAS].i)
        continue;
      snprintf(name, sizeof name, "bias_ih%s", sfx);
      layer_tensor(&t[k++], name, LK_LAYER_PARAM, LK_F32, 1, G, 0, 0, 0);
      snprintf(name, sizeof name, "bias_hh%s", sfx);
      layer_tensor(&t[k++], name, LK_LAYER_PARAM, LK_F32, 1, G, 0, 0, 0);
    }
  return k;
}

/* torch's reset_parameters: every parameter U(-1/sqrt(H), 1/sqrt(H)), in
 * declaration order */
void lk__rnn_init(lk_layer *l, lk_rng *rng) {
  const rnn_state *s = l->state;
  double bound = 1 / sqrt((double)s->H);
  for (int j = 0; j < l->n_t; j++)
    for (size_t k = 0; k < l->t[j]->numel; k++)
      ((float *)l->t[j]->data)[k] =
          (float)((2 * lk_rng_uniform(rng) - 1) * bound);
}

void lk__rnn_release(lk_layer *l) {
  rnn_state *s = l->state;
  free(s->outs), free(s->drops), free(s->mask);
  free(s->cache), free(s->cells), free(s->grad);
  s->outs = s->drops = s->cache = s->cells = s->grad = NULL;
  s->mask = NULL;
  s->cap = 0;
}

/* A * B, SIZE_MAX when it does not fit (then no allocation can hold it) */
static size_t mul(size_t a, size_t b) {
  size_t p;
  return lk_size_mul(a, b, &p) ? p : SIZE_MAX;
}

/* N values of SIZE bytes (NULL for none); *FAILED set when it cannot */
static void *alloc(size_t n, size_t size, bool *failed) {
  size_t bytes = mul(n, size);
  void *p = n && bytes != SIZE_MAX ? malloc(bytes) : NULL;
  if (n && !p)
    *failed = true;
  return p;
}

int lk__rnn_reserve(lk_layer *l, size_t n) {
  rnn_state *s = l->state;
  lk__rnn_release(l);
  size_t seq = mul(n, (size_t)s->T), dh = (size_t)(s->D * s->H);
  size_t below = mul(mul((size_t)(s->L - 1), seq), dh);
  size_t dirs = mul((size_t)(s->L * s->D), seq);
  bool failed = false;
  s->outs = alloc(below, sizeof(float), &failed);
  s->drops = alloc(below, sizeof(float), &failed);
  s->mask = alloc(below, 1, &failed);
  s->cache =
      alloc(mul(dirs, (size_t)s->gates * (size_t)s->H), sizeof(float), &failed);
  s->cells = alloc(mul(dirs, (size_t)s->H), sizeof(float), &failed);
  /* the gradients of the outputs below the last: two [n, T, D H] */
  s->grad = alloc(s->L > 1 ? mul(2, mul(seq, dh)) : 0, sizeof(float), &failed);
  if (failed) {
    lk__rnn_release(l);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  s->cap = n;
  return 0;
}

/* layer I's direction D: its parameters' index in l->t */
static int param(const lk_layer *l, int i, int d) {
  const rnn_state *s = l->state;
  return (i * s->D + d) * per_direction(l);
}

/* where layer I's direction D's cache of PER floats a step starts */
static size_t dir_at(const rnn_state *s, int i, int d, size_t per) {
  return (size_t)(i * s->D + d) * s->cap * (size_t)s->T * per;
}

int lk__rnn_forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                    int n, bool training, lk_rng *rng) {
  rnn_state *s = l->state;
  float p = (float)l->args[RNN_DROPOUT].r;
  size_t dh = (size_t)(s->D * s->H), seq = s->cap * (size_t)s->T;
  bool bias = l->args[RNN_BIAS].i;
  const float *in = x[0];
  s->dropped = training && p > 0;
  for (int i = 0; i < s->L; i++) {
    float *out = i == s->L - 1 ? y : s->outs + (size_t)i * seq * dh;
    int c = i == 0 ? s->C : (int)dh;
    for (int d = 0; d < s->D; d++) {
      int k = param(l, i, d), rc;
      size_t G = (size_t)s->gates * (size_t)s->H;
      if ((rc = s->forward(nn, out + (size_t)d * s->H, (int)dh,
                           s->cache + dir_at(s, i, d, G),
                           s->cells + dir_at(s, i, d, (size_t)s->H), in,
                           layer_data(l, k), layer_data(l, k + 1),
                           bias ? layer_data(l, k + 2) : NULL,
                           bias ? layer_data(l, k + 3) : NULL, n, s->T, c, s->H,
                           d == 1)) < 0)
        return rc;
    }
    if (i == s->L - 1)
      break;
    in = out;
    if (s->dropped) {
      float *dr = s->drops + (size_t)i * seq * dh;
      int rc = lk_nn_dropout_forward(nn, dr, s->mask + (size_t)i * seq * dh,
                                     out, (size_t)n * s->T * dh, p, true, rng);
      if (rc < 0)
        return rc;
      in = dr;
    }
  }
  return 0;
}

int lk__rnn_backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                     const float *const *x, const float *y, int n) {
  rnn_state *s = l->state;
  float p = (float)l->args[RNN_DROPOUT].r;
  size_t dh = (size_t)(s->D * s->H), seq = s->cap * (size_t)s->T;
  size_t values = (size_t)n * s->T;
  bool bias = l->args[RNN_BIAS].i;
  /* ga: the gradient of a lower layer's output (its input's for the one
   * above); gb: it through the dropout, that layer's dh */
  float *ga = s->grad, *gb = s->grad ? s->grad + seq * dh : NULL;
  const float *dcur = dy;
  for (int i = s->L - 1; i >= 0; i--) {
    const float *out = i == s->L - 1 ? y : s->outs + (size_t)i * seq * dh;
    const float *in = i == 0       ? x[0]
                      : s->dropped ? s->drops + (size_t)(i - 1) * seq * dh
                                   : s->outs + (size_t)(i - 1) * seq * dh;
    int c = i == 0 ? s->C : (int)dh;
    float *din = i == 0 ? dx[0] : ga;
    if (i > 0)
      memset(ga, 0, values * dh * sizeof(float));
    for (int d = 0; d < s->D; d++) {
      int k = param(l, i, d), rc;
      size_t G = (size_t)s->gates * (size_t)s->H;
      if ((rc = s->backward(
               nn, din, layer_grad(l, k), layer_grad(l, k + 1),
               bias ? layer_grad(l, k + 2) : NULL,
               bias ? layer_grad(l, k + 3) : NULL, dcur + (size_t)d * s->H,
               (int)dh, in, out + (size_t)d * s->H,
               s->cache + dir_at(s, i, d, G),
               s->cells + dir_at(s, i, d, (size_t)s->H), layer_data(l, k),
               layer_data(l, k + 1), n, s->T, c, s->H, d == 1)) < 0)
        return rc;
    }
    if (i == 0)
      break;
    /* the gradient of the layer below's output, through its dropout */
    if (s->dropped) {
      memset(gb, 0, values * dh * sizeof(float));
      int rc = lk_nn_dropout_backward(nn, gb, ga,
                                      s->mask + (size_t)(i - 1) * seq * dh,
                                      values * dh, p, true);
      if (rc < 0)
        return rc;
    } else {
      memcpy(gb, ga, values * dh * sizeof(float));
    }
    dcur = gb;
  }
  return 0;
}

/* ---- ONNX: LSTM and GRU ------------------------------------------------ */

/* ONNX's gate blocks, in torch's numbering: LSTM i, o, f, c of torch's i,
 * f, g, o; GRU z, r, h of torch's r, z, n */
static const int onnx_lstm_gates[4] = {0, 3, 1, 2};
static const int onnx_gru_gates[3] = {1, 0, 2};

/* The initializer of layer I's tensors at OFFSET (0 weight_ih, 1
 * weight_hh, 2 the biases b_ih then b_hh), each direction's gate blocks
 * in ONNX's order: [D, G H, cols] (the biases [D, 2 G H]); its name. */
static const char *onnx_stack(const lk_layer *l, lk_onnx *g, const char *prefix,
                              int i, int which, const char *hint) {
  const rnn_state *s = l->state;
  const int *perm = s->gates == 4 ? onnx_lstm_gates : onnx_gru_gates;
  size_t H = (size_t)s->H, G = (size_t)s->gates;
  size_t cols = which == 0   ? (i == 0 ? (size_t)s->C : (size_t)(s->D * s->H))
                : which == 1 ? H
                             : 1;
  size_t halves = which == 2 ? 2 : 1, per = halves * G * H * cols;
  float *v = malloc((size_t)s->D * per * sizeof *v);
  char hname[96];
  snprintf(hname, sizeof hname, "%s%s_l%d", prefix ? prefix : "", hint, i);
  const char *name = v ? lk_onnx_tmp(g, hname) : NULL;
  if (!v || !name) {
    free(v);
    lk__err(LK_ENOMEM, "out of memory");
    return NULL;
  }
  for (int d = 0; d < s->D; d++)
    for (size_t h = 0; h < halves; h++) {
      const float *src = layer_data(l, param(l, i, d) + which + (int)h);
      float *dst = v + (size_t)d * per + h * G * H * cols;
      for (size_t q = 0; q < G; q++)
        memcpy(dst + q * H * cols, src + (size_t)perm[q] * H * cols,
               H * cols * sizeof *v);
    }
  lk_tensor t = {.name = name,
                 .dtype = LK_F32,
                 .ndim = which == 2 ? 2 : 3,
                 .numel = (size_t)s->D * per};
  t.shape[0] = (size_t)s->D;
  t.shape[1] = halves * G * H;
  t.shape[2] = cols;
  t.data = v;
  int rc = lk_onnx_initializer(g, name, &t);
  free(v);
  return rc == 0 ? name : NULL;
}

int lk__rnn_onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                 const char *out, const char *prefix) {
  const rnn_state *s = l->state;
  bool bias = l->args[RNN_BIAS].i;
  const char *x = in[0];
  const char *shape = lk_onnx_tmp(g, "rnn_shape");
  int64_t dims[3] = {0, 0, (int64_t)s->D * s->H};
  int rc = shape ? lk_onnx_const_i64(g, shape, dims, 3) : LK_ENOMEM;
  for (int i = 0; rc == 0 && i < s->L; i++) {
    const char *w = onnx_stack(l, g, prefix, i, 0, "onnx_W");
    const char *r = w ? onnx_stack(l, g, prefix, i, 1, "onnx_R") : NULL;
    const char *b = r && bias ? onnx_stack(l, g, prefix, i, 2, "onnx_B") : NULL;
    const char *xt = lk_onnx_tmp(g, "rnn_xt");
    const char *y = lk_onnx_tmp(g, s->gates == 4 ? "lstm_y" : "gru_y");
    const char *yt = lk_onnx_tmp(g, "rnn_yt");
    const char *o = i == s->L - 1 ? out : lk_onnx_tmp(g, "rnn_out");
    if (!w || !r || (bias && !b) || !xt || !y || !yt || !o)
      return LK_ENOMEM;
    const char *ins[4] = {xt, w, r, bias ? b : ""};
    lk_onnx_attr a[3] = {
        {.name = "hidden_size", .type = LK_ONNX_INT, .i = s->H},
        {.name = "direction",
         .type = LK_ONNX_STRING,
         .s = s->D == 2 ? "bidirectional" : "forward"},
        {.name = "linear_before_reset", .type = LK_ONNX_INT, .i = 1}};
    /* ONNX Runtime takes layout 0 only: X [T, N, C] in, Y [T, D, N, H]
     * out, then [N, T, D, H] and [N, T, D H]: the directions side by side */
    static const int64_t into[3] = {1, 0, 2}, back[4] = {2, 0, 1, 3};
    lk_onnx_attr pin = {
        .name = "perm", .type = LK_ONNX_INTS, .ints = into, .n = 3};
    lk_onnx_attr pout = {
        .name = "perm", .type = LK_ONNX_INTS, .ints = back, .n = 4};
    const char *ry[2] = {yt, shape};
    if ((rc = layer_onnx_op(g, "Transpose", &x, 1, xt, &pin, 1)) != 0 ||
        (rc = lk_onnx_node(g, s->gates == 4 ? "LSTM" : "GRU", ins, bias ? 4 : 3,
                           &y, 1, a, s->gates == 4 ? 2 : 3)) != 0 ||
        (rc = layer_onnx_op(g, "Transpose", &y, 1, yt, &pout, 1)) != 0 ||
        (rc = layer_onnx_op(g, "Reshape", ry, 2, o, NULL, 0)) != 0)
      return rc;
    x = o;
  }
  return rc;
}
