/* liblbfgs: the L-BFGS of liblbfgs (Debian liblbfgs-dev) as a loopkit
 * optimizer, to show what turning an existing C optimizer into a plugin
 * takes: its evaluate callback runs loopkit's closure.
 *
 * One optimizer step is one call of lbfgs() from the current parameters,
 * as torch's LBFGS.step(closure) runs up to max_iter iterations. All
 * parameters (f64 or f32) are concatenated into liblbfgs's double vector;
 * the callback writes x back into them, runs the closure (zero_grad, step,
 * backward) and copies the gradients out. liblbfgs starts a new history at
 * every call, so nothing survives a step and a resumed run continues
 * exactly.
 *
 * The loop keeps the result of the closure's last call, so when liblbfgs
 * ends elsewhere than where it evaluated last (it reverts a failed line
 * search), the closure runs once more at the final point. A NaN from the
 * closure ends the step with the parameters put back where it started:
 * liblbfgs cannot be stopped from its evaluate callback, so the callbacks
 * after it return NaN at once, without calling the closure, until the line
 * search gives up or the progress callback cancels. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lbfgs.h>
#include <loopkit/loopkit.h>

#include "bundled.h"
#include "optim_common.h"

_Static_assert(sizeof(lbfgsfloatval_t) == sizeof(double),
               "liblbfgs must be built with LBFGS_FLOAT = 64");

typedef struct liblbfgs {
  lk_host *host;
  lbfgs_parameter_t param;
  size_t n, n_params;
  lbfgsfloatval_t *x; /* liblbfgs's variables (lbfgs_malloc: SSE builds) */
  double *x0;         /* the parameters where the step started */
  double *last_x;     /* where the closure ran last */
  double last_f;
  bool have_last, failed;
  long evals;
  int iters;
  lk_tensor *const *params; /* of the step under way */
  lk_closure_fn closure;
} liblbfgs;

/* ---- the glue ----------------------------------------------------------- */

static lbfgsfloatval_t evaluate(void *instance, const lbfgsfloatval_t *x,
                                lbfgsfloatval_t *g, const int n,
                                const lbfgsfloatval_t step) {
  liblbfgs *s = instance;
  (void)step;
  if (!s->failed) {
    optim_scatter(s->params, s->n_params, x);
    memcpy(s->last_x, x, (size_t)n * sizeof *x);
    s->have_last = true;
    s->evals++;
    s->last_f = s->closure();
    s->failed = isnan(s->last_f);
  }
  if (s->failed) { /* a zero gradient winds liblbfgs down */
    memset(g, 0, (size_t)n * sizeof *g);
    return NAN;
  }
  optim_gather(s->params, s->n_params, true, g);
  return s->last_f;
}

static int progress(void *instance, const lbfgsfloatval_t *x,
                    const lbfgsfloatval_t *g, const lbfgsfloatval_t fx,
                    const lbfgsfloatval_t xnorm, const lbfgsfloatval_t gnorm,
                    const lbfgsfloatval_t step, int n, int k, int ls) {
  liblbfgs *s = instance;
  (void)x, (void)g, (void)fx, (void)xnorm, (void)gnorm, (void)step, (void)n;
  (void)ls;
  s->iters = k;
  return s->failed; /* non-zero cancels */
}

/* liblbfgs has no strerror: its return codes, in its header's words.
 * *BENIGN: it stopped short of epsilon at a point no worse than where it
 * started (x is its last accepted iterate), which is no reason to fail. */
static const char *reason(int code, bool *benign) {
  *benign = true;
  switch (code) {
  case LBFGS_SUCCESS: return "converged: |g| <= epsilon * max(1, |x|)";
  case LBFGS_STOP:
    return "the loss improved by less than delta over past iterations";
  case LBFGS_ALREADY_MINIMIZED:
    return "the starting point already satisfies epsilon";
  case LBFGSERR_MAXIMUMITERATION:
    return "max_iterations reached before epsilon";
  case LBFGSERR_ROUNDING_ERROR:
    return "the line search found no step satisfying its conditions "
           "(rounding errors)";
  case LBFGSERR_MINIMUMSTEP:
    return "the line-search step became smaller than min_step";
  case LBFGSERR_MAXIMUMSTEP:
    return "the line-search step became larger than max_step";
  case LBFGSERR_MAXIMUMLINESEARCH:
    return "the line search used max_linesearch evaluations";
  case LBFGSERR_WIDTHTOOSMALL:
  case LBFGSERR_INCORRECT_TMINMAX:
    return "the line search's interval of uncertainty became too small";
  case LBFGSERR_OUTOFINTERVAL:
    return "the line-search step went out of the interval of uncertainty";
  case LBFGSERR_INCREASEGRADIENT:
    return "the search direction is not a descent direction";
  }
  *benign = false;
  switch (code) {
  case LBFGSERR_OUTOFMEMORY: return "out of memory";
  case LBFGSERR_INVALIDPARAMETERS:
    return "logic error (negative line-search step)";
  case LBFGSERR_INVALID_N_SSE:
  case LBFGSERR_INVALID_X_SSE:
    return "its SSE build refused the vector's size or alignment";
  default:
    return "error"; /* the rest are invalid parameters, checked at create */
  }
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  liblbfgs *s = self;
  int rc = optim_flat_check(s->host, "liblbfgs", params, n, closure,
                            s->n_params, s->n);
  if (rc != 0)
    return rc;

  s->params = params, s->closure = closure;
  s->have_last = s->failed = false, s->evals = 0, s->iters = 0;
  optim_gather(params, n, false, s->x0);
  memcpy(s->x, s->x0, s->n * sizeof *s->x);
  int ret = lbfgs((int)s->n, s->x, NULL, evaluate, progress, s, &s->param);

  /* The loop must see the closure's result at the point we leave. */
  if (!s->failed &&
      (!s->have_last || memcmp(s->x, s->last_x, s->n * sizeof *s->x) != 0)) {
    optim_scatter(params, n, s->x);
    s->evals++;
    s->failed = isnan(s->last_f = closure());
  }
  if (s->failed) {
    optim_scatter(params, n, s->x0);
    lk_log(s->host, LK_LOG_DEBUG,
           "step: NaN from the closure: parameters left where the step "
           "started");
    return 0;
  }
  bool benign;
  const char *why = reason(ret, &benign);
  if (!benign)
    return lk_fail(s->host, LK_EPLUGIN, "lbfgs() failed: %s (code %d)", why,
                   ret);
  lk_log(s->host, ret < 0 ? LK_LOG_WARN : LK_LOG_DEBUG,
         "step: %d iterations, %ld closure calls, loss %.17g: %s", s->iters,
         s->evals, s->last_f, why);
  return 0;
}

/* ---- create ------------------------------------------------------------- */

static const struct {
  const char *name;
  int id;
} linesearches[] = {
    {"morethuente", LBFGS_LINESEARCH_MORETHUENTE},
    {"backtracking_armijo", LBFGS_LINESEARCH_BACKTRACKING_ARMIJO},
    {"backtracking_wolfe", LBFGS_LINESEARCH_BACKTRACKING_WOLFE},
    {"backtracking_strong_wolfe", LBFGS_LINESEARCH_BACKTRACKING_STRONG_WOLFE}};

static void destroy(void *self) {
  liblbfgs *s = self;
  lbfgs_free(s->x);
  free(s->x0);
  free(s->last_x);
  free(s);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  lbfgs_parameter_t p;
  lbfgs_parameter_init(&p); /* min_step, max_step, xtol: its defaults */
  int rc;
  /* liblbfgs checks these in lbfgs(), at the first step (m not at all): the
   * host has checked them against their ranges before create. */
  p.m = (int)lk_opt_int(o, "m");
  p.past = (int)lk_opt_int(o, "past");
  p.max_iterations = (int)lk_opt_int(o, "max_iterations");
  p.max_linesearch = (int)lk_opt_int(o, "max_linesearch");
  p.epsilon = lk_opt_double(o, "epsilon");
  p.delta = lk_opt_double(o, "delta");
  p.ftol = lk_opt_double(o, "ftol");
  p.gtol = lk_opt_double(o, "gtol");
  p.wolfe = lk_opt_double(o, "wolfe");
  const char *ls = lk_opt_string(o, "linesearch");
  for (size_t i = 0; i < sizeof linesearches / sizeof *linesearches; i++)
    if (strcmp(ls, linesearches[i].name) == 0)
      p.linesearch = linesearches[i].id;
  if ((p.linesearch == LBFGS_LINESEARCH_BACKTRACKING_WOLFE ||
       p.linesearch == LBFGS_LINESEARCH_BACKTRACKING_STRONG_WOLFE) &&
      (p.wolfe <= p.ftol || p.wolfe >= 1))
    return lk_fail(host, LK_ECONFIG,
                   "option wolfe = %g: linesearch = %s needs ftol (%g) < "
                   "wolfe < 1",
                   p.wolfe, ls, p.ftol);

  size_t np, n;
  lk_tensor *const *params;
  if ((rc = optim_flat_params(host, &params, &np, &n)) != 0)
    return rc;
  if (n == 0 || n > INT_MAX)
    return lk_fail(host, LK_ECONFIG,
                   "%zu parameter elements: liblbfgs takes 1 to %d", n,
                   INT_MAX);

  liblbfgs *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host, s->param = p, s->n = n, s->n_params = np;
  s->x = lbfgs_malloc((int)n);
  s->x0 = malloc(n * sizeof *s->x0);
  s->last_x = malloc(n * sizeof *s->last_x);
  if (!s->x || !s->x0 || !s->last_x) {
    destroy(s);
    return lk_fail(host, LK_ENOMEM, "out of memory for %zu parameters", n);
  }
  *self = s;
  return 0;
}

/* liblbfgs's names; its defaults except max_iterations (0 = no limit). */
static const lk_option options[] = {
    {"m", LK_OPT_INT, "6", "correction pairs kept", "[1, 2147483647]"},
    {"epsilon", LK_OPT_DOUBLE, "1e-5",
     "stop when |g| < epsilon * max(1, |x|) (Euclidean norms)", "[0, inf)"},
    {"past", LK_OPT_INT, "0",
     "iterations over which delta is measured; 0: no delta test",
     "[0, 2147483647]"},
    {"delta", LK_OPT_DOUBLE, "1e-5",
     "stop when the loss improved by a fraction < delta over past "
     "iterations",
     "[0, inf)"},
    {"max_iterations", LK_OPT_INT, "100",
     "iterations per optimizer step; 0: until a stopping test holds",
     "[0, 2147483647]"},
    {"linesearch", LK_OPT_ENUM, "morethuente", "line search algorithm",
     "morethuente|backtracking_armijo|backtracking_wolfe|"
     "backtracking_strong_wolfe"},
    {"max_linesearch", LK_OPT_INT, "40", "evaluations per line search",
     "[1, 2147483647]"},
    {"ftol", LK_OPT_DOUBLE, "1e-4",
     "sufficient decrease (Armijo) coefficient (liblbfgs advises < 0.5)",
     "[0, inf)"},
    {"wolfe", LK_OPT_DOUBLE, "0.9",
     "curvature coefficient of the backtracking Wolfe searches, in "
     "(ftol, 1)",
     "[0, inf)"},
    {"gtol", LK_OPT_DOUBLE, "0.9",
     "curvature coefficient of More-Thuente's search (liblbfgs advises "
     "ftol < gtol < 1)",
     "[0, inf)"},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_OPTIMIZER("liblbfgs",
                      "liblbfgs's L-BFGS (More-Thuente or backtracking line "
                      "search); one step runs up to max_iterations",
                      destroy, NULL, .step = step);
