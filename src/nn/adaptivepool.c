/* adaptive average pooling: nn.AdaptiveAvgPool2d (and 1d as H = 1).
 * Output cell (i, j) is the mean of the input rows [floor(i H / OH),
 * ceil((i + 1) H / OH)) and columns likewise: torch's bins, which overlap
 * or differ in size when OH does not divide H. The planes are independent:
 * tasks take runs of whole planes (chosen from the sizes only), so the
 * result is the same at any thread count. */
#include <limits.h>

#include "nn_internal.h"

#define LAYER "adaptiveavgpool2d"

typedef struct job {
  lk_nn_adaptivepool2d p;
  float *out, *dinp;
  const float *inp, *dout;
  int parts;
} job;

static int setup(const lk_nn_adaptivepool2d *p) {
  if (!p)
    return lk__err(LK_EINVAL, LAYER ": the sizes are NULL");
  if (p->n < 1 || p->c < 1 || p->h < 1 || p->w < 1 || p->oh < 1 || p->ow < 1)
    return lk__err(LK_EINVAL,
                   LAYER ": input [%d, %d, %d, %d], output %d x %d: every "
                         "size must be >= 1",
                   p->n, p->c, p->h, p->w, p->oh, p->ow);
  if (p->oh > p->h || p->ow > p->w)
    return lk__err(LK_EINVAL,
                   LAYER ": input [%d, %d, %d, %d], output %d x %d: the "
                         "output is larger than the input",
                   p->n, p->c, p->h, p->w, p->oh, p->ow);
  size_t planes = nn__mul((size_t)p->n, (size_t)p->c);
  if (nn__mul(planes, nn__mul((size_t)p->h, (size_t)p->w)) > NN_MAX_FLOATS)
    return lk__err(LK_EINVAL,
                   LAYER ": input [%d, %d, %d, %d]: more values than a "
                         "size_t counts",
                   p->n, p->c, p->h, p->w);
  return 0;
}

/* bin i of OUT over SIZE: [lo, hi) */
static void bin(int i, int size, int out, int *lo, int *hi) {
  *lo = (int)((long long)i * size / out);
  *hi = (int)(((long long)(i + 1) * size + out - 1) / out);
}

static int parts(const lk_nn_adaptivepool2d *p) {
  return nn__parts((size_t)p->n * p->c,
                   1 + 4096 / ((size_t)p->h * (size_t)p->w));
}

static void forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  const lk_nn_adaptivepool2d *p = &j->p;
  size_t lo, hi, in_plane = (size_t)p->h * p->w,
                 out_plane = (size_t)p->oh * p->ow;
  nn__range((size_t)p->n * p->c, j->parts, task, &lo, &hi);
  for (size_t pl = lo; pl < hi; pl++) {
    const float *x = j->inp + pl * in_plane;
    float *y = j->out + pl * out_plane;
    for (int oh = 0; oh < p->oh; oh++) {
      int h0, h1;
      bin(oh, p->h, p->oh, &h0, &h1);
      for (int ow = 0; ow < p->ow; ow++) {
        int w0, w1;
        bin(ow, p->w, p->ow, &w0, &w1);
        float s = 0;
        for (int ih = h0; ih < h1; ih++)
          for (int iw = w0; iw < w1; iw++)
            s += x[(size_t)ih * p->w + iw];
        y[oh * p->ow + ow] = s / (float)((h1 - h0) * (w1 - w0));
      }
    }
  }
}

int lk_nn_adaptiveavgpool2d_forward(lk_nn *nn, const lk_nn_adaptivepool2d *p,
                                    float *out, const float *inp) {
  NN_CHECK(nn && out && inp, LAYER, "forward needs the context, out and inp");
  int rc = setup(p);
  if (rc < 0)
    return rc;
  job j = {.p = *p, .out = out, .inp = inp, .parts = parts(p)};
  nn__run(nn, j.parts, forward_task, &j);
  return 0;
}

static void backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  const lk_nn_adaptivepool2d *p = &j->p;
  size_t lo, hi, in_plane = (size_t)p->h * p->w,
                 out_plane = (size_t)p->oh * p->ow;
  nn__range((size_t)p->n * p->c, j->parts, task, &lo, &hi);
  for (size_t pl = lo; pl < hi; pl++) {
    float *dx = j->dinp + pl * in_plane;
    const float *dy = j->dout + pl * out_plane;
    for (int oh = 0; oh < p->oh; oh++) {
      int h0, h1;
      bin(oh, p->h, p->oh, &h0, &h1);
      for (int ow = 0; ow < p->ow; ow++) {
        int w0, w1;
        bin(ow, p->w, p->ow, &w0, &w1);
        float d = dy[oh * p->ow + ow] / (float)((h1 - h0) * (w1 - w0));
        for (int ih = h0; ih < h1; ih++)
          for (int iw = w0; iw < w1; iw++)
            dx[(size_t)ih * p->w + iw] += d;
      }
    }
  }
}

int lk_nn_adaptiveavgpool2d_backward(lk_nn *nn, const lk_nn_adaptivepool2d *p,
                                     float *dinp, const float *dout) {
  NN_CHECK(nn && dout, LAYER, "backward needs the context and dout");
  int rc = setup(p);
  if (rc < 0 || !dinp)
    return rc;
  job j = {.p = *p, .dinp = dinp, .dout = dout, .parts = parts(p)};
  nn__run(nn, j.parts, backward_task, &j);
  return 0;
}
