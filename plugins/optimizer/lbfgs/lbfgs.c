/* lbfgs: limited-memory BFGS, as torch.optim.LBFGS 1.13, with its option
 * names and real defaults (tolerance_grad 1e-7, not the docstring's 1e-5),
 * its fixed-step and strong-Wolfe modes and its evaluation counting.
 *
 * One step is torch's optimizer.step(closure): up to max_iter iterations
 * over all parameters flattened into one vector (_gather_flat_grad), each
 * calling the closure once (fixed step) or as often as the line search
 * needs. The iterates match torch's to the last bit, which takes:
 *  - the dot products of the reference BLAS torch is linked with here
 *    (BLAS_INFO=generic: a sequential sum, measured for n up to 1e5: every
 *    `acc +=` below is one, in index order, fused with the loop that
 *    produces its operand), and
 *    the cascade sum of Tensor.sum (lanes of 4 doubles or 8 floats);
 *  - fma() where torch's add_(x, alpha=a) fuses, nothing fused elsewhere
 *    (the file must be compiled with -ffp-contract=off);
 *  - Python's types: torch's line search mixes Python floats with 0-d
 *    tensors, and "float / tensor" is computed as tensor.reciprocal() *
 *    float, while an f32 tensor rounds every operation and comparison it
 *    takes part in to float. Scalars therefore carry a flag saying which of
 *    the two they are (num below).
 *
 * Everything that survives a step is host state (a resumed run continues
 * exactly): the direction d and step t, the history as two ring buffers of
 * history_size x N in the parameters' dtype, ro, H_diag, prev_flat_grad,
 * prev_loss and the counters. With the default history_size of 100 that is
 * 200 N values: 160 MB for N = 100000 in f64, written to every checkpoint.
 *
 * A NaN from the step's first closure call returns at once without touching
 * the parameters. A NaN from a later call (the closure failed, or the loss
 * stopped being finite) ends the step too, with the parameters put back to
 * where that iteration started them; torch would carry on with NaN.
 *
 * Each step says at debug level how many iterations and closure calls it
 * made (bench/lbfgs reads it); nothing is formatted unless the host logs
 * debug messages. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#include "optim_common.h"

/* torch's _strong_wolfe constants: LBFGS.step passes none of them, so its
 * line search uses tolerance_change = 1e-9 whatever the option says. */
#define C1 1e-4
#define C2 0.9
#define LS_TOLERANCE_CHANGE 1e-9
#define MAX_LS 25
#define POOL 4 /* gradient buffers the line search keeps alive at once */

typedef struct lbfgs {
  lk_host *host;
  bool f32;     /* every parameter is f32 (else all are f64) */
  bool hw;      /* the kernels compiled for the fma instruction */
  size_t esize; /* bytes per element */
  size_t n;     /* flattened size */
  size_t n_params;
  int64_t max_iter, max_eval, history_size;
  double tolerance_grad, tolerance_change;
  bool wolfe;

  /* host state */
  lk_tensor *lr, *d, *t, *old_dirs, *old_stps, *ro, *h_diag, *prev_flat_grad,
      *prev_loss, *n_iter, *func_evals;
  lk_tensor *ring; /* [2]: pairs held, slot of the oldest */

  /* scratch */
  void *pool[POOL];      /* flat gradients */
  double pool_max[POOL]; /* max |g| of each, taken when it was gathered */
  void *x0;              /* the parameters where the iteration started */
  double *al;            /* the two-loop's alphas */
  int64_t *slot;         /* the two-loop's ring slots, oldest first */
  lk_tensor *const *params;
} lbfgs;

/* ---- scalars as torch sees them --------------------------------------- */

/* A Python float (ts false) or a 0-d tensor of the parameters' dtype. */
typedef struct num {
  double v;
  bool ts;
} num;

static num F(double v) {
  return (num){v, false};
}

static num T(double v) {
  return (num){v, true};
}

/* To the parameters' precision (the identity in f64). */
static inline double rnd(bool f32, double x) {
  return f32 ? (double)(float)x : x;
}

/* With a tensor involved, both operands are converted to its dtype and the
 * result rounded to it; for floats (and f32 values, whose sums, products
 * and quotients are exact or innocuously double-rounded in double) this
 * equals the float operation. */
static inline num add(bool f32, num a, num b) {
  if (a.ts || b.ts)
    return T(rnd(f32, rnd(f32, a.v) + rnd(f32, b.v)));
  return F(a.v + b.v);
}

static inline num sub(bool f32, num a, num b) {
  if (a.ts || b.ts)
    return T(rnd(f32, rnd(f32, a.v) - rnd(f32, b.v)));
  return F(a.v - b.v);
}

static inline num mul(bool f32, num a, num b) {
  if (a.ts || b.ts)
    return T(rnd(f32, rnd(f32, a.v) * rnd(f32, b.v)));
  return F(a.v * b.v);
}

/* float / tensor is Tensor.__rtruediv__: b.reciprocal() * a. */
static inline num divide(bool f32, num a, num b) {
  if (b.ts && !a.ts)
    return T(rnd(f32, rnd(f32, 1.0 / rnd(f32, b.v)) * rnd(f32, a.v)));
  if (a.ts)
    return T(rnd(f32, a.v / rnd(f32, b.v)));
  return F(a.v / b.v);
}

static num absn(num a) {
  return (num){fabs(a.v), a.ts};
}

static inline bool lt(bool f32, num a, num b) {
  return a.ts || b.ts ? rnd(f32, a.v) < rnd(f32, b.v) : a.v < b.v;
}

static inline bool le(bool f32, num a, num b) {
  return a.ts || b.ts ? rnd(f32, a.v) <= rnd(f32, b.v) : a.v <= b.v;
}

/* Python's max(a, b) and min(a, b): the first unless the second wins. */
static inline num pymax(bool f32, num a, num b) {
  return lt(f32, a, b) ? b : a;
}

static inline num pymin(bool f32, num a, num b) {
  return lt(f32, b, a) ? b : a;
}

/* ---- vector kernels, in the parameters' precision ----------------------- */

/* Python's max over |v| as torch computes it: NaN wins. */
#define MAXABS(m, v)                                                           \
  do {                                                                         \
    double a_ = fabs((double)(v));                                             \
    if (a_ > (m) || a_ != a_)                                                  \
      (m) = (m) != (m) ? (m) : a_;                                             \
  } while (0)

/* The kernels, one copy per variant: lbfgs_kernels.h. */

/* fma() is a call into libm unless the compiler may use the instruction:
 * where the CPU has it, the same kernels compiled for it (same results,
 * fma being exact either way) run instead, chosen once at create. */
#if (defined(__x86_64__) || defined(__i386__)) &&                              \
    (defined(__GNUC__) || defined(__clang__))
#define HW_FMA __attribute__((target("fma")))
static bool cpu_has_fma(void) {
  static int has = -1; /* asked once: libgcc's probe is slow */
  if (has < 0) {
    __builtin_cpu_init();
    has = __builtin_cpu_supports("fma") != 0;
  }
  return has;
}
#else
#define HW_FMA
static bool cpu_has_fma(void) {
  return false;
}
#endif

#define LB_F32 0 /* f64 */
#define LB_SFX f64
#include "lbfgs_kernels.h"
#define LB_F32 1 /* f32 */
#define LB_SFX f32
#include "lbfgs_kernels.h"
#define LB_F32 0 /* f64 with the fma instruction */
#define LB_SFX f64_hw
#define LB_ATTR HW_FMA
#include "lbfgs_kernels.h"
#define LB_F32 1 /* f32 with it */
#define LB_SFX f32_hw
#define LB_ATTR HW_FMA
#include "bundled.h"
#include "lbfgs_kernels.h"

#define CALL(v, name, ...)                                                     \
  ((v) == 3   ? name##_f32_hw(__VA_ARGS__)                                     \
   : (v) == 2 ? name##_f32(__VA_ARGS__)                                        \
   : (v) == 1 ? name##_f64_hw(__VA_ARGS__)                                     \
              : name##_f64(__VA_ARGS__))

/* The step is compiled once per variant (f64, f32, each with and without
 * the fma instruction) so that the precision is a constant and the kernels
 * inline: torch's scalar logic costs more than the vectors at small N. */
#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE static inline
#endif

static void *row(const lbfgs *s, const lk_tensor *ring, int64_t slot) {
  return (char *)ring->data + (size_t)slot * s->n * s->esize;
}

static double *st(lk_tensor *t) {
  return t->data;
}

/* ---- create ------------------------------------------------------------- */

static void destroy(void *self) {
  lbfgs *s = self;
  for (size_t i = 0; i < POOL; i++)
    free(s->pool[i]);
  free(s->x0);
  free(s->al);
  free(s->slot);
  free(s);
}

/* A checkpoint's values. The ring's two numbers index the history: pairs
 * held in [0, history_size], the oldest's slot in [0, history_size), and
 * 0 until the ring is full (the order this plugin fills it in). */
static int check_state(void *self) {
  lbfgs *s = self;
  double h = (double)s->history_size;
  int rc = lk_state_check(s->host, s->lr, 0, DBL_MAX, false);
  if (rc == 0)
    rc = lk_state_check(s->host, s->n_iter, 0, LK_STATE_MAX_COUNT, true);
  if (rc == 0)
    rc = lk_state_check(s->host, s->func_evals, 0, LK_STATE_MAX_COUNT, true);
  if (rc != 0)
    return rc;
  const double *ring = s->ring->data;
  if (!(ring[0] >= 0 && ring[0] <= h && ring[0] == floor(ring[0])) ||
      !(ring[1] >= 0 && ring[1] < h && ring[1] == floor(ring[1])) ||
      (ring[0] < h && ring[1] != 0))
    return lk_fail(s->host, LK_EFORMAT,
                   "state %s = [%.17g, %.17g]: expected the pairs held (0 to "
                   "history_size = %lld) and the oldest's slot (0 to %lld, 0 "
                   "until all are held)",
                   s->ring->name, ring[0], ring[1], (long long)s->history_size,
                   (long long)s->history_size - 1);
  return 0;
}

static int add_state(lbfgs *s, const char *name, lk_dtype dtype, size_t rows,
                     size_t cols, lk_tensor **out) {
  size_t shape[2] = {rows, cols};
  return rows ? lk_host_add_state(s->host, name, dtype, 2, shape, out)
              : lk_host_add_state(s->host, name, dtype, 1, &shape[1], out);
}

static int create(lk_host *host, const lk_options *o, void **self) {
  double lr = lk_opt_double(o, "lr");
  int64_t max_iter = lk_opt_int(o, "max_iter");
  int64_t max_eval = lk_opt_int(o, "max_eval");
  int64_t history = lk_opt_int(o, "history_size");
  double tol_grad = lk_opt_double(o, "tolerance_grad");
  double tol_change = lk_opt_double(o, "tolerance_change");
  int rc;

  size_t np = 0, n = 0;
  lk_tensor *const *params;
  if ((rc = optim_params(host, &params, &np)) != 0)
    return rc;
  for (size_t i = 0; i < np; i++) {
    if (params[i]->dtype != params[0]->dtype)
      return lk_fail(host, LK_ECONFIG,
                     "parameters %s (%s) and %s (%s): L-BFGS flattens all "
                     "parameters into one vector and needs one dtype",
                     params[0]->name, lk_dtype_name(params[0]->dtype),
                     params[i]->name, lk_dtype_name(params[i]->dtype));
    n += params[i]->numel;
  }
  if (n == 0)
    return lk_fail(host, LK_ECONFIG, "the parameters have no elements");
  size_t bytes; /* the history's two [history_size, n] states */
  if ((uint64_t)history > SIZE_MAX ||
      !lk_size_mul((size_t)history, n, &bytes) ||
      !lk_size_mul(bytes, 2 * sizeof(double), &bytes))
    return lk_fail(host, LK_ECONFIG,
                   "option history_size = %lld: history_size x %zu "
                   "parameters is too large",
                   (long long)history, n);

  lbfgs *s = calloc(1, sizeof *s);
  if (!s)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  s->host = host;
  s->f32 = params[0]->dtype == LK_F32;
  s->hw = cpu_has_fma();
  s->esize = lk_dtype_size(params[0]->dtype);
  s->n = n;
  s->n_params = np;
  s->max_iter = max_iter;
  s->max_eval = max_eval ? max_eval : max_iter * 5 / 4;
  s->history_size = history;
  s->tolerance_grad = tol_grad;
  s->tolerance_change = tol_change;
  s->wolfe = strcmp(lk_opt_string(o, "line_search_fn"), "strong_wolfe") == 0;

  lk_dtype dt = params[0]->dtype;
  size_t h = (size_t)history;
  if ((rc = add_state(s, "lr", LK_F64, 0, 1, &s->lr)) != 0 ||
      (rc = add_state(s, "d", dt, 0, n, &s->d)) != 0 ||
      (rc = add_state(s, "t", LK_F64, 0, 1, &s->t)) != 0 ||
      (rc = add_state(s, "old_dirs", dt, h, n, &s->old_dirs)) != 0 ||
      (rc = add_state(s, "old_stps", dt, h, n, &s->old_stps)) != 0 ||
      (rc = add_state(s, "ro", LK_F64, 0, h, &s->ro)) != 0 ||
      (rc = add_state(s, "H_diag", LK_F64, 0, 1, &s->h_diag)) != 0 ||
      (rc = add_state(s, "prev_flat_grad", dt, 0, n, &s->prev_flat_grad)) !=
          0 ||
      (rc = add_state(s, "prev_loss", LK_F64, 0, 1, &s->prev_loss)) != 0 ||
      (rc = add_state(s, "n_iter", LK_F64, 0, 1, &s->n_iter)) != 0 ||
      (rc = add_state(s, "func_evals", LK_F64, 0, 1, &s->func_evals)) != 0 ||
      (rc = add_state(s, "history", LK_F64, 0, 2, &s->ring)) != 0) {
    destroy(s);
    return rc;
  }
  st(s->lr)[0] = lr;
  st(s->h_diag)[0] = 1;

  for (size_t i = 0; i < POOL; i++)
    if (!(s->pool[i] = malloc(n * s->esize)))
      break;
  s->x0 = malloc(n * s->esize);
  s->al = malloc(h * sizeof *s->al);
  s->slot = malloc(h * sizeof *s->slot);
  if (!s->pool[POOL - 1] || !s->x0 || !s->al || !s->slot) {
    destroy(s);
    return lk_fail(host, LK_ENOMEM, "out of memory for %zu parameters", n);
  }
  *self = s;
  return 0;
}

/* ---- evaluations -------------------------------------------------------- */

/* A pool buffer that none of LIVE[0..n) is. */
static int free_buffer(const int *live, int n) {
  for (int b = 0; b < POOL; b++) {
    bool used = false;
    for (int i = 0; i < n; i++)
      used |= live[i] == b;
    if (!used)
      return b;
  }
  return -1; /* not reached: at most POOL - 1 are ever alive */
}

static void save_params(lbfgs *s) {
  for (size_t i = 0, off = 0; i < s->n_params; i++) {
    size_t bytes = s->params[i]->numel * s->esize;
    memcpy((char *)s->x0 + off, s->params[i]->data, bytes);
    off += bytes;
  }
}

static void restore_params(lbfgs *s) {
  for (size_t i = 0, off = 0; i < s->n_params; i++) {
    size_t bytes = s->params[i]->numel * s->esize;
    memcpy(s->params[i]->data, (char *)s->x0 + off, bytes);
    off += bytes;
  }
}

/* The closure at x0 + t d (torch's _directional_evaluate): the loss, the
 * gradient gathered into pool buffer BUF, and g . d in *gtd. */
ALWAYS_INLINE double directional(lbfgs *s, int v, lk_closure_fn closure, num t,
                                 int buf, num *gtd) {
  CALL(v, move, s, t.v, s->d->data, s->x0);
  double loss = closure();
  double gd = 0;
  s->pool_max[buf] = CALL(v, gather, s, s->pool[buf], s->d->data, &gd);
  *gtd = T(gd);
  return loss;
}

/* torch's _cubic_interpolate, bounds (lo, hi) if BOUNDED. */
ALWAYS_INLINE num cubic(bool f32, num x1, double f1, num g1, num x2, double f2,
                        num g2, bool bounded, num lo, num hi) {
  num xmin = lo, xmax = hi;
  if (!bounded) {
    bool ordered = le(f32, x1, x2);
    xmin = ordered ? x1 : x2;
    xmax = ordered ? x2 : x1;
  }
  num d1 = sub(f32, add(f32, g1, g2),
               divide(f32, mul(f32, F(3), F(f1 - f2)), sub(f32, x1, x2)));
  num d2_square = sub(f32, mul(f32, d1, d1), mul(f32, g1, g2));
  if (!le(f32, F(0), d2_square))
    return divide(f32, add(f32, xmin, xmax), F(2.));
  num d2 = T(rnd(f32, sqrt(d2_square.v)));
  num min_pos;
  if (le(f32, x1, x2))
    min_pos = sub(f32, x2,
                  mul(f32, sub(f32, x2, x1),
                      divide(f32, sub(f32, add(f32, g2, d2), d1),
                             add(f32, sub(f32, g2, g1), mul(f32, F(2), d2)))));
  else
    min_pos = sub(f32, x1,
                  mul(f32, sub(f32, x1, x2),
                      divide(f32, sub(f32, add(f32, g1, d2), d1),
                             add(f32, sub(f32, g1, g2), mul(f32, F(2), d2)))));
  return pymin(f32, pymax(f32, min_pos, xmin), xmax);
}

/* torch's _strong_wolfe as it goes: where it started (loss f, gradient in
 * pool buffer g, directional derivative gtd), the step t it tries, its
 * bracket (len points: step, loss, gradient buffer, derivative), and its
 * counts. */
typedef struct line_search {
  lk_closure_fn closure;
  double f;
  int g;
  num gtd, t;
  num b[2], b_gtd[2];
  double b_f[2];
  int b_g[2];
  size_t len;
  bool done;     /* b[0] satisfies the strong Wolfe conditions */
  int iter;      /* torch's ls_iter */
  int64_t evals; /* closure calls */
  int live[3];   /* the buffers the search still needs */
} line_search;

/* The bracket's two points: (T0, F0, G0, GTD0) and (T1, F1, G1, GTD1). */
static void ls_bracket2(line_search *ls, num t0, double f0, int g0, num gtd0,
                        num t1, double f1, int g1, num gtd1) {
  ls->b[0] = t0, ls->b_f[0] = f0, ls->b_g[0] = g0, ls->b_gtd[0] = gtd0;
  ls->b[1] = t1, ls->b_f[1] = f1, ls->b_g[1] = g1, ls->b_gtd[1] = gtd1;
  ls->len = 2;
}

/* torch's _strong_wolfe up to its zoom: steps that grow from ls->t until a
 * bracket holds an acceptable one (or one is: ls->done). False if the
 * closure gave NaN. */
ALWAYS_INLINE bool ls_bracket(lbfgs *s, int v, line_search *ls) {
  const bool f32 = v >= 2;
  num c1t_gtd, gtd_new, gtd = ls->gtd;
  int g_new = free_buffer(ls->live, 1);
  double f_new = directional(s, v, ls->closure, ls->t, g_new, &gtd_new);
  ls->evals = 1;
  if (isnan(f_new))
    return false;

  num t_prev = F(0), gtd_prev = gtd;
  double f_prev = ls->f;
  int g_prev = ls->g;
  while (ls->iter < MAX_LS) {
    c1t_gtd = add(f32, F(ls->f), mul(f32, mul(f32, F(C1), ls->t), gtd));
    /* torch's three tests, in its order: the first and last bracket */
    bool over = lt(f32, c1t_gtd, F(f_new)) || (ls->iter > 1 && f_new >= f_prev);
    if (!over && le(f32, absn(gtd_new), mul(f32, F(-C2), gtd))) {
      ls->b[0] = ls->t, ls->b_f[0] = f_new, ls->b_g[0] = g_new, ls->len = 1;
      ls->done = true;
      return true;
    }
    if (over || le(f32, F(0), gtd_new)) {
      ls_bracket2(ls, t_prev, f_prev, g_prev, gtd_prev, ls->t, f_new, g_new,
                  gtd_new);
      return true;
    }
    num min_step = add(f32, ls->t, mul(f32, F(0.01), sub(f32, ls->t, t_prev)));
    num max_step = mul(f32, ls->t, F(10));
    num tmp = ls->t;
    ls->t = cubic(f32, t_prev, f_prev, gtd_prev, ls->t, f_new, gtd_new, true,
                  min_step, max_step);
    t_prev = tmp;
    f_prev = f_new;
    g_prev = g_new;
    gtd_prev = gtd_new;
    ls->live[1] = g_prev;
    g_new = free_buffer(ls->live, 2);
    f_new = directional(s, v, ls->closure, ls->t, g_new, &gtd_new);
    ++ls->evals;
    if (isnan(f_new))
      return false;
    ls->iter++;
  }
  /* out of iterations: the bracket is the start and the last step */
  ls_bracket2(ls, F(0), ls->f, ls->g, gtd, ls->t, f_new, g_new, gtd);
  return true;
}

/* torch's zoom: the bracket shrinks around an acceptable step, which
 * becomes ls->t, ls->f and ls->g. False if the closure gave NaN. */
ALWAYS_INLINE bool ls_zoom(lbfgs *s, int v, line_search *ls) {
  const bool f32 = v >= 2;
  num d_norm = T(CALL(v, maxabs, s->d->data, s->n)), gtd = ls->gtd;
  num *b = ls->b, *b_gtd = ls->b_gtd, c1t_gtd, gtd_new;
  double *b_f = ls->b_f, f_new;
  int *b_g = ls->b_g, g_new;
  bool insuf_progress = false;
  int low = b_f[0] <= b_f[ls->len - 1] ? 0 : 1, high = 1 - low;
  while (!ls->done && ls->iter < MAX_LS) {
    if (lt(f32, mul(f32, absn(sub(f32, b[1], b[0])), d_norm),
           F(LS_TOLERANCE_CHANGE)))
      break;
    ls->t = cubic(f32, b[0], b_f[0], b_gtd[0], b[1], b_f[1], b_gtd[1], false,
                  F(0), F(0));
    num bmax = pymax(f32, b[0], b[1]), bmin = pymin(f32, b[0], b[1]);
    num eps = mul(f32, F(0.1), sub(f32, bmax, bmin));
    if (lt(f32, pymin(f32, sub(f32, bmax, ls->t), sub(f32, ls->t, bmin)),
           eps)) {
      if (insuf_progress || le(f32, bmax, ls->t) || le(f32, ls->t, bmin)) {
        if (lt(f32, absn(sub(f32, ls->t, bmax)), absn(sub(f32, ls->t, bmin))))
          ls->t = sub(f32, bmax, eps);
        else
          ls->t = add(f32, bmin, eps);
        insuf_progress = false;
      } else {
        insuf_progress = true;
      }
    } else {
      insuf_progress = false;
    }
    ls->live[1] = b_g[0];
    ls->live[2] = b_g[1];
    g_new = free_buffer(ls->live, 3);
    f_new = directional(s, v, ls->closure, ls->t, g_new, &gtd_new);
    ++ls->evals;
    if (isnan(f_new))
      return false;
    ls->iter++;

    c1t_gtd = add(f32, F(ls->f), mul(f32, mul(f32, F(C1), ls->t), gtd));
    if (lt(f32, c1t_gtd, F(f_new)) || f_new >= b_f[low]) {
      b[high] = ls->t, b_f[high] = f_new, b_g[high] = g_new;
      b_gtd[high] = gtd_new;
      low = b_f[0] <= b_f[1] ? 0 : 1;
      high = 1 - low;
    } else {
      if (le(f32, absn(gtd_new), mul(f32, F(-C2), gtd)))
        ls->done = true;
      else if (le(f32, F(0), mul(f32, gtd_new, sub(f32, b[high], b[low])))) {
        b[high] = b[low], b_f[high] = b_f[low], b_g[high] = b_g[low];
        b_gtd[high] = b_gtd[low];
      }
      b[low] = ls->t, b_f[low] = f_new, b_g[low] = g_new, b_gtd[low] = gtd_new;
    }
  }
  ls->t = b[low];
  ls->f = b_f[low];
  ls->g = b_g[low];
  return true;
}

/* torch's _strong_wolfe from x0 along d, starting at step *t, with loss f,
 * gradient in pool buffer *g and directional derivative gtd. On return *t,
 * *f and *g are the point chosen; *evals counts the closure calls. Returns
 * false if the closure gave NaN (*t: the step it gave it at). */
ALWAYS_INLINE bool strong_wolfe(lbfgs *s, int v, lk_closure_fn closure, num *t,
                                double *f, int *g, num gtd, int64_t *evals) {
  line_search ls = {.closure = closure,
                    .f = *f,
                    .g = *g,
                    .gtd = gtd,
                    .t = *t,
                    .b_gtd = {gtd, gtd},
                    .live = {*g, *g, *g}};
  bool ok = ls_bracket(s, v, &ls) && ls_zoom(s, v, &ls);
  *evals = ls.evals;
  *t = ls.t;
  if (ok) {
    *f = ls.f;
    *g = ls.g;
  }
  return ok;
}

/* ---- the step ----------------------------------------------------------- */

/* The L-BFGS direction into d (torch's two-loop recursion, "collapsed to
 * use just one buffer"), each update fused with the dot product after it;
 * returns g . d. */
ALWAYS_INLINE double direction(lbfgs *s, int v, const void *g) {
  const bool f32 = v >= 2;
  int64_t held = (int64_t)st(s->ring)[0], head = (int64_t)st(s->ring)[1];
  int64_t h = s->history_size;
  const double *ro = st(s->ro);
  void *d = s->d->data;
  num h_diag = T(st(s->h_diag)[0]);
  if (held == 0) { /* d = (-g) * H_diag */
    CALL(v, start, d, g, g, s->n);
    return CALL(v, turn, d, 0, NULL, h_diag.v, g, s->n);
  }
  /* ring slot of the i-th oldest pair, without a division per use */
  for (int64_t i = 0, slot = head; i < held;
       i++, slot = slot + 1 < h ? slot + 1 : 0)
    s->slot[i] = slot;
#define SLOT(i) (s->slot[i])
  /* q = -g, then from the newest pair to the oldest: al[i] = s_i . q * ro_i,
   * q -= al[i] y_i; r = q * H_diag. */
  double acc = CALL(v, start, d, g, row(s, s->old_stps, SLOT(held - 1)), s->n);
  for (int64_t i = held - 1; i >= 0; i--) {
    s->al[i] = mul(f32, T(acc), T(ro[SLOT(i)])).v;
    const void *y = row(s, s->old_dirs, SLOT(i));
    if (i > 0)
      acc = CALL(v, update, d, -s->al[i], y, row(s, s->old_stps, SLOT(i - 1)),
                 s->n);
    else
      acc = CALL(v, turn, d, -s->al[0], y, h_diag.v, y, s->n);
  }
  /* from the oldest to the newest: be = y_i . r * ro_i,
   * r += (al[i] - be) s_i; the last dot product is g . d. */
  for (int64_t i = 0; i < held; i++) {
    num be = mul(f32, T(acc), T(ro[SLOT(i)]));
    const void *next = i + 1 < held ? row(s, s->old_dirs, SLOT(i + 1)) : g;
    acc = CALL(v, update, d, sub(f32, T(s->al[i]), be).v,
               row(s, s->old_stps, SLOT(i)), next, s->n);
  }
#undef SLOT
  return acc;
}

/* The history update of torch's step, from y = g - prev_flat_grad and
 * s = d * t: a pair is kept when y . s > 1e-10, the oldest dropped when
 * history_size are held. */
ALWAYS_INLINE void update_history(lbfgs *s, int v, const void *g) {
  const bool f32 = v >= 2;
  double *ring = st(s->ring);
  int64_t held = (int64_t)ring[0], head = (int64_t)ring[1];
  int64_t h = s->history_size;
  double t = st(s->t)[0], ys, yy;
  /* A free slot can take the pair at once; a full ring must not lose its
   * oldest pair before we know that the new one is kept. */
  int64_t slot = held < h ? (head + held) % h : head;
  void *Y = row(s, s->old_dirs, slot), *S = row(s, s->old_stps, slot);
  bool direct = held < h;
  CALL(v, pair, g, s->prev_flat_grad->data, s->d->data, t, s->n,
       direct ? Y : NULL, direct ? S : NULL, &ys, &yy);
  if (!lt(f32, F(1e-10), T(ys)))
    return;
  if (!direct)
    CALL(v, pair, g, s->prev_flat_grad->data, s->d->data, t, s->n, Y, S, &ys,
         &yy);
  if (held < h)
    ring[0] = (double)(held + 1);
  else
    ring[1] = (double)((head + 1) % h);
  st(s->ro)[slot] = divide(f32, F(1.), T(ys)).v;
  st(s->h_diag)[0] = divide(f32, T(ys), T(yy)).v;
}

/* What a step did, at debug level (benchmarks read it): costs nothing when
 * the host does not log debug messages. */
static void report(lbfgs *s, int64_t iters, int64_t evals, double loss) {
  lk_log(s->host, LK_LOG_DEBUG,
         "step: %lld iterations, %lld closure calls, loss %.17g "
         "(%.0f iterations, %.0f calls in all)",
         (long long)iters, (long long)evals, loss, st(s->n_iter)[0],
         st(s->func_evals)[0]);
}

/* Before a step: a closure, and the parameters of create. */
static int check_call(lbfgs *s, lk_tensor *const *params, size_t n,
                      lk_closure_fn closure) {
  if (!closure)
    return lk_fail(s->host, LK_EINVAL,
                   "L-BFGS needs a closure: it evaluates the model several "
                   "times per step (pass one to lk_host_optimizer_step)");
  if (n != s->n_params)
    return lk_fail(s->host, LK_ESTATE,
                   "called with %zu parameters, created with %zu", n,
                   s->n_params);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (params[i]->dtype != (s->f32 ? LK_F32 : LK_F64))
      return lk_fail(s->host, LK_ESTATE, "parameter %s changed its dtype",
                     params[i]->name);
    total += params[i]->numel;
  }
  if (total != s->n)
    return lk_fail(s->host, LK_ESTATE,
                   "called with %zu parameter elements, created with %zu",
                   total, s->n);
  return 0;
}

/* The move along d of one iteration: torch's line search, or the fixed
 * step *T and an evaluation (none at the LAST iteration), which leaves the
 * loss in *LOSS and the gradient in pool buffer *G. The closure calls are
 * counted in *EVALS and func_evals; *OPT: the gradient is small enough to
 * stop. False if the closure gave NaN: the parameters are put back. */
ALWAYS_INLINE bool advance(lbfgs *s, int v, lk_closure_fn closure, num *t,
                           double *loss, int *g, num gtd, bool last,
                           int64_t *evals, bool *opt) {
  const bool f32 = v >= 2;
  double *func_evals = st(s->func_evals);
  int64_t ls_evals = 0;
  *opt = false;
  save_params(s);
  if (s->wolfe) {
    bool ok = strong_wolfe(s, v, closure, t, loss, g, gtd, &ls_evals);
    *evals += ls_evals;
    func_evals[0] += (double)ls_evals;
    st(s->t)[0] = t->v;
    if (!ok) {
      restore_params(s);
      return false;
    }
    CALL(v, move, s, t->v, s->d->data, s->x0);
    *opt = le(f32, T(s->pool_max[*g]), F(s->tolerance_grad));
    return true;
  }
  CALL(v, move, s, t->v, s->d->data, NULL);
  if (!last) {
    *loss = closure();
    if (isnan(*loss)) {
      func_evals[0] += 1;
      restore_params(s);
      return false;
    }
    s->pool_max[*g] = CALL(v, gather, s, s->pool[*g], NULL, NULL);
    *opt = le(f32, T(s->pool_max[*g]), F(s->tolerance_grad));
    ls_evals = 1;
  }
  *evals += ls_evals;
  func_evals[0] += (double)ls_evals;
  return true;
}

ALWAYS_INLINE int step_impl(lbfgs *s, lk_tensor *const *params, size_t n,
                            lk_closure_fn closure, int v) {
  const bool f32 = v >= 2;
  int rc = check_call(s, params, n, closure);
  if (rc != 0)
    return rc;
  s->params = params;

  double *n_iter = st(s->n_iter), *func_evals = st(s->func_evals);
  double lr = st(s->lr)[0];
  double loss = closure();
  if (isnan(loss))
    return 0; /* the evaluation failed or gave no loss: leave params be */
  int64_t current_evals = 1;
  func_evals[0] += 1;

  int g = 0; /* the pool buffer holding flat_grad */
  s->pool_max[g] = CALL(v, gather, s, s->pool[g], NULL, NULL);
  if (le(f32, T(s->pool_max[g]), F(s->tolerance_grad))) {
    report(s, 0, current_evals, loss); /* optimal already */
    return 0;
  }

  num t = T(st(s->t)[0]);
  int64_t it;
  for (it = 1; it <= s->max_iter; it++) {
    n_iter[0] += 1;

    /* the direction, and g . d */
    num gtd;
    if (n_iter[0] == 1) {
      gtd = T(CALL(v, negate, s->pool[g], s->d->data, s->n));
      st(s->ring)[0] = st(s->ring)[1] = 0;
      st(s->h_diag)[0] = 1;
    } else {
      update_history(s, v, s->pool[g]);
      gtd = T(direction(s, v, s->pool[g]));
    }
    memcpy(s->prev_flat_grad->data, s->pool[g], s->n * s->esize);
    st(s->prev_loss)[0] = loss;

    /* the step length's first guess */
    if (n_iter[0] == 1) {
      num sum = T(CALL(v, abssum, s->pool[g], s->n));
      t = mul(f32, pymin(f32, F(1.), divide(f32, F(1.), sum)), F(lr));
    } else {
      t = F(lr);
    }
    st(s->t)[0] = t.v;
    if (lt(f32, F(-s->tolerance_change), gtd))
      break; /* directional derivative below tolerance */

    bool opt_cond;
    if (!advance(s, v, closure, &t, &loss, &g, gtd, it == s->max_iter,
                 &current_evals, &opt_cond))
      return 0;

    /* the conditions to stop */
    if (it == s->max_iter || current_evals >= s->max_eval || opt_cond)
      break;
    num step_max =
        T(rnd(f32, CALL(v, maxabs, s->d->data, s->n) * fabs(rnd(f32, t.v))));
    if (le(f32, step_max, F(s->tolerance_change)))
      break; /* lack of progress */
    if (fabs(loss - st(s->prev_loss)[0]) < s->tolerance_change)
      break;
  }
  report(s, it > s->max_iter ? s->max_iter : it, current_evals, loss);
  return 0;
}

/* Each variant of step_impl, inlined: those without the fma instruction
 * here, those with it in step_hw. */
static int step_sw(lbfgs *s, lk_tensor *const *params, size_t n,
                   lk_closure_fn closure) {
  if (s->f32)
    return step_impl(s, params, n, closure, 2);
  return step_impl(s, params, n, closure, 0);
}

HW_FMA static int step_hw(lbfgs *s, lk_tensor *const *params, size_t n,
                          lk_closure_fn closure) {
  return s->f32 ? step_impl(s, params, n, closure, 3)
                : step_impl(s, params, n, closure, 1);
}

static int step(void *self, lk_tensor *const *params, size_t n,
                lk_closure_fn closure) {
  lbfgs *s = self;
  return s->hw ? step_hw(s, params, n, closure)
               : step_sw(s, params, n, closure);
}

static double get_lr(void *self) {
  return st(((lbfgs *)self)->lr)[0];
}

static void set_lr(void *self, double lr) {
  st(((lbfgs *)self)->lr)[0] = lr;
}

/* torch checks none of these; the ranges refuse what cannot work
 * (history_size 0 makes torch fail on its first update) or can only be a
 * mistake. */
static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "1", "learning rate (step length)", "[0, inf)"},
    {"max_iter", LK_OPT_INT, "20", "iterations per optimizer step", "[1, inf)"},
    {"max_eval", LK_OPT_INT, "0",
     "closure evaluations per optimizer step; 0 means max_iter * 5 / 4 "
     "(torch's default, rounded down)",
     "[0, inf)"},
    {"tolerance_grad", LK_OPT_DOUBLE, "1e-7",
     "stop when max |gradient| <= this (torch's real default; its docstring "
     "says 1e-5)",
     "[0, inf)"},
    {"tolerance_change", LK_OPT_DOUBLE, "1e-9",
     "stop when the loss or the parameters change by less than this",
     "[0, inf)"},
    {"history_size", LK_OPT_INT, "100",
     "update pairs kept (memory: 2 x history_size x parameters, "
     "checkpointed)",
     "[1, inf)"},
    {"line_search_fn", LK_OPT_ENUM, "none",
     "none (fixed step lr) or strong_wolfe (torch's line search, c1 = 1e-4, "
     "c2 = 0.9)",
     "none|strong_wolfe"},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_OPTIMIZER(
    "lbfgs",
    "limited-memory BFGS with optional strong-Wolfe line search, "
    "as torch.optim.LBFGS",
    destroy, check_state, .step = step, .get_lr = get_lr, .set_lr = set_lr);
