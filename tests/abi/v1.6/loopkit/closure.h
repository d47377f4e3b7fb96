/* loopkit — closures.
 *
 * A closure is a real C function pointer, double (*)(void), made with libffi.
 * Calling it runs one evaluation of the model: step, zero_grad, backward, in
 * that order, and returns the loss. Optimizers receive only the pointer and
 * may call it any number of times. */
#ifndef LOOPKIT_CLOSURE_H
#define LOOPKIT_CLOSURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loopkit/export.h"
#include "loopkit/host.h"
#include "loopkit/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lk_closure lk_closure;

/* What a closure calls. step is required; zero_grad and backward may be
 * NULL (manual optimization has neither). The hooks are optional and run
 * just before zero_grad, just before backward and just after backward; a
 * hook that fails stops the evaluation like a failing step. */
typedef struct lk_closure_parts {
  int (*step)(void *self, const lk_batch *batch, lk_step_result *out);
  void *step_self;
  int (*zero_grad)(void *self, lk_tensor *const *params, size_t n);
  void *zero_grad_self;
  int (*backward)(void *self, const lk_batch *batch, double scale);
  void *backward_self;

  int (*before_zero_grad)(void *ctx);
  int (*before_backward)(void *ctx, double loss);
  int (*after_backward)(void *ctx);
  void *hook_ctx;

  lk_tensor *const *params; /* checked with terminate_on_nan */
  size_t n_params;
  bool terminate_on_nan;
  const char *step_name; /* plugin names for messages */
  const char *zero_grad_name;
  const char *backward_name;
  lk_log_fn log; /* the one-time "no loss" warning; may be NULL */
  void *log_user;
} lk_closure_parts;

LK_API int lk_closure_new(const lk_closure_parts *parts, lk_closure **out);
LK_API void lk_closure_free(lk_closure *c);

/* The closure's function pointer: valid until lk_closure_free. */
LK_API lk_closure_fn lk_closure_function(const lk_closure *c);

/* Sets what the next evaluations work on: the batch, the loss divisor
 * (the accumulation count, >= 1), whether zero_grad runs, and the epoch and
 * batch numbers that a non-finite-loss message names. */
LK_API void lk_closure_prepare(lk_closure *c, const lk_batch *batch,
                               double divisor, bool zero_grad, uint64_t epoch,
                               uint64_t batch_index);

/* Takes the result cached by the last evaluation. Fails with LK_ESTATE if
 * the closure has not run since the last consume (or ever), and with the
 * evaluation's own error if it failed. */
LK_API int lk_closure_consume(lk_closure *c, lk_step_result *out);

/* Composition: a new closure pointer that calls INNER and then AFTER(ctx,
 * loss) — clipping and hooks after the evaluation. If AFTER fails (returns
 * non-zero) the wrapper returns NaN; AFTER records its own error. */
typedef struct lk_wrap lk_wrap;
LK_API int lk_closure_then(lk_closure_fn inner,
                           int (*after)(void *ctx, double loss), void *ctx,
                           lk_wrap **out);

LK_API lk_closure_fn lk_wrap_function(const lk_wrap *w);
LK_API void lk_wrap_free(lk_wrap *w);

/* bind: partial application. FN is any C function whose type SIGNATURE
 * spells in C, e.g. "double (const double *, size_t)"; ARGS[i] points to
 * the value of argument i (as libffi's avalue). The values are copied: the
 * returned closure takes no arguments and returns FN's result converted to
 * double (NaN for a void function). Accepted types: void, char, short,
 * int, long, long long (and unsigned forms), int8_t..uint64_t, size_t,
 * ssize_t, bool, float, double, and any pointer (a '*' anywhere).
 * lk_bind_n takes the number of entries of ARGS, N_ARGS, and refuses
 * (LK_EINVAL, naming both counts) a SIGNATURE that declares another
 * number of arguments; prefer it, or the LK_BIND macro, which counts the
 * arguments it is given. */
typedef struct lk_bound lk_bound;
LK_API int lk_bind_n(void (*fn)(void), const char *signature, size_t n_args,
                     const void *const *args, lk_bound **out);

/* LK_BIND(FN, SIGNATURE, OUT, &a, &b, ...): lk_bind_n with the addresses
 * given, counted at compile time, so that a call cannot give fewer values
 * than SIGNATURE declares without lk_bind_n saying so. FN is converted to
 * void (*)(void). With no argument at all, call
 * lk_bind_n(FN, SIGNATURE, 0, NULL, OUT). */
#define LK_BIND(fn, signature, out, ...)                                       \
  lk_bind_n((void (*)(void))(fn), (signature),                                 \
            sizeof((const void *[]){__VA_ARGS__}) / sizeof(const void *),      \
            (const void *const[]){__VA_ARGS__}, (out))

/* lk_bind: as lk_bind_n, trusting ARGS to hold as many entries as
 * SIGNATURE declares (it cannot tell: an array that is too short is read
 * past its end; a NULL entry is refused). Kept for the programs written
 * before lk_bind_n; the compiler warns about every use of it. */
LK_API int lk_bind(void (*fn)(void), const char *signature,
                   const void *const *args, lk_bound **out)
    LK_DEPRECATED("lk_bind cannot tell how many values ARGS holds: use "
                  "lk_bind_n or LK_BIND");
/* The closure of B, valid until lk_bound_free(B), which frees it (B may be
 * NULL). */
LK_API lk_closure_fn lk_bound_function(const lk_bound *b);
LK_API void lk_bound_free(lk_bound *b);

#ifdef __cplusplus
}
#endif
#endif
