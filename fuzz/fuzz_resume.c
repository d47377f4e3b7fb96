/* Resuming from a checkpoint (src/loop/resume.c, src/loop/rundir.c, and every
 * bundled plugin's check_state), then training on from it.
 *
 * Input: a config byte, then a checkpoint body (progress, generator, loop
 * section, tensors: everything after the envelope). The target wraps it in
 * a valid envelope with the right length and CRC-32, as an attacker who
 * recomputes the checksum would, so that every mutation reaches the host's
 * and the plugins' checks of what the values mean. The config byte picks
 * one of the configs below, which between them hold every bundled plugin
 * that keeps state; a run of each writes the seed corpus
 * (FUZZ_RESUME_SEEDS=DIR: fuzz/run does it).
 *
 * Checks, beyond "no crash, leak, hang or undefined behaviour" (in the
 * host and in the plugins, which fuzz/run builds with the sanitizers):
 * - a refused checkpoint is LK_EFORMAT (or LK_ENOMEM) with a message
 *   naming it, and no run directory is left;
 * - an accepted one trains to the config's max_steps without failing
 *   (LK_ENONFINITE excepted: a valid state may still diverge) and writes a
 *   last.ckpt that reads back. */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <sys/stat.h>

#include "../src/base/crc32.h"
#include "../src/store/checkpoint.h"
#include "fuzz_util.h"
#include "loopkit/run.h"

#define MAX_STEPS "6"

static const char *const configs[] = {
    "[loop]\nmax_steps = " MAX_STEPS "\ncheckpoint_every_n_steps = 2\n"
    "[plugins]\nstep = rosenbrock\noptimizer = sgd\nscheduler = step_lr\n"
    "callbacks = early_stopping, checkpoint, ema\n"
    "[sgd]\nlr = 0.001\nmomentum = 0.9\n[step_lr]\nstep_size = 2\n"
    "interval = step\n[early_stopping]\nmonitor = loss\n"
    "[checkpoint]\nmonitor = loss\nsave_top_k = 3\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = adam\nscheduler = cosine\n[adam]\nlr = 0.01\n"
    "amsgrad = true\n[cosine]\nT_max = 4\ninterval = step\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = adamw\nscheduler = linear_warmup\n[adamw]\nlr = 0.01\n"
    "[linear_warmup]\ntotal_iters = 3\ninterval = step\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = rmsprop\nscheduler = reduce_on_plateau\n"
    "[rmsprop]\nlr = 0.001\ncentered = true\nmomentum = 0.5\n"
    "[reduce_on_plateau]\nmonitor = loss\ninterval = step\npatience = 1\n"
    "cooldown = 2\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = adagrad\n[adagrad]\nlr = 0.01\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = lbfgs\n[rosenbrock]\nn = 5\n[lbfgs]\nhistory_size = 3\n"
    "max_iter = 4\nline_search_fn = strong_wolfe\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = sam\n[sam]\nbase = adam\n[adam]\nlr = 0.01\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = adadelta\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = adamax\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = asgd\n[asgd]\nlr = 0.001\nt0 = 2\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = nadam\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = radam\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = rprop\n",
    /* The schedulers of ABI 1.5, composed ones included. */
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = sgd\nscheduler = onecycle\n[sgd]\nlr = 0.001\n"
    "momentum = 0.9\n[onecycle]\nmax_lr = 0.001\ntotal_steps = 10\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = adam\nscheduler = cyclic\n[adam]\nlr = 0.01\n"
    "[cyclic]\nbase_lr = 0.001\nmax_lr = 0.01\nstep_size_up = 2\n"
    "mode = exp_range\ngamma = 0.9\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = sgd\nscheduler = lrs:sequential\n[sgd]\nlr = 0.001\n"
    "[lrs]\nschedulers = a:exponential, b:multistep\nmilestones = 3\n"
    "interval = step\n[a]\ngamma = 0.9\n[b]\nmilestones = 1,2\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = adamw\nscheduler = chained\n[adamw]\nlr = 0.01\n"
    "[chained]\nschedulers = c:constant, p:polynomial, w:cosine_warm_restarts\n"
    "interval = step\n[w]\nT_0 = 2\n",
    /* sgd and rmsprop created with momentum = 0, whose buffers a
     * scheduler started: sgd's from step 2 (initialized), rmsprop's at its
     * first step (has_momentum_buffer). */
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = sgd\nscheduler = cyclic\n[sgd]\nlr = 0.001\n"
    "[cyclic]\nbase_lr = 0.0001\nmax_lr = 0.001\nstep_size_up = 3\n"
    "base_momentum = 0.9\nmax_momentum = 0\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = rosenbrock\n"
    "optimizer = rmsprop\nscheduler = onecycle\n[rmsprop]\nlr = 0.001\n"
    "[onecycle]\nmax_lr = 0.001\ntotal_steps = 10\n",
    /* Parameter groups (a group's optimizer and the scheduler's copy for
     * it), and two optimizers. */
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = lstsq\n"
    "optimizer = adamw\nscheduler = cosine\n[adamw]\nlr = 0.01\n"
    "groups = g\n[adamw.g]\nparams = b\nlr = 0.001\nweight_decay = 0\n"
    "[cosine]\nT_max = 4\ninterval = step\n",
    "[loop]\nmax_steps = " MAX_STEPS "\n[plugins]\nstep = lstsq\n"
    "optimizer = p:sgd, q:adam\n[p]\nparams = x\nlr = 0.01\n"
    "momentum = 0.9\n[q]\nlr = 0.01\n",
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

static lk_config *cfgs[N_CONFIGS];
static char dir[256];  /* a temporary directory */
static char ckpt[300]; /* the input, as a file */
static char out[300];  /* the run directory of an accepted one */

static void remove_tree(const char *path) {
  DIR *d = opendir(path);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    char sub[600];
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    struct stat st;
    if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
      remove_tree(sub);
    else
      unlink(sub);
  }
  if (d)
    closedir(d);
  rmdir(path);
}

static void cleanup(void) {
  remove_tree(dir);
  for (size_t i = 0; i < N_CONFIGS; i++)
    lk_config_free(cfgs[i]);
}

static void put32(unsigned char *b, uint32_t v) {
  for (int i = 0; i < 4; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *b, uint64_t v) {
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}

/* A run of config K from scratch, with a checkpoint at every step; its
 * checkpoint of step 3 (in the middle of the run; with two optimizers,
 * step 4), without the envelope
 * and after the config byte, is seed K. */
static void write_seed(size_t k, const char *seeds) {
  lk_run_options opts = {.out_dir = out, .verbosity = LK_LOG_ERROR};
  lk_run *run = NULL;
  lk_config *cfg = NULL;
  remove_tree(out);
  FUZZ_CHECK(lk_config_parse("fuzz.ini", configs[k], &cfg) == 0 &&
                 lk_config_set(cfg, "loop.checkpoint_every_n_steps=1") == 0 &&
                 lk_config_set(cfg, "loop.keep_last=100") == 0,
             "config %zu: %s", k, lk_last_error());
  FUZZ_CHECK(lk_run_new(cfg, &opts, &run) == 0, "config %zu: %s", k,
             lk_last_error());
  FUZZ_CHECK(lk_run_train(run) == 0, "config %zu trains: %s", k,
             lk_last_error());
  lk_run_free(run);
  lk_config_free(cfg);
  /* Step 3, or the first after it: two optimizers take two steps a
   * batch. */
  char *body = NULL, step3[600];
  size_t len = 0;
  struct stat st;
  for (int s = 3; s <= 6; s++) {
    snprintf(step3, sizeof step3, "%s/checkpoints/step-%d.ckpt", out, s);
    if (stat(step3, &st) == 0)
      break;
  }
  FUZZ_CHECK(
      lk__read_file(step3, "checkpoint", UINT64_MAX, &body, &len, NULL) == 0,
      "%s", lk_last_error());
  char path[600];
  snprintf(path, sizeof path, "%s/config-%zu", seeds, k);
  FILE *f = fopen(path, "wb");
  FUZZ_CHECK(f != NULL, "cannot write %s", path);
  unsigned char c = (unsigned char)k;
  fwrite(&c, 1, 1, f);
  fwrite(body + 20, 1, len - 24, f);
  fclose(f);
  free(body);
  remove_tree(out);
}

/* libFuzzer keeps pointers to the coverage counters of every instrumented
 * object it has seen: a plugin unloaded at the end of a run would leave
 * them dangling. Each plugin of the path is loaded once here with
 * RTLD_NODELETE; the runs' own loads of the same files find it (glibc
 * matches them by inode) and their dlclose leaves it mapped. */
static void keep_plugins(void) {
  const char *path = getenv("LOOPKIT_PLUGIN_PATH");
  DIR *d = path ? opendir(path) : NULL;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 3, ".so") != 0)
      continue;
    char so[600];
    snprintf(so, sizeof so, "%s/%s", path, e->d_name);
    FUZZ_CHECK(dlopen(so, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) != NULL, "%s",
               dlerror());
  }
  if (d)
    closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  keep_plugins();
  const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(dir, sizeof dir, "%s/lk-fuzz-resume-XXXXXX", tmp);
  FUZZ_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(ckpt, sizeof ckpt, "%s/in.ckpt", dir);
  snprintf(out, sizeof out, "%s/run", dir);
  atexit(cleanup);
  for (size_t i = 0; i < N_CONFIGS; i++)
    FUZZ_CHECK(lk_config_parse("fuzz.ini", configs[i], &cfgs[i]) == 0,
               "config %zu: %s", i, lk_last_error());
  const char *seeds = getenv("FUZZ_RESUME_SEEDS");
  if (seeds && *seeds)
    for (size_t i = 0; i < N_CONFIGS; i++)
      write_seed(i, seeds);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  size_t k = data[0] % N_CONFIGS;
  data++, size--;
  size_t len = 20 + size + 4;
  unsigned char *buf = malloc(len);
  FUZZ_CHECK(buf != NULL, "malloc");
  memcpy(buf, "LOOPKIT\0", 8);
  put32(buf + 8, 2);
  put64(buf + 12, len);
  if (size)
    memcpy(buf + 20, data, size);
  put32(buf + len - 4, lk__crc32(0, buf, len - 4));
  FILE *f = fopen(ckpt, "wb");
  FUZZ_CHECK(f && fwrite(buf, 1, len, f) == len && fclose(f) == 0,
             "cannot write %s", ckpt);
  free(buf);

  lk_run_options opts = {
      .out_dir = out, .resume = ckpt, .verbosity = LK_LOG_ERROR};
  lk_run *run = NULL;
  int rc = lk_run_new(cfgs[k], &opts, &run);
  fuzz_report(rc);
  if (rc != 0) {
    FUZZ_CHECK(rc == LK_EFORMAT || rc == LK_ENOMEM,
               "config %zu: returned %d: %s", k, rc, lk_last_error());
    FUZZ_CHECK(strstr(lk_last_error(), ckpt) != NULL,
               "the message does not name the checkpoint: \"%s\"",
               lk_last_error());
    FUZZ_CHECK(access(out, F_OK) != 0, "a refused resume left %s", out);
    return 0;
  }
  rc = lk_run_train(run);
  FUZZ_CHECK(rc == 0 || rc == LK_ENONFINITE || rc == LK_EFORMAT,
             "config %zu: an accepted checkpoint fails to train: %d: %s", k, rc,
             lk_last_error());
  if (rc == 0 && access(lk_run_checkpoint(run), F_OK) == 0) {
    /* (A complete run resumed writes nothing.) */
    lk__ckpt *back = NULL;
    FUZZ_CHECK(lk__ckpt_read(lk_run_checkpoint(run), &back, NULL) == 0,
               "the run's last.ckpt does not read back: %s", lk_last_error());
    lk__ckpt_free(back);
  }
  lk_run_free(run);
  remove_tree(out);
  return 0;
}
