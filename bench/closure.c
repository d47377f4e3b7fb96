/* bench/closure: the cost of the closure path.
 *
 * For the Rosenbrock step, the zero zero_grad and the Rosenbrock backward it
 * measures nanoseconds per evaluation of (1) the three plugin functions
 * called directly from C, (2) the same three through the loopkit closure
 * pointer an optimizer receives, and (3) that pointer with the simple and
 * the trace profiler, which wrap every entry with a libffi closure. Rounds
 * interleave them; medians are printed.
 *
 * Run from the build tree: LOOPKIT_PLUGIN_PATH=$PWD/plugins/.libs bench/closure
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loopkit/loopkit.h>

#define ROUNDS 15

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

static lk_run *open_run(const char *dir, int n, const char *profiler) {
  char text[512];
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = 1\n[plugins]\nstep = rosenbrock\n"
           "optimizer = sgd\n%s%s\n[rosenbrock]\nn = %d\n[sgd]\nlr = 0.001\n",
           profiler ? "profiler = " : "", profiler ? profiler : "", n);
  lk_config *cfg;
  lk_run *run = NULL;
  lk_run_options opts = {.out_dir = dir};
  if (lk_config_parse("bench.ini", text, &cfg) != 0 ||
      lk_run_new(cfg, &opts, &run) != 0) {
    fprintf(stderr, "bench/closure: %s\n", lk_last_error());
    exit(1);
  }
  lk_config_free(cfg);
  return run;
}

static volatile double sink;

/* For the cost of libffi's trampoline alone: a wrap around a function that
 * does nothing, against that function called directly. */
static double nothing(void) {
  return 0.0;
}
static int after_nothing(void *ctx, double loss) {
  (void)ctx;
  (void)loss;
  return 0;
}

static double thunk_cost(long iters) {
  lk_wrap *w;
  if (lk_closure_then(nothing, after_nothing, NULL, &w) != 0)
    return -1;
  lk_closure_fn fn = lk_wrap_function(w);
  lk_closure_fn volatile plain = nothing; /* no inlining */
  double cost[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = now_ns();
    for (long i = 0; i < iters; i++)
      sink = plain();
    double t1 = now_ns();
    for (long i = 0; i < iters; i++)
      sink = fn();
    double t2 = now_ns();
    cost[r] = ((t2 - t1) - (t1 - t0)) / (double)iters;
  }
  lk_wrap_free(w);
  return median(cost, ROUNDS);
}

/* The trace profiler writes about 80 bytes per action into the run
 * directory's trace.json: it runs a tenth of the evaluations, and the file
 * is emptied after each round (its writes continue at their offset, into a
 * sparse file) so the disk does not fill. */
#define TRACE_SHARE 10

static void empty_trace(const char *dir) {
  char path[600];
  snprintf(path, sizeof path, "%s/trace.json", dir);
  if (truncate(path, 0) != 0) {
    perror(path);
    exit(1);
  }
}

/* Actions one profiled evaluation starts and stops: the closure, then
 * training_step, zero_grad and backward inside it. */
#define ACTIONS 4

static void bench(int n, long iters, const char *tmp) {
  char d1[512], d2[512], d3[512];
  snprintf(d1, sizeof d1, "%s/plain-%d", tmp, n);
  snprintf(d2, sizeof d2, "%s/simple-%d", tmp, n);
  snprintf(d3, sizeof d3, "%s/trace-%d", tmp, n);
  lk_run *plain = open_run(d1, n, NULL), *simple = open_run(d2, n, "simple"),
         *trace = open_run(d3, n, "trace");
  const lk_descriptor *sd, *zd, *bd;
  void *s = lk_run_instance(plain, "step", &sd);
  void *z = lk_run_instance(plain, "zero_grad", &zd);
  void *b = lk_run_instance(plain, "backward", &bd);
  size_t np;
  lk_tensor *const *params = lk_run_params(plain, &np);
  lk_batch batch = {0};
  lk_closure_fn closure = lk_run_closure(plain);
  lk_closure_fn with_simple = lk_run_closure(simple);
  lk_closure_fn with_trace = lk_run_closure(trace);
  double direct[ROUNDS], through[ROUNDS], prof_simple[ROUNDS],
      prof_trace[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = now_ns();
    for (long i = 0; i < iters; i++) {
      lk_step_result res;
      res.has_loss = false;
      res.n_metrics = 0;
      sd->step->training_step(s, &batch, &res);
      zd->zero_grad->zero_grad(z, params, np);
      bd->backward->backward(b, &batch, 1.0);
      sink = res.loss;
    }
    double t1 = now_ns();
    for (long i = 0; i < iters; i++)
      sink = closure();
    double t2 = now_ns();
    for (long i = 0; i < iters; i++)
      sink = with_simple();
    double t3 = now_ns();
    for (long i = 0; i < iters / TRACE_SHARE; i++)
      sink = with_trace();
    double t4 = now_ns();
    empty_trace(d3);
    direct[r] = (t1 - t0) / (double)iters;
    through[r] = (t2 - t1) / (double)iters;
    prof_simple[r] = (t3 - t2) / (double)iters;
    prof_trace[r] = (t4 - t3) / (double)(iters / TRACE_SHARE);
  }
  double md = median(direct, ROUNDS), mc = median(through, ROUNDS),
         ms = median(prof_simple, ROUNDS), mt = median(prof_trace, ROUNDS);
  printf("%-6d %10.1f %10.1f %8.3f %10.1f %12.1f %10.1f %12.1f %10.1f\n", n, md,
         mc, mc / md, mc - md, ms, (ms - mc) / ACTIONS, mt,
         (mt - mc) / ACTIONS);
  lk_run_free(plain);
  lk_run_free(simple);
  lk_run_free(trace);
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 2000000;
  char tmp[] = "/tmp/lk-bench-closure.XXXXXX";
  if (!mkdtemp(tmp)) {
    perror("mkdtemp");
    return 1;
  }
  printf("bench/closure: ns per evaluation, median of %d rounds of %ld\n",
         ROUNDS, iters);
  printf("%-6s %10s %10s %8s %10s %12s %10s %12s %10s\n", "n", "direct",
         "closure", "ratio", "overhead", "+simple", "/action", "+trace",
         "/action");
  bench(2, iters, tmp);
  bench(100, iters / 20, tmp);
  printf("\ndirect: the step, zero_grad and backward plugin entries called "
         "from C;\nclosure: the pointer the optimizer receives, unprofiled; "
         "ratio = closure / direct;\noverhead = closure - direct; +simple, "
         "+trace: the closure with that profiler;\n/action: the profiler's "
         "cost per profiled action ((+profiler - closure) / %d:\nthe "
         "closure, training_step, zero_grad and backward are each wrapped).\n"
         "trace writes its trace.json (page cache, not fsynced). libffi's "
         "trampoline\nalone (a wrap of an empty function): %.1f ns\n",
         ACTIONS, thunk_cost(iters));
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  return system(cmd) == 0 ? 0 : 1;
}
