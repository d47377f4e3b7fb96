/* loopkit — nn.h: a layer kit for model plugins.
 *
 * Forward and backward passes of the layers small networks are made of
 * (linear, conv2d, pooling, batch and layer norm, activations, dropout,
 * embedding, causal self-attention, softmax cross-entropy), a matrix
 * product, and a context that owns the threads and the scratch memory they
 * use. The layers are compiled into libloopkit: a plugin includes this
 * header and builds with `pkg-config --cflags loopkit` like any other; the
 * loopkit that loads it provides the functions.
 *
 * This header is not included by loopkit/loopkit.h: most plugins
 * (optimizers, data, callbacks) have no use for it, and a model that does
 * says so with `#include <loopkit/nn.h>`.
 *
 * Conventions, the same for every layer:
 * - f32, row-major, torch's layouts: images NCHW, vectors [N, C],
 *   sequences [B, T, C]; nn.Linear's weight [OC, C], nn.Conv2d's
 *   [OC, C, KH, KW]. Sizes are ints and must be >= 1 (element counts of
 *   elementwise layers are size_t, >= 1).
 * - A forward writes its outputs (and what its backward needs, into arrays
 *   the caller owns and keeps until then). A backward ADDS into every
 *   gradient it produces, parameters and inputs alike, as llm.c does: the
 *   caller zeroes the gradients before a step, and residual branches and
 *   tied weights accumulate without copies. Any gradient pointer may be
 *   NULL: that work is skipped (the first layer needs no input gradient).
 * - Elementwise forwards may work in place (out == inp); nothing else may
 *   alias, and a backward's gradients never alias its dout.
 * - Every function returns 0, or LK_EINVAL (bad sizes, a missing
 *   pointer, an index out of range) or LK_ENOMEM (the workspace cannot
 *   grow) and leaves a message naming the layer and the sizes in
 *   lk_last_error(); a failed call has written nothing. The library never
 *   prints and never exits.
 * - Threads: every layer spreads its work over the context's threads, in
 *   pieces chosen from the sizes alone, never from the thread count, and
 *   no sum is ever split between threads. So the results are the same bit
 *   for bit at any thread count, and from run to run, on one machine with
 *   one build (OpenBLAS picks its kernels by CPU; the kit's own vector
 *   width, lk_nn_isa, changes nothing). A context is used by one thread
 *   at a time.
 * - No allocation on the way of a batch: the workspace grows to the
 *   largest need it has seen and stays. */
#ifndef LOOPKIT_NN_H
#define LOOPKIT_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loopkit/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lk_rng lk_rng; /* loopkit/host.h */

/* ---- the context --------------------------------------------------------- */

typedef struct lk_nn lk_nn;

/* Flags of lk_nn_create. PORTABLE: portable code only, the kit's own
 * product even with a BLAS and 16-byte vectors whatever the CPU has.
 * NO_BLAS: the kit's own product, in the CPU's widest vectors (the same
 * bits as PORTABLE's, faster). NO_ONEDNN: OpenBLAS's products even where
 * oneDNN's can be loaded. */
#define LK_NN_PORTABLE 1u
#define LK_NN_NO_BLAS 2u
#define LK_NN_NO_ONEDNN 4u
/* Precision of the products (lk_nn_sgemm and the layers' products: linear,
 * conv2d, attention's): BF16, operands rounded to bf16 (to nearest even)
 * and sums in f32, on the CPU's bf16 product instruction (AVX512_BF16;
 * lk_nn_create fails with LK_EINVAL on a CPU without it: the kit does not
 * emulate it). F32: f32 products even while the process's default is
 * bf16. Neither: the process's default (lk_nn_bf16_acquire), read at each
 * product. Everything else (elementwise layers, norms, softmax, losses,
 * reductions) is f32 in every case, and bf16 products are as
 * deterministic as f32 ones: the same bits at any thread count. */
#define LK_NN_BF16 8u
#define LK_NN_F32 16u

/* A context with THREADS threads (the caller's included; 0: one per CPU
 * the process may run on). The products run in oneDNN's sgemm where the
 * build found it and it loads, else in OpenBLAS's, else in the kit's own;
 * each call on one thread, the kit's (OpenBLAS's own threading is set to
 * 1 with openblas_set_num_threads, process-wide; oneDNN's OpenMP threads
 * to 1 for the calling thread during the call): single-threaded products
 * on the kit's threads measured faster (see src/nn/gemm.c) and leave no
 * two pools fighting for the cores. The environment variable
 * LOOPKIT_GEMM=openblas or portable makes every context of the process
 * take that one instead, as the flags do. */
LK_API int lk_nn_create(lk_nn **out, int threads, unsigned flags);
/* The most threads a context takes (lk_nn_create's THREADS; one per CPU
 * stops there too), and so [loop] threads' largest value. */
#define LK_NN_MAX_THREADS 256
LK_API void lk_nn_free(lk_nn *nn);
LK_API int lk_nn_threads(const lk_nn *nn);
/* Runs FN(CTX, TASK, THREAD) for every TASK in [0, NTASKS) on the
 * context's threads and returns when all have run; THREAD (0 the caller,
 * below lk_nn_threads) tells a task whose scratch it may use. For work a
 * plugin adds beside the layers (an optimizer's update over its
 * parameters): each task must write only its own outputs, so that which
 * thread runs it changes nothing. Every context with the same thread count
 * shares one pool of threads; a call from inside a task, or while another
 * thread's job holds the pool, runs its tasks on the caller. 0, or LK_EINVAL
 * for a NULL context or function or a negative NTASKS. */
LK_API int lk_nn_parallel(lk_nn *nn, int ntasks,
                          void (*fn)(void *ctx, int task, int thread),
                          void *ctx);
/* "onednn", "openblas" or "portable" (the kit's own): what lk_nn_sgemm
 * runs. */
LK_API const char *lk_nn_backend(const lk_nn *nn);
/* The vectors of the kit's own kernels (GELU, tanh, sigmoid, softmax, and
 * its product): "avx512", "avx2" or "base" (LK_NN_PORTABLE: always
 * "base"). All give the same results; only the speed differs. */
LK_API const char *lk_nn_isa(const lk_nn *nn);
/* "f32" or "bf16": the operands of the context's next product. */
LK_API const char *lk_nn_products(const lk_nn *nn);
/* The engine of bf16 products on this CPU: "avx512_bf16" (the kit's own
 * AVX512-BF16 kernels), or NULL where the CPU has none (or the environment
 * says LOOPKIT_BF16=none, for tests). */
LK_API const char *lk_nn_bf16_engine(void);
/* Makes bf16 the process's default precision of products while at least
 * one acquire is not released: every context created with neither
 * LK_NN_BF16 nor LK_NN_F32 runs its products in bf16 from its next
 * product on, contexts created before the call included (the bf16-mixed
 * precision plugin holds it for its run, whose models were created
 * first). LK_EINVAL, and no change, where lk_nn_bf16_engine is NULL. */
LK_API int lk_nn_bf16_acquire(void);
LK_API void lk_nn_bf16_release(void);
/* Bytes of scratch memory the context holds now. */
LK_API size_t lk_nn_workspace_size(const lk_nn *nn);
/* A layer that would need a workspace larger than BYTES fails with
 * LK_ENOMEM instead of growing it (default: no limit). */
LK_API void lk_nn_set_workspace_limit(lk_nn *nn, size_t bytes);

/* ---- the matrix product -------------------------------------------------- */

/* C [M, N] = alpha op(A) op(B) + beta C, row-major, op(X) = X or X^T as
 * BLAS's sgemm (lda, ldb, ldc are row strides; beta == 0: C is not read).
 * M, N, K may be 0. The layers' products run on the same code (OpenBLAS
 * or the kit's own, one call per fixed tile of C). */
LK_API int lk_nn_sgemm(lk_nn *nn, bool transa, bool transb, int m, int n, int k,
                       float alpha, const float *a, int lda, const float *b,
                       int ldb, float beta, float *c, int ldc);

/* ---- linear: nn.Linear --------------------------------------------------- */

/* out [N, OC] = inp [N, C] weight^T + bias; weight [OC, C], bias [OC] or
 * NULL. */
LK_API int lk_nn_linear_forward(lk_nn *nn, float *out, const float *inp,
                                const float *weight, const float *bias, int N,
                                int C, int OC);
/* dinp [N, C] += dout weight, dweight [OC, C] += dout^T inp,
 * dbias [OC] += the column sums of dout [N, OC]. */
LK_API int lk_nn_linear_backward(lk_nn *nn, float *dinp, float *dweight,
                                 float *dbias, const float *dout,
                                 const float *inp, const float *weight, int N,
                                 int C, int OC);

/* ---- conv2d: nn.Conv2d ---------------------------------------------------- */

typedef struct lk_nn_conv2d {
  int n, c, h, w;         /* input [N, C, H, W] */
  int oc, kh, kw;         /* weight [OC, C, KH, KW] */
  int stride_h, stride_w; /* 0: 1 */
  int pad_h, pad_w;       /* zeros on each side */
  /* appended in 0.x: zero in callers that predate them means 1 */
  int dilation_h, dilation_w; /* 0: 1; the kernel's taps dilation apart */
  int groups; /* 0: 1; C and OC divisible by it, weight [OC, C / groups,
               * KH, KW] (torch's; depthwise: groups = C) */
} lk_nn_conv2d;

/* The output's height and width, (H + 2 pad - dilation (K - 1) - 1) /
 * stride + 1, or
 * LK_EINVAL when the sizes are bad. */
LK_API int lk_nn_conv2d_size(const lk_nn_conv2d *p, int *oh, int *ow);
/* out [N, OC, OH, OW]; bias [OC] or NULL. */
LK_API int lk_nn_conv2d_forward(lk_nn *nn, const lk_nn_conv2d *p, float *out,
                                const float *inp, const float *weight,
                                const float *bias);
LK_API int lk_nn_conv2d_backward(lk_nn *nn, const lk_nn_conv2d *p, float *dinp,
                                 float *dweight, float *dbias,
                                 const float *dout, const float *inp,
                                 const float *weight);

/* ---- pooling: nn.MaxPool2d, nn.AvgPool2d --------------------------------- */

typedef struct lk_nn_pool2d {
  int n, c, h, w;         /* input [N, C, H, W] */
  int kh, kw;             /* window */
  int stride_h, stride_w; /* 0: the window's size (torch's default) */
  int pad_h, pad_w;       /* at most half the window, as torch requires */
} lk_nn_pool2d;

/* floor((H + 2 pad - K) / stride) + 1 (torch's ceil_mode = False). */
LK_API int lk_nn_pool2d_size(const lk_nn_pool2d *p, int *oh, int *ow);
/* out and argmax [N, C, OH, OW]; argmax is the index h * W + w of the
 * maximum in its input plane (torch's indices), the first one on ties;
 * padding never wins; a NaN does. */
LK_API int lk_nn_maxpool2d_forward(lk_nn *nn, const lk_nn_pool2d *p, float *out,
                                   int32_t *argmax, const float *inp);
LK_API int lk_nn_maxpool2d_backward(lk_nn *nn, const lk_nn_pool2d *p,
                                    float *dinp, const float *dout,
                                    const int32_t *argmax);
/* The mean over the window, padding counted (count_include_pad = True). */
LK_API int lk_nn_avgpool2d_forward(lk_nn *nn, const lk_nn_pool2d *p, float *out,
                                   const float *inp);
LK_API int lk_nn_avgpool2d_backward(lk_nn *nn, const lk_nn_pool2d *p,
                                    float *dinp, const float *dout);

/* ---- adaptive pooling: nn.AdaptiveAvgPool2d (1d: H = 1) ------------------ */

typedef struct lk_nn_adaptivepool2d {
  int n, c, h, w; /* input [N, C, H, W] */
  int oh, ow;     /* output [N, C, OH, OW], at most H and W */
} lk_nn_adaptivepool2d;

/* Output (i, j) is the mean of input rows [floor(i H / OH), ceil((i + 1) H
 * / OH)) and the columns likewise (torch's bins). */
LK_API int lk_nn_adaptiveavgpool2d_forward(lk_nn *nn,
                                           const lk_nn_adaptivepool2d *p,
                                           float *out, const float *inp);
LK_API int lk_nn_adaptiveavgpool2d_backward(lk_nn *nn,
                                            const lk_nn_adaptivepool2d *p,
                                            float *dinp, const float *dout);

/* ---- batch norm: nn.BatchNorm1d, nn.BatchNorm2d -------------------------- */

/* inp and out [N, C, HW]: HW = H * W for BatchNorm2d, 1 for BatchNorm1d on
 * [N, C] (L for BatchNorm1d on [N, C, L]). Statistics per channel over N
 * and HW. weight and bias [C] or NULL (affine = False).
 *
 * training: normalises with the batch's mean and biased variance, and,
 * when running_mean and running_var are not NULL, updates them as torch
 * does: r = (1 - momentum) r + momentum x, with the unbiased variance
 * (torch's defaults are momentum 0.1, eps 1e-5; N * HW must be >= 2).
 * Not training: normalises with running_mean and running_var (required).
 * Either way mean and rstd [C] receive the statistics used, rstd =
 * 1 / sqrt(var + eps): what backward needs. */
LK_API int lk_nn_batchnorm_forward(lk_nn *nn, float *out, float *mean,
                                   float *rstd, const float *inp,
                                   const float *weight, const float *bias,
                                   float *running_mean, float *running_var,
                                   int N, int C, int HW, bool training,
                                   float momentum, float eps);
/* TRAINING as in the forward: through the batch statistics, or with the
 * running statistics as constants. */
LK_API int lk_nn_batchnorm_backward(lk_nn *nn, float *dinp, float *dweight,
                                    float *dbias, const float *dout,
                                    const float *inp, const float *weight,
                                    const float *mean, const float *rstd, int N,
                                    int C, int HW, bool training);

/* ---- layer norm: nn.LayerNorm over the last dimension -------------------- */

/* inp and out [N, C] (N = B * T for sequences), weight and bias [C] or
 * NULL; mean and rstd [N] receive each row's statistics. */
LK_API int lk_nn_layernorm_forward(lk_nn *nn, float *out, float *mean,
                                   float *rstd, const float *inp,
                                   const float *weight, const float *bias,
                                   int N, int C, float eps);
LK_API int lk_nn_layernorm_backward(lk_nn *nn, float *dinp, float *dweight,
                                    float *dbias, const float *dout,
                                    const float *inp, const float *weight,
                                    const float *mean, const float *rstd, int N,
                                    int C);

/* ---- activations, elementwise over N values ------------------------------ */

/* ReLU, tanh and sigmoid differentiate through their output (so that the
 * forward may run in place); GELU through its input. GELU is torch's
 * approximate='tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
LK_API int lk_nn_relu_forward(lk_nn *nn, float *out, const float *inp,
                              size_t n);
LK_API int lk_nn_relu_backward(lk_nn *nn, float *dinp, const float *dout,
                               const float *out, size_t n);
LK_API int lk_nn_gelu_forward(lk_nn *nn, float *out, const float *inp,
                              size_t n);
LK_API int lk_nn_gelu_backward(lk_nn *nn, float *dinp, const float *dout,
                               const float *inp, size_t n);
LK_API int lk_nn_tanh_forward(lk_nn *nn, float *out, const float *inp,
                              size_t n);
LK_API int lk_nn_tanh_backward(lk_nn *nn, float *dinp, const float *dout,
                               const float *out, size_t n);
LK_API int lk_nn_sigmoid_forward(lk_nn *nn, float *out, const float *inp,
                                 size_t n);
LK_API int lk_nn_sigmoid_backward(lk_nn *nn, float *dinp, const float *dout,
                                  const float *out, size_t n);

/* Since ABI 1.6: torch's SiLU, LeakyReLU(negative_slope), ELU(alpha),
 * Softplus(beta, threshold), Mish, Hardswish and Hardsigmoid, each
 * differentiating through its input with torch's formulas (at the kinks
 * too: hardswish's derivative x / 3 + 1/2 on [-3, 3), so -1/2 at -3 and 1
 * at 3; hardsigmoid's 1/6 on (-3, 3) only; LeakyReLU's and ELU's at 0
 * those of x < 0). Softplus is x where beta x > threshold, else
 * log(1 + e^(beta x)) / beta; beta must be > 0 (else LK_EINVAL). */
LK_API int lk_nn_silu_forward(lk_nn *nn, float *out, const float *inp,
                              size_t n);
LK_API int lk_nn_silu_backward(lk_nn *nn, float *dinp, const float *dout,
                               const float *inp, size_t n);
LK_API int lk_nn_leakyrelu_forward(lk_nn *nn, float *out, const float *inp,
                                   size_t n, float negative_slope);
LK_API int lk_nn_leakyrelu_backward(lk_nn *nn, float *dinp, const float *dout,
                                    const float *inp, size_t n,
                                    float negative_slope);
LK_API int lk_nn_elu_forward(lk_nn *nn, float *out, const float *inp, size_t n,
                             float alpha);
LK_API int lk_nn_elu_backward(lk_nn *nn, float *dinp, const float *dout,
                              const float *inp, size_t n, float alpha);
LK_API int lk_nn_softplus_forward(lk_nn *nn, float *out, const float *inp,
                                  size_t n, float beta, float threshold);
LK_API int lk_nn_softplus_backward(lk_nn *nn, float *dinp, const float *dout,
                                   const float *inp, size_t n, float beta,
                                   float threshold);
LK_API int lk_nn_mish_forward(lk_nn *nn, float *out, const float *inp,
                              size_t n);
LK_API int lk_nn_mish_backward(lk_nn *nn, float *dinp, const float *dout,
                               const float *inp, size_t n);
LK_API int lk_nn_hardswish_forward(lk_nn *nn, float *out, const float *inp,
                                   size_t n);
LK_API int lk_nn_hardswish_backward(lk_nn *nn, float *dinp, const float *dout,
                                    const float *inp, size_t n);
LK_API int lk_nn_hardsigmoid_forward(lk_nn *nn, float *out, const float *inp,
                                     size_t n);
LK_API int lk_nn_hardsigmoid_backward(lk_nn *nn, float *dinp,
                                      const float *dout, const float *inp,
                                      size_t n);

/* Since ABI 1.6: F.softmax(x, dim) and F.log_softmax(x, dim) over the
 * middle dimension of [OUTER, D, INNER] (dim's size D, INNER the product
 * of the sizes after it: 1 for the last dimension), and their backwards
 * from the output OUT: dinp [OUTER, D, INNER] += the gradient (NULL:
 * nothing). Each line of D values is done by one thread: the same bits at
 * any thread count. */
LK_API int lk_nn_softmax_dim_forward(lk_nn *nn, float *out, const float *inp,
                                     int outer, int D, int inner);
LK_API int lk_nn_softmax_dim_backward(lk_nn *nn, float *dinp,
                                      const float *dout, const float *out,
                                      int outer, int D, int inner);
LK_API int lk_nn_log_softmax_forward(lk_nn *nn, float *out, const float *inp,
                                     int outer, int D, int inner);
LK_API int lk_nn_log_softmax_backward(lk_nn *nn, float *dinp,
                                      const float *dout, const float *out,
                                      int outer, int D, int inner);

/* ---- recurrent: nn.LSTM, nn.GRU (batch_first) ---------------------------- */

/* Since ABI 1.7: one direction of one layer of torch's nn.LSTM (gates i,
 * f, g, o) and nn.GRU (gates r, z, n; n = tanh(W_in x + b_in + r (W_hn h
 * + b_hn))), from zero initial states, over x [N, T, C] (REVERSE: from
 * step T - 1 down to 0, the _reverse half of a bidirectional layer).
 * w_ih [G H, C], w_hh [G H, H], b_ih and b_hh [G H] or NULL (G = 4 for
 * the LSTM, 3 for the GRU), torch's parameters. h [N, T, LDH] receives
 * h_t in its first H columns (LDH >= H: a bidirectional layer's output
 * [N, T, 2H] is h with LDH = 2H, and h + H for the reverse half).
 * What backward needs: gates [N, T, G H] receives the gates' activations,
 * and cell [N, T, H] the LSTM's c_t, hn [N, T, H] the GRU's W_hn h + b_hn.
 * The input's projection for all steps is one product; the recurrent one
 * is done per step, cut into blocks of batch rows and hidden units whose
 * number depends on the sizes only: the same bits at any thread count. */
LK_API int lk_nn_lstm_forward(lk_nn *nn, float *h, int ldh, float *gates,
                              float *cell, const float *x, const float *w_ih,
                              const float *w_hh, const float *b_ih,
                              const float *b_hh, int N, int T, int C, int H,
                              bool reverse);
/* Backward through time from dh [N, T, LDH] (the output's gradient, as h):
 * dx [N, T, C] (NULL: not needed), dw_ih, dw_hh, db_ih, db_hh (NULL: not
 * needed) += theirs; x, h, gates and cell as the forward left them. */
LK_API int lk_nn_lstm_backward(lk_nn *nn, float *dx, float *dw_ih,
                               float *dw_hh, float *db_ih, float *db_hh,
                               const float *dh, int ldh, const float *x,
                               const float *h, const float *gates,
                               const float *cell, const float *w_ih,
                               const float *w_hh, int N, int T, int C, int H,
                               bool reverse);
LK_API int lk_nn_gru_forward(lk_nn *nn, float *h, int ldh, float *gates,
                             float *hn, const float *x, const float *w_ih,
                             const float *w_hh, const float *b_ih,
                             const float *b_hh, int N, int T, int C, int H,
                             bool reverse);
LK_API int lk_nn_gru_backward(lk_nn *nn, float *dx, float *dw_ih, float *dw_hh,
                              float *db_ih, float *db_hh, const float *dh,
                              int ldh, const float *x, const float *h,
                              const float *gates, const float *hn,
                              const float *w_ih, const float *w_hh, int N,
                              int T, int C, int H, bool reverse);

/* ---- dropout: nn.Dropout ------------------------------------------------- */

/* Inverted dropout: in training each value is kept with probability 1 - p
 * and scaled by 1 / (1 - p), or zeroed; mask [n] receives 1 for kept, 0
 * for dropped. Not training: out = inp, and neither mask nor rng is used
 * (both may be NULL). 0 <= p <= 1.
 *
 * The mask depends only on RNG's state at the call, which advances by
 * exactly one lk_rng_u64 per training call, whatever n, p and the thread
 * count: that draw seeds the streams lk_rng_seed(r, draw, j) of the
 * 4096-value blocks j, and value i of block j is kept when the i-th
 * 32-bit half (low half first) of its stream's output is >= p * 2^32. So
 * a resumed run draws the same masks. */
LK_API int lk_nn_dropout_forward(lk_nn *nn, float *out, uint8_t *mask,
                                 const float *inp, size_t n, float p,
                                 bool training, lk_rng *rng);
/* The forward with a given mask (out = inp * mask / (1 - p)). */
LK_API int lk_nn_dropout_apply(lk_nn *nn, float *out, const uint8_t *mask,
                               const float *inp, size_t n, float p);
/* dinp += dout * mask / (1 - p) in training, dinp += dout otherwise. */
LK_API int lk_nn_dropout_backward(lk_nn *nn, float *dinp, const float *dout,
                                  const uint8_t *mask, size_t n, float p,
                                  bool training);

/* ---- flatten: torch.flatten ---------------------------------------------- */

/* Flattening a contiguous row-major array moves nothing: the output is the
 * input's memory and its gradient the output gradient's, so a network
 * passes the same pointers on. What changes is the shape: SHAPE [NDIM]
 * with dimensions START to END (inclusive; negative counts from the end,
 * torch's defaults are 1 and -1) merged into one. OUT receives the new
 * shape and *OUT_NDIM its length; OUT may be SHAPE. */
LK_API int lk_nn_flatten(const int *shape, int ndim, int start, int end,
                         int *out, int *out_ndim);

/* ---- embedding: nn.Embedding --------------------------------------------- */

/* out [N, C] = the rows idx [N] of table [V, C]. Every index is checked
 * first: one outside [0, V) is LK_EINVAL naming its position and value,
 * and nothing is written. */
LK_API int lk_nn_embedding_forward(lk_nn *nn, float *out, const int32_t *idx,
                                   const float *table, int N, int V, int C);
/* dtable [V, C] row idx[i] += dout [N, C] row i, repeated indices summed
 * in order of i. The same check. */
LK_API int lk_nn_embedding_backward(lk_nn *nn, float *dtable, const float *dout,
                                    const int32_t *idx, int N, int V, int C);

/* ---- causal self-attention ---------------------------------------------- */

/* qkv [B, T, 3C] holds q, k and v side by side (c_attn's output), each
 * split into NH heads of C / NH; out [B, T, C] is softmax(q k^T /
 * sqrt(C / NH)) v under the causal mask, the heads side by side. att
 * [B, NH, T, T] receives the probabilities (0 above the diagonal): what
 * backward needs. */
LK_API int lk_nn_attention_forward(lk_nn *nn, float *out, float *att,
                                   const float *qkv, int B, int T, int C,
                                   int NH);
/* dqkv [B, T, 3C] += the gradient through q, k and v. */
LK_API int lk_nn_attention_backward(lk_nn *nn, float *dqkv, const float *dout,
                                    const float *qkv, const float *att, int B,
                                    int T, int C, int NH);

/* ---- residual ------------------------------------------------------------ */

/* out = a + b (out may be a or b); backward: da += dout, db += dout (either
 * may be NULL). */
LK_API int lk_nn_residual_forward(lk_nn *nn, float *out, const float *a,
                                  const float *b, size_t n);
LK_API int lk_nn_residual_backward(lk_nn *nn, float *da, float *db,
                                   const float *dout, size_t n);

/* ---- softmax and cross-entropy: F.softmax, F.cross_entropy --------------- */

/* probs [N, V] = softmax of logits [N, V] over the last dimension. */
LK_API int lk_nn_softmax_forward(lk_nn *nn, float *probs, const float *logits,
                                 int N, int V);
/* *loss = the mean over N of -log softmax(logits)[target] (targets [N],
 * each in [0, V), else LK_EINVAL naming it), computed from each row's
 * maximum. With dlogits, also dlogits [N, V] += dloss * (softmax - onehot)
 * / N: the backward of dloss * loss, in the same pass. correct, if not
 * NULL, receives the number of rows whose first maximum is the target. */
LK_API int lk_nn_crossentropy(lk_nn *nn, double *loss, float *dlogits,
                              const float *logits, const int32_t *targets,
                              int N, int V, float dloss, int *correct);

/* Cross-entropy with torch's class weights and label smoothing, as
 * F.cross_entropy(logits, targets, weight, label_smoothing=EPS) with mean
 * reduction: with w = WEIGHT [V] (NULL: every class 1) and log p the log
 * softmax of a row,
 *   loss = sum_i [(1 - EPS) w[y_i] (-log p_i[y_i])
 *                 + EPS / V sum_c w[c] (-log p_i[c])] / sum_i w[y_i].
 * dlogits (NULL: none) += dloss * its gradient; correct as
 * lk_nn_crossentropy's. Rows in parallel, summed in order: the same bits
 * at any thread count. */
LK_API int lk_nn_crossentropy_ex(lk_nn *nn, double *loss, float *dlogits,
                                 const float *logits, const int32_t *targets,
                                 int N, int V, const float *weight,
                                 float label_smoothing, float dloss,
                                 int *correct);

/* ---- other losses: torch's functional forms, mean reduction -------------- */

/* F.nll_loss(input, targets, weight): input [N, C] log-probabilities,
 * loss = -sum_i w[y_i] input[i, y_i] / sum_i w[y_i] (WEIGHT NULL: 1).
 * dinput (NULL: none) += dloss * its gradient; correct (NULL: not wanted)
 * receives the rows whose first maximum is the target. */
LK_API int lk_nn_nll(lk_nn *nn, double *loss, float *dinput,
                     const float *input, const int32_t *targets, int N, int C,
                     const float *weight, float dloss, int *correct);

/* Elementwise losses of input [n] against target [n], the mean over the n
 * values, computed in double; dinput (NULL: none) += dloss * d loss /
 * d input. F.mse_loss, F.l1_loss (gradient sign(x - t), 0 at 0),
 * F.smooth_l1_loss(beta) (beta >= 0; 0 is l1, as torch's) and
 * F.huber_loss(delta) (delta > 0). The same bits at any thread count. */
LK_API int lk_nn_mse(lk_nn *nn, double *loss, float *dinput,
                     const float *input, const float *target, size_t n,
                     float dloss);
LK_API int lk_nn_l1(lk_nn *nn, double *loss, float *dinput, const float *input,
                    const float *target, size_t n, float dloss);
LK_API int lk_nn_smooth_l1(lk_nn *nn, double *loss, float *dinput,
                           const float *input, const float *target, size_t n,
                           float beta, float dloss);
LK_API int lk_nn_huber(lk_nn *nn, double *loss, float *dinput,
                       const float *input, const float *target, size_t n,
                       float delta, float dloss);
/* F.binary_cross_entropy_with_logits(input, target, pos_weight): input and
 * target [n / width, width], POS_WEIGHT NULL or [width] (the weight of the
 * positive term of each column, torch's broadcast over the last
 * dimension); loss = mean of (1 - t) x + (1 + (p - 1) t) softplus(-x).
 * correct (NULL: not wanted) receives the values where x > 0 agrees with
 * t > 0.5: the accuracy of thresholding the logits at 0. */
LK_API int lk_nn_bce_with_logits(lk_nn *nn, double *loss, float *dinput,
                                 const float *input, const float *target,
                                 size_t n, const float *pos_weight,
                                 size_t width, float dloss, size_t *correct);

#ifdef __cplusplus
}
#endif
#endif
