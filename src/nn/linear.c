/* linear: out = inp weight^T + bias, as nn.Linear.
 *   inp [N, C], weight [OC, C], bias [OC], out [N, OC]
 * The forward adds the bias to each tile of the product while the tile is
 * in cache; the backward's two products and the bias sums are one job. */
#include "nn_internal.h"

#define LAYER "linear"

static int check(int N, int C, int OC) {
  NN_CHECK(N >= 1 && C >= 1 && OC >= 1, LAYER,
           "sizes N = %d, C = %d, OC = %d; expected >= 1", N, C, OC);
  return 0;
}

/* With a bias, each tile of C is the product plus the bias (nn_gemm's
 * bias: added as C is stored, or into a C filled with it). */
static void forward_task(void *ctx, int tile, int thread) {
  (void)thread;
  nn__gemm_tile(ctx, tile);
}

int lk_nn_linear_forward(lk_nn *nn, float *out, const float *inp,
                         const float *weight, const float *bias, int N, int C,
                         int OC) {
  NN_CHECK(nn && out && inp && weight, LAYER,
           "forward needs the context, out, inp and weight");
  int rc = check(N, C, OC);
  if (rc < 0)
    return rc;
  nn_gemm g = {.nn = nn,
               .tb = true,
               .m = N,
               .n = OC,
               .k = C,
               .a = inp,
               .lda = C,
               .b = weight,
               .ldb = C,
               .c = out,
               .ldc = OC,
               .alpha = 1,
               .beta = 0,
               .bias = bias};
  nn__gemm_plan(&g);
  nn__run(nn, g.tiles, forward_task, &g);
  return 0;
}

/* Bias sums over parts of the OC columns, each summed over all N rows in
 * order (no sum is split). */
#define BIAS_GRAIN 64

typedef struct bwd {
  const lk_nn *nn;
  nn_gemm dinp, dweight;
  int bias_parts, N, OC;
  float *dbias;
  const float *dout;
} bwd;

static void backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const bwd *b = ctx;
  if (task < b->dweight.tiles) {
    nn__gemm_tile(&b->dweight, task);
    return;
  }
  task -= b->dweight.tiles;
  if (task < b->dinp.tiles) {
    nn__gemm_tile(&b->dinp, task);
    return;
  }
  task -= b->dinp.tiles;
  size_t lo, hi;
  nn__range((size_t)b->OC, b->bias_parts, task, &lo, &hi);
  b->nn->k->col_sums(b->dbias + lo, b->dout + lo, (size_t)b->N, hi - lo,
                     (size_t)b->OC);
}

int lk_nn_linear_backward(lk_nn *nn, float *dinp, float *dweight, float *dbias,
                          const float *dout, const float *inp,
                          const float *weight, int N, int C, int OC) {
  NN_CHECK(nn && dout, LAYER, "backward needs the context and dout");
  NN_CHECK(!dinp || weight, LAYER, "dinp needs weight");
  NN_CHECK(!dweight || inp, LAYER, "dweight needs inp");
  int rc = check(N, C, OC);
  if (rc < 0)
    return rc;
  bwd b = {.nn = nn, .N = N, .OC = OC, .dbias = dbias, .dout = dout};
  if (dinp) { /* dinp [N, C] += dout [N, OC] weight [OC, C] */
    b.dinp = (nn_gemm){.nn = nn,
                       .m = N,
                       .n = C,
                       .k = OC,
                       .a = dout,
                       .lda = OC,
                       .b = weight,
                       .ldb = C,
                       .c = dinp,
                       .ldc = C,
                       .alpha = 1,
                       .beta = 1};
    nn__gemm_plan(&b.dinp);
  }
  if (dweight) { /* dweight [OC, C] += dout^T [OC, N] inp [N, C] */
    b.dweight = (nn_gemm){.nn = nn,
                          .ta = true,
                          .m = OC,
                          .n = C,
                          .k = N,
                          .a = dout,
                          .lda = OC,
                          .b = inp,
                          .ldb = C,
                          .c = dweight,
                          .ldc = C,
                          .alpha = 1,
                          .beta = 1};
    nn__gemm_plan(&b.dweight);
  }
  if (dbias)
    b.bias_parts = nn__parts((size_t)OC, BIAS_GRAIN);
  nn__run(nn, b.dweight.tiles + b.dinp.tiles + b.bias_parts, backward_task, &b);
  return 0;
}
