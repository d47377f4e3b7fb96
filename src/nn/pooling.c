/* Max and average pooling 2d, as nn.MaxPool2d and nn.AvgPool2d with
 * torch's defaults otherwise (dilation 1, ceil_mode False,
 * count_include_pad True).
 *   inp [N, C, H, W], out and argmax [N, C, OH, OW]
 * Every plane (n, c) is independent: tasks are runs of whole planes, so the
 * backward's sums into one input pixel (overlapping windows) stay in one
 * task, in order. The loops follow torch's CPU kernels (MaxPoolKernel.cpp,
 * AvgPoolKernel.cpp) step for step: the same window bounds, the same first
 * index on ties, NaN winning, the same divisor. */
#include <limits.h>
#include <math.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "nn_internal.h"
#include "vmath.h"

#define OUT_GRAIN 16384 /* outputs per task at least */

typedef struct geom {
  int N, C, H, W, KH, KW, sh, sw, ph, pw, OH, OW;
} geom;

static int setup(const char *layer, const lk_nn_pool2d *p, geom *g) {
  if (!p)
    return lk__err(LK_EINVAL, "%s: the sizes are NULL", layer);
  const char *why = NULL;
  if (p->n < 1 || p->c < 1 || p->h < 1 || p->w < 1 || p->kh < 1 || p->kw < 1)
    why = "every size must be >= 1";
  else if (p->stride_h < 0 || p->stride_w < 0 || p->pad_h < 0 || p->pad_w < 0)
    why = "strides and padding must be >= 0";
  else if (p->pad_h > p->kh / 2 || p->pad_w > p->kw / 2)
    why = "padding must be at most half the window (as torch requires)";
  else if ((long long)p->h + 2LL * p->pad_h < p->kh ||
           (long long)p->w + 2LL * p->pad_w < p->kw)
    why = "the window is larger than the padded input";
  else if (nn__mul((size_t)p->h, (size_t)p->w) > INT32_MAX ||
           p->h > INT_MAX / 4 || p->w > INT_MAX / 4 ||
           (long long)p->h + 2LL * p->pad_h > INT_MAX ||
           (long long)p->w + 2LL * p->pad_w > INT_MAX)
    why = "the planes are too large for int32 indices";
  else if (nn__mul((size_t)p->kh, (size_t)p->kw) > INT_MAX)
    why = "the window holds more values than an int counts";
  else if (nn__mul(nn__mul((size_t)p->n, (size_t)p->c),
                   nn__mul((size_t)p->h, (size_t)p->w)) > NN_MAX_FLOATS)
    why = "the input holds more bytes than a size_t counts";
  if (why)
    return lk__err(LK_EINVAL,
                   "%s: input [%d, %d, %d, %d], window %d x %d, stride %d x "
                   "%d, padding %d x %d: %s",
                   layer, p->n, p->c, p->h, p->w, p->kh, p->kw, p->stride_h,
                   p->stride_w, p->pad_h, p->pad_w, why);
  g->N = p->n, g->C = p->c, g->H = p->h, g->W = p->w, g->KH = p->kh;
  g->KW = p->kw, g->ph = p->pad_h, g->pw = p->pad_w;
  g->sh = p->stride_h ? p->stride_h : p->kh;
  g->sw = p->stride_w ? p->stride_w : p->kw;
  g->OH = (g->H + 2 * g->ph - g->KH) / g->sh + 1;
  g->OW = (g->W + 2 * g->pw - g->KW) / g->sw + 1;
  return 0;
}

int lk_nn_pool2d_size(const lk_nn_pool2d *p, int *oh, int *ow) {
  geom g;
  int rc = setup("pool2d", p, &g);
  if (rc < 0)
    return rc;
  if (oh)
    *oh = g.OH;
  if (ow)
    *ow = g.OW;
  return 0;
}

typedef struct job {
  geom g;
  int parts;
  bool avx512; /* the context's kernels are AVX-512's */
  float *out, *dinp;
  int32_t *argmax;
  const int32_t *cargmax;
  const float *inp, *dout;
} job;

static int planes_per_task(const geom *g) {
  size_t per = (size_t)g->OH * g->OW;
  return nn__parts((size_t)g->N * g->C, (OUT_GRAIN + per - 1) / per);
}

/* ---- max ----------------------------------------------------------------- */

/* The even (K = 0) or odd (K = 1) lanes of A then B. */
#if NN_W == 4 && (defined(__clang__) || __GNUC__ >= 12)
#define NN_EVEN_ODD(a, b, k)                                                   \
  __builtin_shufflevector(a, b, 0 + (k), 2 + (k), 4 + (k), 6 + (k))
#elif NN_W == 4 && defined(__GNUC__)
#define NN_EVEN_ODD(a, b, k)                                                   \
  __builtin_shuffle(a, b, (nn_vi){0 + (k), 2 + (k), 4 + (k), 6 + (k)})
#endif

/* The outputs whose window lies inside the input, [lo, hi) along one side
 * of S inputs: the vector paths' range. */
static void interior(int S, int K, int stride, int pad, int O, int *lo,
                     int *hi) {
  *lo = (pad + stride - 1) / stride;
  *hi = S + pad - K >= 0 ? (S + pad - K) / stride + 1 : 0;
  if (*hi > O)
    *hi = O;
  if (*lo > *hi)
    *lo = *hi;
}

/* m, best = v, i where v > m or v is NaN: as bit masks, not a branch,
 * which the winner's data made mispredict half the time (20 ns an output
 * on 2 x 2 windows). */
static inline void max_take(float v, int32_t i, float *m, int32_t *best) {
  uint32_t vb, mb;
  memcpy(&vb, &v, sizeof vb);
  memcpy(&mb, m, sizeof mb);
  uint32_t take = -(uint32_t)((v > *m) | (v != v));
  mb = (vb & take) | (mb & ~take);
  memcpy(m, &mb, sizeof mb);
  *best = (int32_t)(((uint32_t)i & take) | ((uint32_t)*best & ~take));
}

static void max_one(const geom *g, const float *x, int oh, int ow, float *y,
                    int32_t *arg) {
  int h0 = oh * g->sh - g->ph, h1 = h0 + g->KH < g->H ? h0 + g->KH : g->H;
  int w0 = ow * g->sw - g->pw, w1 = w0 + g->KW < g->W ? w0 + g->KW : g->W;
  h0 = h0 > 0 ? h0 : 0;
  w0 = w0 > 0 ? w0 : 0;
  int32_t best = h0 * g->W + w0;
  float m = -INFINITY;
  for (int ih = h0; ih < h1; ih++)
    for (int iw = w0; iw < w1; iw++)
      max_take(x[ih * g->W + iw], ih * g->W + iw, &m, &best);
  y[oh * g->OW + ow] = m;
  arg[oh * g->OW + ow] = best;
}

#if NN_W == 4
/* Outputs [ow, ow + 4) of row oh, inside the input: four lanes, the steps
 * of max_one in each. */
static void max4(const geom *g, const float *x, int oh, int ow, float *y,
                 int32_t *arg) {
  int32_t i0 = (oh * g->sh - g->ph) * g->W + ow * g->sw - g->pw;
  nn_vi base = i0 + (nn_vi){0, g->sw, 2 * g->sw, 3 * g->sw}, best = base;
  nn_vf m = nn_splat(-INFINITY);
  for (int kh = 0; kh < g->KH; kh++)
    for (int kw = 0; kw < g->KW; kw++) {
      nn_vi i = base + (kh * g->W + kw);
      nn_vf v = {x[i[0]], x[i[1]], x[i[2]], x[i[3]]};
      nn_vi take = (v > m) | (v != v);
      m = nn_sel(take, v, m);
      best = (i & take) | (best & ~take);
    }
  nn_store(y + oh * g->OW + ow, m);
  memcpy(arg + oh * g->OW + ow, &best, sizeof best);
}

#ifdef NN_EVEN_ODD
/* The same for 2 x 2 windows of stride 2: each of the two rows is two
 * loads, split into the windows' left and right values. */
static void max4_2x2(const geom *g, const float *x, int oh, int ow, float *y,
                     int32_t *arg) {
  int32_t i0 = (oh * 2 - g->ph) * g->W + ow * 2 - g->pw;
  nn_vi base = i0 + (nn_vi){0, 2, 4, 6}, best = base;
  nn_vf m = nn_splat(-INFINITY);
  for (int kh = 0; kh < 2; kh++) {
    const float *r = x + i0 + kh * g->W;
    nn_vf a = nn_load(r), b = nn_load(r + 4);
    nn_vf v[2] = {NN_EVEN_ODD(a, b, 0), NN_EVEN_ODD(a, b, 1)};
    for (int kw = 0; kw < 2; kw++) {
      nn_vi i = base + (kh * g->W + kw);
      nn_vi take = (v[kw] > m) | (v[kw] != v[kw]);
      m = nn_sel(take, v[kw], m);
      best = (i & take) | (best & ~take);
    }
  }
  nn_store(y + oh * g->OW + ow, m);
  memcpy(arg + oh * g->OW + ow, &best, sizeof best);
}
#endif
#endif

static void max_plane(const geom *g, const float *x, float *y, int32_t *arg) {
  int hlo, hhi, wlo, whi;
  interior(g->H, g->KH, g->sh, g->ph, g->OH, &hlo, &hhi);
  interior(g->W, g->KW, g->sw, g->pw, g->OW, &wlo, &whi);
#if NN_W == 4
  void (*four)(const geom *, const float *, int, int, float *, int32_t *) =
      max4;
#ifdef NN_EVEN_ODD
  if (g->KH == 2 && g->KW == 2 && g->sh == 2 && g->sw == 2)
    four = max4_2x2;
#endif
#endif
  for (int oh = 0; oh < g->OH; oh++) {
    int ow = 0;
#if NN_W == 4
    if (oh >= hlo && oh < hhi && whi - wlo >= 4) {
      for (; ow < wlo; ow++)
        max_one(g, x, oh, ow, y, arg);
      for (; ow + 4 <= whi; ow += 4)
        four(g, x, oh, ow, y, arg);
      if (ow < whi) /* the last four again: the same values, no tail */
        four(g, x, oh, whi - 4, y, arg);
      ow = whi;
    }
#endif
    for (; ow < g->OW; ow++)
      max_one(g, x, oh, ow, y, arg);
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define NN_MAX_2X2_AVX512 1
/* A plane's 2 x 2 windows of stride 2 without padding (the CNNs' pooling)
 * with 64-byte vectors, for contexts whose kernels are AVX-512's: 16
 * outputs of a row at a time, each input row two loads split into the
 * windows' left and right values, the steps of max_one in each lane (the
 * same values and indices: a maximum is exact). The 4-wide max4_2x2 was
 * 6% of a Fashion-MNIST CNN step on this project's EPYC. Rows shorter
 * than 16 (7 and 14 there) are masked; no lane is loaded past the row's
 * windows (an all-off masked load costs an assist on AMD: gemm_bf16.c). */
__attribute__((target("avx512f"))) static void
max_plane_2x2_avx512(const geom *g, const float *x, float *y, int32_t *arg) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12,
                                        10, 8, 6, 4, 2, 0),
                odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int oh = 0; oh < g->OH; oh++)
    for (int ow = 0; ow < g->OW; ow += 16) {
      int n = g->OW - ow < 16 ? g->OW - ow : 16;
      __mmask16 out = (__mmask16)((1u << n) - 1);
      __mmask16 m0 = (__mmask16)(2 * n >= 16 ? 0xffff : (1u << 2 * n) - 1);
      __mmask16 m1 = (__mmask16)(2 * n >= 32  ? 0xffff
                                 : 2 * n > 16 ? (1u << (2 * n - 16)) - 1
                                              : 0);
      int32_t i0 = 2 * oh * g->W + 2 * ow;
      __m512i base = _mm512_add_epi32(_mm512_set1_epi32(i0), even), best = base;
      __m512 m = _mm512_set1_ps(-INFINITY);
      for (int kh = 0; kh < 2; kh++) {
        const float *r = x + i0 + kh * g->W;
        __m512 a = _mm512_maskz_loadu_ps(m0, r),
               b = m1 ? _mm512_maskz_loadu_ps(m1, r + 16) : _mm512_setzero_ps();
        __m512 v[2] = {_mm512_permutex2var_ps(a, even, b),
                       _mm512_permutex2var_ps(a, odd, b)};
        for (int kw = 0; kw < 2; kw++) {
          __m512i i = _mm512_add_epi32(base, _mm512_set1_epi32(kh * g->W + kw));
          __mmask16 take = _mm512_cmp_ps_mask(v[kw], m, _CMP_GT_OQ) |
                           _mm512_cmp_ps_mask(v[kw], v[kw], _CMP_UNORD_Q);
          m = _mm512_mask_mov_ps(m, take, v[kw]);
          best = _mm512_mask_mov_epi32(best, take, i);
        }
      }
      _mm512_mask_storeu_ps(y + oh * g->OW + ow, out, m);
      _mm512_mask_storeu_epi32(arg + oh * g->OW + ow, out, best);
    }
}
#endif

static void max_forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  const geom *g = &j->g;
  size_t lo, hi, in_plane = (size_t)g->H * g->W,
                 out_plane = (size_t)g->OH * g->OW;
  nn__range((size_t)g->N * g->C, j->parts, task, &lo, &hi);
#ifdef NN_MAX_2X2_AVX512
  if (j->avx512 && g->KH == 2 && g->KW == 2 && g->sh == 2 && g->sw == 2 &&
      g->ph == 0 && g->pw == 0) {
    for (size_t pl = lo; pl < hi; pl++)
      max_plane_2x2_avx512(g, j->inp + pl * in_plane, j->out + pl * out_plane,
                           j->argmax + pl * out_plane);
    return;
  }
#endif
  for (size_t pl = lo; pl < hi; pl++)
    max_plane(g, j->inp + pl * in_plane, j->out + pl * out_plane,
              j->argmax + pl * out_plane);
}

int lk_nn_maxpool2d_forward(lk_nn *nn, const lk_nn_pool2d *p, float *out,
                            int32_t *argmax, const float *inp) {
  NN_CHECK(nn && out && argmax && inp, "maxpool2d",
           "forward needs the context, out, argmax and inp");
  job j = {.out = out,
           .argmax = argmax,
           .inp = inp,
           .avx512 = nn->k == &nn__kernels_avx512};
  int rc = setup("maxpool2d", p, &j.g);
  if (rc < 0)
    return rc;
  j.parts = planes_per_task(&j.g);
  nn__run(nn, j.parts, max_forward_task, &j);
  return 0;
}

static void max_backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  const geom *g = &j->g;
  size_t lo, hi, in_plane = (size_t)g->H * g->W,
                 out_plane = (size_t)g->OH * g->OW;
  nn__range((size_t)g->N * g->C, j->parts, task, &lo, &hi);
  for (size_t pl = lo; pl < hi; pl++) {
    float *dx = j->dinp + pl * in_plane;
    const float *dy = j->dout + pl * out_plane;
    const int32_t *arg = j->cargmax + pl * out_plane;
    for (size_t o = 0; o < out_plane; o++)
      if ((uint32_t)arg[o] < in_plane) /* never trust an index */
        dx[arg[o]] += dy[o];
  }
}

int lk_nn_maxpool2d_backward(lk_nn *nn, const lk_nn_pool2d *p, float *dinp,
                             const float *dout, const int32_t *argmax) {
  NN_CHECK(nn && dout && argmax, "maxpool2d",
           "backward needs the context, dout and argmax");
  job j = {.dinp = dinp, .dout = dout, .cargmax = argmax};
  int rc = setup("maxpool2d", p, &j.g);
  if (rc < 0 || !dinp)
    return rc;
  j.parts = planes_per_task(&j.g);
  nn__run(nn, j.parts, max_backward_task, &j);
  return 0;
}

/* ---- average ------------------------------------------------------------- */

/* The window of output (oh, ow) clipped to the input, and torch's divisor:
 * the window clipped to the padded input only. */
static int window(const geom *g, int oh, int ow, int *h0, int *h1, int *w0,
                  int *w1) {
  int a = oh * g->sh - g->ph, b = ow * g->sw - g->pw;
  int c = a + g->KH < g->H + g->ph ? a + g->KH : g->H + g->ph;
  int d = b + g->KW < g->W + g->pw ? b + g->KW : g->W + g->pw;
  int size = (c - a) * (d - b);
  *h0 = a > 0 ? a : 0, *w0 = b > 0 ? b : 0;
  *h1 = c < g->H ? c : g->H, *w1 = d < g->W ? d : g->W;
  return size;
}

static void avg_one(const geom *g, const float *x, int oh, int ow, float *y) {
  int h0, h1, w0, w1, div = window(g, oh, ow, &h0, &h1, &w0, &w1);
  float s = 0;
  for (int ih = h0; ih < h1; ih++)
    for (int iw = w0; iw < w1; iw++)
      s += x[ih * g->W + iw];
  y[oh * g->OW + ow] = h0 < h1 && w0 < w1 ? s / (float)div : 0;
}

#if NN_W == 4
static void avg4(const geom *g, const float *x, int oh, int ow, float *y) {
  int32_t i0 = (oh * g->sh - g->ph) * g->W + ow * g->sw - g->pw;
  nn_vi base = i0 + (nn_vi){0, g->sw, 2 * g->sw, 3 * g->sw};
  nn_vf s = nn_splat(0);
  for (int kh = 0; kh < g->KH; kh++)
    for (int kw = 0; kw < g->KW; kw++) {
      nn_vi i = base + (kh * g->W + kw);
      nn_vf v = {x[i[0]], x[i[1]], x[i[2]], x[i[3]]};
      s += v;
    }
  /* inside the input, torch's divisor is the window */
  nn_store(y + oh * g->OW + ow, s / nn_splat((float)(g->KH * g->KW)));
}
#endif

static void avg_plane(const geom *g, const float *x, float *y) {
  int hlo, hhi, wlo, whi;
  interior(g->H, g->KH, g->sh, g->ph, g->OH, &hlo, &hhi);
  interior(g->W, g->KW, g->sw, g->pw, g->OW, &wlo, &whi);
  for (int oh = 0; oh < g->OH; oh++) {
    int ow = 0;
#if NN_W == 4
    if (oh >= hlo && oh < hhi && whi - wlo >= 4) {
      for (; ow < wlo; ow++)
        avg_one(g, x, oh, ow, y);
      for (; ow + 4 <= whi; ow += 4)
        avg4(g, x, oh, ow, y);
      if (ow < whi)
        avg4(g, x, oh, whi - 4, y);
      ow = whi;
    }
#endif
    for (; ow < g->OW; ow++)
      avg_one(g, x, oh, ow, y);
  }
}

static void avg_forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  const geom *g = &j->g;
  size_t lo, hi, in_plane = (size_t)g->H * g->W,
                 out_plane = (size_t)g->OH * g->OW;
  nn__range((size_t)g->N * g->C, j->parts, task, &lo, &hi);
  for (size_t pl = lo; pl < hi; pl++)
    avg_plane(g, j->inp + pl * in_plane, j->out + pl * out_plane);
}

int lk_nn_avgpool2d_forward(lk_nn *nn, const lk_nn_pool2d *p, float *out,
                            const float *inp) {
  NN_CHECK(nn && out && inp, "avgpool2d",
           "forward needs the context, out and inp");
  job j = {.out = out, .inp = inp};
  int rc = setup("avgpool2d", p, &j.g);
  if (rc < 0)
    return rc;
  j.parts = planes_per_task(&j.g);
  nn__run(nn, j.parts, avg_forward_task, &j);
  return 0;
}

static void avg_backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  const geom *g = &j->g;
  size_t lo, hi, in_plane = (size_t)g->H * g->W,
                 out_plane = (size_t)g->OH * g->OW;
  nn__range((size_t)g->N * g->C, j->parts, task, &lo, &hi);
  for (size_t pl = lo; pl < hi; pl++) {
    float *dx = j->dinp + pl * in_plane;
    const float *dy = j->dout + pl * out_plane;
    for (int oh = 0; oh < g->OH; oh++)
      for (int ow = 0; ow < g->OW; ow++) {
        int h0, h1, w0, w1, div = window(g, oh, ow, &h0, &h1, &w0, &w1);
        float d = dy[oh * g->OW + ow] / (float)div;
        for (int ih = h0; ih < h1; ih++)
          for (int iw = w0; iw < w1; iw++)
            dx[ih * g->W + iw] += d;
      }
  }
}

int lk_nn_avgpool2d_backward(lk_nn *nn, const lk_nn_pool2d *p, float *dinp,
                             const float *dout) {
  NN_CHECK(nn && dout, "avgpool2d", "backward needs the context and dout");
  job j = {.dinp = dinp, .dout = dout};
  int rc = setup("avgpool2d", p, &j.g);
  if (rc < 0 || !dinp)
    return rc;
  j.parts = planes_per_task(&j.g);
  nn__run(nn, j.parts, avg_backward_task, &j);
  return 0;
}
