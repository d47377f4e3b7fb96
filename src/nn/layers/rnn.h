/* Private to the recurrent layer tables (lstm.c, gru.c): what they share
 * (rnn.c): the arguments, the shapes, torch's parameter names and init,
 * the layers stacked and the dropout between them; each table gives its
 * kernels. */
#ifndef LK_NN_LAYERS_RNN_H
#define LK_NN_LAYERS_RNN_H

#include "layers.h"

enum { RNN_HIDDEN, RNN_LAYERS, RNN_BIAS, RNN_DROPOUT, RNN_BIDI, RNN_IN };

/* One direction of one layer's forward and backward (loopkit/nn.h's
 * lk_nn_lstm_forward and lk_nn_gru_forward's signatures). */
typedef int (*rnn_forward_fn)(lk_nn *nn, float *h, int ldh, float *gates,
                              float *cell, const float *x, const float *w_ih,
                              const float *w_hh, const float *b_ih,
                              const float *b_hh, int N, int T, int C, int H,
                              bool reverse);
typedef int (*rnn_backward_fn)(lk_nn *nn, float *dx, float *dw_ih, float *dw_hh,
                               float *db_ih, float *db_hh, const float *dh,
                               int ldh, const float *x, const float *h,
                               const float *gates, const float *cell,
                               const float *w_ih, const float *w_hh, int N,
                               int T, int C, int H, bool reverse);

typedef struct rnn_state {
  int gates; /* G: 4 (LSTM) or 3 (GRU) */
  rnn_forward_fn forward;
  rnn_backward_fn backward;
  int T, C, H, L, D; /* steps, input, hidden, layers, directions */
  bool dropped;      /* the last forward applied dropout between layers */
  size_t cap;
  float *outs;   /* [L - 1][cap, T, D H]: the outputs below the last */
  float *drops;  /* [L - 1][cap, T, D H]: them after dropout */
  uint8_t *mask; /* [L - 1][cap, T, D H] */
  float *cache;  /* [L][D][cap, T, G H]: the gates */
  float *cells;  /* [L][D][cap, T, H]: the cells (LSTM), W_hn h + b_hn */
  float *grad;   /* [2][cap, T, D H]: gradients between layers (L > 1) */
} rnn_state;

extern const lk_layer_arg lk__rnn_args[];
int lk__rnn_infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                  lk_layer_shape *out);
int lk__rnn_tensors(const lk_layer *l, lk_layer_tensor *t);
void lk__rnn_init(lk_layer *l, lk_rng *rng);
int lk__rnn_reserve(lk_layer *l, size_t n);
void lk__rnn_release(lk_layer *l);
int lk__rnn_forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                    int n, bool training, lk_rng *rng);
/* the layer as ONNX LSTM or GRU nodes, one a layer */
int lk__rnn_onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                 const char *out, const char *prefix);
int lk__rnn_backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                     const float *const *x, const float *y, int n);

#endif
