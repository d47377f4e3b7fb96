/* Closures (ffi/): what only the library and its tests use of one
 * evaluation behind a function pointer (closure.c) and of what wraps it
 * (wrap.c). */
#ifndef LK_CLOSURES_H
#define LK_CLOSURES_H

#include "internal.h"

/* closure.c: the error of C's last evaluation (0: it did not fail). */
int lk__closure_error(const lk_closure *c);
/* Records CODE and the current message as the failure of C's last
 * evaluation, unless one is recorded already: what wraps the closure
 * (hooks, clipping, the processes' mean) fails into the same record that
 * lk_closure_consume reports. Returns CODE. */
int lk__closure_fail(lk_closure *c, int code);

/* wrap.c: a closure that returns MAP(ctx, the loss INNER returns). */
int lk__closure_map(lk_closure_fn inner, double (*map)(void *ctx, double loss),
                    void *ctx, lk_wrap **out);

/* closure.c, wrap.c: what only the library (and its tests) use. */
/* Evaluations since lk_closure_new. */
uint64_t lk__closure_calls(const lk_closure *c);

/* Sets the name used in "optimizer NAME returned without calling the
 * closure" messages. */
void lk__closure_set_caller(lk_closure *c, const char *optimizer_name);

/* Composition: a new closure pointer that calls BEFORE(ctx), INNER, then
 * AFTER(ctx) (the library's tests use it; the profiler has wrappers of its
 * own, profile.c). */
int lk__closure_around(lk_closure_fn inner, void (*before)(void *ctx),
                       void (*after)(void *ctx), void *ctx, lk_wrap **out);

#endif
