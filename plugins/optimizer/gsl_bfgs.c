/* gsl_bfgs: GSL's multimin BFGS (gsl_multimin_fdfminimizer_vector_bfgs2,
 * Fletcher's algorithm with his line search; Debian libgsl-dev) as a
 * loopkit optimizer: GSL's function callbacks run loopkit's closure.
 *
 * One optimizer step sets the minimizer at the current parameters and
 * iterates it until |g| < epsabs or max_iterations, as torch's
 * LBFGS.step(closure) runs up to max_iter iterations. All parameters (f64
 * or f32) are concatenated into GSL's double vector; an evaluation writes
 * x back into them, runs the closure (zero_grad, step, backward) and
 * copies the gradients out. GSL asks for f and for its gradient in
 * separate calls at the same point, so the last evaluation is cached and
 * the closure runs once per point. The minimizer starts afresh at every
 * step, so nothing survives one and a resumed run continues exactly.
 *
 * The loop keeps the result of the closure's last call, so when GSL ends
 * elsewhere than where it evaluated last, the closure runs once more at the
 * final point. A NaN from the closure ends the step with the parameters
 * put back where it started; the evaluations GSL still asks for before its
 * iteration returns give NaN and a zero gradient without calling the
 * closure. */
#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multimin.h>
#include <loopkit/loopkit.h>

#include "bundled.h"
#include "optim_common.h"

typedef struct gsl_bfgs {
  lk_host *host;
  size_t n, n_params;
  double step_size, tol, epsabs;
  int64_t max_iterations;
  gsl_multimin_fdfminimizer *m;
  gsl_vector *x0;     /* the parameters where the step started */
  gsl_vector *last_x; /* where the closure ran last, */
  gsl_vector *last_g; /* the gradient it gave */
  double last_f;      /* and the loss */
  bool have_last, failed;
  long evals;
  lk_tensor *const *params; /* of the step under way */
  lk_closure_fn closure;
} gsl_bfgs;

/* ---- the glue ----------------------------------------------------------- */

/* The loss at X, and its gradient into G unless G is NULL. */
static double evaluate(gsl_bfgs *s, const gsl_vector *x, gsl_vector *g) {
  if (!s->failed && !(s->have_last && gsl_vector_equal(x, s->last_x))) {
    /* Through last_x: GSL's X may have a stride, our vectors have none. */
    gsl_vector_memcpy(s->last_x, x);
    optim_scatter(s->params, s->n_params, s->last_x->data);
    s->have_last = true;
    s->evals++;
    s->last_f = s->closure();
    s->failed = isnan(s->last_f);
    if (!s->failed)
      optim_gather(s->params, s->n_params, true, s->last_g->data);
  }
  if (s->failed) { /* a zero gradient ends GSL's line search at once */
    if (g)
      gsl_vector_set_zero(g);
    return NAN;
  }
  if (g)
    gsl_vector_memcpy(g, s->last_g);
  return s->last_f;
}

static double f_cb(const gsl_vector *x, void *self) {
  return evaluate(self, x, NULL);
}

static void df_cb(const gsl_vector *x, void *self, gsl_vector *g) {
  evaluate(self, x, g);
}

static void fdf_cb(const gsl_vector *x, void *self, double *f, gsl_vector *g) {
  *f = evaluate(self, x, g);
}

/* GSL reports errors to a process-wide handler whose default aborts, which
 * a plugin must never do: while GSL runs, ours keeps the reason (a string
 * literal in GSL) and GSL's function returns the error code. */
static _Thread_local const char *gsl_reason;

static void on_gsl_error(const char *reason, const char *file, int line,
                         int code) {
  (void)file, (void)line, (void)code;
  gsl_reason = reason;
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  gsl_bfgs *s = self;
  int rc = optim_flat_check(s->host, "gsl_bfgs", params, n, closure,
                            s->n_params, s->n);
  if (rc != 0)
    return rc;

  s->params = params, s->closure = closure;
  s->have_last = s->failed = false, s->evals = 0;
  optim_gather(params, n, false, s->x0->data);
  gsl_multimin_function_fdf fn = {f_cb, df_cb, fdf_cb, s->n, s};
  gsl_error_handler_t *prev = gsl_set_error_handler(on_gsl_error);
  gsl_reason = NULL;
  int status =
      gsl_multimin_fdfminimizer_set(s->m, &fn, s->x0, s->step_size, s->tol);
  int64_t it = 0;
  bool converged = false;
  while (status == GSL_SUCCESS && !s->failed) {
    const gsl_vector *g = gsl_multimin_fdfminimizer_gradient(s->m);
    if ((converged = gsl_multimin_test_gradient(g, s->epsabs) == GSL_SUCCESS))
      break;
    if (s->max_iterations && it == s->max_iterations)
      break;
    status = gsl_multimin_fdfminimizer_iterate(s->m);
    it++;
  }
  gsl_set_error_handler(prev);

  /* The loop must see the closure's result at the point we leave. */
  const gsl_vector *x = gsl_multimin_fdfminimizer_x(s->m);
  if (!s->failed && (status == GSL_SUCCESS || status == GSL_ENOPROG))
    evaluate(s, x, NULL); /* the closure runs (and x goes into the
                             parameters) only if x is new */
  if (s->failed) {
    optim_scatter(params, n, s->x0->data);
    lk_log(s->host, LK_LOG_DEBUG,
           "step: NaN from the closure: parameters left where the step "
           "started");
    return 0;
  }
  if (status != GSL_SUCCESS && status != GSL_ENOPROG) {
    optim_scatter(params, n, s->x0->data);
    return lk_fail(s->host, LK_EPLUGIN, "GSL's %s failed: %s (%s)",
                   gsl_multimin_fdfminimizer_name(s->m),
                   gsl_reason ? gsl_reason : "no reason given",
                   gsl_strerror(status));
  }
  /* GSL_ENOPROG: its line search gives up once the decrease it predicts
   * is below DBL_EPSILON, in absolute terms, at a point no worse than the
   * step's start; not a reason to fail the run. */
  const char *why = converged               ? "converged: |g| < epsabs"
                    : status == GSL_ENOPROG ? gsl_strerror(status)
                                            : "max_iterations reached";
  lk_log(s->host, converged ? LK_LOG_DEBUG : LK_LOG_WARN,
         "step: %lld iterations, %ld closure calls, loss %.17g, |g| %.3g: %s",
         (long long)it, s->evals, s->last_f,
         gsl_blas_dnrm2(gsl_multimin_fdfminimizer_gradient(s->m)), why);
  return 0;
}

/* ---- create ------------------------------------------------------------- */

static void destroy(void *self) {
  gsl_bfgs *s = self;
  if (s->m)
    gsl_multimin_fdfminimizer_free(s->m);
  if (s->x0)
    gsl_vector_free(s->x0);
  if (s->last_x)
    gsl_vector_free(s->last_x);
  if (s->last_g)
    gsl_vector_free(s->last_g);
  free(s);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  double step_size = lk_opt_double(o, "step_size");
  double tol = lk_opt_double(o, "tol"), epsabs = lk_opt_double(o, "epsabs");
  int64_t max_iterations = lk_opt_int(o, "max_iterations");
  size_t np, n;
  lk_tensor *const *params;
  int rc = optim_flat_params(host, &params, &np, &n);
  if (rc != 0)
    return rc;
  if (n == 0)
    return lk_fail(host, LK_ECONFIG, "the parameters have no elements");

  gsl_bfgs *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host, s->n = n, s->n_params = np;
  s->step_size = step_size, s->tol = tol, s->epsabs = epsabs;
  s->max_iterations = max_iterations;
  gsl_error_handler_t *prev = gsl_set_error_handler(on_gsl_error);
  s->m = gsl_multimin_fdfminimizer_alloc(gsl_multimin_fdfminimizer_vector_bfgs2,
                                         n);
  s->x0 = gsl_vector_alloc(n);
  s->last_x = gsl_vector_alloc(n);
  s->last_g = gsl_vector_alloc(n);
  gsl_set_error_handler(prev);
  if (!s->m || !s->x0 || !s->last_x || !s->last_g) {
    destroy(s);
    return lk_fail(host, LK_ENOMEM, "out of memory for %zu parameters", n);
  }
  *self = s;
  return 0;
}

/* gsl_multimin_fdfminimizer_set's arguments and gsl_multimin_test_gradient's
 * epsabs, with the values GSL's manual uses for BFGS. */
static const lk_option options[] = {
    {"step_size", LK_OPT_DOUBLE, "0.01", "length of the first trial step",
     "(0, inf)"},
    {"tol", LK_OPT_DOUBLE, "0.1",
     "line search accuracy: stop when |g.p| <= tol |g0.p| (0.1 is "
     "Fletcher's choice)",
     "(0, 1)"},
    {"epsabs", LK_OPT_DOUBLE, "1e-5", "stop when |g| < epsabs (Euclidean)",
     "[0, inf)"},
    {"max_iterations", LK_OPT_INT, "100",
     "iterations per optimizer step; 0: until |g| < epsabs", "[0, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_OPTIMIZER("gsl_bfgs",
                      "GSL's multimin BFGS (vector_bfgs2); one step runs up to "
                      "max_iterations",
                      destroy, NULL, .step = step);
