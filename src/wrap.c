/* Closure composition: a new double (*)(void) that runs code before or after
 * another closure pointer (gradient clipping, hooks, profiling).
 *
 * Optimizers may call a closure many times per step, so each kind of wrap
 * has its own libffi handler and none of them branches on the kind. */
#include <ffi.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct lk_wrap {
  lk_closure_fn inner;
  int (*then)(void *ctx, double loss); /* lk_closure_then */
  void (*before)(void *ctx);           /* lk_closure_around */
  void (*after)(void *ctx);
  void *ctx;
  ffi_closure *ffi;
  lk_closure_fn fn;
  ffi_cif cif;
};

static void then_handler(ffi_cif *cif, void *ret, void **args, void *user) {
  const lk_wrap *w = user;
  double loss = w->inner();
  LK_UNUSED(cif);
  LK_UNUSED(args);
  /* AFTER has recorded its own error; NaN tells the optimizer to stop. */
  *(double *)ret = w->then(w->ctx, loss) != 0 ? NAN : loss;
}

static void around_handler(ffi_cif *cif, void *ret, void **args, void *user) {
  const lk_wrap *w = user;
  LK_UNUSED(cif);
  LK_UNUSED(args);
  w->before(w->ctx);
  double loss = w->inner();
  w->after(w->ctx);
  *(double *)ret = loss;
}

/* Takes ownership of W: on failure it is freed. */
static int make(lk_wrap *w, const char *who,
                void (*handler)(ffi_cif *, void *, void **, void *),
                lk_wrap **out) {
  void *code = NULL;
  w->ffi = ffi_closure_alloc(sizeof(ffi_closure), &code);
  if (!w->ffi) {
    free(w);
    return lk__err(LK_ENOMEM, "%s: ffi_closure_alloc failed", who);
  }
  if (ffi_prep_cif(&w->cif, FFI_DEFAULT_ABI, 0, &ffi_type_double, NULL) !=
          FFI_OK ||
      ffi_prep_closure_loc(w->ffi, &w->cif, handler, w, code) != FFI_OK) {
    ffi_closure_free(w->ffi);
    free(w);
    return lk__err(LK_EINVAL, "%s: libffi could not prepare the closure", who);
  }
  /* ISO C forbids converting void * to a function pointer; libffi hands
   * back the executable address as data. */
  memcpy(&w->fn, &code, sizeof w->fn);
  *out = w;
  return 0;
}

int lk_closure_then(lk_closure_fn inner, int (*after)(void *ctx, double loss),
                    void *ctx, lk_wrap **out) {
  if (!out)
    return lk__err(LK_EINVAL, "lk_closure_then: OUT is NULL");
  *out = NULL;
  if (!inner)
    return lk__err(LK_EINVAL, "lk_closure_then: the inner closure is NULL");
  if (!after)
    return lk__err(LK_EINVAL, "lk_closure_then: the after function is NULL");
  lk_wrap *w = calloc(1, sizeof *w);
  if (!w)
    return lk__err(LK_ENOMEM, "lk_closure_then: out of memory");
  w->inner = inner;
  w->then = after;
  w->ctx = ctx;
  return make(w, "lk_closure_then", then_handler, out);
}

int lk_closure_around(lk_closure_fn inner, void (*before)(void *ctx),
                      void (*after)(void *ctx), void *ctx, lk_wrap **out) {
  if (!out)
    return lk__err(LK_EINVAL, "lk_closure_around: OUT is NULL");
  *out = NULL;
  if (!inner)
    return lk__err(LK_EINVAL, "lk_closure_around: the inner closure is NULL");
  if (!before || !after)
    return lk__err(LK_EINVAL, "lk_closure_around: the %s function is NULL",
                   before ? "after" : "before");
  lk_wrap *w = calloc(1, sizeof *w);
  if (!w)
    return lk__err(LK_ENOMEM, "lk_closure_around: out of memory");
  w->inner = inner;
  w->before = before;
  w->after = after;
  w->ctx = ctx;
  return make(w, "lk_closure_around", around_handler, out);
}

lk_closure_fn lk_wrap_function(const lk_wrap *w) {
  return w ? w->fn : NULL;
}

void lk_wrap_free(lk_wrap *w) {
  if (!w)
    return;
  ffi_closure_free(w->ffi);
  free(w);
}
