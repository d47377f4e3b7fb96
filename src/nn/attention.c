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
#include <limits.h>
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "nn_internal.h"
#include "vmath.h"

#define LAYER "attention"
#define RB 32

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NN_SMALL_AVX512 1
#define SMALL_MR 12
#define SMALL_HS 64 /* the widest head, and T's block of columns */

/* The head's small products (32 x 32 x 32 at nanoGPT's baby GPT) in
 * AVX-512 registers, without packing: C [m, 16 NV] = alpha A B (+ C when
 * ADD), A [m, k] read at A + i ars + k acs (either layout), B's rows at
 * B + k ldb. Each element's sum runs over k in order, one FMA at a time,
 * from 0: the same wherever the element lies, so a task's results do not
 * depend on the thread that runs it. Through a library's sgemm a call
 * this small cost more in the call than in the arithmetic (oneDNN: 70 to
 * 140 GFLOP/s on these shapes on this project's EPYC, 190 on the GPT's
 * linear layers); the rows past m repeat row m - 1, computed and not
 * stored, so that every loop has constant bounds and the sums stay in
 * registers. */
#define SMALL_TARGET __attribute__((target("avx512f,fma")))
/* NV (1 or 2) vectors of 16 columns; inlined into small1 and small2 with
 * NV a constant, so that the loops unroll and the sums stay in registers. */
SMALL_TARGET __attribute__((always_inline)) static inline void
small_nv(int nv, int m, int k, float alpha, const float *a, size_t ars,
         size_t acs, const float *b, size_t ldb, bool add, float *c,
         size_t ldc) {
  for (int i0 = 0; i0 < m; i0 += SMALL_MR) {
    const float *ar[SMALL_MR];
    __m512 acc[SMALL_MR][2];
#pragma GCC unroll 16
    for (int i = 0; i < SMALL_MR; i++) {
      ar[i] = a + (size_t)(i0 + i < m ? i0 + i : m - 1) * ars;
      for (int v = 0; v < nv; v++)
        acc[i][v] = _mm512_setzero_ps();
    }
    for (int kk = 0; kk < k; kk++) {
      __m512 bv[2];
      for (int v = 0; v < nv; v++)
        bv[v] = _mm512_loadu_ps(b + (size_t)kk * ldb + 16 * v);
#pragma GCC unroll 16
      for (int i = 0; i < SMALL_MR; i++) {
        __m512 av = _mm512_set1_ps(ar[i][(size_t)kk * acs]);
        for (int v = 0; v < nv; v++)
          acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
      }
    }
    int h = m - i0 < SMALL_MR ? m - i0 : SMALL_MR;
    __m512 s = _mm512_set1_ps(alpha);
    for (int i = 0; i < h; i++)
      for (int v = 0; v < nv; v++) {
        float *ci = c + (size_t)(i0 + i) * ldc + 16 * v;
        __m512 r = _mm512_mul_ps(acc[i][v], s);
        if (add)
          r = _mm512_add_ps(r, _mm512_loadu_ps(ci));
        _mm512_storeu_ps(ci, r);
      }
  }
}

SMALL_TARGET static void small2(int m, int k, float alpha, const float *a,
                                size_t ars, size_t acs, const float *b,
                                size_t ldb, bool add, float *c, size_t ldc) {
  small_nv(2, m, k, alpha, a, ars, acs, b, ldb, add, c, ldc);
}

SMALL_TARGET static void small1(int m, int k, float alpha, const float *a,
                                size_t ars, size_t acs, const float *b,
                                size_t ldb, bool add, float *c, size_t ldc) {
  small_nv(1, m, k, alpha, a, ars, acs, b, ldb, add, c, ldc);
}

/* C [m, n] as small_nv, n a multiple of 16: 32 columns at a time. */
static void small(int m, int n, int k, float alpha, const float *a, size_t ars,
                  size_t acs, const float *b, size_t ldb, bool add, float *c,
                  size_t ldc) {
  int j = 0;
  for (; j + 32 <= n; j += 32)
    small2(m, k, alpha, a, ars, acs, b + j, ldb, add, c + j, ldc);
  if (j < n)
    small1(m, k, alpha, a, ars, acs, b + j, ldb, add, c + j, ldc);
}

/* BT [hs, rows] = the head's ROWS x HS slice at X (rows ld apart),
 * transposed: the NT products' B as rows. */
static void transpose(float *bt, const float *x, size_t ld, int rows, int hs) {
  for (int r = 0; r < rows; r++)
    for (int d = 0; d < hs; d++)
      bt[(size_t)d * rows + r] = x[(size_t)r * ld + d];
}
#endif

typedef struct job {
  lk_nn *nn;
  int B, T, C, NH, hs;
  bool small; /* the products on small_nv's registers */
  float scale;
  float *out, *att, *dqkv;
  const float *qkv, *dout, *catt;
} job;

static int check(int B, int T, int C, int NH) {
  NN_CHECK(B >= 1 && T >= 1 && C >= 1 && NH >= 1, LAYER,
           "sizes B = %d, T = %d, C = %d, NH = %d; expected >= 1", B, T, C, NH);
  NN_CHECK(C % NH == 0, LAYER, "C = %d is not a multiple of NH = %d heads", C,
           NH);
  NN_CHECK(nn__mul((size_t)T, (size_t)T) <= INT_MAX &&
               nn__mul((size_t)T, nn__mul(3, (size_t)C)) <= INT_MAX,
           LAYER, "T = %d, C = %d: too large", T, C);
  /* att [B, NH, T, T] and qkv [B, T, 3C]: arrays the caller has */
  NN_CHECK(nn__mul(nn__mul((size_t)B, (size_t)NH),
                   nn__mul((size_t)T, (size_t)T)) <= NN_MAX_FLOATS &&
               nn__mul((size_t)B, nn__mul((size_t)T, nn__mul(3, (size_t)C))) <=
                   NN_MAX_FLOATS,
           LAYER,
           "B = %d, T = %d, C = %d, NH = %d: att or qkv holds more bytes "
           "than a size_t counts",
           B, T, C, NH);
  return 0;
}

/* Rows [T0, T1) of S (row t at ATT + t T, its first t + 1 values kept):
 * the softmax of each over [0, t], zeros after (torch's
 * _vec_softmax_lastdim: exp(x - max), then times 1 / sum), a row at a
 * time over its own t + 1 values only: the max in vector lanes (the same
 * in any order), one exp call, the sum in vmath.h's lane order. This did
 * the exp of the whole block, masked part included, and summed rows one
 * value at a time; the row's sum is now in another (fixed) order. */
static void softmax_rows(const nn_kernels *k, float *att, int t0, int t1,
                         int T) {
  for (int t = t0; t < t1; t++) {
    float *a = att + (size_t)t * T;
    size_t n = (size_t)t + 1, whole = (n + 15) / 16 * 16;
    /* the exp of whole vectors (NN_MAP's tail is a copy): the values past
     * n are the block's masked scores (whole <= r1, RB being a multiple of
     * 16), exp'd for nothing and zeroed below */
    k->exp_shift(a, a, nn_max(a, n), whole < (size_t)T ? whole : (size_t)T);
    float inv = 1 / nn_sum(a, n);
    for (size_t s = 0; s < n; s++)
      a[s] *= inv;
    for (size_t s = n; s < (size_t)T; s++)
      a[s] = 0;
  }
}

/* dS = P (dP - rowsum(P dP)) for rows [T0, T1) of a block whose rows are
 * R wide (DS: dP in, dS out, row t at DS + (t - T0) R; P's row t at
 * ATT + t T), zeros past the diagonal; the row sums four rows side by
 * side, each in its own order. */
static void softmax_grad_rows(const float *att, float *ds, int t0, int t1,
                              int R, int T) {
  int t = t0;
  for (; t + 4 <= t1; t += 4) {
    const float *p0 = att + (size_t)t * T, *p1 = p0 + T, *p2 = p1 + T,
                *p3 = p2 + T;
    float *d0 = ds + (size_t)(t - t0) * R, *d1 = d0 + R, *d2 = d1 + R,
          *d3 = d2 + R;
    int n = t + 1;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int s = 0; s < n; s++) {
      s0 += p0[s] * d0[s];
      s1 += p1[s] * d1[s];
      s2 += p2[s] * d2[s];
      s3 += p3[s] * d3[s];
    }
    s1 += p1[n] * d1[n];
    s2 += p2[n] * d2[n];
    s2 += p2[n + 1] * d2[n + 1];
    s3 += p3[n] * d3[n];
    s3 += p3[n + 1] * d3[n + 1];
    s3 += p3[n + 2] * d3[n + 2];
    const float *p[4] = {p0, p1, p2, p3};
    float *d[4] = {d0, d1, d2, d3}, dot[4] = {s0, s1, s2, s3};
    for (int i = 0; i < 4; i++) {
      for (int s = 0; s < n + i; s++)
        d[i][s] = p[i][s] * (d[i][s] - dot[i]);
      for (int s = n + i; s < R; s++)
        d[i][s] = 0;
    }
  }
  for (; t < t1; t++) {
    const float *pt = att + (size_t)t * T;
    float *d = ds + (size_t)(t - t0) * R, dot = 0;
    for (int s = 0; s <= t; s++)
      dot += pt[s] * d[s];
    for (int s = 0; s <= t; s++)
      d[s] = pt[s] * (d[s] - dot);
    for (int s = t + 1; s < R; s++)
      d[s] = 0;
  }
}

/* Whether the head's products take small_nv: f32 products that a
 * library would run (the kit's own loop keeps its bits, the same at every
 * vector width: isa_agree), AVX-512 kernels, and a head and a context
 * that fit its blocks. */
static bool small_ok(const lk_nn *nn, int T, int hs) {
#ifdef NN_SMALL_AVX512
  return nn->blas && !nn__bf16(nn) && nn->k == &nn__kernels_avx512 &&
         hs % 16 == 0 && hs <= SMALL_HS && T % 16 == 0 && T <= SMALL_HS;
#else
  (void)nn, (void)T, (void)hs;
  return false;
#endif
}

static void forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  int b = task / j->NH, h = task % j->NH, T = j->T, C3 = 3 * j->C;
  const float *q = j->qkv + (size_t)b * T * C3 + (size_t)h * j->hs;
  const float *k = q + j->C, *v = q + 2 * j->C;
  float *att = j->att + (size_t)task * T * T;
  float *out = j->out + (size_t)b * T * j->C + (size_t)h * j->hs;
#ifdef NN_SMALL_AVX512
  if (j->small) {
    float kt[SMALL_HS * SMALL_HS];
    transpose(kt, k, C3, T, j->hs);
    for (int r0 = 0; r0 < T; r0 += RB) {
      int r1 = r0 + RB < T ? r0 + RB : T, rows = r1 - r0;
      float *a = att + (size_t)r0 * T;
      /* kt's first r1 columns, rows T apart: S = Q K^T's block */
      small(rows, r1, j->hs, j->scale, q + (size_t)r0 * C3, C3, 1, kt, T, false,
            a, T);
      softmax_rows(j->nn->k, att, r0, r1, T);
      small(rows, j->hs, r1, 1, a, T, 1, v, C3, false, out + (size_t)r0 * j->C,
            j->C);
    }
    return;
  }
#endif
  for (int r0 = 0; r0 < T; r0 += RB) {
    int r1 = r0 + RB < T ? r0 + RB : T, rows = r1 - r0;
    float *a = att + (size_t)r0 * T;
    nn__gemm1(j->nn, false, true, rows, r1, j->hs, j->scale,
              q + (size_t)r0 * C3, C3, k, C3, 0, a, T);
    softmax_rows(j->nn->k, att, r0, r1, T);
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
  j.small = small_ok(nn, T, j.hs);
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
#ifdef NN_SMALL_AVX512
  if (j->small) {
    float vt[SMALL_HS * SMALL_HS];
    transpose(vt, v, C3, T, j->hs);
    for (int r0 = 0; r0 < T; r0 += RB) {
      int r1 = r0 + RB < T ? r0 + RB : T, rows = r1 - r0;
      const float *p = att + (size_t)r0 * T, *dy = dout + (size_t)r0 * j->C;
      small(r1, j->hs, rows, 1, p, 1, T, dy, j->C, true, dv, C3);
      small(rows, r1, j->hs, 1, dy, j->C, 1, vt, T, false, ds, r1);
      softmax_grad_rows(att, ds, r0, r1, r1, T);
      small(rows, j->hs, r1, j->scale, ds, r1, 1, k, C3, true,
            dq + (size_t)r0 * C3, C3);
      small(r1, j->hs, rows, j->scale, ds, 1, r1, q + (size_t)r0 * C3, C3, true,
            dk, C3);
    }
    return;
  }
#endif
  for (int r0 = 0; r0 < T; r0 += RB) {
    int r1 = r0 + RB < T ? r0 + RB : T, rows = r1 - r0;
    const float *p = att + (size_t)r0 * T, *dy = dout + (size_t)r0 * j->C;
    nn__gemm1(j->nn, true, false, r1, j->hs, rows, 1, p, T, dy, j->C, 1, dv,
              C3);
    nn__gemm1(j->nn, false, true, rows, r1, j->hs, 1, dy, j->C, v, C3, 0, ds,
              r1);
    softmax_grad_rows(att, ds, r0, r1, r1, T);
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
  j.small = small_ok(nn, T, j.hs);
  nn__run(nn, B * NH, backward_task, &j);
  return 0;
}
