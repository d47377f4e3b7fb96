/* adam_common.c: Adam and AdamW's create, check and step (adam_common.h
 * says how they match torch's bit for bit). */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h>

#include "adam_common.h"
#include "fma_clones.h"
#include "optim_common.h"

typedef struct adam {
  optim_common c; /* lr, step (torch's state_steps), momentum: beta1 */
  double beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled;
  /* Host state, one tensor per parameter each (c.bufs); max_exp_avg_sq
   * only with amsgrad. Torch creates them as zeros at the first step, and
   * the host zero-fills them, which is the same. */
  lk_tensor **exp_avg, **exp_avg_sq, **max_exp_avg_sq;
  lk_nn *nn; /* the run's threads ([loop] threads), for f32 updates */
} adam;

void adam_destroy(void *self) {
  adam *s = self;
  lk_nn_free(s->nn);
  optim_destroy(s);
}

/* The host has checked the ranges, in torch's order (the table's), and
 * refused inf and nan (which torch lets through to poison the weights). */
int adam_create(lk_host *host, const lk_options *o, void **self,
                bool decoupled) {
  optim_spec spec = {.size = sizeof(adam),
                     .step = true,
                     .lists = 3,
                     .states = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
                     OPTIM_BETA1};
  bool amsgrad = lk_opt_bool(o, "amsgrad");
  if (!amsgrad)
    spec.states[2] = NULL;
  double betas[2];
  void *mem = NULL;
  int rc = optim_betas(host, o, betas);
  if (rc == 0)
    rc = optim_create(host, o, &spec, betas[0], &mem);
  if (rc != 0)
    return rc;
  adam *s = mem;
  size_t n = s->c.n;
  s->beta2 = betas[1];
  s->eps = lk_opt_double(o, "eps");
  s->weight_decay = lk_opt_double(o, "weight_decay");
  s->amsgrad = amsgrad;
  s->maximize = lk_opt_bool(o, "maximize");
  s->decoupled = decoupled;
  s->exp_avg = s->c.bufs;
  s->exp_avg_sq = s->c.bufs + n;
  s->max_exp_avg_sq = s->c.bufs + 2 * n;
  if ((rc = lk_nn_create(&s->nn, lk_host_threads(host), LK_NN_NO_BLAS)) != 0) {
    rc = lk_fail(host, rc, "%s", lk_last_error());
    adam_destroy(s);
    return rc;
  }
  *self = s;
  return 0;
}

/* A checkpoint's values: the rate, the step count, beta1, and second
 * moments that are never negative (a negative one would make sqrt NaN). */
int adam_check_state(void *self) {
  adam *s = self;
  int rc = optim_check_state(&s->c);
  if (rc == 0)
    rc = optim_check_squares(&s->c, s->exp_avg_sq);
  if (rc == 0 && s->amsgrad)
    rc = optim_check_squares(&s->c, s->max_exp_avg_sq);
  return rc;
}

/* The scalars of one step, computed in double as torch's Python code does. */
typedef struct adam_scalars {
  double beta1, lr, step_size, bc2_sqrt;
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
  double b1 = c->beta1, b2 = s->beta2, k1 = 1 - c->beta1, k2 = 1 - s->beta2;
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

/* The f32 update's common cases (no amsgrad, no maximize) are loops with
 * no branch inside, which the compiler vectorizes (the plugins are built
 * with the layer kit's vectorizer flags and -fno-math-errno, which lets
 * sqrtf be one instruction): IEEE's sqrt, division and fma round the same
 * in a vector lane as alone, so the iterates are the scalar loop's to the
 * bit. On the baby GPT (0.8M parameters) the scalar loop was 6% of a
 * step. */
FMA_CLONES static void adam_update_f32(const adam *s, const adam_scalars *c,
                                       float *restrict p,
                                       const float *restrict grad,
                                       float *restrict m, float *restrict v,
                                       float *restrict vmax, size_t numel) {
  float b1 = (float)c->beta1, b2 = (float)s->beta2;
  float k1 = (float)(1 - c->beta1), k2 = (float)(1 - s->beta2);
  float wd = (float)s->weight_decay, eps = (float)s->eps;
  float neg_step = (float)-c->step_size, bc2_sqrt = (float)c->bc2_sqrt;
  float shrink = (float)(1 - c->lr * s->weight_decay);
  if (!s->amsgrad && !s->maximize && (s->decoupled || s->weight_decay == 0)) {
    if (!s->decoupled)
      shrink = 1; /* p * 1 is p; AdamW multiplies even by 1, as torch */
    for (size_t k = 0; k < numel; k++) {
      float g = grad[k], pk = p[k] * shrink;
      float mk = fmaf(k1, g, m[k] * b1), vk = fmaf(k2 * g, g, v[k] * b2);
      m[k] = mk;
      v[k] = vk;
      p[k] = pk + (neg_step * mk) / (sqrtf(vk) / bc2_sqrt + eps);
    }
    return;
  }
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

/* An f32 tensor's update on the run's threads, in chunks of ADAM_CHUNK
 * values (the last takes the rest): each value's update is its own, so
 * the chunks change no bit. 16384 values are 320 KiB of state to stream. */
#define ADAM_CHUNK 16384

typedef struct adam_job {
  const adam *s;
  const adam_scalars *c;
  lk_tensor *p;
  float *m, *v, *vmax;
} adam_job;

static void adam_task(void *ctx, int task, int thread) {
  (void)thread;
  const adam_job *j = ctx;
  size_t lo = (size_t)task * ADAM_CHUNK, n = j->p->numel - lo;
  if (n > ADAM_CHUNK)
    n = ADAM_CHUNK;
  adam_update_f32(j->s, j->c, (float *)j->p->data + lo,
                  (const float *)j->p->grad + lo, j->m + lo, j->v + lo,
                  j->vmax ? j->vmax + lo : NULL, n);
}

static int adam_step(void *self, lk_tensor *const *params, size_t n,
                     lk_closure_fn closure) {
  adam *s = self;
  if (closure && !isfinite(closure()))
    return 0; /* the evaluation failed or gave no loss: leave params be */
  int rc = optim_check_params(&s->c, params, n, s->exp_avg);
  if (rc != 0)
    return rc;

  /* torch counts steps per parameter; they all step together here. */
  double step = ((double *)s->c.step->data)[0] += 1;
  adam_scalars c;
  c.beta1 = optim_get_momentum(s);
  c.lr = optim_get_lr(s);
  c.step_size = c.lr / (1 - pow(c.beta1, step));
  c.bc2_sqrt = sqrt(1 - pow(s->beta2, step));
  for (size_t i = 0; i < n; i++) {
    lk_tensor *p = params[i];
    void *vmax = s->amsgrad ? s->max_exp_avg_sq[i]->data : NULL;
    if (p->dtype == LK_F64) {
      adam_update_f64(s, &c, p->data, p->grad, s->exp_avg[i]->data,
                      s->exp_avg_sq[i]->data, vmax, p->numel);
      continue;
    }
    adam_job j = {s, &c, p, s->exp_avg[i]->data, s->exp_avg_sq[i]->data, vmax};
    /* a tensor has fewer than INT_MAX * ADAM_CHUNK values (the host's
     * tensors are at most 2^40 bytes) */
    int parts = (int)((p->numel + ADAM_CHUNK - 1) / ADAM_CHUNK);
    lk_nn_parallel(s->nn, parts, adam_task, &j);
  }
  return 0;
}

const lk_optimizer_ops adam_optimizer_ops = {.step = adam_step,
                                             .get_lr = optim_get_lr,
                                             .set_lr = optim_set_lr,
                                             .get_momentum = optim_get_momentum,
                                             .set_momentum =
                                                 optim_set_momentum};
