/* bench/cnn: the sequential plugin against torch, training the CNN of
 * examples/fashion-mnist-cnn.ini the same way, in samples per second.
 *
 *   conv(1->32, 3x3, pad 1) - ReLU - maxpool 2 - conv(32->64, 3x3, pad 1) -
 *   ReLU - maxpool 2 - flatten - linear(3136->128) - ReLU - linear(128->10)
 *
 * Both train it at batch 64 with Adam lr 0.001 on the first training
 * images of Fashion-MNIST in file order (no shuffling, x / 255), from the
 * same initial parameters: a safetensors file this program writes
 * (torch's distributions, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), from a
 * fixed seed, named as nn.Sequential names them: 0.weight, 0.bias, ...)
 * that the plugin (option init) and bench/cnn_torch.py both read. At 1
 * and at 2 threads ([loop] threads; torch.set_num_threads and
 * OMP_NUM_THREADS, with OPENBLAS_NUM_THREADS=1 as bench/gpt.c says why):
 *
 * - loopkit: two fresh runs (lk_run_new, lk_run_train) of W and S = 2W
 *   steps; the difference of their lk_run_train times is what steps W to
 *   S - 1 cost, the data plugin's copies, the closure, the optimizer and
 *   metrics.csv included. Its idx reads the training file from the data
 *   directory and a test split of one image this program writes, so that
 *   the runs' final test costs nothing.
 * - torch: bench/cnn_torch.py, a subprocess, times the same steps of the
 *   usual zero_grad / forward / loss / backward / step loop.
 *
 * Samples per second are the median of --reps repetitions (the ratio is
 * of the medians). The losses of the first 20 steps must agree to 1e-4,
 * relative (they part by ~1e-6: other sums in other orders). GFLOP/s are
 * samples/s times the products' FLOPs per sample (forward, the weights'
 * gradients and the inputs' but the first conv's, which neither computes),
 * against the peak this program measures: one 1536^3 sgemm per thread,
 * through lk_nn_sgemm; "per CPU" is the same fraction by CPU time (as
 * bench/gpt.c explains: steadier on a shared machine; the load is
 * printed), and the last lines say which goals are met. Peak memory is
 * each side's getrusage maxrss:
 * loopkit's, this process's high-water mark after the runs of that thread
 * count (every earlier run's included, and at 2 threads the 1-thread
 * peak's 28 MiB of matrices: an upper bound); torch's, its largest
 * subprocess.
 *
 * Goals (issue 14): loopkit >= 1.0x torch at 1 thread, >= 1.3x at 2.
 *
 * Run from the build tree:
 *   LOOPKIT_PLUGIN_PATH=$PWD/plugins/.libs bench/cnn [--reps R]
 *     [--steps W] [--data DIR] [--srcdir DIR] [--python PATH]
 * SRCDIR (default: LK_SRCDIR) is where bench/cnn_torch.py is. Which
 * kernels OpenBLAS runs is printed: the environment's OPENBLAS_CORETYPE
 * decides (src/nn/gemm.c). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, nftw, popen */
#endif
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h>

#define MAX_REPS 32
#define REPORT 20 /* steps whose losses are compared */
#define LOSS_TOLERANCE 1e-4
#define BATCH 64
#define LAYERS                                                                 \
  "conv2d(32, 3, padding=1), relu, maxpool2d(2), conv2d(64, 3, padding=1), "   \
  "relu, maxpool2d(2), flatten, linear(128), relu, linear(10)"
#define LR "0.001"

static struct {
  int reps;
  size_t steps;
  const char *data, *srcdir, *python;
} opt = {3, 40, "/usr/share/datasets/fashion-mnist", ".", "/usr/bin/python3"};

static char tmp_root[] = "/tmp/loopkit-bench-cnn-XXXXXX";
static char init_path[sizeof tmp_root + 24], data_dir[sizeof tmp_root + 16];
static int run_counter;

/* The parameters in order: weight [out, in, kh, kw] or [out, in] and
 * bias [out] of each conv and linear, with fan_in = in x kernel. */
static const struct {
  const char *name;
  size_t out, in, kernel; /* kernel 0: a linear layer */
} params[] = {
    {"0", 32, 1, 3}, {"3", 64, 32, 3}, {"7", 128, 3136, 0}, {"9", 10, 128, 0}};
#define N_PARAMS (sizeof params / sizeof params[0])

/* FLOPs of one training sample's products: forward 2 MACs... per layer
 * (conv: 2 OC C K P; linear: 2 OC C), the weight gradient the same, the
 * input gradient the same but for the first layer. */
static double flops_per_sample(void) {
  double conv1 = 2.0 * 32 * 1 * 9 * 784, conv2 = 2.0 * 64 * 32 * 9 * 196;
  double fc1 = 2.0 * 128 * 3136, fc2 = 2.0 * 10 * 128;
  return 2 * conv1 + 3 * (conv2 + fc1 + fc2);
}

/* CPU seconds of this process, every thread's: under a loaded machine a
 * steadier measure of the work than the clock on the wall. */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

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

/* The machine's load, the 1-minute average (0 if unknown): a shared
 * machine's figures are only as good as it is low. */
static double load_now(void) {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : 0;
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
  fprintf(stderr, "bench/cnn: %s: %s\n", what, why);
  cleanup();
  exit(1);
}

static void put_le32(FILE *f, uint32_t u) {
  unsigned char le[4] = {(unsigned char)u, (unsigned char)(u >> 8),
                         (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
  fwrite(le, 1, 4, f);
}

static void put_be32(FILE *f, uint32_t u) {
  unsigned char be[4] = {(unsigned char)(u >> 24), (unsigned char)(u >> 16),
                         (unsigned char)(u >> 8), (unsigned char)u};
  fwrite(be, 1, 4, f);
}

/* A safetensors file: an 8-byte little-endian header length, the JSON
 * header (name: dtype, shape, byte offsets), padded with spaces to 8
 * bytes, then the tensors' bytes. */
static void write_init(const char *path) {
  char header[2048];
  int used = snprintf(header, sizeof header, "{");
  size_t offset = 0;
  for (size_t l = 0; l < N_PARAMS; l++) {
    size_t k = params[l].kernel,
           w = params[l].out * params[l].in * (k ? k * k : 1);
    char shape[64];
    if (k)
      snprintf(shape, sizeof shape, "%zu,%zu,%zu,%zu", params[l].out,
               params[l].in, k, k);
    else
      snprintf(shape, sizeof shape, "%zu,%zu", params[l].out, params[l].in);
    used += snprintf(header + used, sizeof header - (size_t)used,
                     "%s\"%s.weight\":{\"dtype\":\"F32\",\"shape\":[%s],"
                     "\"data_offsets\":[%zu,%zu]},"
                     "\"%s.bias\":{\"dtype\":\"F32\",\"shape\":[%zu],"
                     "\"data_offsets\":[%zu,%zu]}",
                     l ? "," : "", params[l].name, shape, offset,
                     offset + 4 * w, params[l].name, params[l].out,
                     offset + 4 * w, offset + 4 * (w + params[l].out));
    offset += 4 * (w + params[l].out);
  }
  used += snprintf(header + used, sizeof header - (size_t)used, "}");
  while ((8 + used) % 8)
    header[used++] = ' ';
  FILE *f = fopen(path, "wb");
  if (!f)
    die(path, "cannot create");
  put_le32(f, (uint32_t)used);
  put_le32(f, 0);
  fwrite(header, 1, (size_t)used, f);
  lk_rng rng;
  lk_rng_seed(&rng, 20261201, 0);
  for (size_t l = 0; l < N_PARAMS; l++) {
    size_t k = params[l].kernel,
           w = params[l].out * params[l].in * (k ? k * k : 1);
    double bound = 1 / sqrt((double)(w / params[l].out)); /* 1/sqrt(fan_in) */
    for (size_t i = 0; i < w + params[l].out; i++) {
      float v = (float)((2 * lk_rng_uniform(&rng) - 1) * bound);
      uint32_t u;
      memcpy(&u, &v, sizeof u);
      put_le32(f, u);
    }
  }
  if (ferror(f) | fclose(f))
    die(path, "write error");
}

/* DATA_DIR: the training files linked from the data directory, and a test
 * split of one blank image. */
static void write_data(void) {
  const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"};
  char from[1024], to[1024];
  for (int i = 0; i < 2; i++) {
    const char *ext = "";
    snprintf(from, sizeof from, "%s/%s", opt.data, names[i]);
    if (access(from, R_OK) != 0)
      ext = ".gz";
    snprintf(from, sizeof from, "%s/%s%s", opt.data, names[i], ext);
    snprintf(to, sizeof to, "%s/%s%s", data_dir, names[i], ext);
    if (symlink(from, to) != 0)
      die(to, "cannot link");
  }
  snprintf(to, sizeof to, "%s/t10k-images-idx3-ubyte", data_dir);
  FILE *f = fopen(to, "wb");
  if (!f)
    die(to, "cannot create");
  put_be32(f, 0x803), put_be32(f, 1), put_be32(f, 28), put_be32(f, 28);
  for (int i = 0; i < 784; i++)
    fputc(0, f);
  fclose(f);
  snprintf(to, sizeof to, "%s/t10k-labels-idx1-ubyte", data_dir);
  if (!(f = fopen(to, "wb")))
    die(to, "cannot create");
  put_be32(f, 0x801), put_be32(f, 1), fputc(0, f);
  fclose(f);
}

/* ---- loopkit ------------------------------------------------------------ */

/* The loss column of metrics.csv's step rows: LOSSES[0..n). */
static size_t read_losses(const char *dir, double *losses, size_t n) {
  char path[512], line[4096];
  snprintf(path, sizeof path, "%s/metrics.csv", dir);
  FILE *f = fopen(path, "r");
  if (!f)
    die(path, "cannot open");
  size_t got = 0;
  while (got < n && fgets(line, sizeof line, f)) {
    char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (!c2 || c2[1] == ',' || c2[1] == '\n' || strncmp(line, "step,", 5) == 0)
      continue;
    losses[got++] = strtod(c2 + 1, NULL);
  }
  fclose(f);
  return got;
}

/* Trains STEPS steps on THREADS threads in a fresh run: the seconds
 * lk_run_train took; the first losses into LOSSES (REPORT of them). */
static double loopkit_run(size_t steps, int threads, bool bf16, double *losses,
                          double *cpu) {
  char text[2048], dir[sizeof tmp_root + 32];
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = %zu\nthreads = %d\n"
           "[plugins]\nstep = sequential\noptimizer = adam\ndata = idx\n%s"
           "[sequential]\nlayers = " LAYERS "\ninit = %s\n"
           "[idx]\ndir = %s\nbatch_size = %d\nshuffle = false\n"
           "normalize = scale\nlimit = %zu\n"
           "[adam]\nlr = " LR "\n",
           steps, threads, bf16 ? "precision = bf16-mixed\n" : "", init_path,
           data_dir, BATCH, (steps + 1) * BATCH);
  snprintf(dir, sizeof dir, "%s/run-%d", tmp_root, run_counter++);
  lk_config *cfg;
  lk_run *run = NULL;
  lk_run_options ro = {.out_dir = dir};
  if (lk_config_parse("bench-cnn.ini", text, &cfg) != 0)
    die("config", lk_last_error());
  if (lk_run_new(cfg, &ro, &run) != 0)
    die("lk_run_new", lk_last_error());
  lk_config_free(cfg);
  double t0 = now_s(), c0 = cpu_s();
  if (lk_run_train(run) != 0)
    die("lk_run_train", lk_last_error());
  double t = now_s() - t0;
  *cpu = cpu_s() - c0;
  lk_run_free(run);
  if (losses && read_losses(dir, losses, REPORT) != REPORT)
    die(dir, "metrics.csv has fewer step rows than compared");
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  return t;
}

/* ---- torch -------------------------------------------------------------- */

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

/* How torch runs: at its best (denormals flushed: its conv kernels ran 4x
 * slower on denormals here; OpenBLAS's AVX-512 kernels), as the
 * environment gives it (denormals kept, the environment's
 * OPENBLAS_CORETYPE), or at its best under autocast(bf16). */
typedef enum { TORCH_BEST, TORCH_DEFAULT, TORCH_BF16 } torch_mode;
static const char *env_coretype; /* the environment's, NULL: unset */

/* Torch's samples per second over steps W to S - 1 and its first losses;
 * false if the script failed. */
static bool torch_run(torch_mode mode, size_t w, size_t s, int threads,
                      double *sps, double *cps, double *losses) {
  char path[1024], script[1024], py[1024], init[1024], data[1024], cmd[8192];
  snprintf(path, sizeof path, "%s/bench/cnn_torch.py", opt.srcdir);
  quote(script, sizeof script, path);
  quote(py, sizeof py, opt.python);
  quote(init, sizeof init, init_path);
  quote(data, sizeof data, opt.data);
  char core[200] = "";
  if (mode == TORCH_DEFAULT) { /* the environment's kernels */
    char q[100];
    quote(q, sizeof q, env_coretype ? env_coretype : "");
    snprintf(core, sizeof core, env_coretype ? "OPENBLAS_CORETYPE=%s " : "%s",
             env_coretype ? q : "env -u OPENBLAS_CORETYPE ");
  }
  snprintf(cmd, sizeof cmd,
           "%sOPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=%d %s %s --init %s "
           "--batch %d --steps %zu --warmup %zu --data %s "
           "--threads %d --lr " LR " --report %d%s%s",
           core, threads, py, script, init, BATCH, s, w, data, threads, REPORT,
           mode != TORCH_DEFAULT ? " --flush-denormal" : "",
           mode == TORCH_BF16 ? " --autocast-bf16" : "");
  FILE *p = popen(cmd, "r");
  if (!p)
    return false;
  double secs, cpu;
  long timed;
  char list[4096];
  int got = fscanf(p,
                   "samples_per_second %lf seconds %lf cpu_seconds %lf "
                   "timed_steps %ld losses %4095s",
                   sps, &secs, &cpu, &timed, list);
  int status = pclose(p);
  if (status != 0 || got != 5)
    return false;
  *cps = (double)timed * BATCH / cpu;
  char *c = list;
  for (int i = 0; i < REPORT; i++) {
    losses[i] = strtod(c, &c);
    if (*c == ',')
      c++;
  }
  return true;
}

/* ---- the machine's peak ------------------------------------------------ */

/* GFLOP/s of a 1536^3 lk_nn_sgemm on THREADS threads, the best of 7 after a
 * warm-up: f32 products (FLAGS LK_NN_F32, the sgemm peak) or the kit's bf16
 * ones (LK_NN_BF16, the bf16 peak). */
static double sgemm_peak(int threads, unsigned flags, double *per_cpu) {
  const int n = 1536;
  lk_nn *nn;
  if (lk_nn_create(&nn, threads, flags) != 0)
    die("lk_nn_create", lk_last_error());
  size_t count = (size_t)n * n;
  float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b),
        *c = malloc(count * sizeof *c);
  if (!a || !b || !c)
    die("peak", "out of memory");
  for (size_t i = 0; i < count; i++)
    a[i] = (float)(i % 7) * 0.25f, b[i] = (float)(i % 5) * 0.5f;
  double best = 0;
  *per_cpu = 0;
  for (int r = 0; r < 8; r++) {
    double t0 = now_s(), c0 = cpu_s();
    lk_nn_sgemm(nn, false, false, n, n, n, 1, a, n, b, n, 0, c, n);
    double g = 2.0 * n * n * n / (now_s() - t0) / 1e9;
    double gc = 2.0 * n * n * n / (cpu_s() - c0) / 1e9;
    if (r > 0 && gc > *per_cpu)
      *per_cpu = gc;
    if (r > 0 && g > best) /* the first warms up */
      best = g;
  }
  free(a), free(b), free(c);
  lk_nn_free(nn);
  return best;
}

static void usage(void) {
  fprintf(stderr, "usage: bench/cnn [--reps R] [--steps W] [--data DIR] "
                  "[--srcdir DIR] [--python PATH]\n");
  exit(2);
}

static void parse_args(int argc, char **argv) {
#ifdef LK_SRCDIR
  opt.srcdir = LK_SRCDIR;
#else
  if (getenv("LK_SRCDIR"))
    opt.srcdir = getenv("LK_SRCDIR");
#endif
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v)
      usage();
    if (strcmp(a, "--reps") == 0)
      opt.reps = atoi(v);
    else if (strcmp(a, "--steps") == 0)
      opt.steps = (size_t)atol(v);
    else if (strcmp(a, "--data") == 0)
      opt.data = v;
    else if (strcmp(a, "--srcdir") == 0)
      opt.srcdir = v;
    else if (strcmp(a, "--python") == 0)
      opt.python = v;
    else
      usage();
  }
  if (opt.reps < 1 || opt.reps > MAX_REPS || opt.steps < REPORT)
    usage();
}

/* OpenBLAS's AVX-512 kernels wherever the CPU has AVX-512, whatever the
 * environment said (some set OPENBLAS_CORETYPE=Haswell, half the speed):
 * torch at its best, and the kit's OpenBLAS if it takes it. The
 * environment's value is kept for torch's default row. */
static void coretype(void) {
  env_coretype = getenv("OPENBLAS_CORETYPE");
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static char before[64];
  if (env_coretype)
    snprintf(before, sizeof before, "%s", env_coretype), env_coretype = before;
  if (__builtin_cpu_supports("avx512f"))
    setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 1);
#endif
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  coretype();
  if (!mkdtemp(tmp_root)) {
    perror("bench/cnn: mkdtemp");
    return 1;
  }
  snprintf(init_path, sizeof init_path, "%s/init.safetensors", tmp_root);
  snprintf(data_dir, sizeof data_dir, "%s/data", tmp_root);
  write_init(init_path);
  if (mkdir(data_dir, 0700) != 0)
    die(data_dir, "cannot create");
  write_data();

  char check[1200], py[1024];
  quote(py, sizeof py, opt.python);
  snprintf(check, sizeof check,
           "%s -I -c 'import torch; torch.tensor' >/dev/null 2>&1", py);
  bool have_torch = system(check) == 0;
  const char *core = getenv("OPENBLAS_CORETYPE");
  {
    lk_nn *nn;
    if (lk_nn_create(&nn, 1, 0) != 0)
      die("lk_nn_create", lk_last_error());
    printf("CNN " LAYERS "\nbatch %d, Adam lr " LR
           ", Fashion-MNIST in file order; median of %d; W = %zu, S = %zu "
           "steps\nproducts: %s (OPENBLAS_CORETYPE %s), kit vectors %s\n\n",
           BATCH, opt.reps, opt.steps, 2 * opt.steps, lk_nn_backend(nn),
           core ? core : "unset: OpenBLAS's own choice", lk_nn_isa(nn));
    lk_nn_free(nn);
  }
  const char *bf16 = lk_nn_bf16_engine();
  printf("loopkit bf16-mixed: %s\n"
         "torch best: denormals flushed (torch.set_flush_denormal), "
         "OPENBLAS_CORETYPE %s; torch default: denormals kept, "
         "OPENBLAS_CORETYPE %s\n\n",
         bf16 ? bf16 : "none (this CPU has no bf16 product instruction)",
         core ? core : "unset", env_coretype ? env_coretype : "unset");
  printf("%7s %-19s %10s %8s %9s %7s %7s %10s\n", "threads", "row", "samples/s",
         "vs lk f32", "GFLOP/s", "of peak", "per CPU", "loss diff");
  fflush(stdout);
  static const char *names[5] = {"loopkit f32", "loopkit bf16-mixed",
                                 "torch f32 best", "torch f32 default",
                                 "torch bf16 autocast"};
  double flops = flops_per_sample();
  double goals_bf16[2] = {1.4, 0}, goals_peak[2] = {0.70, 0.60},
         goals_torch[2] = {1.0, 1.3};
  bool all_goals = true, all_agree = true;
  char summary[6][256];
  int lines = 0;
  for (int t = 1; t <= 2; t++) {
    size_t w = opt.steps, s = 2 * w;
    double load0 = load_now();
    /* The peaks before the rows and after them, the larger kept: on a
     * shared machine one measurement may fall in another's burst. */
    double cpu0, cpu016 = 0, cpu1, cpu116 = 0;
    double peak0 = sgemm_peak(t, LK_NN_F32, &cpu0),
           peak016 = bf16 ? sgemm_peak(t, LK_NN_BF16, &cpu016) : 0;
    double sps[5][MAX_REPS], cps[5][MAX_REPS], loss[5][REPORT];
    int got[5] = {0};
    for (int r = 0; r < opt.reps; r++) {
      for (int k = 0; k < 2; k++) { /* loopkit: f32, bf16-mixed */
        if (k == 1 && !bf16)
          continue;
        double cw, cs;
        double tw = loopkit_run(w, t, k == 1, NULL, &cw);
        double ts = loopkit_run(s, t, k == 1, loss[k], &cs);
        sps[k][got[k]] = (double)((s - w) * BATCH) / (ts - tw);
        cps[k][got[k]++] = (double)((s - w) * BATCH) / (cs - cw);
      }
      for (int k = 2; k < 5 && have_torch; k++)
        if (torch_run((torch_mode)(k - 2), w, s, t, &sps[k][got[k]],
                      &cps[k][got[k]], loss[k]))
          got[k]++;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long lk_rss = ru.ru_maxrss;
    double peak = fmax(peak0, sgemm_peak(t, LK_NN_F32, &cpu1)),
           peak16 =
               bf16 ? fmax(peak016, sgemm_peak(t, LK_NN_BF16, &cpu116)) : 0;
    double cpeak = fmax(cpu0, cpu1), cpeak16 = fmax(cpu016, cpu116);
    double med[5] = {0}, cmed[5] = {0};
    for (int k = 0; k < 5; k++) {
      med[k] = got[k] ? median(sps[k], got[k]) : 0;
      cmed[k] = got[k] ? median(cps[k], got[k]) : 0;
    }
    for (int k = 0; k < 5; k++) {
      if (!got[k]) {
        printf("%7d %-19s %10s\n", t, names[k],
               k == 1       ? "no engine"
               : have_torch ? "failed"
                            : "no torch");
        continue;
      }
      bool b16 = k == 1 || k == 4;
      double gf = med[k] * flops / 1e9, pk = b16 ? peak16 : peak;
      double cgf = cmed[k] * flops / 1e9, cpk = b16 ? cpeak16 : cpeak;
      double worst = 0; /* against torch best's losses */
      for (int i = 0; i < REPORT && got[2]; i++) {
        double d = fabs(loss[k][i] - loss[2][i]) / fabs(loss[2][i]);
        worst = isnan(d) || d > worst ? d : worst;
      }
      printf("%7d %-19s %10.0f %7.2fx %9.1f %6.0f%% %6.0f%%", t, names[k],
             med[k], med[k] / med[0], gf, pk > 0 ? 100 * gf / pk : 0,
             cpk > 0 ? 100 * cgf / cpk : 0);
      if (got[2])
        printf(" %10.2e%s", worst,
               k == 0 ? (worst <= LOSS_TOLERANCE ? " PASS" : " FAIL") : "");
      printf("\n");
      if (k == 0 && got[2])
        all_agree &= worst <= LOSS_TOLERANCE;
    }
    getrusage(RUSAGE_CHILDREN, &ru);
    printf("%7s peaks (1536^3 lk_nn_sgemm): f32 %.1f GFLOP/s (%.1f per "
           "CPU-second), bf16 %.1f (%.1f); per CPU-second: loopkit f32 %.0f, "
           "bf16 %.0f, torch best %.0f samples; load %.2f then %.2f\n",
           "", peak, cpeak, peak16, cpeak16, cmed[0], cmed[1], cmed[2], load0,
           load_now());
    double frac = med[0] * flops / 1e9 / peak;
    double cfrac = cmed[0] * flops / 1e9 / cpeak;
    bool g1 = !got[1] || med[1] / med[0] >= goals_bf16[t - 1];
    bool g2 = frac >= goals_peak[t - 1];
    bool g3 = !got[2] || med[0] / med[2] >= goals_torch[t - 1];
    printf("%7s goals: bf16-mixed %.2fx loopkit f32 (>= %.1fx) %s; loopkit "
           "f32 at %.0f%% of the sgemm peak (>= %.0f%%) %s; loopkit f32 "
           "%.2fx torch best (>= %.1fx) %s; peak RSS loopkit %ld MiB, torch "
           "%ld MiB\n",
           "", got[1] ? med[1] / med[0] : 0, goals_bf16[t - 1],
           !got[1]              ? "(no engine)"
           : !goals_bf16[t - 1] ? "(no goal)"
           : g1                 ? "met"
                                : "NOT met",
           100 * frac, 100 * goals_peak[t - 1], g2 ? "met" : "NOT met",
           got[2] ? med[0] / med[2] : 0, goals_torch[t - 1],
           got[2] ? (g3 ? "met" : "NOT met") : "(no torch)", lk_rss / 1024,
           ru.ru_maxrss / 1024);
    snprintf(summary[lines++], sizeof summary[0],
             "%d thread%s: f32 at %.0f%% of the sgemm peak (>= %.0f%%): %s "
             "(per CPU-second: %.0f%%)",
             t, t > 1 ? "s" : "", 100 * frac, 100 * goals_peak[t - 1],
             g2 ? "met" : "NOT met", 100 * cfrac);
    if (got[1] && goals_bf16[t - 1])
      snprintf(summary[lines++], sizeof summary[0],
               "%d thread%s: bf16-mixed %.2fx loopkit f32 (>= %.1fx): %s "
               "(per CPU-second: %.2fx)",
               t, t > 1 ? "s" : "", med[1] / med[0], goals_bf16[t - 1],
               g1 ? "met" : "NOT met", cmed[1] / cmed[0]);
    if (got[2])
      snprintf(summary[lines++], sizeof summary[0],
               "%d thread%s: f32 %.2fx torch best (>= %.1fx): %s", t,
               t > 1 ? "s" : "", med[0] / med[2], goals_torch[t - 1],
               g3 ? "met" : "NOT met");
    all_goals &= g1 && g2 && g3;
    fflush(stdout);
  }
  printf("\n%.1f MFLOP per training sample (products only)\n", flops / 1e6);
  printf("\nthe goals, by the clock (issue 29: f32 at 70%% and 60%% of the "
         "peak, bf16-mixed 1.4x on 1 thread; issue 14: 1.0x and 1.3x "
         "torch):\n");
  for (int i = 0; i < lines; i++)
    printf("  %s\n", summary[i]);
  if (!have_torch)
    printf("  torch: skipped (%s cannot import torch)\n", opt.python);
  else
    printf("losses of the first %d steps agree to %g relative: %s\n", REPORT,
           LOSS_TOLERANCE, all_agree ? "PASS" : "FAIL");
  printf("speed goals: %s%s\n", all_goals ? "met" : "NOT met",
         have_torch ? "" : " (torch's not measured)");
  cleanup();
  return all_agree ? 0 : 1;
}
