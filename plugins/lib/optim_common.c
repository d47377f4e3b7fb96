/* optim_common.c: what the optimizer plugins share (optim_common.h says
 * what), built once into plugins/lib/libplugincommon.la. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#include "optim_common.h"

int optim_params(lk_host *host, lk_tensor *const **params, size_t *n) {
  *params = lk_host_params(host, n);
  if (*n == 0)
    return lk_fail(host, LK_ECONFIG,
                   "no parameters to optimize (the model registered none)");
  return 0;
}

void optim_destroy(void *self) {
  optim_common *c = self;
  free(c->bufs);
  free(c);
}

int optim_new(lk_host *host, size_t size, size_t lists, double lr, bool step,
              void **out) {
  size_t n;
  lk_tensor *const *params;
  int rc = optim_params(host, &params, &n);
  if (rc != 0)
    return rc;
  optim_common *c = calloc(1, size);
  if (!c || (lists && !(c->bufs = calloc(lists * n, sizeof *c->bufs)))) {
    free(c);
    return lk_fail(host, LK_ENOMEM, "out of memory");
  }
  c->host = host;
  c->n = n;
  c->lists = lists;
  size_t one = 1;
  rc = lk_host_add_state(host, "lr", LK_F64, 1, &one, &c->lr);
  if (rc == 0 && step)
    rc = lk_host_add_state(host, "step", LK_F64, 1, &one, &c->step);
  if (rc != 0) {
    optim_destroy(c);
    return rc;
  }
  *(double *)c->lr->data = lr;
  *out = c;
  return 0;
}

int optim_two(lk_host *host, const lk_options *o, const char *name,
              const char *meaning, double out[2]) {
  size_t n = 0;
  const double *v = lk_opt_doubles(o, name, &n);
  if (!v || n != 2)
    return lk_fail(host, LK_ECONFIG, "option %s has %zu values: give two, %s",
                   name, n, meaning);
  out[0] = v[0];
  out[1] = v[1];
  return 0;
}

int optim_create(lk_host *host, const lk_options *o, const optim_spec *spec,
                 double momentum, void **out) {
  void *mem = NULL;
  size_t lists = spec->lists, one = 1;
  int rc = optim_new(host, spec->size, lists, lk_opt_double(o, "lr"),
                     spec->step, &mem);
  if (rc != 0)
    return rc;
  optim_common *c = mem;
  if (spec->momentum)
    rc = optim_add_momentum(c, spec->momentum, momentum, spec->momentum_option,
                            spec->momentum_below);
  for (size_t i = 0; rc == 0 && i < 2 && spec->f32[i]; i++)
    rc = lk_host_add_state(host, spec->f32[i], LK_F32, 1, &one, &c->f32[i]);
  for (size_t j = 0; rc == 0 && spec->states[j]; j++)
    rc = optim_param_states(c, spec->states[j], c->bufs + j * c->n);
  if (rc != 0) {
    optim_destroy(c);
    return rc;
  }
  c->kernel = spec->kernel;
  for (size_t i = 0; i < OPTIM_MAX_FIELDS && spec->fields[i].name; i++) {
    const optim_field *f = &spec->fields[i];
    if (f->type == LK_OPT_BOOL)
      *(bool *)((char *)c + f->offset) = lk_opt_bool(o, f->name);
    else
      *(double *)((char *)c + f->offset) = lk_opt_double(o, f->name);
  }
  *out = c;
  return 0;
}

int optim_betas(lk_host *host, const lk_options *o, double out[2]) {
  return optim_two(host, o, "betas", "beta1,beta2 (default 0.9,0.999)", out);
}

int optim_create_adamlike(lk_host *host, const lk_options *o,
                          const optim_spec *spec, void **out) {
  double betas[2];
  int rc = optim_betas(host, o, betas);
  if (rc == 0)
    rc = optim_create(host, o, spec, betas[0], out);
  if (rc != 0)
    return rc;
  optim_adamlike *a = *out;
  a->beta2 = betas[1];
  a->eps = lk_opt_double(o, "eps");
  a->weight_decay = lk_opt_double(o, "weight_decay");
  return 0;
}

double optim_step_f32(optim_common *c) {
  double *step = c->step->data;
  *step = (double)((float)*step + 1.0f);
  return *step;
}

int optim_param_states(const optim_common *c, const char *prefix,
                       lk_tensor **out) {
#if LK_ABI_MINOR >= 4
  return lk_host_add_param_states(c->host, prefix, out, c->n);
#else /* the frozen headers of tests/abi have no lk_host_add_param_states */
  size_t n;
  lk_tensor *const *params = lk_host_params(c->host, &n);
  for (size_t i = 0; i < c->n; i++) {
    const lk_tensor *p = params[i];
    char name[256];
    if (snprintf(name, sizeof name, "%s.%s", prefix, p->name) >=
        (int)sizeof name)
      return lk_fail(c->host, LK_EINVAL,
                     "parameter name \"%s\" is too long for its %s buffer's "
                     "name",
                     p->name, prefix);
    int rc =
        lk_host_add_state(c->host, name, p->dtype, p->ndim, p->shape, &out[i]);
    if (rc != 0)
      return rc;
  }
  return 0;
#endif
}

double optim_get_lr(void *self) {
  return *(const double *)((const optim_common *)self)->lr->data;
}

void optim_set_lr(void *self, double lr) {
  *(double *)((optim_common *)self)->lr->data = lr;
}

int optim_add_momentum(optim_common *c, const char *name, double value,
                       const char *option, double below) {
  size_t one = 1;
  c->momentum_below = below;
  c->momentum_option = option;
  int rc = lk_host_add_state(c->host, name, LK_F64, 1, &one, &c->momentum);
  if (rc == 0)
    *(double *)c->momentum->data = value;
  return rc;
}

double optim_get_momentum(void *self) {
  return *(const double *)((const optim_common *)self)->momentum->data;
}

int optim_check_params(const optim_common *c, lk_tensor *const *params,
                       size_t n, lk_tensor *const *buf) {
  if (n != c->n)
    return lk_fail(c->host, LK_ESTATE,
                   "called with %zu parameters, created with %zu", n, c->n);
  for (size_t i = 0; buf && i < n; i++)
    if (buf[i]->numel != params[i]->numel || buf[i]->dtype != params[i]->dtype)
      return lk_fail(c->host, LK_ESTATE,
                     "parameter %s does not match its buffer %s",
                     params[i]->name, buf[i]->name);
  return 0;
}

bool optim_begin(const optim_common *c, lk_tensor *const *params, size_t n,
                 lk_closure_fn closure, int *rc) {
  *rc = 0;
  if (closure && !isfinite(closure()))
    return false; /* the evaluation failed or gave no loss: leave params be */
  *rc =
      optim_check_params(c, params, n, c->lists && c->bufs[0] ? c->bufs : NULL);
  return *rc == 0;
}

void optim_each(const optim_common *c, lk_tensor *const *params,
                const void *scalars, optim_update_fn *f64,
                optim_update_fn *f32) {
  for (size_t i = 0; i < c->n; i++) {
    lk_tensor *p = params[i];
    void *bufs[OPTIM_MAX_LISTS] = {NULL};
    for (size_t j = 0; j < c->lists; j++)
      if (c->bufs[j * c->n + i])
        bufs[j] = c->bufs[j * c->n + i]->data;
    (p->dtype == LK_F64 ? f64 : f32)(c, scalars, p->data, p->grad, bufs,
                                     p->numel);
  }
}

int optim_step(void *self, lk_tensor *const *params, size_t n,
               lk_closure_fn closure) {
  optim_common *c = self;
  const void *scalars = NULL;
  int rc;
  if (!optim_begin(c, params, n, closure, &rc))
    return rc;
  if ((rc = c->kernel.prepare(self, &scalars)) != 0)
    return rc;
  optim_each(c, params, scalars, c->kernel.f64, c->kernel.f32);
  return 0;
}

/* ---- optimizers of a flat vector of doubles (C libraries) --------------- */

int optim_flat_params(lk_host *host, lk_tensor *const **params, size_t *np,
                      size_t *n) {
  int rc = optim_params(host, params, np);
  *n = 0;
  for (size_t i = 0; rc == 0 && i < *np; i++) {
    const lk_tensor *p = (*params)[i];
    if (p->dtype != LK_F64 && p->dtype != LK_F32)
      return lk_fail(host, LK_ECONFIG, "parameter %s: f64 or f32 only, not %s",
                     p->name, lk_dtype_name(p->dtype));
    *n += p->numel;
  }
  return rc;
}

int optim_flat_check(lk_host *host, const char *who, lk_tensor *const *params,
                     size_t n_params, lk_closure_fn closure, size_t np,
                     size_t n) {
  size_t total = 0;
  if (!closure)
    return lk_fail(host, LK_EINVAL,
                   "%s needs a closure: it evaluates the model several "
                   "times per step",
                   who);
  for (size_t i = 0; i < n_params; i++)
    total += params[i]->numel;
  if (n_params != np || total != n)
    return lk_fail(host, LK_ESTATE,
                   "called with %zu parameters (%zu elements), created with "
                   "%zu (%zu)",
                   n_params, total, np, n);
  return 0;
}

void optim_gather(lk_tensor *const *p, size_t np, bool grad, double *v) {
  for (size_t i = 0; i < np; i++) {
    const void *src = grad ? p[i]->grad : p[i]->data;
    for (size_t k = 0; k < p[i]->numel; k++)
      *v++ = p[i]->dtype == LK_F64 ? ((const double *)src)[k]
                                   : (double)((const float *)src)[k];
  }
}

void optim_scatter(lk_tensor *const *p, size_t np, const double *v) {
  for (size_t i = 0; i < np; i++)
    for (size_t k = 0; k < p[i]->numel; k++, v++)
      if (p[i]->dtype == LK_F64)
        ((double *)p[i]->data)[k] = *v;
      else
        ((float *)p[i]->data)[k] = (float)*v;
}

#if LK_ABI_MINOR >= 4
static const char *optim_momentum_range(const optim_common *c, char *buf,
                                        size_t len) {
  if (isinf(c->momentum_below))
    snprintf(buf, len, "[0, inf)");
  else
    snprintf(buf, len, "[0, %.17g)", c->momentum_below);
  return buf;
}

int optim_check_momentum(const optim_common *c, double m, int code) {
  if (m >= 0 && m < c->momentum_below)
    return 0;
  char range[64];
  optim_momentum_range(c, range, sizeof range);
  if (code == LK_EFORMAT)
    return lk_fail(c->host, code,
                   "state %s[0] = %.17g: expected a number in %s (the range "
                   "of option %s.%s)",
                   c->momentum->name, m, range, lk_host_name(c->host),
                   c->momentum_option);
  return lk_fail(c->host, code,
                 "%s = %.17g: %s takes a %s in %s only (the range of its "
                 "option %s)",
                 c->momentum->name, m, lk_host_name(c->host),
                 strrchr(c->momentum->name, '.') + 1, range,
                 c->momentum_option);
}

int optim_set_momentum(void *self, double momentum) {
  optim_common *c = self;
  int rc = optim_check_momentum(c, momentum, LK_EINVAL);
  if (rc == 0)
    *(double *)c->momentum->data = momentum;
  return rc;
}

int optim_set_momentum_kept(optim_common *c, double momentum, bool *kept,
                            int (*make)(optim_common *c)) {
  int rc = optim_check_momentum(c, momentum, LK_EINVAL);
  if (rc == 0 && !*kept) {
    rc = make(c);
    if (rc == 0)
      *kept = true;
    else if (rc == LK_ESTATE && momentum == 0)
      rc = 0; /* the run is set up: a momentum of 0 needs no buffers */
    else if (rc == LK_ESTATE)
      rc = lk_fail(c->host, LK_ECONFIG,
                   "momentum %g set while the run trains, but %s was "
                   "created with momentum = 0 and nothing set its momentum "
                   "while the run was set up, so it keeps no momentum "
                   "buffers: a scheduler that cycles the momentum sets it "
                   "in its create (as onecycle and cyclic do), or give %s "
                   "momentum > 0",
                   momentum, lk_host_name(c->host), lk_host_name(c->host));
  }
  if (rc == 0)
    *(double *)c->momentum->data = momentum;
  return rc;
}

int optim_check_no_buffers(const optim_common *c) {
  double m = optim_get_momentum((void *)c);
  if (m == 0)
    return 0;
  return lk_fail(c->host, LK_EFORMAT,
                 "state %s[0] = %g in the checkpoint, but %s was created "
                 "with momentum = 0 and no scheduler drives its momentum, "
                 "so it keeps no momentum buffers to step with: expected 0",
                 c->momentum->name, m, lk_host_name(c->host));
}

int optim_check_unfilled(const optim_common *c, lk_tensor *const *buf,
                         const lk_tensor *flag) {
  for (size_t i = 0; i < c->n; i++)
    for (size_t k = 0; k < buf[i]->numel; k++) {
      double v = buf[i]->dtype == LK_F64 ? ((const double *)buf[i]->data)[k]
                                         : ((const float *)buf[i]->data)[k];
      if (v != 0)
        return lk_fail(c->host, LK_EFORMAT,
                       "state %s[%zu] = %.17g, but %s[0] = 0 says no step "
                       "has made the momentum buffers yet: expected 0",
                       buf[i]->name, k, v, flag->name);
    }
  return 0;
}

int optim_check_state(const optim_common *c) {
  int rc = lk_state_check(c->host, c->lr, 0, DBL_MAX, false);
  if (rc == 0 && c->step)
    rc = lk_state_check(c->host, c->step, 0, LK_STATE_MAX_COUNT, true);
  if (rc == 0 && c->momentum)
    rc = optim_check_momentum(c, optim_get_momentum((void *)c), LK_EFORMAT);
  return rc;
}

int optim_check_f32_step(const optim_common *c) {
  int rc = optim_check_state(c);
  return rc ? rc
            : lk_state_check(c->host, c->step, 0, OPTIM_F32_MAX_COUNT, true);
}

int optim_check_adamlike(void *self) {
  optim_common *c = self;
  int rc = optim_check_f32_step(c);
  return rc ? rc : optim_check_squares(c, c->bufs + c->n);
}

int optim_check_squares(const optim_common *c, lk_tensor *const *buf) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < c->n; i++)
    rc = lk_state_check(c->host, buf[i], 0, DBL_MAX, false);
  return rc;
}
#endif
