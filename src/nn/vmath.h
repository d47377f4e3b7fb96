/* Vector exp and tanh for the kit's elementwise kernels, with GCC or clang
 * vector extensions, or one float at a time with other compilers, the
 * same arithmetic either way.
 *
 * Why not libm: expf and tanhf are one call per value, 5 to 10 ns; GELU's
 * forward and backward over a GPT's MLP (B T 4C values, twice) took longer
 * than the two products around it. These are Cephes' expf and tanhf (about
 * 2 ulp) written without branches, so that a vector of inputs takes one
 * pass.
 *
 * NN_VBYTES (default 16: SSE2 or NEON with no -m flags) sets the vector
 * width: kernels.h is compiled again with 32 and 64 under AVX2 and
 * AVX-512 targets. Every lane does the same IEEE operations in the same
 * order at any width (no FMA contraction: GCC does none in ISO C mode,
 * clang is told so below), so the wide kernels give the very results of
 * the narrow ones. An array is done a vector at a time and its tail
 * through the same code on a padded vector (NN_MAP), so a value's result
 * does not depend on where it sits either: results are independent of how
 * work is cut. */
#ifndef LK_NN_VMATH_H
#define LK_NN_VMATH_H

#include <stdint.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#ifndef NN_VBYTES
#define NN_VBYTES 16
#endif

#if defined(__GNUC__) || defined(__clang__)
typedef float nn_vf __attribute__((vector_size(NN_VBYTES)));
typedef int32_t nn_vi __attribute__((vector_size(NN_VBYTES)));
#define NN_W (NN_VBYTES / 4)
static inline nn_vf nn_asf(nn_vi i) {
  return (nn_vf)i;
}
static inline nn_vi nn_asi(nn_vf f) {
  return (nn_vi)f;
}
/* m ? a : b lane by lane; m from a comparison (all ones or zero). */
static inline nn_vf nn_sel(nn_vi m, nn_vf a, nn_vf b) {
  return nn_asf((nn_asi(a) & m) | (nn_asi(b) & ~m));
}
static inline nn_vf nn_splat(float x) {
  nn_vf z = {0};
  return z + x;
}
#else
typedef float nn_vf;
typedef int32_t nn_vi;
#define NN_W 1
static inline nn_vf nn_asf(nn_vi i) {
  nn_vf f;
  memcpy(&f, &i, sizeof f);
  return f;
}
static inline nn_vi nn_asi(nn_vf f) {
  nn_vi i;
  memcpy(&i, &f, sizeof i);
  return i;
}
static inline nn_vf nn_sel(nn_vi m, nn_vf a, nn_vf b) {
  return m ? a : b;
}
static inline nn_vf nn_splat(float x) {
  return x;
}
#endif

static inline nn_vf nn_load(const float *p) {
  nn_vf v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void nn_store(float *p, nn_vf v) {
  memcpy(p, &v, sizeof v);
}
static inline nn_vf nn_abs(nn_vf x) {
  return nn_asf(nn_asi(x) & 0x7fffffff);
}

/* e^x for x in [-87.3, 88] (NaN kept): x = n ln 2 + r with |r| <= ln 2 /
 * 2, e^r by a polynomial, 2^n put in the exponent. The callers clamp. */
static inline nn_vf nn_exp_in_range(nn_vf x) {
  const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds */
  nn_vf t = x * 1.44269504088896341f + magic;
  nn_vf n = t - magic; /* round(x / ln 2) */
  nn_vf r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f; /* ln 2 in two parts (Cody and Waite) */
  nn_vf z = r * r;
  nn_vf p = nn_splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  nn_vi e = (nn_asi(t) - nn_asi(nn_splat(magic)) + 127) << 23; /* 2^n */
  return p * nn_asf(e);
}

/* e^x, NaN kept; 0 below -87.3 (no denormals) and e^88 above 88: the kit
 * only takes it of x <= 0 (softmax) or where it saturates (tanh, sigmoid). */
static inline nn_vf nn_exp(nn_vf x) {
  x = nn_sel(x > 88.0f, nn_splat(88.0f), x);
  nn_vi under = x < -87.33654f;
  x = nn_sel(under, nn_splat(-87.33654f), x);
  return nn_sel(under, nn_splat(0.0f), nn_exp_in_range(x));
}

/* tanh x: an odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above. */
static inline nn_vf nn_tanh(nn_vf x) {
  nn_vf ax = nn_abs(x);
  nn_vf z = x * x;
  nn_vf s = nn_splat(-5.70498872745e-3f);
  s = s * z + 2.06390887954e-2f;
  s = s * z - 5.37397155531e-2f;
  s = s * z + 1.33314422036e-1f;
  s = s * z - 3.33332819422e-1f;
  s = s * z * x + x;
  nn_vf big = 1.0f - 2.0f / (nn_exp(ax + ax) + 1.0f);
  big = nn_asf(nn_asi(big) | (nn_asi(x) & (int32_t)0x80000000)); /* sign */
  return nn_sel(ax > 0.625f, big, s);
}

static inline nn_vf nn_sigmoid(nn_vf x) {
  return 1.0f / (1.0f + nn_exp(-x));
}

/* e^x with x clamped to [-87.3, 80] (NaN kept): e^-87.3 is the smallest
 * normal float and 1 / e^80 is normal too, so neither e^x nor a
 * reciprocal of it is ever a denormal, and nn_exp's last select (0 below
 * -87.3) goes. For kernels that do not care how small a tiny e^x or its
 * reciprocal is (GELU: x / (1 + e^-2u) is x e^-80 or less there, where
 * torch's is 0). */
static inline nn_vf nn_exp_floor(nn_vf x) {
  x = nn_sel(x > 80.0f, nn_splat(80.0f), x);
  x = nn_sel(x < -87.33654f, nn_splat(-87.33654f), x);
  return nn_exp_in_range(x);
}

/* torch's GELU(approximate='tanh'), 0.5 x (1 + tanh u) with
 * u = sqrt(2 / pi) (x + 0.044715 x^3), and its derivative, computed as
 * x sigmoid(2u): 0.5 (1 + tanh u) = 1 / (1 + e^-2u) = s. One exp and one
 * division instead of tanh's polynomial, exp, division and select: half
 * the operations (GELU's forward and backward were 7% of a baby-GPT step,
 * bound by the vector units, not memory). The results differ from
 * torch's by a few ulps, and where 1 + tanh u cancels (x < -2) torch's
 * carry its own rounding error of 1 + tanh u, which this form does not
 * have; test_nn's tolerance holds either way.
 *   gelu'(x) = s + x s' = s + s (1 - s) x 2 sqrt(2 / pi) (1 + 3 0.044715 x^2)
 * with 1 - s = e s (e = e^-2u): no cancellation either. */
#define NN_GELU_2B 1.5957691216057308f   /* 2 sqrt(2 / pi) */
#define NN_GELU_2BK 0.07135481627260025f /* 2 sqrt(2 / pi) 0.044715 */
#define NN_GELU_6BK 0.21406444881780075f /* 6 sqrt(2 / pi) 0.044715 */

static inline nn_vf nn_gelu(nn_vf x) {
  nn_vf e = nn_exp_floor(x * (-NN_GELU_2B - NN_GELU_2BK * (x * x)));
  return x / (1.0f + e);
}

static inline nn_vf nn_gelu_grad(nn_vf x) {
  nn_vf x2 = x * x;
  nn_vf e = nn_exp_floor(x * (-NN_GELU_2B - NN_GELU_2BK * x2));
  nn_vf s = 1.0f / (1.0f + e);
  nn_vf du = x * (NN_GELU_2B + NN_GELU_6BK * x2); /* d(2u)/dx x */
  return s + s * (e * s) * du;
}

/* e^x - 1 without the cancellation of nn_exp(x) - 1 near 0 (ELU; torch
 * uses expm1): with x = n ln 2 + r as in nn_exp_in_range, e^x - 1 =
 * 2^n (e^r - 1) + (2^n - 1), and e^r - 1 is the polynomial without its 1.
 * For |x| < ln 2 / 2 (n = 0) that is e^r - 1 itself. -1 below -87.3
 * (e^x is below a float's precision of 1 there), NaN kept. */
static inline nn_vf nn_expm1(nn_vf x) {
  const float magic = 12582912.0f;
  x = nn_sel(x > 88.0f, nn_splat(88.0f), x);
  nn_vi under = x < -87.33654f;
  x = nn_sel(under, nn_splat(-87.33654f), x);
  nn_vf t = x * 1.44269504088896341f + magic;
  nn_vf n = t - magic;
  nn_vf r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  nn_vf z = r * r;
  nn_vf p = nn_splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r; /* e^r - 1 */
  nn_vf two_n = nn_asf((nn_asi(t) - nn_asi(nn_splat(magic)) + 127) << 23);
  return nn_sel(under, nn_splat(-1.0f), p * two_n + (two_n - 1.0f));
}

/* log(1 + u) for u in [0, 1] (softplus's log1p(e^-|z|)): Cephes' logf of
 * w = 1 + u, then corrected by u / (w - 1) for the rounding of 1 + u
 * (Goldberg's log1p; w - 1 is exact), u itself where 1 + u rounds to 1. */
static inline nn_vf nn_log1p_unit(nn_vf u) {
  const float magic = 12582912.0f;
  nn_vf w = 1.0f + u;
  nn_vi bits = nn_asi(w);
  /* w = m 2^e with m in [0.5, 1); e is 1 or 2 here, made a float by the
   * magic number as nn_exp_in_range rounds */
  nn_vf e = nn_asf(((bits >> 23) - 126) + nn_asi(nn_splat(magic))) - magic;
  nn_vf m = nn_asf((bits & 0x007fffff) | 0x3f000000);
  nn_vi small = m < 0.707106781186547524f;
  e = nn_sel(small, e - 1.0f, e);
  m = nn_sel(small, m + m, m) - 1.0f;
  nn_vf z = m * m;
  nn_vf y = nn_splat(7.0376836292e-2f);
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  nn_vf lw = m + y + e * 0.693359375f;
  nn_vf dw = w - 1.0f;
  return nn_sel(dw == 0.0f, u,
                lw * (u / nn_sel(dw == 0.0f, nn_splat(1.0f), dw)));
}

/* SiLU, torch's x / (1 + e^-x), and its derivative s (1 + x (1 - s)). */
static inline nn_vf nn_silu(nn_vf x) {
  return x / (1.0f + nn_exp(-x));
}
static inline nn_vf nn_silu_grad(nn_vf x) {
  nn_vf s = 1.0f / (1.0f + nn_exp(-x));
  return s * (1.0f + x * (1.0f - s));
}

/* Mish, x tanh(softplus x). With e = e^x, tanh(log(1 + e)) =
 * ((1 + e)^2 - 1) / ((1 + e)^2 + 1) = q / (q + 2), q = e (e + 2): no log,
 * no tanh, and no cancellation for x < 0 (it is about e there). Above 20
 * the tanh is 1 in a float (and q would overflow): x. The derivative is
 * torch's, t + x sigmoid(x) (1 - t^2). */
static inline nn_vf nn_mish_tanh(nn_vf x) {
  nn_vf e = nn_exp(x);
  nn_vf q = e * (e + 2.0f);
  return nn_sel(x > 20.0f, nn_splat(1.0f), q / (q + 2.0f));
}
static inline nn_vf nn_mish(nn_vf x) {
  return x * nn_mish_tanh(x);
}
static inline nn_vf nn_mish_grad(nn_vf x) {
  nn_vf t = nn_mish_tanh(x);
  nn_vf s = 1.0f / (1.0f + nn_exp(-x));
  return t + x * s * (1.0f - t * t);
}

/* ELU with ALPHA, torch's: x <= 0 ? alpha expm1(x) : x (a NaN stays); its
 * derivative alpha e^x at and below 0, 1 above. */
static inline nn_vf nn_elu(nn_vf x, float alpha) {
  return nn_sel(x <= 0.0f, alpha * nn_expm1(x), x);
}
static inline nn_vf nn_elu_grad(nn_vf x, float alpha) {
  return nn_sel(x <= 0.0f, alpha * nn_exp(x), nn_splat(1.0f));
}

/* Softplus with BETA and THRESHOLD, torch's: x where beta x > threshold,
 * else log(1 + e^(beta x)) / beta, computed as (max(z, 0) + log1p(e^-|z|))
 * / beta (z = beta x) so that e^z never overflows; its derivative
 * sigmoid(beta x), 1 past the threshold. */
static inline nn_vf nn_softplus(nn_vf x, float beta, float threshold) {
  nn_vf z = x * beta;
  nn_vf sp =
      nn_sel(z > 0.0f, z, nn_splat(0.0f)) + nn_log1p_unit(nn_exp(-nn_abs(z)));
  return nn_sel(z > threshold, x, sp / beta);
}
static inline nn_vf nn_softplus_grad(nn_vf x, float beta, float threshold) {
  nn_vf z = x * beta;
  return nn_sel(z > threshold, nn_splat(1.0f), 1.0f / (1.0f + nn_exp(-z)));
}

/* Sums in a fixed order, eight lanes wide (two vectors) and the tail
 * after them: several times faster than one running sum, whose additions
 * wait on each other, and the same result wherever the array lies. */
static inline float nn_lanes(nn_vf a, nn_vf b) {
  float l[2 * NN_W];
  nn_store(l, a + b);
  for (int w = NN_W / 2; w > 0; w /= 2) /* pairwise, in a fixed order */
    for (int i = 0; i < w; i++)
      l[i] += l[i + w];
  return l[0];
}

/* sum x[0, n) */
static inline float nn_sum(const float *x, size_t n) {
  nn_vf a = nn_splat(0), b = nn_splat(0);
  size_t i = 0;
  for (; i + 2 * NN_W <= n; i += 2 * NN_W) {
    a += nn_load(x + i);
    b += nn_load(x + i + NN_W);
  }
  float s = nn_lanes(a, b);
  for (; i < n; i++)
    s += x[i];
  return s;
}

/* max x[0, n), n >= 1, as the scan m = x[0], m = x[i] > m ? x[i] : m
 * gives it (a maximum is the same in any order): a NaN is never taken,
 * unless it is x[0], which then stays. */
static inline float nn_max(const float *x, size_t n) {
  float m = x[0];
  size_t i = 1;
  if (n >= 2 * NN_W) {
    nn_vf a = nn_splat(m), b = a;
    for (; i + 2 * NN_W <= n; i += 2 * NN_W) {
      nn_vf u = nn_load(x + i), v = nn_load(x + i + NN_W);
      a = nn_sel(u > a, u, a);
      b = nn_sel(v > b, v, b);
    }
    float l[2 * NN_W];
    nn_store(l, a);
    nn_store(l + NN_W, b);
    for (int k = 0; k < 2 * NN_W; k++)
      m = l[k] > m ? l[k] : m;
  }
  for (; i < n; i++)
    m = x[i] > m ? x[i] : m;
  return m;
}

/* sum (x - m)^2 over [0, n) */
static inline float nn_sumsq(const float *x, float m, size_t n) {
  nn_vf a = nn_splat(0), b = nn_splat(0), mv = nn_splat(m);
  size_t i = 0;
  for (; i + 2 * NN_W <= n; i += 2 * NN_W) {
    nn_vf u = nn_load(x + i) - mv, v = nn_load(x + i + NN_W) - mv;
    a += u * u;
    b += v * v;
  }
  float s = nn_lanes(a, b);
  for (; i < n; i++)
    s += (x[i] - m) * (x[i] - m);
  return s;
}

/* sum x y over [0, n) */
static inline float nn_dot(const float *x, const float *y, size_t n) {
  nn_vf a = nn_splat(0), b = nn_splat(0);
  size_t i = 0;
  for (; i + 2 * NN_W <= n; i += 2 * NN_W) {
    a += nn_load(x + i) * nn_load(y + i);
    b += nn_load(x + i + NN_W) * nn_load(y + i + NN_W);
  }
  float s = nn_lanes(a, b);
  for (; i < n; i++)
    s += x[i] * y[i];
  return s;
}

/* sum (x - m) y over [0, n) */
static inline float nn_dotsub(const float *x, float m, const float *y,
                              size_t n) {
  nn_vf a = nn_splat(0), b = nn_splat(0), mv = nn_splat(m);
  size_t i = 0;
  for (; i + 2 * NN_W <= n; i += 2 * NN_W) {
    a += (nn_load(x + i) - mv) * nn_load(y + i);
    b += (nn_load(x + i + NN_W) - mv) * nn_load(y + i + NN_W);
  }
  float s = nn_lanes(a, b);
  for (; i < n; i++)
    s += (x[i] - m) * y[i];
  return s;
}

/* Applies EXPR (of the nn_vf named v, whose lanes are elements i ...) to
 * every element of [0, n), the tail on a padded copy so that every value
 * goes through the vector code. IN may be an output: each block is read
 * before it is written. */
#define NN_MAP(n, out, in, expr)                                               \
  do {                                                                         \
    size_t i_ = 0, n_ = (n);                                                   \
    for (; i_ + NN_W <= n_; i_ += NN_W) {                                      \
      nn_vf v = nn_load((in) + i_);                                            \
      nn_store((out) + i_, (expr));                                            \
    }                                                                          \
    if (i_ < n_) {                                                             \
      float buf_[NN_W] = {0};                                                  \
      memcpy(buf_, (in) + i_, (n_ - i_) * sizeof(float));                      \
      nn_vf v = nn_load(buf_);                                                 \
      nn_store(buf_, (expr));                                                  \
      memcpy((out) + i_, buf_, (n_ - i_) * sizeof(float));                     \
    }                                                                          \
  } while (0)

/* DX[i] += EXPR for every element, EXPR of the nn_vf d (DY's elements)
 * and v (X's), the tail again on padded copies. */
#define NN_ACC(n, dx, dy, x, expr)                                             \
  do {                                                                         \
    size_t i_ = 0, n_ = (n);                                                   \
    for (; i_ + NN_W <= n_; i_ += NN_W) {                                      \
      nn_vf d = nn_load((dy) + i_), v = nn_load((x) + i_);                     \
      nn_store((dx) + i_, nn_load((dx) + i_) + (expr));                        \
    }                                                                          \
    if (i_ < n_) {                                                             \
      float b0_[NN_W] = {0}, b1_[NN_W] = {0}, b2_[NN_W] = {0};                 \
      size_t r_ = (n_ - i_) * sizeof(float);                                   \
      memcpy(b0_, (dx) + i_, r_);                                              \
      memcpy(b1_, (dy) + i_, r_);                                              \
      memcpy(b2_, (x) + i_, r_);                                               \
      nn_vf d = nn_load(b1_), v = nn_load(b2_);                                \
      nn_store(b0_, nn_load(b0_) + (expr));                                    \
      memcpy((dx) + i_, b0_, r_);                                              \
    }                                                                          \
  } while (0)

#endif
