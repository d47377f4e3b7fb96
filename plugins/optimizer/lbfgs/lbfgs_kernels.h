/* lbfgs_kernels.h: L-BFGS's vector kernels in one precision, included by
 * lbfgs.c once per variant (f64, f32, each with and without the fma
 * instruction), so that each is compiled as plain C with the precision a
 * constant and inlines into its step. Before each inclusion lbfgs.c
 * defines LB_F32 (1: float elements, 0: double), LB_SFX (the variant's
 * suffix of the functions' names) and maybe LB_ATTR (the functions'
 * attributes); this file undefines them. No include guard: it is meant to
 * be included again. */

#if LB_F32
#define LB_T float
#define LB_FMA fmaf
#define LB_LANES 8 /* floats in torch's vectors */
#else
#define LB_T double
#define LB_FMA fma
#define LB_LANES 4
#endif
#ifndef LB_ATTR
#define LB_ATTR
#endif

#define LB_CAT2(a, b) a##_##b
#define LB_CAT(a, b) LB_CAT2(a, b)
#define LB_FN(name) LB_CAT(name, LB_SFX)

LB_ATTR static double LB_FN(maxabs)(const LB_T *v, size_t n) {
  double m = 0;
  for (size_t k = 0; k < n; k++)
    MAXABS(m, v[k]);
  return m;
}

/* The parameters' gradients into g; returns max |g|, and g . d if d. */
LB_ATTR static double LB_FN(gather)(const lbfgs *s, LB_T *g, const LB_T *d,
                                    double *gd) {
  double m = 0;
  LB_T acc = 0;
  for (size_t i = 0, off = 0; i < s->n_params; i++) {
    const LB_T *src = s->params[i]->grad;
    size_t numel = s->params[i]->numel;
    LB_T *dst = g + off;
    for (size_t k = 0; k < numel; k++) {
      dst[k] = src[k];
      MAXABS(m, src[k]);
    }
    if (d)
      for (size_t k = 0; k < numel; k++)
        acc += dst[k] * d[off + k];
    off += numel;
  }
  if (gd)
    *gd = acc;
  return m;
}

/* params = fma(t, d, base), base = x0, or the params themselves. */
LB_ATTR static void LB_FN(move)(const lbfgs *s, double t, const LB_T *d,
                                const LB_T *base) {
  LB_T tt = (LB_T)t;
  for (size_t i = 0, off = 0; i < s->n_params; i++) {
    LB_T *p = s->params[i]->data;
    const LB_T *b = base ? base + off : p;
    const LB_T *dd = d + off;
    size_t numel = s->params[i]->numel;
    for (size_t k = 0; k < numel; k++)
      p[k] = LB_FMA(tt, dd[k], b[k]);
    off += numel;
  }
}

/* y = g - pg and s = d * t, for ys = y . s and yy = y . y; stored into
 * Y and S when they are not NULL. */
LB_ATTR static void LB_FN(pair)(const LB_T *g, const LB_T *pg, const LB_T *d,
                                double t, size_t n, LB_T *Y, LB_T *S,
                                double *ys, double *yy) {
  LB_T tt = (LB_T)t, a = 0, b = 0;
  for (size_t k = 0; k < n; k++) {
    LB_T y = g[k] - pg[k], st = d[k] * tt;
    a += y * st;
    b += y * y;
    if (Y) {
      Y[k] = y;
      S[k] = st;
    }
  }
  *ys = a;
  *yy = b;
}

/* d = -g, and g . d. */
LB_ATTR static double LB_FN(negate)(const LB_T *g, LB_T *d, size_t n) {
  LB_T acc = 0;
  for (size_t k = 0; k < n; k++) {
    d[k] = -g[k];
    acc += g[k] * d[k];
  }
  return acc;
}

/* v = LB_FMA(a, x, v), then next . v: one pass for an update of the
 * two-loop recursion and the dot product that follows it. */
LB_ATTR static double LB_FN(update)(LB_T *v, double a, const LB_T *x,
                                    const LB_T *next, size_t n) {
  LB_T aa = (LB_T)a, acc = 0;
  for (size_t k = 0; k < n; k++) {
    v[k] = LB_FMA(aa, x[k], v[k]);
    acc += next[k] * v[k];
  }
  return acc;
}

/* The turn of the recursion: v = LB_FMA(a, x, v) * h (x NULL: v * h), then
 * next . v. */
LB_ATTR static double LB_FN(turn)(LB_T *v, double a, const LB_T *x, double h,
                                  const LB_T *next, size_t n) {
  LB_T aa = (LB_T)a, hh = (LB_T)h, acc = 0;
  for (size_t k = 0; k < n; k++) {
    v[k] = (x ? LB_FMA(aa, x[k], v[k]) : v[k]) * hh;
    acc += next[k] * v[k];
  }
  return acc;
}

/* -g into v, then next . v. */
LB_ATTR static double LB_FN(start)(LB_T *v, const LB_T *g, const LB_T *next,
                                   size_t n) {
  LB_T acc = 0;
  for (size_t k = 0; k < n; k++) {
    v[k] = -g[k];
    acc += next[k] * v[k];
  }
  return acc;
}

/* Tensor.sum of |v| (torch's vectorized_inner_sum: LB_LANES-wide vectors,
 * four of them interleaved, each lane a cascade of four levels). */
LB_ATTR static double LB_FN(abssum)(const LB_T *v, size_t n) {
  size_t vecs = n / LB_LANES, rows = vecs / 4;
  unsigned level = 0;
  while (((size_t)1 << level) < rows)
    level++;
  level = level / 4 < 4 ? 4 : level / 4;
  size_t stride = (size_t)1 << level;
  LB_T lane[LB_LANES];
  for (size_t l = 0; l < LB_LANES; l++) {
    LB_T acc[4][4] = {{0}};
    size_t i = 0;
    while (i + stride <= rows) {
      for (size_t j = 0; j < stride; j++, i++)
        for (size_t c = 0; c < 4; c++)
          acc[0][c] += (LB_T)fabs((double)v[(4 * i + c) * LB_LANES + l]);
      for (unsigned j = 1; j < 4; j++) {
        for (size_t c = 0; c < 4; c++) {
          acc[j][c] += acc[j - 1][c];
          acc[j - 1][c] = 0;
        }
        if (i & ((stride - 1) << (j * level)))
          break;
      }
    }
    for (; i < rows; i++)
      for (size_t c = 0; c < 4; c++)
        acc[0][c] += (LB_T)fabs((double)v[(4 * i + c) * LB_LANES + l]);
    for (unsigned j = 1; j < 4; j++)
      for (size_t c = 0; c < 4; c++)
        acc[0][c] += acc[j][c];
    for (size_t k = rows * 4; k < vecs; k++)
      acc[0][0] += (LB_T)fabs((double)v[k * LB_LANES + l]);
    for (size_t c = 1; c < 4; c++)
      acc[0][0] += acc[0][c];
    lane[l] = acc[0][0];
  }
  LB_T total = 0;
  for (size_t k = vecs * LB_LANES; k < n; k++)
    total += (LB_T)fabs((double)v[k]);
  for (size_t l = 0; l < LB_LANES; l++)
    total += lane[l];
  return total;
}

#undef LB_FN
#undef LB_CAT
#undef LB_CAT2
#undef LB_T
#undef LB_F32
#undef LB_SFX
#undef LB_FMA
#undef LB_LANES
#undef LB_ATTR
