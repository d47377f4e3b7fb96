/* adam_common.h: Adam and AdamW as torch.optim.Adam and torch.optim.AdamW
 * 1.13 (_single_tensor_adam, _single_tensor_adamw), shared by plugins/adam.c
 * and plugins/adamw.c, which differ only in how weight decay is applied
 * (added to the gradient, or "decoupled": the parameter shrinks by
 * 1 - lr * weight_decay first) and in its default.
 *
 * The iterates match torch's to the last bit. Torch's CPU kernels fuse
 * exp_avg.mul_(b1).add_(g, alpha=1-b1) into fma(1-b1, g, m*b1),
 * exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2) into fma((1-b2)*g, g, v*b2)
 * and grad.add(p, alpha=wd) into fma(wd, p, g); everything else rounds at
 * each operation (param.addcdiv_(m, denom, value=-s) is p + (-s*m)/denom),
 * so the including file must be compiled with -ffp-contract=off. The bias
 * corrections are Python float powers, which are C's pow(). f32 parameters
 * are updated in float with each scalar rounded to float, as torch does.
 *
 * Everything here is static inline: each plugin includes it once. */
#ifndef LOOPKIT_PLUGINS_ADAM_COMMON_H
#define LOOPKIT_PLUGINS_ADAM_COMMON_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "fma_clones.h"

typedef struct adam {
  lk_host *host;
  lk_tensor *lr;   /* [1] f64, host state: a scheduler changes it */
  lk_tensor *step; /* [1] f64, host state: steps taken (torch's state_steps) */
  double beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled;
  size_t n; /* parameters at create time */
  /* Host state, one tensor per parameter each; max_exp_avg_sq only with
   * amsgrad. Torch creates them as zeros at the first step, and the host
   * zero-fills them, which is the same. */
  lk_tensor **exp_avg, **exp_avg_sq, **max_exp_avg_sq;
} adam;

static inline int adam_check_finite(lk_host *host, const char *name, double v) {
  if (!isfinite(v))
    return lk_fail(host, LK_ECONFIG, "option %s = %g: must be finite", name, v);
  return 0;
}

/* Adds the state tensor "WHAT.PARAM" shaped like each parameter. */
static inline int adam_add_buffers(lk_host *host, lk_tensor *const *params,
                                   size_t n, const char *what,
                                   lk_tensor **out) {
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *p = params[i];
    char name[256];
    if (snprintf(name, sizeof name, "%s.%s", what, p->name) >= (int)sizeof name)
      return lk_fail(host, LK_EINVAL,
                     "parameter name \"%s\" is too long for its %s buffer's "
                     "name",
                     p->name, what);
    int rc =
        lk_host_add_state(host, name, p->dtype, p->ndim, p->shape, &out[i]);
    if (rc != 0)
      return rc;
  }
  return 0;
}

static inline void adam_destroy(void *self) {
  adam *s = self;
  free(s->exp_avg);
  free(s);
}

/* create, for both plugins: DECOUPLED selects AdamW's weight decay. */
static inline int adam_create(lk_host *host, const lk_options *o, void **self,
                              bool decoupled) {
  double lr = lk_opt_double(o, "lr"), eps = lk_opt_double(o, "eps");
  double weight_decay = lk_opt_double(o, "weight_decay");
  size_t n_betas = 0;
  const double *betas = lk_opt_doubles(o, "betas", &n_betas);
  int rc;

  if (!betas || n_betas != 2)
    return lk_fail(host, LK_ECONFIG,
                   "option betas has %zu values: give two, beta1,beta2 "
                   "(default 0.9,0.999)",
                   n_betas);
  /* torch's checks, in torch's order, after refusing inf and nan (which
   * torch lets through to poison the weights). */
  if ((rc = adam_check_finite(host, "lr", lr)) != 0 ||
      (rc = adam_check_finite(host, "betas[0]", betas[0])) != 0 ||
      (rc = adam_check_finite(host, "betas[1]", betas[1])) != 0 ||
      (rc = adam_check_finite(host, "eps", eps)) != 0 ||
      (rc = adam_check_finite(host, "weight_decay", weight_decay)) != 0)
    return rc;
  if (lr < 0)
    return lk_fail(host, LK_ECONFIG,
                   "option lr = %g: invalid learning rate (must be >= 0)", lr);
  if (eps < 0)
    return lk_fail(host, LK_ECONFIG,
                   "option eps = %g: invalid epsilon value (must be >= 0)",
                   eps);
  for (int k = 0; k < 2; k++)
    if (!(betas[k] >= 0 && betas[k] < 1))
      return lk_fail(host, LK_ECONFIG,
                     "option betas = %g,%g: invalid beta parameter at index "
                     "%d (must be in [0, 1))",
                     betas[0], betas[1], k);
  if (weight_decay < 0)
    return lk_fail(host, LK_ECONFIG,
                   "option weight_decay = %g: invalid weight_decay value "
                   "(must be >= 0)",
                   weight_decay);

  size_t n = 0;
  lk_tensor *const *params = lk_host_params(host, &n);
  if (n == 0)
    return lk_fail(host, LK_ECONFIG,
                   "no parameters to optimize (the model registered none)");

  adam *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->beta1 = betas[0];
  s->beta2 = betas[1];
  s->eps = eps;
  s->weight_decay = weight_decay;
  s->amsgrad = lk_opt_bool(o, "amsgrad");
  s->maximize = lk_opt_bool(o, "maximize");
  s->decoupled = decoupled;
  s->n = n;
  /* One allocation for the three lists. */
  if (!(s->exp_avg = calloc(3 * n, sizeof *s->exp_avg))) {
    free(s);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  s->exp_avg_sq = s->exp_avg + n;
  s->max_exp_avg_sq = s->exp_avg + 2 * n;

  size_t one = 1;
  rc = lk_host_add_state(host, "lr", LK_F64, 1, &one, &s->lr);
  if (rc == 0)
    rc = lk_host_add_state(host, "step", LK_F64, 1, &one, &s->step);
  if (rc == 0)
    rc = adam_add_buffers(host, params, n, "exp_avg", s->exp_avg);
  if (rc == 0)
    rc = adam_add_buffers(host, params, n, "exp_avg_sq", s->exp_avg_sq);
  if (rc == 0 && s->amsgrad)
    rc = adam_add_buffers(host, params, n, "max_exp_avg_sq", s->max_exp_avg_sq);
  if (rc != 0) {
    adam_destroy(s);
    return rc;
  }
  *(double *)s->lr->data = lr;
  *self = s;
  return 0;
}

/* A checkpoint's values: the rate, the step count, and second moments
 * that are never negative (a negative one would make sqrt NaN). */
static inline int adam_check_state(void *self) {
  adam *s = self;
  int rc = lk_state_check(s->host, s->lr, 0, DBL_MAX, false);
  if (rc == 0)
    rc = lk_state_check(s->host, s->step, 0, LK_STATE_MAX_COUNT, true);
  for (size_t i = 0; rc == 0 && i < s->n; i++) {
    rc = lk_state_check(s->host, s->exp_avg_sq[i], 0, DBL_MAX, false);
    if (rc == 0 && s->amsgrad)
      rc = lk_state_check(s->host, s->max_exp_avg_sq[i], 0, DBL_MAX, false);
  }
  return rc;
}

static inline double adam_get_lr(void *self) {
  return *(const double *)((adam *)self)->lr->data;
}

static inline void adam_set_lr(void *self, double lr) {
  *(double *)((adam *)self)->lr->data = lr;
}

/* The scalars of one step, computed in double as torch's Python code does. */
typedef struct adam_scalars {
  double lr, step_size, bc2_sqrt;
} adam_scalars;

/* torch.maximum: NaN wins. */
static inline double adam_max(double a, double b) {
  return isnan(a) || a > b ? a : b;
}

static inline float adam_maxf(float a, float b) {
  return isnan(a) || a > b ? a : b;
}

FMA_CLONES static void adam_update_f64(const adam *s, const adam_scalars *c,
                                       double *p, const double *grad, double *m,
                                       double *v, double *vmax, size_t numel) {
  double b1 = s->beta1, b2 = s->beta2, k1 = 1 - s->beta1, k2 = 1 - s->beta2;
  double wd = s->weight_decay, eps = s->eps, neg_step = -c->step_size;
  double shrink = 1 - c->lr * s->weight_decay;
  for (size_t k = 0; k < numel; k++) {
    double g = s->maximize ? -grad[k] : grad[k];
    if (s->decoupled)
      p[k] = p[k] * shrink; /* torch multiplies even by 1 */
    else if (wd != 0)
      g = fma(wd, p[k], g);
    m[k] = fma(k1, g, m[k] * b1);
    v[k] = fma(k2 * g, g, v[k] * b2);
    double second = v[k];
    if (s->amsgrad)
      second = vmax[k] = adam_max(vmax[k], v[k]);
    double denom = sqrt(second) / c->bc2_sqrt + eps;
    p[k] = p[k] + (neg_step * m[k]) / denom;
  }
}

FMA_CLONES static void adam_update_f32(const adam *s, const adam_scalars *c,
                                       float *p, const float *grad, float *m,
                                       float *v, float *vmax, size_t numel) {
  float b1 = (float)s->beta1, b2 = (float)s->beta2;
  float k1 = (float)(1 - s->beta1), k2 = (float)(1 - s->beta2);
  float wd = (float)s->weight_decay, eps = (float)s->eps;
  float neg_step = (float)-c->step_size, bc2_sqrt = (float)c->bc2_sqrt;
  float shrink = (float)(1 - c->lr * s->weight_decay);
  for (size_t k = 0; k < numel; k++) {
    float g = s->maximize ? -grad[k] : grad[k];
    if (s->decoupled)
      p[k] = p[k] * shrink;
    else if (s->weight_decay != 0)
      g = fmaf(wd, p[k], g);
    m[k] = fmaf(k1, g, m[k] * b1);
    v[k] = fmaf(k2 * g, g, v[k] * b2);
    float second = v[k];
    if (s->amsgrad)
      second = vmax[k] = adam_maxf(vmax[k], v[k]);
    float denom = sqrtf(second) / bc2_sqrt + eps;
    p[k] = p[k] + (neg_step * m[k]) / denom;
  }
}

static inline int adam_step(void *self, lk_tensor *const *params, size_t n,
                            lk_closure_fn closure) {
  adam *s = self;
  if (closure && !isfinite(closure()))
    return 0; /* the evaluation failed or gave no loss: leave params be */
  if (n != s->n)
    return lk_fail(s->host, LK_ESTATE,
                   "called with %zu parameters, created with %zu", n, s->n);
  for (size_t i = 0; i < n; i++)
    if (s->exp_avg[i]->numel != params[i]->numel ||
        s->exp_avg[i]->dtype != params[i]->dtype)
      return lk_fail(s->host, LK_ESTATE,
                     "parameter %s does not match its buffer %s",
                     params[i]->name, s->exp_avg[i]->name);

  /* torch counts steps per parameter; they all step together here. */
  double step = ((double *)s->step->data)[0] += 1;
  adam_scalars c;
  c.lr = adam_get_lr(s);
  c.step_size = c.lr / (1 - pow(s->beta1, step));
  c.bc2_sqrt = sqrt(1 - pow(s->beta2, step));
  for (size_t i = 0; i < n; i++) {
    lk_tensor *p = params[i];
    void *vmax = s->amsgrad ? s->max_exp_avg_sq[i]->data : NULL;
    if (p->dtype == LK_F64)
      adam_update_f64(s, &c, p->data, p->grad, s->exp_avg[i]->data,
                      s->exp_avg_sq[i]->data, vmax, p->numel);
    else
      adam_update_f32(s, &c, p->data, p->grad, s->exp_avg[i]->data,
                      s->exp_avg_sq[i]->data, vmax, p->numel);
  }
  return 0;
}

static const lk_optimizer_ops adam_optimizer_ops = {
    .step = adam_step, .get_lr = adam_get_lr, .set_lr = adam_set_lr};

#endif
