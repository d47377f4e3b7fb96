/* Closure composition: a new double (*)(void) that runs code before or after
 * another closure pointer (the chain's hooks, clipping, the processes' mean
 * and the precision plugin's scale, loop/chain.c; a host's own wraps). The
 * profiler does not wrap here: it times the closure as any other entry,
 * with a wrapper of its C type (profile.c).
 *
 * Optimizers may call a closure many times per step, so each kind of wrap
 * has its own libffi handler and none of them branches on the kind. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "closures.h"
#include "thunk.h"

struct lk_wrap {
  lk_closure_fn inner;
  double (*map)(void *ctx, double loss); /* lk__closure_map */
  int (*then)(void *ctx, double loss);   /* lk_closure_then */
  void (*before)(void *ctx);             /* lk__closure_around */
  void (*after)(void *ctx);
  void *ctx;
  lk__thunk thunk;
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

static void map_handler(ffi_cif *cif, void *ret, void **args, void *user) {
  const lk_wrap *w = user;
  LK_UNUSED(cif);
  LK_UNUSED(args);
  *(double *)ret = w->map(w->ctx, w->inner());
}

/* Takes ownership of W: on failure it is freed. */
static int make(lk_wrap *w, const char *who,
                void (*handler)(ffi_cif *, void *, void **, void *),
                lk_wrap **out) {
  int rc = lk__thunk_init(&w->thunk, handler, w, who);
  if (rc != 0) {
    free(w);
    return rc;
  }
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

int lk__closure_around(lk_closure_fn inner, void (*before)(void *ctx),
                       void (*after)(void *ctx), void *ctx, lk_wrap **out) {
  if (!out)
    return lk__err(LK_EINVAL, "lk__closure_around: OUT is NULL");
  *out = NULL;
  if (!inner)
    return lk__err(LK_EINVAL, "lk__closure_around: the inner closure is NULL");
  if (!before || !after)
    return lk__err(LK_EINVAL, "lk__closure_around: the %s function is NULL",
                   before ? "after" : "before");
  lk_wrap *w = calloc(1, sizeof *w);
  if (!w)
    return lk__err(LK_ENOMEM, "lk__closure_around: out of memory");
  w->inner = inner;
  w->before = before;
  w->after = after;
  w->ctx = ctx;
  return make(w, "lk__closure_around", around_handler, out);
}

lk_closure_fn lk_wrap_function(const lk_wrap *w) {
  return w ? w->thunk.fn : NULL;
}

void lk_wrap_free(lk_wrap *w) {
  if (!w)
    return;
  lk__thunk_free(&w->thunk);
  free(w);
}

int lk__closure_map(lk_closure_fn inner, double (*map)(void *ctx, double loss),
                    void *ctx, lk_wrap **out) {
  *out = NULL;
  lk_wrap *w = calloc(1, sizeof *w);
  if (!w)
    return lk__err(LK_ENOMEM, "out of memory");
  w->inner = inner;
  w->map = map;
  w->ctx = ctx;
  return make(w, "lk__closure_map", map_handler, out);
}
