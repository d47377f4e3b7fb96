/* Batch norm over N and HW per channel, as nn.BatchNorm1d/2d.
 *   inp, out [N, C, HW]; weight, bias, mean, rstd, running_* [C]
 * Statistics in double (as torch's CPU kernel accumulates them) over the
 * f32-lane sums of each plane (vmath.h), two passes: the mean, then the
 * squared deviations from it. The output is
 * x * alpha + beta with alpha = rstd * weight, beta = bias - mean * alpha,
 * torch's form (batch_norm_kernel.cpp), and so is the backward:
 *   sum = sum(dy), dot = sum((x - mean) dy), dweight += dot rstd,
 *   dbias += sum, and in training
 *   dx += (dy - sum / M - (x - mean) dot rstd^2 / M) rstd weight.
 * Tasks are runs of channels; a channel's sums are never split. With HW
 * >= 16 a task is one channel (its planes are contiguous); below, a task
 * takes CB channels and walks each sample's row of them, so that [N, C]
 * is read along its rows. */
#include <math.h>

#include "nn_internal.h"
#include "vmath.h"

#define LAYER "batchnorm"
#define CB 64

typedef struct job {
  int N, C, HW, parts;
  bool training;
  float momentum, eps;
  float *out, *mean, *rstd, *running_mean, *running_var;
  float *dinp, *dweight, *dbias;
  const float *inp, *weight, *bias, *dout, *cmean, *crstd;
} job;

static int check(const char *what, int N, int C, int HW) {
  NN_CHECK(N >= 1 && C >= 1 && HW >= 1, LAYER,
           "%s: sizes N = %d, C = %d, HW = %d; expected >= 1", what, N, C, HW);
  NN_CHECK(nn__mul(nn__mul((size_t)N, (size_t)C), (size_t)HW) <= NN_MAX_FLOATS,
           LAYER,
           "%s: sizes N = %d, C = %d, HW = %d: more bytes than a size_t "
           "counts",
           what, N, C, HW);
  return 0;
}

static int channel_parts(int C, int HW) {
  return HW >= 16 ? C : (C + CB - 1) / CB;
}

static void channels(const job *j, int task, int *c0, int *c1) {
  int per = j->HW >= 16 ? 1 : CB;
  *c0 = task * per;
  *c1 = *c0 + per < j->C ? *c0 + per : j->C;
}

#define AT(j, n, c)                                                            \
  ((size_t)(n) * (size_t)(j)->C + (size_t)(c)) * (size_t)(j)->HW

static void forward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  int c0, c1;
  channels(j, task, &c0, &c1);
  float mean[CB], alpha[CB], beta[CB];
  if (j->training) {
    double sum[CB] = {0}, var[CB] = {0};
    double m = (double)j->N * j->HW;
    for (int n = 0; n < j->N; n++)
      for (int c = c0; c < c1; c++)
        sum[c - c0] += nn_sum(j->inp + AT(j, n, c), (size_t)j->HW);
    for (int c = c0; c < c1; c++)
      mean[c - c0] = (float)(sum[c - c0] / m);
    for (int n = 0; n < j->N; n++)
      for (int c = c0; c < c1; c++)
        var[c - c0] +=
            nn_sumsq(j->inp + AT(j, n, c), mean[c - c0], (size_t)j->HW);
    for (int c = c0; c < c1; c++) {
      double v = var[c - c0] / m;
      float r = (float)(1 / sqrt(v + (double)j->eps));
      j->mean[c] = mean[c - c0];
      j->rstd[c] = r;
      if (j->running_mean) {
        float mo = j->momentum;
        j->running_mean[c] = (1 - mo) * j->running_mean[c] + mo * mean[c - c0];
        j->running_var[c] =
            (1 - mo) * j->running_var[c] + mo * (float)(var[c - c0] / (m - 1));
      }
    }
  } else
    for (int c = c0; c < c1; c++) {
      mean[c - c0] = j->mean[c] = j->running_mean[c];
      j->rstd[c] =
          (float)(1 / sqrt((double)j->running_var[c] + (double)j->eps));
    }
  for (int c = c0; c < c1; c++) {
    alpha[c - c0] = j->rstd[c] * (j->weight ? j->weight[c] : 1);
    beta[c - c0] = (j->bias ? j->bias[c] : 0) - mean[c - c0] * alpha[c - c0];
  }
  for (int n = 0; n < j->N; n++)
    for (int c = c0; c < c1; c++) {
      const float *x = j->inp + AT(j, n, c);
      float *y = j->out + AT(j, n, c), a = alpha[c - c0], b = beta[c - c0];
      for (int p = 0; p < j->HW; p++)
        y[p] = x[p] * a + b;
    }
}

int lk_nn_batchnorm_forward(lk_nn *nn, float *out, float *mean, float *rstd,
                            const float *inp, const float *weight,
                            const float *bias, float *running_mean,
                            float *running_var, int N, int C, int HW,
                            bool training, float momentum, float eps) {
  NN_CHECK(nn && out && mean && rstd && inp, LAYER,
           "forward needs the context, out, mean, rstd and inp");
  int rc = check("forward", N, C, HW);
  if (rc < 0)
    return rc;
  NN_CHECK(!running_mean == !running_var, LAYER,
           "running_mean and running_var go together");
  NN_CHECK(training || running_mean, LAYER,
           "evaluation needs running_mean and running_var");
  NN_CHECK(!training || (long long)N * HW >= 2, LAYER,
           "training needs more than one value per channel (N = %d, HW = "
           "%d)",
           N, HW);
  NN_CHECK(eps >= 0, LAYER, "eps is %g; expected >= 0", (double)eps);
  job j = {.N = N,
           .C = C,
           .HW = HW,
           .training = training,
           .momentum = momentum,
           .eps = eps,
           .out = out,
           .mean = mean,
           .rstd = rstd,
           .running_mean = running_mean,
           .running_var = running_var,
           .inp = inp,
           .weight = weight,
           .bias = bias};
  nn__run(nn, channel_parts(C, HW), forward_task, &j);
  return 0;
}

static void backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  int c0, c1;
  channels(j, task, &c0, &c1);
  double sum[CB] = {0}, dot[CB] = {0};
  for (int n = 0; n < j->N; n++)
    for (int c = c0; c < c1; c++) {
      const float *x = j->inp + AT(j, n, c), *dy = j->dout + AT(j, n, c);
      sum[c - c0] += nn_sum(dy, (size_t)j->HW);
      dot[c - c0] += nn_dotsub(x, j->cmean[c], dy, (size_t)j->HW);
    }
  double m = (double)j->N * j->HW;
  for (int c = c0; c < c1; c++) {
    float r = j->crstd[c];
    if (j->dweight)
      j->dweight[c] += (float)(dot[c - c0] * r);
    if (j->dbias)
      j->dbias[c] += (float)sum[c - c0];
  }
  if (!j->dinp)
    return;
  for (int n = 0; n < j->N; n++)
    for (int c = c0; c < c1; c++) {
      const float *x = j->inp + AT(j, n, c), *dy = j->dout + AT(j, n, c);
      float *dx = j->dinp + AT(j, n, c);
      float r = j->crstd[c], w = j->weight ? j->weight[c] : 1;
      if (!j->training) {
        float a = r * w;
        for (int p = 0; p < j->HW; p++)
          dx[p] += dy[p] * a;
        continue;
      }
      float mu = j->cmean[c], k = (float)(dot[c - c0] * r * r / m);
      float gm = (float)(sum[c - c0] / m), a = r * w;
      for (int p = 0; p < j->HW; p++)
        dx[p] += (dy[p] - gm - (x[p] - mu) * k) * a;
    }
}

int lk_nn_batchnorm_backward(lk_nn *nn, float *dinp, float *dweight,
                             float *dbias, const float *dout, const float *inp,
                             const float *weight, const float *mean,
                             const float *rstd, int N, int C, int HW,
                             bool training) {
  NN_CHECK(nn && dout && inp && mean && rstd, LAYER,
           "backward needs the context, dout, inp, mean and rstd");
  int rc = check("backward", N, C, HW);
  if (rc < 0)
    return rc;
  if (!dinp && !dweight && !dbias)
    return 0;
  job j = {.N = N,
           .C = C,
           .HW = HW,
           .training = training,
           .dinp = dinp,
           .dweight = dweight,
           .dbias = dbias,
           .inp = inp,
           .weight = weight,
           .dout = dout,
           .cmean = mean,
           .crstd = rstd};
  nn__run(nn, channel_parts(C, HW), backward_task, &j);
  return 0;
}
