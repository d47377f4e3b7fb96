/* conv2d: nn.Conv2d (dilation and groups too), lowered to products.
 *   inp [N, C, H, W], weight [OC, C / G, KH, KW] = [OC, K], bias [OC],
 *   out [N, OC, OH, OW] = [N, OC, P]
 * im2col turns a chunk of S samples into col [G K, S P] (row (c, kh, kw),
 * column (sample, oh, ow)); then out = weight col, dweight += dout col^T
 * and dcol = weight^T dout, which col2im adds back into dinp. With G
 * groups each product is G products of a block: group g's rows of col are
 * [g K, (g + 1) K), of the weight and out [g OC / G, (g + 1) OC / G).
 * Dilation D moves tap kh to input row oh stride - pad + kh D. With G = D
 * = 1 this is the code as it was (the "same" shortcuts included).
 *
 * The work is cut into chunks of whole samples, S of them so that the
 * products are at least CHUNK_COLS wide (S = 1 for Fashion-MNIST's
 * 28x28 and 14x14: a sample's P = 196 already runs OpenBLAS at full
 * speed, and then out and dout are used in place, with no copy). A chunk's
 * col stays in its thread's cache from im2col to the product; the
 * backward makes it again rather than keeping N K P floats from the
 * forward.
 *
 * dweight sums over every sample, and a sum is never split between
 * threads: the chunks are dealt into G groups (G from the sizes only), each
 * group sums its chunks into its own partial dweight, and the partials are
 * added in group order at the end. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "nn_internal.h"
#include "vmath.h"

#define LAYER "conv2d"
#define CHUNK_COLS 128         /* S P at least this */
#define GROUPS_MAX 16          /* partial dweights */
#define PARTIALS_MAX (8 << 20) /* bytes of them */

typedef struct geom {
  int N, C, H, W, OC, KH, KW, sh, sw, ph, pw, OH, OW;
  int dh, dw, G;                   /* dilation, groups (>= 1) */
  int K, Kc, P, S, chunks, groups; /* K per group, Kc = G K rows of col */
  bool same; /* stride 1, no dilation, OW == W: the shifted-plane copies */
} geom;

static int bad(const lk_nn_conv2d *p, const char *why) {
  return lk__err(
      LK_EINVAL,
      LAYER ": input [%d, %d, %d, %d], weight [%d, %d, %d, %d], "
            "stride %d x %d, padding %d x %d, dilation %d x %d, "
            "groups %d: %s",
      p->n, p->c, p->h, p->w, p->oc, p->groups > 0 ? p->c / p->groups : p->c,
      p->kh, p->kw, p->stride_h, p->stride_w, p->pad_h, p->pad_w,
      p->dilation_h ? p->dilation_h : 1, p->dilation_w ? p->dilation_w : 1,
      p->groups ? p->groups : 1, why);
}

static int setup(const lk_nn_conv2d *p, geom *g) {
  if (!p)
    return lk__err(LK_EINVAL, LAYER ": the sizes are NULL");
  if (p->n < 1 || p->c < 1 || p->h < 1 || p->w < 1 || p->oc < 1 || p->kh < 1 ||
      p->kw < 1)
    return bad(p, "every size must be >= 1");
  if (p->stride_h < 0 || p->stride_w < 0 || p->pad_h < 0 || p->pad_w < 0 ||
      p->dilation_h < 0 || p->dilation_w < 0 || p->groups < 0)
    return bad(p, "strides, padding, dilation and groups must be >= 0");
  g->dh = p->dilation_h ? p->dilation_h : 1;
  g->dw = p->dilation_w ? p->dilation_w : 1;
  g->G = p->groups ? p->groups : 1;
  if (p->c % g->G || p->oc % g->G)
    return bad(p, "the input and output channels must be divisible by "
                  "groups");
  g->N = p->n, g->C = p->c, g->H = p->h, g->W = p->w, g->OC = p->oc;
  g->KH = p->kh, g->KW = p->kw, g->ph = p->pad_h, g->pw = p->pad_w;
  g->sh = p->stride_h ? p->stride_h : 1;
  g->sw = p->stride_w ? p->stride_w : 1;
  long long hp = (long long)g->H + 2LL * g->ph,
            wp = (long long)g->W + 2LL * g->pw;
  long long ekh = (long long)g->dh * (g->KH - 1) + 1,
            ekw = (long long)g->dw * (g->KW - 1) + 1;
  if (hp < ekh || wp < ekw)
    return bad(p, "the (dilated) kernel is larger than the padded input");
  long long oh = (hp - ekh) / g->sh + 1, ow = (wp - ekw) / g->sw + 1;
  /* the products an int must hold (a plane, a kernel, the weight), and
   * the arrays the caller has (no more floats than a size_t counts) */
  size_t plane = nn__mul((size_t)oh, (size_t)ow),
         k = nn__mul(nn__mul((size_t)g->C, (size_t)g->KH), (size_t)g->KW);
  if (plane > INT_MAX / 2 || k > INT_MAX / 2 ||
      nn__mul((size_t)g->OC, k / (size_t)g->G) > INT_MAX / 2)
    return bad(p, "too large: an output plane, a kernel and the weight "
                  "must each hold at most 2^30 values");
  size_t per = nn__mul(nn__mul((size_t)g->C, (size_t)g->H), (size_t)g->W);
  if (nn__mul((size_t)g->N, per) > NN_MAX_FLOATS ||
      nn__mul(nn__mul((size_t)g->N, (size_t)g->OC), plane) > NN_MAX_FLOATS)
    return bad(p, "the input or the output holds more bytes than a size_t "
                  "counts");
  g->OH = (int)oh, g->OW = (int)ow, g->P = (int)plane, g->Kc = (int)k;
  g->K = g->Kc / g->G;
  g->same =
      g->sh == 1 && g->sw == 1 && g->OW == g->W && g->dh == 1 && g->dw == 1;
  g->S = (CHUNK_COLS + g->P - 1) / g->P;
  if (g->S > g->N)
    g->S = g->N;
  if (nn__mul((size_t)g->S, (size_t)g->P) > INT_MAX / 2)
    g->S = 1;
  g->chunks = (g->N + g->S - 1) / g->S;
  long long fit = PARTIALS_MAX /
                  (long long)nn__mul(nn__mul((size_t)g->OC, (size_t)g->K), 4);
  g->groups = g->chunks < GROUPS_MAX ? g->chunks : GROUPS_MAX;
  if (g->groups > fit)
    g->groups = fit > 1 ? (int)fit : 1;
  return 0;
}

int lk_nn_conv2d_size(const lk_nn_conv2d *p, int *oh, int *ow) {
  geom g;
  int rc = setup(p, &g);
  if (rc < 0)
    return rc;
  if (oh)
    *oh = g.OH;
  if (ow)
    *ow = g.OW;
  return 0;
}

/* The output columns [lo, hi) whose input column ow sw - pw + kw is
 * inside the image. */
static void columns(const geom *g, int kw, int *lo, int *hi) {
  *lo = g->pw - kw > 0 ? (g->pw - kw + g->sw - 1) / g->sw : 0;
  *hi = g->W - 1 + g->pw - kw >= 0 ? (g->W - 1 + g->pw - kw) / g->sw + 1 : 0;
  if (*hi > g->OW)
    *hi = g->OW;
  if (*lo > *hi)
    *lo = *hi;
}

/* im2col of a "same" convolution (stride 1, OW == W): a row of col is the
 * input plane shifted by (kh - ph, kw - pw), so one copy makes it, and
 * only the columns that wrapped around an edge are zeroed after. At 14 x
 * 14 that is 4x faster than a copy per output row. */
static void im2col_same(const geom *g, const float *x, float *col, size_t ld,
                        int s) {
  int W = g->W;
  for (int c = 0; c < g->C; c++)
    for (int kh = 0; kh < g->KH; kh++)
      for (int kw = 0; kw < g->KW; kw++) {
        float *row = col + (size_t)((c * g->KH + kh) * g->KW + kw) * ld +
                     (size_t)s * (size_t)g->P;
        const float *plane = x + (size_t)c * g->H * W;
        int lo, hi, off = (kh - g->ph) * W + (kw - g->pw);
        columns(g, kw, &lo, &hi);
        int oh0 = g->ph - kh > 0 ? g->ph - kh : 0;
        int oh1 = g->H + g->ph - kh < g->OH ? g->H + g->ph - kh : g->OH;
        if (oh1 <= oh0 || hi <= lo) {
          memset(row, 0, (size_t)g->P * sizeof *row);
          continue;
        }
        memset(row, 0, (size_t)(oh0 * W + lo) * sizeof *row);
        size_t first = (size_t)oh0 * W + lo, last = (size_t)(oh1 - 1) * W + hi;
        memcpy(row + first, plane + (ptrdiff_t)first + off,
               (last - first) * sizeof *row);
        for (int oh = oh0; oh < oh1; oh++) {
          float *r = row + (size_t)oh * W;
          for (int ow = 0; ow < lo; ow++)
            r[ow] = 0;
          for (int ow = hi; ow < W; ow++)
            r[ow] = 0;
        }
        memset(row + last, 0, ((size_t)g->P - last) * sizeof *row);
      }
}

/* col [K, ld] columns [s P, (s + 1) P) from sample plane x [C, H, W]. */
static void im2col(const geom *g, const float *x, float *col, size_t ld,
                   int s) {
  if (g->same) {
    im2col_same(g, x, col, ld, s);
    return;
  }
  for (int c = 0; c < g->C; c++)
    for (int kh = 0; kh < g->KH; kh++)
      for (int kw = 0; kw < g->KW; kw++) {
        float *row = col + (size_t)((c * g->KH + kh) * g->KW + kw) * ld +
                     (size_t)s * (size_t)g->P;
        int lo, hi;
        columns(g, kw * g->dw, &lo, &hi);
        for (int oh = 0; oh < g->OH; oh++, row += g->OW) {
          int ih = oh * g->sh - g->ph + kh * g->dh;
          if (ih < 0 || ih >= g->H) {
            memset(row, 0, (size_t)g->OW * sizeof *row);
            continue;
          }
          const float *src = x + ((size_t)c * g->H + (size_t)ih) * g->W;
          for (int ow = 0; ow < lo; ow++)
            row[ow] = 0;
          if (g->sw == 1)
            memcpy(row + lo, src + lo - g->pw + kw * g->dw,
                   (size_t)(hi - lo) * sizeof *row);
          else
            for (int ow = lo; ow < hi; ow++)
              row[ow] = src[ow * g->sw - g->pw + kw * g->dw];
          for (int ow = hi; ow < g->OW; ow++)
            row[ow] = 0;
        }
      }
}

/* col2im of a "same" convolution: each row of dcol is added to the
 * shifted plane in one run, its wrapped columns first set to -0, which
 * adds nothing to any value (x + -0 == x, signed zeros included). dcol is
 * the caller's scratch. */
static void col2im_same(const geom *g, float *dcol, size_t ld, int s,
                        float *dx) {
  int W = g->W;
  for (int c = 0; c < g->C; c++)
    for (int kh = 0; kh < g->KH; kh++)
      for (int kw = 0; kw < g->KW; kw++) {
        float *row = dcol + (size_t)((c * g->KH + kh) * g->KW + kw) * ld +
                     (size_t)s * (size_t)g->P;
        float *plane = dx + (size_t)c * g->H * W;
        int lo, hi, off = (kh - g->ph) * W + (kw - g->pw);
        columns(g, kw, &lo, &hi);
        int oh0 = g->ph - kh > 0 ? g->ph - kh : 0;
        int oh1 = g->H + g->ph - kh < g->OH ? g->H + g->ph - kh : g->OH;
        if (oh1 <= oh0 || hi <= lo)
          continue;
        for (int oh = oh0; oh < oh1; oh++) {
          float *r = row + (size_t)oh * W;
          for (int ow = 0; ow < lo; ow++)
            r[ow] = -0.0f;
          for (int ow = hi; ow < W; ow++)
            r[ow] = -0.0f;
        }
        size_t first = (size_t)oh0 * W + lo, last = (size_t)(oh1 - 1) * W + hi;
        float *d = plane + (ptrdiff_t)first + off;
        const float *r = row + first;
        for (size_t q = 0; q < last - first; q++)
          d[q] += r[q];
      }
}

/* dx [C, H, W] += dcol [K, ld] columns [s P, (s + 1) P), row by row of
 * dcol: a pixel's terms are added in order of (c, kh, kw). */
static void col2im(const geom *g, float *dcol, size_t ld, int s, float *dx) {
  if (g->same) {
    col2im_same(g, dcol, ld, s, dx);
    return;
  }
  for (int c = 0; c < g->C; c++)
    for (int kh = 0; kh < g->KH; kh++)
      for (int kw = 0; kw < g->KW; kw++) {
        const float *row = dcol + (size_t)((c * g->KH + kh) * g->KW + kw) * ld +
                           (size_t)s * (size_t)g->P;
        int lo, hi;
        columns(g, kw * g->dw, &lo, &hi);
        for (int oh = 0; oh < g->OH; oh++, row += g->OW) {
          int ih = oh * g->sh - g->ph + kh * g->dh;
          if (ih < 0 || ih >= g->H)
            continue;
          float *dst = dx + ((size_t)c * g->H + (size_t)ih) * g->W;
          if (g->sw == 1) {
            float *d = dst - g->pw + kw * g->dw;
            for (int ow = lo; ow < hi; ow++)
              d[ow] += row[ow];
          } else
            for (int ow = lo; ow < hi; ow++)
              dst[ow * g->sw - g->pw + kw * g->dw] += row[ow];
        }
      }
}

/* ---- forward ------------------------------------------------------------- */

typedef struct fwd {
  lk_nn *nn;
  geom g;
  float *out;
  const float *inp, *weight, *bias;
} fwd;

static void forward_task(void *ctx, int chunk, int thread) {
  const fwd *f = ctx;
  const geom *g = &f->g;
  int n0 = chunk * g->S, n1 = n0 + g->S < g->N ? n0 + g->S : g->N;
  size_t cols = (size_t)(n1 - n0) * (size_t)g->P,
         inp_plane = (size_t)g->C * g->H * g->W,
         out_plane = (size_t)g->OC * g->P;
  float *col = nn__scratch(f->nn, thread);
  float *tmp = col + (size_t)g->Kc * g->S * g->P;
  for (int n = n0; n < n1; n++)
    im2col(g, f->inp + (size_t)n * inp_plane, col, cols, n - n0);
  /* one sample: the product's rows are out's planes, in place */
  float *c = n1 - n0 == 1 ? f->out + (size_t)n0 * out_plane : tmp;
  int ocg = g->OC / g->G;
  for (int gi = 0; gi < g->G; gi++)
    nn__gemm1(f->nn, false, false, ocg, (int)cols, g->K, 1,
              f->weight + (size_t)gi * ocg * g->K, g->K,
              col + (size_t)gi * g->K * cols, (int)cols, 0,
              c + (size_t)gi * ocg * cols, (int)cols);
  for (int n = n0; n < n1; n++)
    for (int oc = 0; oc < g->OC; oc++) {
      float *o = f->out + (size_t)n * out_plane + (size_t)oc * g->P;
      const float *t = c + (size_t)oc * cols + (size_t)(n - n0) * g->P;
      float b = f->bias ? f->bias[oc] : 0;
      if (t != o)
        for (int p = 0; p < g->P; p++)
          o[p] = t[p] + b;
      else if (f->bias)
        for (int p = 0; p < g->P; p++)
          o[p] += b;
    }
}

int lk_nn_conv2d_forward(lk_nn *nn, const lk_nn_conv2d *p, float *out,
                         const float *inp, const float *weight,
                         const float *bias) {
  NN_CHECK(nn && out && inp && weight, LAYER,
           "forward needs the context, out, inp and weight");
  fwd f = {.nn = nn, .out = out, .inp = inp, .weight = weight, .bias = bias};
  int rc = setup(p, &f.g);
  if (rc < 0)
    return rc;
  const geom *g = &f.g;
  size_t cols = (size_t)g->S * g->P;
  size_t per = ((size_t)g->Kc + (g->S > 1 ? (size_t)g->OC : 0)) * cols;
  if ((rc = nn__reserve(nn, LAYER, 0, per * sizeof(float))) < 0)
    return rc;
  nn__run(nn, g->chunks, forward_task, &f);
  return 0;
}

/* ---- backward ------------------------------------------------------------ */

typedef struct bwd {
  lk_nn *nn;
  geom g;
  float *dinp, *dweight, *dbias, *partials;
  /* [N, OC]: each plane of dout's sum (nn_sum), taken by backward_task
   * while the plane is in cache, or NULL: finish_task reads dout again */
  float *plane_sums;
  const float *dout, *inp, *weight;
  int sum_parts, bias_parts;
  bool groups_direct; /* one group: it adds into dweight itself */
} bwd;

static void backward_task(void *ctx, int group, int thread) {
  const bwd *b = ctx;
  const geom *g = &b->g;
  size_t inp_plane = (size_t)g->C * g->H * g->W,
         out_plane = (size_t)g->OC * g->P, most = (size_t)g->S * g->P;
  float *col = nn__scratch(b->nn, thread);
  float *dcol = col + (size_t)g->Kc * most;
  float *gather = dcol + (size_t)g->Kc * most;
  int ocg = g->OC / g->G;
  float *dw = b->groups_direct ? b->dweight
                               : b->partials + (size_t)group * g->OC * g->K;
  size_t first, last;
  nn__range((size_t)g->chunks, g->groups, group, &first, &last);
  for (size_t chunk = first; chunk < last; chunk++) {
    int n0 = (int)chunk * g->S, n1 = n0 + g->S < g->N ? n0 + g->S : g->N;
    size_t cols = (size_t)(n1 - n0) * (size_t)g->P;
    /* dout of the chunk as [OC, cols]: in place for one sample */
    const float *d = b->dout + (size_t)n0 * out_plane;
    if (n1 - n0 > 1) {
      for (int n = n0; n < n1; n++)
        for (int oc = 0; oc < g->OC; oc++)
          memcpy(gather + (size_t)oc * cols + (size_t)(n - n0) * g->P,
                 b->dout + (size_t)n * out_plane + (size_t)oc * g->P,
                 (size_t)g->P * sizeof(float));
      d = gather;
    }
    if (b->dweight) {
      for (int n = n0; n < n1; n++)
        im2col(g, b->inp + (size_t)n * inp_plane, col, cols, n - n0);
      float beta = chunk == first && !b->groups_direct ? 0 : 1;
      for (int gi = 0; gi < g->G; gi++)
        nn__gemm1(b->nn, false, true, ocg, g->K, (int)cols, 1,
                  d + (size_t)gi * ocg * cols, (int)cols,
                  col + (size_t)gi * g->K * cols, (int)cols, beta,
                  dw + (size_t)gi * ocg * g->K, g->K);
    }
    if (b->dinp) {
      for (int gi = 0; gi < g->G; gi++)
        nn__gemm1(b->nn, true, false, g->K, (int)cols, ocg, 1,
                  b->weight + (size_t)gi * ocg * g->K, g->K,
                  d + (size_t)gi * ocg * cols, (int)cols, 0,
                  dcol + (size_t)gi * g->K * cols, (int)cols);
      for (int n = n0; n < n1; n++)
        col2im(g, dcol, cols, n - n0, b->dinp + (size_t)n * inp_plane);
    }
    if (b->plane_sums)
      for (int n = n0; n < n1; n++)
        for (int oc = 0; oc < g->OC; oc++)
          b->plane_sums[(size_t)n * g->OC + oc] =
              nn_sum(b->dout + (size_t)n * out_plane + (size_t)oc * g->P,
                     (size_t)g->P);
  }
}

/* dweight += the partials in group order; dbias += the sums of dout. */
static void finish_task(void *ctx, int task, int thread) {
  (void)thread;
  const bwd *b = ctx;
  const geom *g = &b->g;
  size_t lo, hi;
  if (task < b->sum_parts) {
    size_t total = (size_t)g->OC * g->K;
    nn__range(total, b->sum_parts, task, &lo, &hi);
    size_t e = lo;
    /* a vector of elements at a time, each summed in group order as the
     * one-at-a-time loop after does (it was 2.8% of a CNN step) */
    for (; e + NN_W <= hi; e += NN_W) {
      nn_vf s = nn_load(b->partials + e);
      for (int k = 1; k < g->groups; k++)
        s += nn_load(b->partials + (size_t)k * total + e);
      nn_store(b->dweight + e, nn_load(b->dweight + e) + s);
    }
    for (; e < hi; e++) {
      float s = b->partials[e];
      for (int k = 1; k < g->groups; k++)
        s += b->partials[(size_t)k * total + e];
      b->dweight[e] += s;
    }
    return;
  }
  nn__range((size_t)g->OC, b->bias_parts, task - b->sum_parts, &lo, &hi);
  for (size_t oc = lo; oc < hi; oc++) {
    double s = 0; /* planes in f32 lanes, their sums in double */
    for (int n = 0; n < g->N; n++)
      s += b->plane_sums ? b->plane_sums[(size_t)n * g->OC + oc]
                         : nn_sum(b->dout + ((size_t)n * g->OC + oc) * g->P,
                                  (size_t)g->P);
    b->dbias[oc] += (float)s;
  }
}

int lk_nn_conv2d_backward(lk_nn *nn, const lk_nn_conv2d *p, float *dinp,
                          float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight) {
  NN_CHECK(nn && dout, LAYER, "backward needs the context and dout");
  NN_CHECK(!dinp || weight, LAYER, "dinp needs weight");
  NN_CHECK(!dweight || inp, LAYER, "dweight needs inp");
  bwd b = {.nn = nn,
           .dinp = dinp,
           .dweight = dweight,
           .dbias = dbias,
           .dout = dout,
           .inp = inp,
           .weight = weight};
  int rc = setup(p, &b.g);
  if (rc < 0)
    return rc;
  const geom *g = &b.g;
  size_t most = (size_t)g->S * g->P;
  size_t per = (2 * (size_t)g->Kc + (g->S > 1 ? (size_t)g->OC : 0)) * most;
  b.groups_direct = g->groups == 1;
  size_t partials =
             dweight && !b.groups_direct ? (size_t)g->groups * g->OC * g->K : 0,
         sums = dbias && (dweight || dinp) ? (size_t)g->N * g->OC : 0;
  if ((rc = nn__reserve(nn, LAYER, (partials + sums) * sizeof(float),
                        per * sizeof(float))) < 0)
    return rc;
  b.partials = nn__shared(nn);
  b.plane_sums = sums ? b.partials + partials : NULL;
  if (dweight || dinp)
    nn__run(nn, g->groups, backward_task, &b);
  if (dweight && !b.groups_direct)
    b.sum_parts = nn__parts((size_t)g->OC * g->K, 4096);
  if (dbias)
    b.bias_parts = nn__parts((size_t)g->OC, 4);
  nn__run(nn, b.sum_parts + b.bias_parts, finish_task, &b);
  return 0;
}
