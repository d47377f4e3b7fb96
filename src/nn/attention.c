/* Causal multi-head self-attention, as nanoGPT's CausalSelfAttention
 * between c_attn and c_proj (llm.c's attention_forward/backward).
 *   qkv [B, T, 3C], out [B, T, C], att [B, NH, T, T], hs = C / NH
 * For one (b, h), with Q, K, V the head's [T, hs] slices of qkv:
 *   S = Q K^T / sqrt(hs), P = softmax(S) under the causal mask, O = P V
 *   dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)),
 *   dQ += dS K / sqrt(hs), dK += dS^T Q / sqrt(hs)
 * Each product is a kit product on the head's strided slices, in place:
 * no copies. To skip the masked upper triangle, rows go in blocks of RB:
 * rows [r0, r1) need keys [0, r1) only, so at T = 64 the products do 3/4
 * of the full T x T work (about 1/2 as T grows).
 *
 * A task is one (b, h): its outputs (its head's columns of out and dqkv,
 * its plane of att) are its own, and its sums run in a fixed order. The
 * forward keeps P, so the backward recomputes nothing. */
#include <math.h>
#include <string.h>

#include "nn_internal.h"

#define LAYER "attention"
#define RB 32

typedef struct job {
  lk_nn *nn;
  int B, T, C, NH, hs;
  float scale;
  float *out, *att, *dqkv;
  const float *qkv, *dout, *catt;
} job;

static int check(int B, int T, int C, int NH) {
  NN_CHECK(B >= 1 && T >= 1 && C >= 1 && NH >= 1, LAYER,
           "sizes B = %d, T = %d, C = %d, NH = %d; expected >= 1", B, T, C, NH);
  NN_CHECK(C % NH == 0, LAYER, "C = %d is not a multiple of NH = %d heads", C,
           NH);
  NN_CHECK((long long)T * T <= 0x7fffffff && (long long)T * 3 * C <= 0x7fffffff,
           LAYER, "T = %d, C = %d: too large", T, C);
  return 0;
}

/* Row a [0, T) of S: softmax over [0, n), zeros after (torch's
 * _vec_softmax_lastdim: exp(x - max), then times 1 / sum). */
static void softmax_row(const nn_kernels *k, float *a, int n, int T) {
  float m = a[0];
  for (int s = 1; s < n; s++)
    m = a[s] > m ? a[s] : m;
  k->exp_shift(a, a, m, (size_t)n);
  float sum = 0;
  for (int s = 0; s < n; s++)
    sum += a[s];
  float inv = 1 / sum;
  for (int s = 0; s < n; s++)
    a[s] *= inv;
  memset(a + n, 0, (size_t)(T - n) * sizeof *a);
}

static void forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  int b = task / j->NH, h = task % j->NH, T = j->T, C3 = 3 * j->C;
  const float *q = j->qkv + (size_t)b * T * C3 + (size_t)h * j->hs;
  const float *k = q + j->C, *v = q + 2 * j->C;
  float *att = j->att + (size_t)task * T * T;
  float *out = j->out + (size_t)b * T * j->C + (size_t)h * j->hs;
  for (int r0 = 0; r0 < T; r0 += RB) {
    int r1 = r0 + RB < T ? r0 + RB : T, rows = r1 - r0;
    float *a = att + (size_t)r0 * T;
    nn__gemm1(j->nn, false, true, rows, r1, j->hs, j->scale,
              q + (size_t)r0 * C3, C3, k, C3, 0, a, T);
    for (int t = r0; t < r1; t++)
      softmax_row(j->nn->k, att + (size_t)t * T, t + 1, T);
    nn__gemm1(j->nn, false, false, rows, j->hs, r1, 1, a, T, v, C3, 0,
              out + (size_t)r0 * j->C, j->C);
  }
}

int lk_nn_attention_forward(lk_nn *nn, float *out, float *att, const float *qkv,
                            int B, int T, int C, int NH) {
  NN_CHECK(nn && out && att && qkv, LAYER,
           "forward needs the context, out, att and qkv");
  int rc = check(B, T, C, NH);
  if (rc < 0)
    return rc;
  job j = {.nn = nn,
           .B = B,
           .T = T,
           .C = C,
           .NH = NH,
           .hs = C / NH,
           .out = out,
           .att = att,
           .qkv = qkv};
  j.scale = (float)(1 / sqrt((double)j.hs));
  nn__run(nn, B * NH, forward_task, &j);
  return 0;
}

static void backward_task(void *ctx, int task, int thread) {
  const job *j = ctx;
  int b = task / j->NH, h = task % j->NH, T = j->T, C3 = 3 * j->C;
  size_t at = (size_t)b * T * C3 + (size_t)h * j->hs;
  const float *q = j->qkv + at, *k = q + j->C, *v = q + 2 * j->C;
  float *dq = j->dqkv + at, *dk = dq + j->C, *dv = dq + 2 * j->C;
  const float *att = j->catt + (size_t)task * T * T;
  const float *dout = j->dout + (size_t)b * T * j->C + (size_t)h * j->hs;
  float *ds = nn__scratch(j->nn, thread); /* [RB, T]: dP, then dS */
  for (int r0 = 0; r0 < T; r0 += RB) {
    int r1 = r0 + RB < T ? r0 + RB : T, rows = r1 - r0;
    const float *p = att + (size_t)r0 * T, *dy = dout + (size_t)r0 * j->C;
    nn__gemm1(j->nn, true, false, r1, j->hs, rows, 1, p, T, dy, j->C, 1, dv,
              C3);
    nn__gemm1(j->nn, false, true, rows, r1, j->hs, 1, dy, j->C, v, C3, 0, ds,
              r1);
    for (int t = r0; t < r1; t++) {
      const float *pt = att + (size_t)t * T;
      float *d = ds + (size_t)(t - r0) * r1, dot = 0;
      for (int s = 0; s <= t; s++)
        dot += pt[s] * d[s];
      for (int s = 0; s <= t; s++)
        d[s] = pt[s] * (d[s] - dot);
      for (int s = t + 1; s < r1; s++)
        d[s] = 0;
    }
    nn__gemm1(j->nn, false, false, rows, j->hs, r1, j->scale, ds, r1, k, C3, 1,
              dq + (size_t)r0 * C3, C3);
    nn__gemm1(j->nn, true, false, r1, j->hs, rows, j->scale, ds, r1,
              q + (size_t)r0 * C3, C3, 1, dk, C3);
  }
}

int lk_nn_attention_backward(lk_nn *nn, float *dqkv, const float *dout,
                             const float *qkv, const float *att, int B, int T,
                             int C, int NH) {
  NN_CHECK(nn && dout && qkv && att, LAYER,
           "backward needs the context, dout, qkv and att");
  int rc = check(B, T, C, NH);
  if (rc < 0 || !dqkv)
    return rc;
  int rb = T < RB ? T : RB;
  if ((rc = nn__reserve(nn, LAYER, 0, (size_t)rb * T * sizeof(float))) < 0)
    return rc;
  job j = {.nn = nn,
           .B = B,
           .T = T,
           .C = C,
           .NH = NH,
           .hs = C / NH,
           .dqkv = dqkv,
           .dout = dout,
           .qkv = qkv,
           .catt = att};
  j.scale = (float)(1 / sqrt((double)j.hs));
  nn__run(nn, B * NH, backward_task, &j);
  return 0;
}
