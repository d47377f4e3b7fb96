/* sgd: stochastic gradient descent with momentum, as torch.optim.SGD 1.13
 * (_single_tensor_sgd), with its option names, defaults and checks (lr is
 * required, as torch's).
 *
 * The momentum is host state that a scheduler may change (ABI 1.5's
 * set_momentum, as torch's OneCycleLR sets group['momentum']), read at
 * every step. As torch, a step with momentum 0 leaves the buffers alone,
 * and the first step with momentum != 0 fills them with d_p (torch creates
 * them then, as copies of d_p). Host state exists from setup on, so the
 * buffers are made when they may be needed: at create with momentum != 0,
 * or when a scheduler sets the momentum in its create (onecycle, cyclic),
 * even over sgd created with momentum = 0; "initialized" says whether a
 * step has filled them yet, so that a resume across that step is exact.
 *
 * The iterates match torch's to the last bit: where torch's CPU kernels fuse
 * (a.add_(b, alpha=s) is fma(s, b, a); a.mul_(m).add_(b, alpha=k) is
 * fma(k, b, a*m)) we call fma(), and the file must be compiled with
 * -ffp-contract=off so that the compiler fuses nothing else. f32 parameters
 * are updated in float with the scalars rounded to float, as torch does. */
#include <math.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "fma_clones.h"
#include "optim_common.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SGD_AVX2 1

/* AVX2 and FMA in the CPU and AVX state enabled by the OS, asked of CPUID
 * directly: __builtin_cpu_supports would link libgcc's CPU probe, a
 * constructor, into the plugin. */
static bool cpu_has_avx2_fma(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  bool fma = c >> 12 & 1, osxsave = c >> 27 & 1, avx = c >> 28 & 1;
  if (!(fma && osxsave && avx))
    return false;
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 6) != 6) /* XMM and YMM state */
    return false;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 5 & 1);
}
#endif

typedef struct sgd {
  optim_common c; /* lr, momentum; bufs: the buffers, once made */
  double dampening, weight_decay;
  bool nesterov, maximize;
  bool avx2;              /* the float loop may use AVX2 and FMA */
  bool kept;              /* the buffers and initialized exist */
  bool first;             /* this step's buffers are empty and take d_p */
  lk_tensor *initialized; /* [1]: 1 once the buffers hold a first gradient */
  double m;               /* this step's momentum: its scalars */
} sgd;

/* The momentum buffers, zero, and initialized = 0, as host state. */
static int make_buffers(optim_common *c) {
  sgd *s = (sgd *)c;
  size_t one = 1;
  int rc = lk_host_add_state(c->host, "initialized", LK_F64, 1, &one,
                             &s->initialized);
  return rc ? rc : optim_param_states(c, "momentum_buffer", c->bufs);
}

#if LK_ABI_MINOR >= 4 /* tests/abi builds this file with older headers */
/* A checkpoint's values: a rate, a momentum (0 without buffers), a flag,
 * and buffers that no step has filled yet while it is 0. */
static int check_state(void *self) {
  sgd *s = self;
  int rc = optim_check_state(&s->c);
  if (rc != 0 || !s->kept)
    return rc ? rc : optim_check_no_buffers(&s->c);
  rc = lk_state_check(s->c.host, s->initialized, 0, 1, true);
  if (rc == 0 && ((const double *)s->initialized->data)[0] == 0)
    rc = optim_check_unfilled(&s->c, s->c.bufs, s->initialized);
  return rc;
}
#endif

#if LK_ABI_MINOR >= 5
/* A scheduler's momentum: the buffers made if it comes during setup. */
static int set_momentum(void *self, double momentum) {
  sgd *s = self;
  return optim_set_momentum_kept(&s->c, momentum, &s->kept, make_buffers);
}
#endif

/* One parameter, in double, with the step's momentum (the scalars): BUFS
 * its momentum buffer (unused while the momentum is 0). */
FMA_CLONES static void update_f64(const void *self, const void *scalars,
                                  void *pv, const void *gv, void *const *bufs,
                                  size_t numel) {
  const sgd *s = self;
  double m = *(const double *)scalars, *p = pv, *buf = bufs[0];
  bool first = s->first;
  const double *g = gv;
  double lr = optim_get_lr((void *)s);
  double wd = s->weight_decay, keep = 1 - s->dampening;
  for (size_t k = 0; k < numel; k++) {
    double d = s->maximize ? -g[k] : g[k];
    if (wd != 0)
      d = fma(wd, p[k], d);
    if (m != 0) {
      buf[k] = first ? d : fma(keep, d, buf[k] * m);
      d = s->nesterov ? fma(m, buf[k], d) : buf[k];
    }
    p[k] = fma(-lr, d, p[k]);
  }
}

/* The same in float: torch rounds the Python scalars to the tensor's type.
 * fmaf is a call into libm unless the compiler may emit FMA instructions,
 * which baseline x86-64 does not allow: ~4 ns an element, 1 ms a step for
 * a 235k-parameter MLP. So on x86 the loop also exists as an AVX2+FMA
 * version, picked at run time; both round exactly alike (fma is exact in
 * either). */
typedef struct f32_coef {
  float wd, m, keep, step;
  bool decay, momentum, nesterov, maximize, first;
} f32_coef;

FMA_CLONES static void update_f32_portable(const f32_coef *c, float *p,
                                           const float *g, float *buf, size_t k,
                                           size_t numel) {
  for (; k < numel; k++) {
    float d = c->maximize ? -g[k] : g[k];
    if (c->decay)
      d = fmaf(c->wd, p[k], d);
    if (c->momentum) {
      buf[k] = c->first ? d : fmaf(c->keep, d, buf[k] * c->m);
      d = c->nesterov ? fmaf(c->m, buf[k], d) : buf[k];
    }
    p[k] = fmaf(c->step, d, p[k]);
  }
}

#ifdef SGD_AVX2
__attribute__((target("avx2,fma"))) static void
update_f32_avx2(const f32_coef *c, float *p, const float *g, float *buf,
                size_t numel) {
  const __m256 wd = _mm256_set1_ps(c->wd), m = _mm256_set1_ps(c->m);
  const __m256 keep = _mm256_set1_ps(c->keep), step = _mm256_set1_ps(c->step);
  const __m256 sign = _mm256_set1_ps(c->maximize ? -0.0f : 0.0f);
  size_t k = 0;
  for (; k + 8 <= numel; k += 8) {
    __m256 d = _mm256_xor_ps(_mm256_loadu_ps(g + k), sign);
    __m256 pk = _mm256_loadu_ps(p + k);
    if (c->decay)
      d = _mm256_fmadd_ps(wd, pk, d);
    if (c->momentum) {
      __m256 b = c->first
                     ? d
                     : _mm256_fmadd_ps(
                           keep, d, _mm256_mul_ps(_mm256_loadu_ps(buf + k), m));
      _mm256_storeu_ps(buf + k, b);
      d = c->nesterov ? _mm256_fmadd_ps(m, b, d) : b;
    }
    _mm256_storeu_ps(p + k, _mm256_fmadd_ps(step, d, pk));
  }
  update_f32_portable(c, p, g, buf, k, numel); /* the last few */
}
#endif

static void update_f32(const void *self, const void *scalars, void *pv,
                       const void *gv, void *const *bufs, size_t numel) {
  const sgd *s = self;
  double m = *(const double *)scalars;
  float *p = pv, *buf = bufs[0];
  const float *g = gv;
  f32_coef c = {.wd = (float)s->weight_decay,
                .m = (float)m,
                .keep = (float)(1 - s->dampening),
                .step = (float)-optim_get_lr((void *)s),
                .decay = s->weight_decay != 0,
                .momentum = m != 0,
                .nesterov = s->nesterov,
                .maximize = s->maximize,
                .first = s->first};
#ifdef SGD_AVX2
  if (s->avx2) {
    update_f32_avx2(&c, p, g, buf, numel);
    return;
  }
#endif
  update_f32_portable(&c, p, g, buf, 0, numel);
}

/* The step's own part: its momentum (the scalars), and whether its
 * buffers are empty. */
static int prepare(void *self, const void **scalars) {
  sgd *s = self;
  double m = s->m = optim_get_momentum(s);
  if (m != 0 && !s->kept) /* set_momentum and check_state refuse it */
    return lk_fail(s->c.host, LK_ESTATE, "momentum %g without momentum buffers",
                   m);
  /* torch creates each buffer as a copy of d_p at the first step with
   * momentum != 0: this one's update fills them. */
  s->first = m != 0 && ((double *)s->initialized->data)[0] == 0;
  if (m != 0)
    ((double *)s->initialized->data)[0] = 1;
  *scalars = &s->m;
  return 0;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  double momentum = lk_opt_double(o, "momentum");
  double dampening = lk_opt_double(o, "dampening");
  bool nesterov = lk_opt_bool(o, "nesterov");
  /* The host has checked the ranges (and refused inf and nan, which torch
   * lets through to poison the weights); torch's last check is one option
   * against another. */
  if (nesterov && (momentum <= 0 || dampening != 0))
    return lk_fail(host, LK_ECONFIG,
                   "option nesterov = true requires momentum > 0 and "
                   "dampening = 0 (got momentum = %g, dampening = %g)",
                   momentum, dampening);
  /* torch keeps no buffer without momentum; with it, the buffers are host
   * state so that a resumed run continues with them. Room for them in any
   * case: a scheduler may make them (set_momentum). */
  static const optim_spec spec = {.size = sizeof(sgd),
                                  .lists = 1,
                                  OPTIM_MOMENTUM,
                                  .kernel = {prepare, update_f64, update_f32}};
  int rc = optim_create(host, o, &spec, momentum, self);
  if (rc != 0)
    return rc;
  sgd *s = *self;
  s->dampening = dampening;
  s->weight_decay = lk_opt_double(o, "weight_decay");
  s->nesterov = nesterov;
  s->maximize = lk_opt_bool(o, "maximize");
#ifdef SGD_AVX2
  s->avx2 = cpu_has_avx2_fma();
#endif
  if (momentum != 0 && (rc = make_buffers(&s->c)) == 0)
    s->kept = true;
  if (rc != 0)
    optim_destroy(s);
  return rc;
}

/* The ranges are torch's checks; the host makes them in the table's order,
 * which is torch's (lr, momentum, weight_decay). */
static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, NULL,
     "learning rate (required, as torch's: no rate suits every model)",
     "[0, inf)"},
    {"momentum", LK_OPT_DOUBLE, "0", "momentum factor", "[0, inf)"},
    {"dampening", LK_OPT_DOUBLE, "0", "dampening for momentum", NULL},
    {"weight_decay", LK_OPT_DOUBLE, "0", "L2 penalty", "[0, inf)"},
    {"nesterov", LK_OPT_BOOL, "false",
     "Nesterov momentum (needs momentum > 0 and dampening = 0)", NULL},
    OPTIM_MAXIMIZE_OPTION,
    {NULL, 0, NULL, NULL, NULL}};

static const lk_optimizer_ops optimizer_ops = {
    .step = optim_step,
    .get_lr = optim_get_lr,
    .set_lr = optim_set_lr,
#if LK_ABI_MINOR >= 5 /* tests/abi builds this file with older headers */
    .get_momentum = optim_get_momentum,
    .set_momentum = set_momentum,
#endif
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "sgd",
    .version = "1.0",
    .summary = "stochastic gradient descent with momentum, as torch.optim.SGD",
    .options = options,
    .create = create,
    .destroy = optim_destroy,
    .optimizer = &optimizer_ops,
#if LK_ABI_MINOR >= 4
    .check_state = check_state,
#endif
};
