/* The dense layers of the model plugins (linear, softmax, mlp): the matrix
 * product, fused bias and activation, a dense layer's gradients and
 * parameters, and a model of one dense layer. Built once into
 * plugins/lib/libmodelcommon.la (model_dense.c), apart from
 * libplugincommon.la because it brings OpenBLAS.
 *
 * All matrices are f32 and row-major. With LK_HAVE_BLAS (configure's
 * --with-blas) products go to OpenBLAS; otherwise to a cache-blocked C loop
 * that is always compiled, so that a test can hold the two against each
 * other in one binary. */
#ifndef LK_MODEL_DENSE_H
#define LK_MODEL_DENSE_H

#include "model_common.h"

/* ---- matrix product --------------------------------------------------- */

/* C = alpha * op(A) op(B) + beta * C with op(A) [M, K], op(B) [K, N], in
 * portable C. */
void model_sgemm_portable(bool ta, bool tb, size_t m, size_t n, size_t k,
                          float alpha, const float *a, size_t lda,
                          const float *b, size_t ldb, float beta, float *c,
                          size_t ldc);

/* The product every model uses. BLAS's level-2 routines take the shapes a
 * batch of one gives (a row times a matrix, an outer product): cheaper to
 * call than sgemm's general path. */
void model_sgemm(bool ta, bool tb, size_t m, size_t n, size_t k, float alpha,
                 const float *a, size_t lda, const float *b, size_t ldb,
                 float beta, float *c, size_t ldc);

/* OpenBLAS's threads cost more than they give on these models' products:
 * on two shared cores an MLP 784-256-128-10 step ran up to 2.3x faster
 * single-threaded at batch 1, 2x at 32 and 1.1x at 256 (idle workers spin
 * with sched_yield against the loop's own thread between calls), and was
 * never slower when the machine was quiet.
 * So a model runs OpenBLAS on one thread unless the user asked for a
 * number with OPENBLAS_NUM_THREADS (or OMP_NUM_THREADS). Process-wide, but
 * the model plugins are OpenBLAS's only users in a loopkit process. */
void model_blas_threads(void);

/* ---- layers ----------------------------------------------------------- */

typedef enum model_act { MODEL_NONE = 0, MODEL_RELU, MODEL_TANH } model_act;

/* Z [n, m] += bias per row, then the activation, in one pass. */
void model_bias_act(float *z, const float *bias, size_t n, size_t m,
                    model_act act);

/* D [n, m] *= the activation's derivative, written through its output A. */
void model_act_grad(float *d, const float *a, size_t count, model_act act);

/* The gradients of a dense layer z = x W^T + b from D = dL/dz [n, out]:
 * dW [out, in] += alpha * D^T X, db += alpha * column sums of D. */
void model_dense_grad(const float *d, const float *x, size_t n, size_t in,
                      size_t out, float alpha, float *dw, float *db);

/* ---- ONNX (loopkit export FILE.onnx) ------------------------------------- */

/* Declares the graph's input f32 [N, INPUTS] and output f32 [N, OUTPUTS]
 * (N given at run time): a dense classifier's. */
int model_onnx_io(lk_host *host, lk_onnx *g, size_t inputs, size_t outputs);

/* The dense layer OUT = act(X W^T + b) as ONNX nodes: Gemm (transB), then
 * Relu or Tanh; W and B added as initializers under their names. OUT is
 * a new value: the caller's name, or NULL for one of G's (*MADE gets it). */
int model_onnx_dense(lk_host *host, lk_onnx *g, const char *x,
                     const lk_tensor *w, const lk_tensor *b, model_act act,
                     const char *out, const char **made);

/* ---- the scaffolding of a model ---------------------------------------- */

/* A dense layer's parameters, as torch.nn.Linear names and shapes them:
 * PREFIX.weight [out, in] and PREFIX.bias [out] (PREFIX NULL: weight and
 * bias), f32, zero-filled. */
int model_add_dense(lk_host *host, const char *prefix, size_t in, size_t out,
                    lk_tensor **w, lk_tensor **b);

/* ---- a model of one dense layer (linear, softmax) ----------------------- */

typedef struct model_single {
  lk_host *host;
  size_t inputs, outputs;
  lk_tensor *w, *b; /* parameters weight [outputs, inputs], bias [outputs] */
  float *buf[2];    /* the plugin's batch buffers, cap rows each */
  size_t cap;       /* batch size the buffers hold; they never shrink */
  size_t ready;     /* batch size of the training step backward may use, or 0 */
  model_scores scores; /* a classifier's top-k and F1 (softmax) */
} model_single;

void model_single_destroy(void *self);

/* create: a layer of IN inputs and OUT outputs, the logits of OUT classes
 * when CLASSIFY (else OUT real targets), checked against the data's
 * samples; its parameters start at zero. */
int model_single_new(lk_host *host, size_t in, size_t out, bool classify,
                     void **self);

/* The two batch buffers for a batch of N, of WIDTH0 and WIDTH1 floats a
 * sample. */
int model_single_reserve(model_single *m, size_t n, size_t width0,
                         size_t width1);

#endif
