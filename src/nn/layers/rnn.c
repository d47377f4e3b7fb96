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

/* N floats, or NULL for none */
static int alloc(void **p, size_t n, size_t size) {
  *p = NULL;
  if (n == 0)
    return 0;
  size_t bytes = n > SIZE_MAX / size ? SIZE_MAX : n * size;
  return bytes != SIZE_MAX && (*p = malloc(bytes)) ? 0 : -1;
}

int lk__rnn_reserve(lk_layer *l, size_t n) {
  rnn_state *s = l->state;
  lk__rnn_release(l);
  size_t seq = n * (size_t)s->T, dh = (size_t)(s->D * s->H);
  size_t wide = (size_t)s->C > dh ? (size_t)s->C : dh;
  size_t below = (size_t)(s->L - 1) * seq * dh;
  size_t dirs = (size_t)(s->L * s->D) * seq;
  if (alloc((void **)&s->outs, below, sizeof(float)) ||
      alloc((void **)&s->drops, below, sizeof(float)) ||
      alloc((void **)&s->mask, below, 1) ||
      alloc((void **)&s->cache, dirs * (size_t)s->gates * (size_t)s->H,
            sizeof(float)) ||
      alloc((void **)&s->cells, dirs * (size_t)s->H, sizeof(float)) ||
      alloc((void **)&s->grad, 2 * seq * wide, sizeof(float))) {
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
  size_t wide = (size_t)s->C > dh ? (size_t)s->C : dh,
         values = (size_t)n * s->T;
  bool bias = l->args[RNN_BIAS].i;
  float *ga = s->grad, *gb = s->grad + seq * wide;
  const float *dcur = dy;
  for (int i = s->L - 1; i >= 0; i--) {
    const float *out = i == s->L - 1 ? y : s->outs + (size_t)i * seq * dh;
    const float *in = i == 0       ? x[0]
                      : s->dropped ? s->drops + (size_t)(i - 1) * seq * dh
                                   : s->outs + (size_t)(i - 1) * seq * dh;
    int c = i == 0 ? s->C : (int)dh;
    float *din = i == 0 ? dx[0] : ga;
    if (din == ga)
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
