/* bench/mpi: data-parallel training with the mpi strategy, K = 1 and 2.
 *
 * Trains the Fashion-MNIST MLP of examples/fashion-mnist.ini (its layers,
 * activation, optimizer and data; plugins.strategy = mpi and max_steps set
 * here) under mpirun -np K for K = 1 and 2 with the same per-rank batch
 * (weak scaling: K ranks train on K times the samples a step), for per-rank
 * batches B (--batch, default 128: the example's) and B / 2; K = 2 with
 * B / 2 has the global batch of K = 1 with B (strong scaling). A control
 * case runs two processes without a strategy, each training alone at the
 * same time: what sharing the machine costs without communication. It
 * prints steps and samples per second, the time the mpi plugin spent in
 * MPI_Allreduce per step (from the line the plugin logs on rank 0 when it
 * is destroyed) and the bytes reduced per step.
 *
 * Run by hand, without mpirun, from the build tree:
 *   bench/mpi [--reps R] [--batch B] [--steps S] [--warmup W] [--data DIR]
 *     [--config PATH] [--mpirun PATH]
 * It runs itself as `mpirun [--allow-run-as-root] --oversubscribe -np K
 * bench/mpi --worker ...` (popen), R rounds of every case (cases
 * interleaved, so that a change in the machine's load hits them all), and
 * prints medians. A worker trains S steps (epochs as needed); rank 0 times
 * the steps after the first W with the run's progress callback, leaving
 * out the intervals that span an epoch's end (validation and checkpoint),
 * and times the whole lk_run_train between two barriers.
 *
 * OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are set to 1 for the workers:
 * one core per rank, so that K = 2 on two cores is twice the cores of
 * K = 1 and not OpenBLAS's threads against MPI's ranks. LOOPKIT_PLUGIN_PATH
 * defaults to LK_BUILDDIR/plugins/.libs. Runs go to a temporary directory
 * under /tmp, removed at the end. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, nftw, popen, setenv, readlink */
#endif
#include <ftw.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include <loopkit/loopkit.h>

#ifndef LK_SRCDIR
#define LK_SRCDIR "."
#endif
#ifndef LK_BUILDDIR
#define LK_BUILDDIR "."
#endif

#define MAX_REPS 15
#define TAG "bench-mpi-worker"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void remove_tree(const char *dir) {
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ==== the worker, under mpirun ============================================ */

/* Rank 0's clock over the steady state: the run's progress callback comes
 * after every training batch. An interval counts when it starts after the
 * warmup and does not span an epoch's end. */
typedef struct meter {
  uint64_t warmup;
  bool seen, epoch_done;
  uint64_t epoch, step;
  double at;
  double seconds;
  uint64_t steps;
} meter;

static void on_progress(void *user, const lk_progress *p) {
  meter *m = user;
  double t = now_s();
  if (m->seen && !m->epoch_done && p->epoch == m->epoch &&
      m->step >= m->warmup) {
    m->seconds += t - m->at;
    m->steps += p->global_step - m->step;
  }
  m->seen = true;
  m->epoch_done = p->epoch_done;
  m->epoch = p->epoch;
  m->step = p->global_step;
  m->at = t;
}

/* The mpi plugin's last line about its allreduces, logged at destroy. */
typedef struct capture {
  char line[512];
} capture;

static void on_log(void *user, lk_log_level level, const char *msg) {
  capture *c = user;
  if (level <= LK_LOG_WARN)
    fprintf(stderr, "bench/mpi worker: %s\n", msg);
  if (strncmp(msg, "mpi: ", 5) == 0 && strstr(msg, "allreduces of"))
    snprintf(c->line, sizeof c->line, "%s", msg);
}

/* The number after KEY in LINE, or NAN. The plugin's format:
 * "mpi: K ranks; N gradient allreduces of BYTES bytes, X µs each (mean),
 * total T s". */
static double number_after(const char *line, const char *key) {
  const char *at = strstr(line, key);
  if (!at)
    return NAN;
  char *end;
  double v = strtod(at + strlen(key), &end);
  return end == at + strlen(key) ? NAN : v;
}

static void worker_fail(const char *what, const char *why) {
  fprintf(stderr, "bench/mpi worker: %s: %s\n", what, why);
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

static void set(lk_config *cfg, const char *fmt, const char *value) {
  char a[1200];
  snprintf(a, sizeof a, fmt, value);
  if (lk_config_set(cfg, a) != 0)
    worker_fail("config", lk_last_error());
}

/* argv: --worker CONFIG BATCH STEPS WARMUP OUT_DIR STRATEGY [DATA_DIR]
 * STRATEGY "none": no strategy plugin, every process trains alone (in its
 * own OUT_DIR-rN). */
static int worker(int argc, char **argv) {
  MPI_Init(&argc, &argv); /* ours: the plugin then leaves it to us */
  if (argc < 8)
    worker_fail("usage", "--worker CONFIG BATCH STEPS WARMUP OUT_DIR "
                         "STRATEGY [DATA]");
  const char *config = argv[2], *batch = argv[3], *steps = argv[4],
             *strategy = argv[7];
  int mpi_rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  char out_dir[1100];
  snprintf(out_dir, sizeof out_dir, "%s-r%d", argv[6], mpi_rank);
  lk_config *cfg;
  if (lk_config_load(config, &cfg) != 0)
    worker_fail(config, lk_last_error());
  if (strcmp(strategy, "none") != 0)
    set(cfg, "plugins.strategy=%s", strategy);
  set(cfg, "idx.batch_size=%s", batch);
  set(cfg, "loop.max_steps=%s", steps);
  set(cfg, "loop.max_epochs=%s", "1000"); /* max_steps ends the run */
  if (argc > 8)
    set(cfg, "idx.dir=%s", argv[8]);

  meter m = {.warmup = strtoull(argv[5], NULL, 10)};
  capture cap = {{0}};
  lk_run_options ro = {.out_dir = out_dir,
                       .log = on_log,
                       .log_user = &cap,
                       .verbosity = LK_LOG_INFO,
                       .progress = on_progress,
                       .progress_user = &m};
  lk_run *run;
  if (lk_run_new(cfg, &ro, &run) != 0)
    worker_fail("lk_run_new", lk_last_error());
  lk_config_free(cfg);

  size_t n_params, numel = 0, bytes = 0;
  lk_tensor *const *params = lk_run_params(run, &n_params);
  for (size_t i = 0; i < n_params; i++) {
    numel += params[i]->numel;
    bytes += params[i]->numel * lk_dtype_size(params[i]->dtype);
  }

  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now_s();
  if (lk_run_train(run) != 0)
    worker_fail("lk_run_train", lk_last_error());
  MPI_Barrier(MPI_COMM_WORLD);
  double train_s = now_s() - t0;
  lk_run_free(run); /* the plugin logs its allreduce line here */
  MPI_Finalize();

  if (mpi_rank == 0) {
    double reduces = number_after(cap.line, "ranks; ");
    double total = number_after(cap.line, "total ");
    bool reduced = world > 1 && strcmp(strategy, "none") != 0;
    if (reduced && (isnan(reduces) || isnan(total)))
      fprintf(stderr,
              "bench/mpi worker: no allreduce line from the mpi plugin%s%s\n",
              cap.line[0] ? ": " : "", cap.line);
    /* One process reduces nothing: no line needed, no time spent. */
    if (!reduced && isnan(total))
      reduces = total = 0;
    printf(TAG " world %d steps %s timed_steps %llu timed_s %.9g train_s "
               "%.9g params %zu bytes %zu reduces %.0f reduce_s %.9g\n",
           world, steps, (unsigned long long)m.steps, m.seconds, train_s, numel,
           bytes, reduces, total);
  }
  return 0;
}

/* ==== the launcher ======================================================== */

static struct {
  int reps, batch;
  long steps, warmup;
  const char *data, *config, *mpirun;
} opt = {3,       128, 300, 20, NULL, LK_SRCDIR "/examples/fashion-mnist.ini",
         "mpirun"};

/* Per-rank batches of --batch B and B / 2. "none": K processes that each
 * train alone, at the same time: what sharing the machine costs K = 2
 * without any communication. */
static const struct {
  int world;
  int divisor; /* of opt.batch */
  const char *strategy;
} cases[] = {
    {1, 1, "mpi"}, {2, 1, "mpi"}, {2, 1, "none"}, {1, 2, "mpi"}, {2, 2, "mpi"}};
#define N_CASES (sizeof cases / sizeof cases[0])
enum { ONE_B, TWO_B, ALONE_B, ONE_HALF, TWO_HALF }; /* indices in cases */

static int batch_of(size_t c) {
  return opt.batch / cases[c].divisor;
}

/* What one worker reported. */
typedef struct figures {
  double steps_per_s, samples_per_s, ms_per_step, train_s;
  double reduce_us_per_step, reduces_per_step;
  size_t params, bytes;
} figures;

static char tmp_root[] = "/tmp/loopkit-bench-mpi-XXXXXX";

static void die(const char *what, const char *why) {
  fprintf(stderr, "bench/mpi: %s: %s\n", what, why);
  remove_tree(tmp_root);
  exit(1);
}

/* S in single quotes for sh. */
static void quote(char *out, size_t len, const char *s) {
  size_t n = 0;
  out[n++] = '\'';
  for (; *s && n + 6 < len; s++) {
    if (*s == '\'') {
      memcpy(out + n, "'\\''", 4);
      n += 4;
    } else {
      out[n++] = *s;
    }
  }
  out[n++] = '\'';
  out[n] = '\0';
}

/* Samples per second count every process's samples, at rank 0's pace. */
static bool parse_worker_line(const char *line, int batch, figures *f) {
  int world;
  long steps;
  unsigned long long timed_steps;
  double timed_s, reduces, reduce_s;
  if (sscanf(line,
             TAG " world %d steps %ld timed_steps %llu timed_s %lf train_s "
                 "%lf params %zu bytes %zu reduces %lf reduce_s %lf",
             &world, &steps, &timed_steps, &timed_s, &f->train_s, &f->params,
             &f->bytes, &reduces, &reduce_s) != 9 ||
      timed_steps == 0 || !(timed_s > 0) || steps <= 0)
    return false;
  f->steps_per_s = (double)timed_steps / timed_s;
  f->samples_per_s = f->steps_per_s * batch * world;
  f->ms_per_step = 1e3 * timed_s / (double)timed_steps;
  f->reduce_us_per_step = 1e6 * reduce_s / (double)steps;
  f->reduces_per_step = reduces / (double)steps;
  return true;
}

static void run_case(const char *self, size_t c, int rep, figures *f) {
  char dir[sizeof tmp_root + 48], q_self[1100], q_cfg[1100], q_dir[200],
      q_data[1100] = "", q_mpirun[1100], cmd[6000];
  snprintf(dir, sizeof dir, "%s/case%zu-%d", tmp_root, c, rep);
  quote(q_self, sizeof q_self, self);
  quote(q_cfg, sizeof q_cfg, opt.config);
  quote(q_dir, sizeof q_dir, dir);
  quote(q_mpirun, sizeof q_mpirun, opt.mpirun);
  if (opt.data)
    quote(q_data, sizeof q_data, opt.data);
  /* timeout: a rank stuck in a collective must not hang the bench. */
  snprintf(cmd, sizeof cmd,
           "timeout 300 %s %s--oversubscribe -np %d %s --worker %s %d %ld "
           "%ld %s %s %s",
           q_mpirun, geteuid() == 0 ? "--allow-run-as-root " : "",
           cases[c].world, q_self, q_cfg, batch_of(c), opt.steps, opt.warmup,
           q_dir, cases[c].strategy, q_data);
  FILE *p = popen(cmd, "r");
  if (!p)
    die("popen", cmd);
  char line[1024];
  bool got = false;
  while (fgets(line, sizeof line, p))
    if (strncmp(line, TAG " ", sizeof TAG) == 0)
      got = parse_worker_line(line, batch_of(c), f);
  if (pclose(p) != 0 || !got)
    die("worker failed", cmd);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of one field over the reps of a case. */
static double median_of(const figures *f, int n, size_t offset) {
  double v[MAX_REPS];
  for (int i = 0; i < n; i++)
    memcpy(&v[i], (const char *)&f[i] + offset, sizeof v[i]);
  return median(v, n);
}
#define MEDIAN(c, field) median_of(fig[c], opt.reps, offsetof(figures, field))

static figures fig[N_CASES][MAX_REPS];

/* Forward (2 in out), weight gradients (2 in out) and, past the first
 * layer, input gradients (2 in out) per sample, from "784,256,128,10". */
static double flops_per_sample(const char *layers) {
  double flops = 0, in = 0;
  int l = 0;
  for (const char *s = layers; s && *s; l++) {
    char *end;
    double out = strtod(s, &end);
    if (end == s)
      return NAN;
    if (l > 0)
      flops += (l > 1 ? 6 : 4) * in * out;
    in = out;
    s = *end == ',' ? end + 1 : NULL;
  }
  return flops;
}

static const char *config_value(const char *section, const char *key, char *buf,
                                size_t len) {
  lk_config *cfg;
  if (lk_config_load(opt.config, &cfg) != 0)
    die(opt.config, lk_last_error());
  const lk_config_entry *e = lk_config_find(cfg, section, key);
  snprintf(buf, len, "%s", e ? e->value : "?");
  lk_config_free(cfg);
  return buf;
}

static void usage(void) {
  fprintf(stderr, "usage: bench/mpi [--reps R] [--batch B] [--steps S] "
                  "[--warmup W] [--data DIR] "
                  "[--config PATH] [--mpirun PATH]\n");
  exit(2);
}

static void parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v)
      usage();
    if (strcmp(a, "--reps") == 0)
      opt.reps = atoi(v);
    else if (strcmp(a, "--batch") == 0)
      opt.batch = atoi(v);
    else if (strcmp(a, "--steps") == 0)
      opt.steps = atol(v);
    else if (strcmp(a, "--warmup") == 0)
      opt.warmup = atol(v);
    else if (strcmp(a, "--data") == 0)
      opt.data = v;
    else if (strcmp(a, "--config") == 0)
      opt.config = v;
    else if (strcmp(a, "--mpirun") == 0)
      opt.mpirun = v;
    else
      usage();
  }
  if (opt.reps < 1 || opt.reps > MAX_REPS || opt.batch < 2 || opt.warmup < 0 ||
      opt.steps <= opt.warmup + 1)
    usage();
}

static double load_average(void) {
  double load = NAN;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &load) != 1)
      load = NAN;
    fclose(f);
  }
  return load;
}

static void print_table(void) {
  printf("%2s %8s %7s %7s %8s %10s %8s %17s %7s %7s\n", "K", "strategy",
         "B/rank", "B/step", "steps/s", "samples/s", "ms/step",
         "allreduce ms (%)", "MB/step", "train s");
  for (size_t c = 0; c < N_CASES; c++) {
    bool reduces = cases[c].world > 1 && strcmp(cases[c].strategy, "none");
    double ms = MEDIAN(c, ms_per_step);
    double ar = MEDIAN(c, reduce_us_per_step) / 1e3;
    printf("%2d %8s %7d %7d %8.1f %10.0f %8.3f %9.3f (%4.1f%%) %7.3f %7.2f\n",
           cases[c].world, cases[c].strategy, batch_of(c),
           cases[c].world * batch_of(c), MEDIAN(c, steps_per_s),
           MEDIAN(c, samples_per_s), ms, ar, 100 * ar / ms,
           reduces ? (double)fig[c][0].bytes / 1e6 : 0.0, MEDIAN(c, train_s));
  }
}

static void print_summary(void) {
  char layers[256], act[64], optim[64];
  config_value("mlp", "layers", layers, sizeof layers);
  double flops = flops_per_sample(layers);
  double us_sample = 1e6 / MEDIAN(ONE_B, samples_per_s);
  double ar_us = MEDIAN(TWO_B, reduce_us_per_step);
  double bytes = (double)fig[TWO_B][0].bytes;
  printf("\nMLP %s %s, %s: %zu parameters; %.0f bytes allreduced per step, "
         "%.2f allreduces per step\n",
         layers, config_value("mlp", "activation", act, sizeof act),
         config_value("plugins", "optimizer", optim, sizeof optim),
         fig[ONE_B][0].params, bytes, MEDIAN(TWO_B, reduces_per_step));
  printf("K = 1, B = %d: %.2f µs per sample on one core (whole step); "
         "forward + backward\n  are %.3f MFLOP per sample: %.1f GFLOP/s over "
         "the whole step\n",
         batch_of(ONE_B), us_sample, flops / 1e6, flops / us_sample / 1e3);
  double s1 = MEDIAN(ONE_B, samples_per_s);
  printf("B/rank %d: K = 2 gives %.2fx the samples/s of K = 1 "
         "(efficiency %.0f%%); two processes\n  alone at once give %.2fx\n",
         batch_of(ONE_B), MEDIAN(TWO_B, samples_per_s) / s1,
         50 * MEDIAN(TWO_B, samples_per_s) / s1,
         MEDIAN(ALONE_B, samples_per_s) / s1);
  printf("B/rank %d: K = 2 gives %.2fx the samples/s of K = 1 "
         "(efficiency %.0f%%)\n",
         batch_of(ONE_HALF),
         MEDIAN(TWO_HALF, samples_per_s) / MEDIAN(ONE_HALF, samples_per_s),
         50 * MEDIAN(TWO_HALF, samples_per_s) /
             MEDIAN(ONE_HALF, samples_per_s));
  printf("B/step %d: K = 2 (B/rank %d) gives %.2fx the samples/s of K = 1 "
         "(B/rank %d)\n",
         batch_of(ONE_B), batch_of(TWO_HALF),
         MEDIAN(TWO_HALF, samples_per_s) / s1, batch_of(ONE_B));
  printf("K = 2, B/rank %d: allreduce %.0f µs per step (%.2f GB/s = bytes / "
         "time); the step costs\n  %.0f µs more than a process alone beside "
         "another (allreduce, packing, waiting)\n",
         batch_of(TWO_B), ar_us, bytes / ar_us / 1e3,
         1e3 * (MEDIAN(TWO_B, ms_per_step) - MEDIAN(ALONE_B, ms_per_step)));
}

static void print_legend(void) {
  printf(
      "\nK: processes (mpirun -np K, one core each: OPENBLAS_NUM_THREADS=1); "
      "strategy none: K\nprocesses that each train alone at the same time; "
      "B/rank: idx.batch_size;\nB/step: the samples of one optimizer step "
      "(K * B/rank with mpi). steps/s and\nsamples/s (all processes): rank "
      "0's wall time over steps %ld..%ld, intervals across\nan epoch's end "
      "left out; allreduce: the mpi plugin's time in MPI_Allreduce per step\n"
      "(its log line), waiting for the other rank included, and its share of "
      "a step;\nMB/step: bytes each rank reduces per step (f32 gradients, "
      "packed); train s: the\nwhole lk_run_train between barriers (data "
      "loading excluded; validation, test and\ncheckpoints included).\n",
      opt.warmup, opt.steps);
}

static int launcher(int argc, char **argv) {
  parse_args(argc, argv);
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0)
    die("/proc/self/exe", "cannot read the link");
  self[len] = '\0';
  /* Inherited by mpirun and its ranks, read once by OpenBLAS. */
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  setenv("OMP_NUM_THREADS", "1", 1);
  setenv("LOOPKIT_PLUGIN_PATH", LK_BUILDDIR "/plugins/.libs", 0);
  if (!mkdtemp(tmp_root)) {
    perror("bench/mpi: mkdtemp");
    return 1;
  }
  double load = load_average();
  printf("bench/mpi: %s with plugins.strategy = mpi, %ld steps a run, "
         "median of %d rounds\n",
         opt.config, opt.steps, opt.reps);
  fflush(stdout);
  for (int r = 0; r < opt.reps; r++)
    for (size_t c = 0; c < N_CASES; c++)
      run_case(self, c, r, &fig[c][r]);
  printf("%ld cores online, load average %.2f before, %.2f after (other "
         "processes slow K = 2 most)\n\n",
         sysconf(_SC_NPROCESSORS_ONLN), load, load_average());
  print_table();
  print_summary();
  print_legend();
  remove_tree(tmp_root);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--worker") == 0)
    return worker(argc, argv);
  return launcher(argc, argv);
}
