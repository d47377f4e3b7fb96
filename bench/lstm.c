/* bench/lstm: the sequential plugin's char-level LSTM language model
 * against torch 1.13's nn.LSTM, training the same net the same way, in
 * tokens per second (issue 27, item 6).
 *
 *   embedding(256, 256) -> lstm(256) -> linear(256) on every step,
 *   cross-entropy over every position; batches of 32 windows of 65 bytes
 *   of the Jargon File (the text plugin's: 64 inputs, 64 targets); Adam
 *   lr 1e-3
 *
 * Both start from the same parameters, a safetensors file this program
 * writes (torch's default init drawn from a fixed seed, with the names of
 * the sequential plugin and of a torch module whose children are "0",
 * "1" and "2"), and train on the same batches: the text plugin draws each
 * window's start from the run's generator (nothing else draws from it:
 * the init is loaded, there is no dropout), and this program draws the
 * same ones with the same generator for bench/lstm_torch.py. At 1 and 2
 * threads ([loop] threads; torch.set_num_threads and OMP_NUM_THREADS, with
 * OPENBLAS_NUM_THREADS=1, as bench/gpt does):
 *
 * - loopkit: two fresh runs of W and S = 2W steps; the difference of
 *   their lk_run_train times is what steps W to S - 1 cost, the data
 *   plugin's copies, the optimizer and metrics.csv included.
 * - torch: bench/lstm_torch.py, a subprocess, times the same steps of the
 *   usual zero_grad / forward / loss / backward / step loop, at its best
 *   (denormals flushed, OpenBLAS's AVX-512 kernels where the CPU has
 *   them) and as the environment gives it (denormals kept, the
 *   environment's OPENBLAS_CORETYPE), side by side.
 *
 * Tokens per second are the median of --reps repetitions (the ratio is of
 * the medians), by the clock and per CPU-second of every thread (steadier
 * on a loaded machine: the load is printed). The losses of the first 20
 * steps must agree to 1e-4, relative (the exit status says whether).
 *
 * Goals (issue 27): loopkit >= 1.5x torch best at 1 thread, >= 2x at 2.
 *
 * Run from the build tree:
 *   LOOPKIT_PLUGIN_PATH=$PWD/plugins/.libs bench/lstm [--reps R]
 *     [--steps W] [--text FILE] [--srcdir DIR] [--python PATH]
 * SRCDIR (default: LK_SRCDIR) is where bench/lstm_torch.py is. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, nftw, popen, setenv */
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
#include <zlib.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h>

#define MAX_REPS 32
#define REPORT 20 /* steps whose losses are compared */
#define LOSS_TOLERANCE 1e-4
#define E 256 /* the embedding's width */
#define H 256 /* the LSTM's hidden size */
#define T 64
#define V 256
#define B 32
#define SEED 1337
#define LR "1e-3"

static struct {
  int reps;
  size_t steps;
  const char *text, *srcdir, *python;
} opt = {3, 20, "/usr/share/doc/jargon-text/jargon.txt.gz", ".",
         "/usr/bin/python3"};

static char tmp_root[] = "/tmp/loopkit-bench-lstm-XXXXXX";
static char init_path[sizeof tmp_root + 32], pos_path[sizeof tmp_root + 32];
static int run_counter;

/* CPU seconds of this process, every thread's. */
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
  fprintf(stderr, "bench/lstm: %s: %s\n", what, why);
  cleanup();
  exit(1);
}

/* ---- the parameters ------------------------------------------------------ */

/* The net's parameters in the plugin's order: name, shape, and torch's
 * default init: bound > 0, uniform on [-bound, bound); 0, normal(0, 1)
 * (nn.Embedding's). */
typedef struct param {
  const char *name;
  size_t d0, d1; /* d1 = 0: a vector */
  double bound;
} param;

#define N_PARAMS 7
static const param params[N_PARAMS] = {
    {"0.weight", V, E, 0},
    {"1.weight_ih_l0", 4 * H, E, 0.0625}, /* 1 / sqrt(H) */
    {"1.weight_hh_l0", 4 * H, H, 0.0625},
    {"1.bias_ih_l0", 4 * H, 0, 0.0625},
    {"1.bias_hh_l0", 4 * H, 0, 0.0625},
    {"2.weight", V, H, 0.0625}, /* 1 / sqrt(in_features) */
    {"2.bias", V, 0, 0.0625},
};

static void put_le(FILE *f, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++)
    fputc((int)(v >> (8 * i)) & 0xff, f);
}

/* The init, as a safetensors file: an 8-byte header length, the JSON
 * header (name: dtype, shape, data_offsets), the little-endian f32 data. */
static void write_init(const char *path) {
  char head[2048];
  size_t h = (size_t)snprintf(head, sizeof head, "{"), off = 0;
  for (size_t i = 0; i < N_PARAMS; i++) {
    const param *p = &params[i];
    size_t count = p->d0 * (p->d1 ? p->d1 : 1);
    char shape[48];
    if (p->d1)
      snprintf(shape, sizeof shape, "%zu,%zu", p->d0, p->d1);
    else
      snprintf(shape, sizeof shape, "%zu", p->d0);
    h += (size_t)snprintf(head + h, sizeof head - h,
                          "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],"
                          "\"data_offsets\":[%zu,%zu]}",
                          i ? "," : "", p->name, shape, off, off + 4 * count);
    off += 4 * count;
  }
  h += (size_t)snprintf(head + h, sizeof head - h, "}");
  while (h % 8)
    head[h++] = ' ';
  FILE *f = fopen(path, "wb");
  if (!f)
    die(path, "cannot create");
  put_le(f, h, 8);
  fwrite(head, 1, h, f);
  lk_rng rng;
  lk_rng_seed(&rng, 20261206, 0);
  for (size_t i = 0; i < N_PARAMS; i++) {
    const param *p = &params[i];
    size_t count = p->d0 * (p->d1 ? p->d1 : 1);
    for (size_t k = 0; k < count; k++) {
      float v = p->bound > 0
                    ? (float)(p->bound * (2 * lk_rng_uniform(&rng) - 1))
                    : (float)lk_rng_normal(&rng);
      uint32_t u;
      memcpy(&u, &v, sizeof u);
      put_le(f, u, 4);
    }
  }
  if (ferror(f) | fclose(f))
    die(path, "write error");
}

/* ---- the batches --------------------------------------------------------- */

/* The text plugin's window starts for S steps: the run's generator (seeded
 * from [loop] seed, stream 0, as the host seeds it) modulo the positions a
 * window may take. */
static void write_positions(const char *path, size_t steps) {
  gzFile g = gzopen(opt.text, "rb");
  if (!g)
    die(opt.text, "cannot open");
  unsigned char buf[1 << 16];
  size_t len = 0;
  int got;
  while ((got = gzread(g, buf, sizeof buf)) > 0)
    len += (size_t)got;
  gzclose(g);
  if (len < T + 2)
    die(opt.text, "too short");
  FILE *f = fopen(path, "wb");
  if (!f)
    die(path, "cannot create");
  lk_rng rng;
  lk_rng_seed(&rng, SEED, 0);
  for (size_t i = 0; i < steps * B; i++)
    put_le(f, lk_rng_u64(&rng) % (len - T), 4);
  if (ferror(f) | fclose(f))
    die(path, "write error");
}

/* ---- loopkit ------------------------------------------------------------- */

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
 * lk_run_train took (*CPU its CPU seconds); the first losses into LOSSES. */
static double loopkit_run(size_t steps, int threads, double *losses,
                          double *cpu) {
  char text[2048], dir[sizeof tmp_root + 32];
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = %zu\nthreads = %d\nseed = %d\n"
           "[plugins]\nstep = sequential\ndata = text\noptimizer = adam\n"
           "[sequential]\nlayers = embedding(%d, %d), lstm(%d), linear(%d)\n"
           "block_size = %d\ninit = %s\n"
           "[text]\npath = %s\nbatch_size = %d\n"
           "val_split = 0\nbatches_per_epoch = %zu\n"
           "[adam]\nlr = " LR "\n",
           steps, threads, SEED, V, E, H, V, T, init_path, opt.text, B,
           steps + 1);
  snprintf(dir, sizeof dir, "%s/run-%d", tmp_root, run_counter++);
  lk_config *cfg;
  lk_run *run = NULL;
  lk_run_options ro = {.out_dir = dir};
  if (lk_config_parse("bench-lstm.ini", text, &cfg) != 0)
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

/* ---- torch --------------------------------------------------------------- */

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

/* Torch's tokens per second (by the clock, per CPU-second) over steps W to
 * S - 1, its peak RSS and its first losses, at its best (BEST: denormals
 * flushed, OpenBLAS's AVX-512 kernels) or as the environment gives it;
 * false if the script failed. */
static bool torch_run(bool best, size_t w, size_t s, int threads, double *tps,
                      double *cps, long *rss, double *losses) {
  char path[1024], script[1100], py[1100], init[1100], text[1100], pos[1100],
      cmd[8192];
  snprintf(path, sizeof path, "%s/bench/lstm_torch.py", opt.srcdir);
  quote(script, sizeof script, path);
  quote(py, sizeof py, opt.python);
  quote(init, sizeof init, init_path);
  quote(text, sizeof text, opt.text);
  quote(pos, sizeof pos, pos_path);
  char core[200] = "";
  if (!best) { /* the environment's kernels */
    char q[100];
    quote(q, sizeof q, env_coretype ? env_coretype : "");
    snprintf(core, sizeof core, env_coretype ? "OPENBLAS_CORETYPE=%s " : "%s",
             env_coretype ? q : "env -u OPENBLAS_CORETYPE ");
  }
  snprintf(cmd, sizeof cmd,
           "%sOPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=%d %s %s --init %s "
           "--text %s --positions %s --steps %zu --warmup %zu --threads %d "
           "--batch %d --block %d --embed %d --hidden %d --lr " LR
           " --report %d%s",
           core, threads, py, script, init, text, pos, s, w, threads, B, T, E,
           H, REPORT, best ? " --flush-denormal" : "");
  FILE *p = popen(cmd, "r");
  if (!p)
    return false;
  double secs;
  long timed;
  char list[4096];
  int got = fscanf(p,
                   "tokens_per_second %lf cpu_tokens_per_second %lf seconds "
                   "%lf timed_steps %ld maxrss_kb %ld losses %4095s",
                   tps, cps, &secs, &timed, rss, list);
  int status = pclose(p);
  if (status != 0 || got != 6)
    return false;
  char *c = list;
  for (int i = 0; i < REPORT; i++) {
    losses[i] = strtod(c, &c);
    if (*c == ',')
      c++;
  }
  return true;
}

static void usage(void) {
  fprintf(stderr, "usage: bench/lstm [--reps R] [--steps W] [--text FILE] "
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
    else if (strcmp(a, "--text") == 0)
      opt.text = v;
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
 * environment said: OpenBLAS reads it when it is loaded, so before either
 * side loads it (bench/gpt says why). *WAS gets the environment's value. */
static void coretype(const char **was) {
  *was = getenv("OPENBLAS_CORETYPE");
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static char before[64];
  if (*was)
    snprintf(before, sizeof before, "%s", *was), *was = before;
  if (__builtin_cpu_supports("avx512f"))
    setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 1);
#endif
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  coretype(&env_coretype);
  if (!mkdtemp(tmp_root)) {
    perror("bench/lstm: mkdtemp");
    return 1;
  }
  snprintf(init_path, sizeof init_path, "%s/init.safetensors", tmp_root);
  snprintf(pos_path, sizeof pos_path, "%s/positions.u32", tmp_root);
  write_init(init_path);
  write_positions(pos_path, 2 * opt.steps);

  char check[1200], py[1100];
  quote(py, sizeof py, opt.python);
  snprintf(check, sizeof check,
           "%s -I -c 'import torch; torch.tensor' >/dev/null 2>&1", py);
  bool have_torch = system(check) == 0;
  const char *core = getenv("OPENBLAS_CORETYPE");
  {
    lk_nn *nn;
    if (lk_nn_create(&nn, 1, 0) != 0)
      die("lk_nn_create", lk_last_error());
    printf("char-level LSTM LM: embedding(%d, %d) -> lstm(%d) -> linear(%d) "
           "on every step; batch %d x %d tokens; Adam lr " LR
           "\n%s; median of %d; W = %zu, S = %zu steps\nproducts: %s, kit "
           "vectors %s\ntorch best: denormals flushed "
           "(torch.set_flush_denormal), OPENBLAS_CORETYPE %s; torch "
           "default: denormals kept, OPENBLAS_CORETYPE %s\n\n",
           V, E, H, V, B, T, opt.text, opt.reps, opt.steps, 2 * opt.steps,
           lk_nn_backend(nn), lk_nn_isa(nn), core ? core : "unset",
           env_coretype ? env_coretype : "unset");
    lk_nn_free(nn);
  }
  printf("%7s %-19s %11s %9s %12s %10s\n", "threads", "row", "tokens/s",
         "vs torch", "per CPU-s", "loss diff");
  fflush(stdout);
  static const char *names[3] = {"loopkit", "torch best", "torch default"};
  double goals[2] = {1.5, 2.0};
  bool all_goals = true, all_agree = true;
  char summary[2][160];
  for (int t = 1; t <= 2; t++) {
    size_t w = opt.steps, s = 2 * w;
    double load0 = load_now();
    double tps[3][MAX_REPS], cps[3][MAX_REPS], loss[3][REPORT];
    int got[3] = {0};
    long t_rss = 0;
    for (int r = 0; r < opt.reps; r++) {
      double cw, cs;
      double tw = loopkit_run(w, t, NULL, &cw);
      double ts = loopkit_run(s, t, loss[0], &cs);
      tps[0][got[0]] = (double)((s - w) * B * T) / (ts - tw);
      cps[0][got[0]++] = (double)((s - w) * B * T) / (cs - cw);
      for (int k = 1; k < 3 && have_torch; k++) {
        long rss;
        if (torch_run(k == 1, w, s, t, &tps[k][got[k]], &cps[k][got[k]], &rss,
                      loss[k])) {
          got[k]++;
          t_rss = rss > t_rss ? rss : t_rss;
        }
      }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double med[3] = {0}, cmed[3] = {0};
    for (int k = 0; k < 3; k++) {
      med[k] = got[k] ? median(tps[k], got[k]) : 0;
      cmed[k] = got[k] ? median(cps[k], got[k]) : 0;
    }
    for (int k = 0; k < 3; k++) {
      if (!got[k]) {
        printf("%7d %-19s %11s\n", t, names[k],
               have_torch ? "failed" : "no torch");
        continue;
      }
      printf("%7d %-19s %11.0f", t, names[k], med[k]);
      if (got[1])
        printf(" %8.2fx", med[k] / med[1]);
      else
        printf(" %9s", "");
      printf(" %12.0f", cmed[k]);
      if (got[1]) { /* against torch best's losses */
        double worst = 0;
        for (int i = 0; i < REPORT; i++) {
          double d = fabs(loss[k][i] - loss[1][i]) / fabs(loss[1][i]);
          worst = isnan(d) || d > worst ? d : worst;
        }
        printf(" %10.2e%s", worst,
               k == 0 ? (worst <= LOSS_TOLERANCE ? " PASS" : " FAIL") : "");
        if (k == 0)
          all_agree &= worst <= LOSS_TOLERANCE;
      }
      printf("\n");
    }
    bool g = !got[1] || med[0] / med[1] >= goals[t - 1];
    printf("%7s load %.2f then %.2f; peak RSS loopkit %ld MiB, torch %ld "
           "MiB\n",
           "", load0, load_now(), ru.ru_maxrss / 1024, t_rss / 1024);
    snprintf(summary[t - 1], sizeof summary[0],
             "%d thread%s: loopkit %.2fx torch best (>= %.1fx): %s "
             "(per CPU-second: %.2fx)",
             t, t > 1 ? "s" : "", got[1] ? med[0] / med[1] : 0, goals[t - 1],
             got[1] ? (g ? "met" : "NOT met") : "(no torch)",
             got[1] ? cmed[0] / cmed[1] : 0);
    all_goals &= g;
    fflush(stdout);
  }
  printf("\nthe goals, by the clock (issue 27: 1.5x torch at 1 thread, 2x "
         "at 2):\n  %s\n  %s\n",
         summary[0], summary[1]);
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
