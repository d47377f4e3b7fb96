/* bench/mlp: loopkit's mlp plugin against torch, training the same network
 * the same way, in samples per second.
 *
 * Both train a 784-256-128-10 ReLU MLP with softmax cross-entropy on the
 * first training images of Fashion-MNIST in file order (no shuffling, x /
 * 255), with SGD lr 0.001 momentum 0.9, from the same initial weights: a file
 * this program writes (nn.Linear's layout and distribution, U(-1/sqrt(in),
 * 1/sqrt(in)) for weights and biases, from a fixed seed) and that the mlp
 * plugin (option init) and bench/mlp_torch.py both read. For each batch
 * size B in 1, 32 and 256:
 *
 * - loopkit: two fresh runs (lk_config_parse, lk_run_new, lk_run_train) with
 *   the idx, mlp and sgd plugins, one of W steps and one of S = 2W; each
 *   lk_run_train is timed. The difference of the two times is what steps W
 *   to S - 1 cost in the steady state, the data plugin's copies, the
 *   closure, the optimizer and the metrics.csv rows included; whatever both
 *   runs do once (the first steps' page faults and buffer growth, the test
 *   split evaluated after training, the last checkpoint) cancels out.
 *   lk_run_new (reading the IDX files) is not timed.
 * - torch: /usr/bin/python3 bench/mlp_torch.py runs the usual
 *   zero_grad / forward / loss / backward / step loop for S steps and times
 *   steps W to S - 1, the same steps.
 *
 * Samples per second are (S - W) * B over that time, the median of --reps
 * repetitions (each figure separately; the ratio is of the medians). The
 * losses after W and after S steps (the loss of that step's batch:
 * metrics.csv's last loss row, torch's loss.item()) must agree to 1e-3;
 * |diff| is the larger of the two differences. OPENBLAS_NUM_THREADS,
 * OMP_NUM_THREADS and torch.set_num_threads are all set to --threads.
 *
 * Why lr 0.001: the two never round alike (OpenBLAS sgemv against torch's
 * sgemm at B = 1, a double log-sum-exp against torch's f32 log_softmax),
 * so their iterates part by ~1e-7 at once; at lr 0.01 with momentum 0.9
 * single-sample SGD is unstable enough that this grows to O(1) within
 * 500-1000 steps, and a ReLU unit that crosses zero in one run and not the
 * other does the same at B = 32 within a few hundred. At lr 0.001 the
 * losses stay within ~1e-5 over every run here.
 *
 * Goals (issue 4): loopkit >= 10x torch at B = 1, >= 1x at 32 and 256.
 *
 * Run from the build tree:
 *   LOOPKIT_PLUGIN_PATH=$PWD/plugins/.libs bench/mlp [--threads T] [--reps R]
 *     [--scale F] [--data DIR] [--srcdir DIR] [--python PATH]
 * SRCDIR (default: LK_SRCDIR, the macro or else the environment variable,
 * else ".") is where bench/mlp_torch.py is;
 * --scale multiplies the number of steps (0.2 for a quick look; much less
 * and the difference of two run times drowns in their noise). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, nftw, popen, setenv */
#endif
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loopkit/loopkit.h>

#define MAX_REPS 32
#define LOSS_TOLERANCE 1e-3

static const size_t layer_sizes[] = {784, 256, 128, 10};
#define N_SIZES (sizeof layer_sizes / sizeof layer_sizes[0])
#define LAYERS "784,256,128,10"
#define LR "0.001"
#define MOMENTUM "0.9"

/* Batch sizes, the W of each (half of the S steps trained) and the goal
 * ratio. W is chosen so that torch's timed part takes a second or two. */
static const struct {
  size_t batch, half_steps;
  double goal;
} cases[] = {{1, 5000, 10}, {32, 600, 1}, {256, 100, 1}};
#define N_CASES (sizeof cases / sizeof cases[0])

static struct {
  int threads, reps;
  double scale;
  const char *data, *srcdir, *python;
} opt = {1, 3, 1, "/usr/share/datasets/fashion-mnist", ".", "/usr/bin/python3"};

static char tmp_root[] = "/tmp/loopkit-bench-mlp-XXXXXX";
static char init_path[sizeof tmp_root + 16];
static int run_counter;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void cleanup(void) {
  nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void die(const char *what, const char *why) {
  fprintf(stderr, "bench/mlp: %s: %s\n", what, why);
  cleanup();
  exit(1);
}

/* ---- the initial weights ------------------------------------------------ */

/* nn.Linear's reset_parameters draws weights and biases from
 * U(-1/sqrt(in), 1/sqrt(in)); we draw from loopkit's generator, seeded, so
 * that every run of the benchmark starts from the same point. */
static void write_init(const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f)
    die(path, "cannot create");
  lk_rng rng;
  lk_rng_seed(&rng, 20240406, 0);
  for (size_t l = 0; l + 1 < N_SIZES; l++) {
    size_t in = layer_sizes[l], out = layer_sizes[l + 1];
    double bound = 1 / sqrt((double)in);
    for (size_t i = 0; i < (in + 1) * out; i++) { /* weight, then bias */
      float v = (float)((2 * lk_rng_uniform(&rng) - 1) * bound);
      uint32_t u;
      memcpy(&u, &v, sizeof u);
      unsigned char le[4] = {(unsigned char)u, (unsigned char)(u >> 8),
                             (unsigned char)(u >> 16),
                             (unsigned char)(u >> 24)};
      fwrite(le, 1, 4, f);
    }
  }
  if (ferror(f) | fclose(f))
    die(path, "write error");
}

/* ---- loopkit ------------------------------------------------------------ */

/* The loss column of the last row that has one: the last step's loss. */
static double last_loss(const char *dir) {
  char path[512], line[4096];
  snprintf(path, sizeof path, "%s/metrics.csv", dir);
  FILE *f = fopen(path, "r");
  if (!f)
    die(path, "cannot open");
  double loss = NAN;
  while (fgets(line, sizeof line, f)) {
    char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c2 || c2[1] == ',' || c2[1] == '\n' || c2[1] == '\0' ||
        strncmp(line, "step,", 5) == 0)
      continue;
    loss = strtod(c2 + 1, NULL);
  }
  fclose(f);
  return loss;
}

/* Trains STEPS steps of batch size B in a fresh run: the seconds
 * lk_run_train took, and the final loss. */
static double loopkit_run(size_t b, size_t steps, double *loss) {
  char text[2048], dir[sizeof tmp_root + 32];
  /* limit: one batch more than the run reads, so that no run ends an epoch
   * (and writes an epoch's checkpoint) that the other does not. */
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = %zu\n"
           "[plugins]\nstep = mlp\noptimizer = sgd\ndata = idx\n"
           "[mlp]\nlayers = " LAYERS "\nactivation = relu\ninit = %s\n"
           "[idx]\ndir = %s\nbatch_size = %zu\nshuffle = false\n"
           "normalize = scale\nlimit = %zu\n"
           "[sgd]\nlr = " LR "\nmomentum = " MOMENTUM "\n",
           steps, init_path, opt.data, b, (steps + 1) * b);
  snprintf(dir, sizeof dir, "%s/run-%d", tmp_root, run_counter++);
  lk_config *cfg;
  lk_run *run = NULL;
  lk_run_options ro = {.out_dir = dir};
  if (lk_config_parse("bench-mlp.ini", text, &cfg) != 0)
    die("config", lk_last_error());
  if (lk_run_new(cfg, &ro, &run) != 0)
    die("lk_run_new", lk_last_error());
  lk_config_free(cfg);
  double t0 = now_s();
  if (lk_run_train(run) != 0)
    die("lk_run_train", lk_last_error());
  double t = now_s() - t0;
  lk_run_free(run);
  *loss = last_loss(dir);
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  return t;
}

/* ---- torch -------------------------------------------------------------- */

/* S in single quotes for sh. */
static void quote(char *out, size_t len, const char *s) {
  size_t n = 0;
  out[n++] = '\'';
  for (; *s && n + 5 < len; s++) {
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

static const char *env_coretype; /* the environment's, NULL: unset */

/* Torch's samples per second over steps W to S - 1 and its losses after W
 * and S steps, at its BEST (denormals flushed, OpenBLAS's AVX-512 kernels)
 * or as the environment gives it; false if the script failed. */
static bool torch_run(bool best, size_t b, size_t w, size_t s, double *sps,
                      double *loss_w, double *loss) {
  char path[1024], script[1024], py[1024], init[1024], data[1024], cmd[8192];
  snprintf(path, sizeof path, "%s/bench/mlp_torch.py", opt.srcdir);
  quote(script, sizeof script, path);
  quote(py, sizeof py, opt.python);
  quote(init, sizeof init, init_path);
  quote(data, sizeof data, opt.data);
  char core[200] = "";
  if (!best) { /* the environment's kernels */
    char q[100];
    quote(q, sizeof q, env_coretype ? env_coretype : "");
    snprintf(core, sizeof core, env_coretype ? "OPENBLAS_CORETYPE=%s " : "%s",
             env_coretype ? q : "env -u OPENBLAS_CORETYPE ");
  }
  snprintf(cmd, sizeof cmd,
           "%s%s %s --init %s --batch %zu --steps %zu --warmup %zu --data %s "
           "--threads %d --lr " LR " --momentum " MOMENTUM " --layers " LAYERS
           "%s",
           core, py, script, init, b, s, w, data, opt.threads,
           best ? " --flush-denormal" : "");
  FILE *p = popen(cmd, "r");
  if (!p)
    return false;
  double secs;
  long timed;
  int got = fscanf(p,
                   "samples_per_second %lf seconds %lf timed_steps %ld "
                   "loss_at_warmup %lf loss %lf",
                   sps, &secs, &timed, loss_w, loss);
  return pclose(p) == 0 && got == 5;
}

/* ---- the table ---------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr, "usage: bench/mlp [--threads T] [--reps R] [--scale F] "
                  "[--data DIR] [--srcdir DIR] [--python PATH]\n");
  exit(2);
}

static void parse_args(int argc, char **argv) {
#ifdef LK_SRCDIR
  opt.srcdir = LK_SRCDIR;
#else
  if (getenv("LK_SRCDIR")) /* as make check's environment has it */
    opt.srcdir = getenv("LK_SRCDIR");
#endif
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v)
      usage();
    if (strcmp(a, "--threads") == 0)
      opt.threads = atoi(v);
    else if (strcmp(a, "--reps") == 0)
      opt.reps = atoi(v);
    else if (strcmp(a, "--scale") == 0)
      opt.scale = atof(v);
    else if (strcmp(a, "--data") == 0)
      opt.data = v;
    else if (strcmp(a, "--srcdir") == 0)
      opt.srcdir = v;
    else if (strcmp(a, "--python") == 0)
      opt.python = v;
    else
      usage();
  }
  if (opt.threads < 1 || opt.reps < 1 || opt.reps > MAX_REPS ||
      !(opt.scale > 0))
    usage();
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  /* Before any plugin loads OpenBLAS (it reads them once), and inherited
   * by torch. */
  char threads[16];
  snprintf(threads, sizeof threads, "%d", opt.threads);
  setenv("OPENBLAS_NUM_THREADS", threads, 1);
  setenv("OMP_NUM_THREADS", threads, 1);
  /* OpenBLAS's AVX-512 kernels where the CPU has AVX-512, whatever the
   * environment says (some say Haswell: half the speed), for the mlp
   * plugin's OpenBLAS and torch at its best; torch's default row keeps
   * the environment's. */
  env_coretype = getenv("OPENBLAS_CORETYPE");
  static char before[64];
  if (env_coretype)
    snprintf(before, sizeof before, "%s", env_coretype), env_coretype = before;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f"))
    setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 1);
#endif
  if (!mkdtemp(tmp_root)) {
    perror("bench/mlp: mkdtemp");
    return 1;
  }
  snprintf(init_path, sizeof init_path, "%s/init.f32", tmp_root);
  write_init(init_path);

  char check[1200], py[1024];
  quote(py, sizeof py, opt.python);
  snprintf(check, sizeof check,
           "%s -I -c 'import torch; torch.tensor' >/dev/null 2>&1", py);
  bool have_torch = system(check) == 0;

  printf("MLP " LAYERS " ReLU, cross-entropy, SGD lr " LR " momentum " MOMENTUM
         ", Fashion-MNIST in file order, %d thread%s; median of %d\n"
         "samples/s over steps W..S-1 (S = 2W); loss after S steps; |diff|: "
         "the larger difference of the losses after W and after S steps\n\n",
         opt.threads, opt.threads > 1 ? "s" : "", opt.reps);
  printf("torch/s: torch at its best (denormals flushed, OPENBLAS_CORETYPE "
         "%s), the ratio's; torch dflt/s: as the environment gives it "
         "(OPENBLAS_CORETYPE %s)\n\n",
         getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset",
         env_coretype ? env_coretype : "unset");
  printf("%5s %6s %12s %12s %12s %8s %6s %12s %12s %9s\n", "B", "S",
         "loopkit/s", "torch/s", "torch dflt/s", "ratio", "goal",
         "loopkit loss", "torch loss", "|diff|");
  fflush(stdout);
  bool all_goals = true, all_agree = true;
  for (size_t c = 0; c < N_CASES; c++) {
    size_t b = cases[c].batch;
    size_t w = (size_t)llround((double)cases[c].half_steps * opt.scale);
    w = w ? w : 1;
    size_t s = 2 * w;
    double mine[MAX_REPS], theirs[MAX_REPS], dflt[MAX_REPS];
    double lk_w = NAN, lk_s = NAN, t_w = NAN, t_s = NAN, d_w, d_s;
    int n_theirs = 0, n_dflt = 0;
    for (int r = 0; r < opt.reps; r++) {
      double tw = loopkit_run(b, w, &lk_w);
      double ts = loopkit_run(b, s, &lk_s);
      mine[r] = (double)((s - w) * b) / (ts - tw);
      if (have_torch && torch_run(true, b, w, s, &theirs[n_theirs], &t_w, &t_s))
        n_theirs++;
      if (have_torch && torch_run(false, b, w, s, &dflt[n_dflt], &d_w, &d_s))
        n_dflt++;
    }
    double m = median(mine, opt.reps);
    if (n_theirs == 0) {
      printf("%5zu %6zu %12.0f %12s %8s %5.0fx %12.7f\n", b, s, m,
             have_torch ? "failed" : "no torch", "", cases[c].goal, lk_s);
      all_goals = all_agree = false;
      continue;
    }
    double t = median(theirs, n_theirs), ratio = m / t;
    double dw = fabs(lk_w - t_w), ds = fabs(lk_s - t_s);
    bool agree = dw <= LOSS_TOLERANCE && ds <= LOSS_TOLERANCE; /* not NaN */
    double diff = isnan(dw) || isnan(ds) ? NAN : fmax(dw, ds);
    all_goals &= ratio >= cases[c].goal;
    all_agree &= agree;
    printf("%5zu %6zu %12.0f %12.0f %12.0f %7.2fx %5.0fx %12.7f %12.7f %9.2e "
           "%s %s\n",
           b, s, m, t, n_dflt ? median(dflt, n_dflt) : 0, ratio, cases[c].goal,
           lk_s, t_s, diff, agree ? "PASS" : "FAIL",
           ratio >= cases[c].goal ? "" : "(slow)");
    fflush(stdout);
  }
  if (!have_torch) { /* nothing to compare with: not a failure */
    printf("\ntorch skipped: %s cannot import torch\n", opt.python);
    cleanup();
    return 0;
  }
  printf("\nlosses agree to %g: %s\nspeed goals: %s\n", LOSS_TOLERANCE,
         all_agree ? "PASS" : "FAIL", all_goals ? "met" : "NOT met");
  cleanup();
  return all_agree ? 0 : 1; /* a slow figure is news, not an error */
}
