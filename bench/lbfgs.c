/* bench/lbfgs: loopkit's lbfgs against liblbfgs and torch.optim.LBFGS.
 *
 * 1. On the chained Rosenbrock function (plugins/model/rosenbrock.c) in N = 2,
 *    100, 1000 and 100000 dimensions from (-1.2, 1, -1.2, ...), f64, with
 *    10 correction pairs:
 *    - loopkit: one optimizer step of the lbfgs plugin through the run's
 *      closure (rosenbrock step and backward, zero zero_grad), strong-Wolfe
 *      line search, max_iter MAX_ITER (BIG_N_ITER for N = 100000, which
 *      would need about 5 N iterations), tolerance_grad 1e-5 (on max |g|),
 *      tolerance_change 1e-9;
 *    - liblbfgs (Debian's liblbfgs-dev): lbfgs() with m = 10, its default
 *      More-Thuente line search, epsilon 1e-5 (on |g| / max(1, |x|)),
 *      max_iterations the same, and its own C evaluate callback computing
 *      the same function.
 *    Each prints iterations, function evaluations, final f and microseconds
 *    per iteration (median of REPS runs), and the ratio loopkit / liblbfgs
 *    of microseconds per iteration.
 * 2. Closure evaluations per second of loopkit's lbfgs on N = 2 against
 *    torch's (bench/lbfgs_torch.py, run with /usr/bin/python3 when it has
 *    torch), same settings, both timing only the optimizer steps.
 *
 * Run from the build tree:
 *   LOOPKIT_PLUGIN_PATH=$PWD/plugins/.libs bench/lbfgs [SRCDIR]
 * SRCDIR (default LK_SRCDIR, then ".") is where bench/lbfgs_torch.py is. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, nftw, popen */
#endif
#include <ftw.h>
#include <lbfgs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loopkit/loopkit.h>

#define REPS 5
#define MAX_ITER 20000 /* enough to converge for N <= 1000 */
#define BIG_N_ITER 300 /* N = 100000 would need about 5 N: a cap */
#define TORCH_REPS 20

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

static void die(const char *what) {
  fprintf(stderr, "bench/lbfgs: %s: %s\n", what, lk_last_error());
  exit(1);
}

typedef struct result {
  long iters, evals;
  double f, us; /* final loss, microseconds for the whole minimisation */
} result;

/* ---- loopkit ------------------------------------------------------------ */

/* The plugin says at debug level what each step did. */
static void on_log(void *user, lk_log_level level, const char *msg) {
  result *r = user;
  long iters, evals;
  if (level == LK_LOG_DEBUG &&
      sscanf(msg, "lbfgs: step: %ld iterations, %ld closure calls, loss %lf",
             &iters, &evals, &r->f) == 3) {
    r->iters += iters;
    r->evals += evals;
  }
}

static char tmp_root[] = "/tmp/loopkit-bench-lbfgs-XXXXXX";
static int run_counter;

static int max_iter(int n) {
  return n >= 100000 ? BIG_N_ITER : MAX_ITER;
}

static lk_run *open_run(int n, result *r) {
  char text[1024], dir[sizeof tmp_root + 32];
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = 1\n[plugins]\nstep = rosenbrock\n"
           "optimizer = lbfgs\n[rosenbrock]\nn = %d\n[lbfgs]\n"
           "history_size = 10\nline_search_fn = strong_wolfe\n"
           "max_iter = %d\nmax_eval = %d\ntolerance_grad = 1e-5\n"
           "tolerance_change = 1e-9\n",
           n, max_iter(n), 10 * max_iter(n));
  snprintf(dir, sizeof dir, "%s/run-%d", tmp_root, run_counter++);
  lk_config *cfg;
  lk_run *run = NULL;
  /* Only an untimed run logs: formatting the message would be timed. */
  lk_run_options opts = {.out_dir = dir,
                         .log = r ? on_log : NULL,
                         .log_user = r,
                         .verbosity = LK_LOG_DEBUG};
  if (lk_config_parse("bench-lbfgs.ini", text, &cfg) != 0)
    die("config");
  if (lk_run_new(cfg, &opts, &run) != 0)
    die("lk_run_new");
  lk_config_free(cfg);
  return run;
}

/* One optimizer step on a fresh run, timed; with COUNT, an untimed one
 * that reads what the step did from the plugin's debug message. */
static result loopkit_run(int n, bool count) {
  result r = {0};
  lk_run *run = open_run(n, count ? &r : NULL);
  const lk_descriptor *desc;
  void *self = lk_run_instance(run, "optimizer", &desc);
  size_t np;
  lk_tensor *const *params = lk_run_params(run, &np);
  lk_closure_fn closure = lk_run_closure(run);
  double t0 = now_us();
  if (desc->optimizer->step(self, params, np, closure) != 0)
    die("lbfgs step");
  r.us = now_us() - t0;
  lk_run_free(run);
  return r;
}

static result loopkit_once(int n) {
  static int counted_n = -1;
  static result counted;
  if (counted_n != n) {
    counted = loopkit_run(n, true);
    counted_n = n;
  }
  result r = loopkit_run(n, false);
  r.iters = counted.iters, r.evals = counted.evals, r.f = counted.f;
  return r;
}

/* ---- liblbfgs ------------------------------------------------------------
 */

/* The same chained Rosenbrock function and gradient as the plugin. */
static lbfgsfloatval_t evaluate(void *instance, const lbfgsfloatval_t *x,
                                lbfgsfloatval_t *g, const int n,
                                const lbfgsfloatval_t step) {
  (void)step;
  ++*(long *)instance;
  double f = 0, carry = 0;
  for (int i = 0; i < n; i++) {
    if (i + 1 < n) {
      double d = x[i + 1] - x[i] * x[i], e = 1 - x[i];
      double gd = 100.0 * (2 * d);
      f += 100.0 * (d * d) + e * e;
      g[i] = -gd * (2 * x[i]) + -(2 * e) + carry;
      carry = gd;
    } else {
      g[i] = carry;
    }
  }
  return f;
}

static int progress(void *instance, const lbfgsfloatval_t *x,
                    const lbfgsfloatval_t *g, const lbfgsfloatval_t fx,
                    const lbfgsfloatval_t xnorm, const lbfgsfloatval_t gnorm,
                    const lbfgsfloatval_t step, int n, int k, int ls) {
  (void)instance, (void)x, (void)g, (void)fx, (void)xnorm, (void)gnorm;
  (void)step, (void)n, (void)k, (void)ls;
  return 0;
}

static long lib_iters;

static int count_progress(void *instance, const lbfgsfloatval_t *x,
                          const lbfgsfloatval_t *g, const lbfgsfloatval_t fx,
                          const lbfgsfloatval_t xnorm,
                          const lbfgsfloatval_t gnorm,
                          const lbfgsfloatval_t step, int n, int k, int ls) {
  lib_iters = k;
  return progress(instance, x, g, fx, xnorm, gnorm, step, n, k, ls);
}

static result liblbfgs_once(int n) {
  result r = {0};
  lbfgsfloatval_t *x = lbfgs_malloc(n), fx = 0;
  if (!x) {
    fprintf(stderr, "bench/lbfgs: out of memory\n");
    exit(1);
  }
  for (int i = 0; i < n; i++)
    x[i] = i % 2 ? 1.0 : -1.2;
  lbfgs_parameter_t param;
  lbfgs_parameter_init(&param);
  param.m = 10;
  param.epsilon = 1e-5;
  param.max_iterations = max_iter(n);
  lib_iters = 0;
  double t0 = now_us();
  int rc = lbfgs(n, x, &fx, evaluate, count_progress, &r.evals, &param);
  r.us = now_us() - t0;
  if (rc < 0 && rc != LBFGSERR_MAXIMUMITERATION &&
      rc != LBFGSERR_ROUNDING_ERROR)
    fprintf(stderr, "bench/lbfgs: liblbfgs N=%d returned %d\n", n, rc);
  r.iters = lib_iters;
  r.f = fx;
  lbfgs_free(x);
  return r;
}

/* ---- figures ------------------------------------------------------------- */

/* Median time over REPS; the counts and f of the last run (they do not
 * change from run to run). */
static result best(result (*once)(int), int n, int reps) {
  double us[REPS];
  result r = {0};
  for (int k = 0; k < reps; k++) {
    r = once(n);
    us[k] = r.us;
  }
  r.us = median(us, reps);
  return r;
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

/* Torch's evaluations per second, or a negative value if it was skipped. */
static double torch_evals_per_second(const char *srcdir) {
  if (system("/usr/bin/python3 -I -c 'import torch; torch.tensor' >/dev/null "
             "2>&1") != 0)
    return -1;
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/bench/lbfgs_torch.py' %d",
           srcdir, TORCH_REPS);
  FILE *p = popen(cmd, "r");
  double eps = -2;
  if (p) {
    long evals;
    double secs;
    if (fscanf(p, "evals %ld seconds %lf evals_per_second %lf", &evals, &secs,
               &eps) != 3)
      eps = -2;
    pclose(p);
  }
  return eps;
}

int main(int argc, char **argv) {
#ifdef LK_SRCDIR
  const char *srcdir = argc > 1 ? argv[1] : LK_SRCDIR;
#else
  const char *srcdir = argc > 1 ? argv[1] : ".";
#endif
  if (!mkdtemp(tmp_root)) {
    perror("bench/lbfgs: mkdtemp");
    return 1;
  }
  static const int sizes[] = {2, 100, 1000, 100000};
  printf("Chained Rosenbrock from (-1.2, 1, ...), f64, 10 pairs; median of "
         "%d runs\n",
         REPS);
  printf("loopkit: strong Wolfe, tolerance_grad 1e-5 (max |g|), "
         "tolerance_change 1e-9\n"
         "liblbfgs: More-Thuente, epsilon 1e-5 (|g| / max(1, |x|))\n\n");
  printf("%7s  %-8s %6s %6s %13s %10s  %s\n", "N", "", "iters", "evals",
         "final f", "us/iter", "ratio");
  bool all_under = true;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int n = sizes[i], reps = n >= 100000 ? 3 : REPS;
    result a = best(loopkit_once, n, reps);
    result b = best(liblbfgs_once, n, reps);
    double ua = a.us / (double)(a.iters ? a.iters : 1);
    double ub = b.us / (double)(b.iters ? b.iters : 1);
    printf("%7d  %-8s %6ld %6ld %13.6g %10.3f\n", n, "loopkit", a.iters,
           a.evals, a.f, ua);
    printf("%7s  %-8s %6ld %6ld %13.6g %10.3f  %.2f\n", "", "liblbfgs", b.iters,
           b.evals, b.f, ub, ua / ub);
    all_under &= ua <= ub;
    fflush(stdout);
  }
  printf("(N = %d: both stopped at %d iterations)\n", sizes[3], BIG_N_ITER);
  printf("goal: loopkit/liblbfgs <= 1.0 at every N: %s\n\n",
         all_under ? "met" : "NOT met");

  /* closure evaluations per second on N = 2 */
  long evals = 0;
  double us = 0;
  for (int k = 0; k < TORCH_REPS * 50; k++) {
    result r = loopkit_once(2);
    evals += r.evals;
    us += r.us;
  }
  double mine = 1e6 * (double)evals / us;
  printf("N = 2, one step to convergence, closure evaluations per second:\n");
  printf("  loopkit lbfgs  %12.0f\n", mine);
  double theirs = torch_evals_per_second(srcdir);
  if (theirs > 0)
    printf("  torch LBFGS    %12.0f\n  ratio %.0fx (goal >= 100x): %s\n",
           theirs, mine / theirs, mine >= 100 * theirs ? "met" : "NOT met");
  else if (theirs == -1)
    printf("  torch LBFGS    skipped (/usr/bin/python3 has no torch)\n");
  else
    printf("  torch LBFGS    skipped (%s/bench/lbfgs_torch.py failed)\n",
           srcdir);
  nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}
