/* The scheduler plugins (step_lr, cosine, linear_warmup, reduce_on_plateau)
 * against torch.optim.lr_scheduler 1.13: every case of
 * tests/data/schedulers.ref (written by tests/torch/scheduler_reference.py)
 * is trained through the public API with interval = step, and each step's
 * learning rate (metrics.csv's lr column), loss and the final parameters
 * (the checkpoint) must equal torch's to 1e-10 relative. Also: interval =
 * epoch changes the rate only at epoch ends, a resume mid-schedule equals
 * the straight run bit for bit, a missing monitor fails the run naming it,
 * and bad options are refused naming them. Torch is not needed here. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, nftw, open_memstream */
#endif
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>

#define STEPS 60
#define N_CASES 50 /* 16 settings on 3 problems, and 2 with Adam */
#define MAX_PARAMS 128
#define TOLERANCE 1e-10

typedef struct ref_case {
  char name[64], label[320];
  char problem[64], problem_opts[128]; /* "rosenbrock", "n=2" */
  char optimizer[32], optimizer_opts[256];
  char scheduler[32], scheduler_opts[256];
  double lr[STEPS], loss[STEPS];
  int n_lr, n_loss;
  char param_name[MAX_PARAMS][16]; /* "x[0]" */
  double param[MAX_PARAMS];
  int n_param;
} ref_case;

static ref_case cases[N_CASES];
static int n_cases;
static bool reference_loaded;

/* ---- the reference --------------------------------------------------------
 */

static ref_case *find_case(const char *name, const char *problem) {
  for (int i = 0; i < n_cases; i++) {
    char full[200];
    snprintf(full, sizeof full, "%s %s", cases[i].problem,
             cases[i].problem_opts);
    if (strcmp(cases[i].name, name) == 0 && strcmp(full, problem) == 0)
      return &cases[i];
  }
  return NULL;
}

/* case NAME problem "PROB OPTS" optimizer OPT "OPTS" scheduler S "OPTS" */
static bool parse_case(const char *line, ref_case *c) {
  int used = 0;
  if (sscanf(line, "case %63s problem \"%63s %127[^\"]\" optimizer %31s \"%n",
             c->name, c->problem, c->problem_opts, c->optimizer, &used) != 4 ||
      used == 0)
    return false;
  const char *p = line + used, *q = strchr(p, '"');
  if (!q || (size_t)(q - p) >= sizeof c->optimizer_opts)
    return false;
  memcpy(c->optimizer_opts, p, (size_t)(q - p));
  c->optimizer_opts[q - p] = '\0';
  if (sscanf(q + 1, " scheduler %31s \"%255[^\"]\"", c->scheduler,
             c->scheduler_opts) != 2)
    return false;
  /* Through a local buffer: gcc's -Wrestrict cannot tell the fields of
   * *c apart once this is inlined. */
  char label[sizeof c->label];
  snprintf(label, sizeof label, "%s %s %s (%s)", c->name, c->problem,
           c->problem_opts, c->optimizer);
  memcpy(c->label, label, sizeof label);
  return true;
}

static int load_reference(void) {
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/schedulers.ref",
           dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  char line[1024], name[16];
  ref_case *c = NULL;
  int i;
  double v;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "case ", 5) == 0) {
      c = n_cases < N_CASES ? &cases[n_cases] : NULL;
      if (!c || !parse_case(line, c)) {
        fprintf(stderr, "%s: bad or too many cases at: %s", path, line);
        fclose(f);
        return -1;
      }
      n_cases++;
    } else if (c && sscanf(line, "lr %d %lf", &i, &v) == 2) {
      if (i == c->n_lr + 1 && i <= STEPS)
        c->lr[c->n_lr++] = v;
    } else if (c && sscanf(line, "loss %d %lf", &i, &v) == 2) {
      if (i == c->n_loss + 1 && i <= STEPS)
        c->loss[c->n_loss++] = v;
    } else if (c && sscanf(line, "param %15s %lf", name, &v) == 2) {
      if (c->n_param < MAX_PARAMS) {
        snprintf(c->param_name[c->n_param], sizeof c->param_name[0], "%s",
                 name);
        c->param[c->n_param++] = v;
      }
    }
  }
  fclose(f);
  reference_loaded = true;
  return 0;
}

/* ---- run directories -------------------------------------------------------
 */

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* The run directories of the current test: removed by its teardown even
 * when an assertion ends the test early. */
static char *dirs[4];

static void drop_dirs(void) {
  for (size_t i = 0; i < 4; i++)
    if (dirs[i]) {
      nftw(dirs[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
      free(dirs[i]);
      dirs[i] = NULL;
    }
}

static const char *make_temp_dir(void) {
  size_t i = 0;
  while (i < 4 && dirs[i])
    i++;
  assert_true(i < 4);
  dirs[i] = strdup("/tmp/loopkit-sched-XXXXXX");
  assert_non_null(dirs[i]);
  assert_non_null(mkdtemp(dirs[i]));
  return dirs[i];
}

static int cleanup(void **state) {
  (void)state;
  drop_dirs();
  return 0;
}

/* ---- configs and runs ------------------------------------------------------
 */

/* Appends "key = value" lines for "k=v k=v" to TEXT. */
static void add_options(char *text, size_t size, const char *options) {
  char copy[256];
  snprintf(copy, sizeof copy, "%s", options);
  size_t used = strlen(text);
  char *save = NULL;
  for (char *kv = strtok_r(copy, " ", &save); kv;
       kv = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(kv, '=');
    assert_non_null(eq);
    *eq = '\0';
    used += (size_t)snprintf(text + used, size - used, "%s = %s\n", kv, eq + 1);
    assert_true(used < size);
  }
}

static lk_config *parse_config(const char *text) {
  lk_config *cfg = NULL;
  if (lk_config_parse("schedulers_torch.ini", text, &cfg) != 0)
    fail_msg("config: %s\n%s", lk_last_error(), text);
  return cfg;
}

/* A case's config: the problem, the optimizer and the scheduler. */
static lk_config *case_config(const ref_case *c, int max_steps) {
  char text[2048];
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = %d\n"
           "[plugins]\nstep = %s\noptimizer = %s\nscheduler = %s\n[%s]\n",
           max_steps, c->problem, c->optimizer, c->scheduler, c->problem);
  add_options(text, sizeof text, c->problem_opts);
  snprintf(text + strlen(text), sizeof text - strlen(text), "[%s]\n",
           c->optimizer);
  add_options(text, sizeof text, c->optimizer_opts);
  snprintf(text + strlen(text), sizeof text - strlen(text), "[%s]\n",
           c->scheduler);
  add_options(text, sizeof text, c->scheduler_opts);
  return parse_config(text);
}

/* Trains CFG in OUT (resuming from RESUME if not NULL); returns
 * lk_run_train's code, with its message in MSG. */
static int try_train(const lk_config *cfg, const char *out, const char *resume,
                     char *msg, size_t len) {
  lk_run_options opts = {.out_dir = resume ? NULL : out, .resume = resume};
  lk_run *run = NULL;
  int rc = lk_run_new(cfg, &opts, &run);
  if (rc != 0)
    fail_msg("lk_run_new: %s", lk_last_error());
  rc = lk_run_train(run);
  snprintf(msg, len, "%s", rc ? lk_last_error() : "");
  lk_run_free(run);
  return rc;
}

static void train(const lk_config *cfg, const char *out, const char *resume) {
  char msg[2048];
  if (try_train(cfg, out, resume, msg, sizeof msg) != 0)
    fail_msg("lk_run_train: %s", msg);
}

/* ---- metrics.csv and checkpoints -------------------------------------------
 */

typedef struct row {
  long step, epoch;
  bool has_loss, has_lr;
  double loss, lr;
} row;

/* The rows of OUT/metrics.csv: step, epoch, and the loss and lr cells. */
static int read_rows(const char *out, row *rows, int max) {
  char path[4096], line[8192];
  snprintf(path, sizeof path, "%s/metrics.csv", out);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof line, f));
  assert_int_equal(strncmp(line, "step,epoch,loss", 15), 0);
  int lr_col = -1, col = 0;
  for (char *p = line; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
    if (strncmp(p, "lr", 2) == 0 && strchr(",\r\n", p[2]))
      lr_col = col;
    col++;
  }
  assert_true(lr_col >= 3);
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    assert_true(n < max);
    row *r = &rows[n++];
    memset(r, 0, sizeof *r);
    char *p = line;
    for (col = 0; p; col++) {
      char *end;
      double v = strtod(p, &end);
      bool set = end != p;
      if (col == 0)
        r->step = (long)v;
      else if (col == 1)
        r->epoch = (long)v;
      else if (col == 2 && set) {
        r->has_loss = true;
        r->loss = v;
      } else if (col == lr_col && set) {
        r->has_lr = true;
        r->lr = v;
      }
      p = strchr(p, ',');
      p = p ? p + 1 : NULL;
    }
  }
  fclose(f);
  return n;
}

/* lk_checkpoint_dump of OUT/checkpoints/last.ckpt (to free). */
static char *dump(const char *out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/checkpoints/last.ckpt", out);
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  assert_non_null(f);
  int rc = lk_checkpoint_dump(path, f);
  fclose(f);
  if (rc != 0) {
    free(text);
    fail_msg("lk_checkpoint_dump %s: %s", path, lk_last_error());
  }
  return text;
}

static void assert_close(double got, double want, const char *what,
                         const char *where) {
  double scale = fmax(fabs(got), fabs(want));
  double err = got == want ? 0 : fabs(got - want) / scale;
  if (!(err <= TOLERANCE))
    fail_msg("%s %s: loopkit %.17g, torch %.17g (relative error %.3g)", what,
             where, got, want, err);
}

static void check_against_torch(const ref_case *c, const char *out) {
  row rows[STEPS + 1];
  int n = read_rows(out, rows, STEPS + 1);
  assert_int_equal(n, STEPS);
  for (int i = 0; i < STEPS; i++) {
    char where[32];
    snprintf(where, sizeof where, "at step %d", i + 1);
    assert_int_equal(rows[i].step, i);
    assert_true(rows[i].has_lr && rows[i].has_loss);
    assert_close(rows[i].lr, c->lr[i], "lr", where);
    assert_close(rows[i].loss, c->loss[i], "loss", where);
  }
  char *text = dump(out);
  int found = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char name[64];
    double v;
    if (sscanf(line, "%63s %lf", name, &v) != 2)
      continue;
    for (int k = 0; k < c->n_param; k++)
      if (strcmp(name, c->param_name[k]) == 0) {
        assert_close(v, c->param[k], "final", name);
        found++;
      }
  }
  free(text);
  assert_int_equal(found, c->n_param);
}

/* ---- tests against torch ---------------------------------------------------
 */

static void test_reference_complete(void **state) {
  (void)state;
  assert_true(reference_loaded);
  assert_int_equal(n_cases, N_CASES);
  /* Three problems for every case of every scheduler, and two with Adam. */
  static const char *const needed[] = {"step_lr_defaults",
                                       "step_lr_gamma",
                                       "step_lr_every_step",
                                       "cosine_defaults",
                                       "cosine_eta_min",
                                       "cosine_restart",
                                       "linear_warmup_defaults",
                                       "linear_warmup_long",
                                       "linear_warmup_decay",
                                       "linear_warmup_to_zero",
                                       "reduce_on_plateau_defaults",
                                       "reduce_on_plateau_patience",
                                       "reduce_on_plateau_cooldown",
                                       "reduce_on_plateau_abs",
                                       "reduce_on_plateau_max",
                                       "reduce_on_plateau_max_abs"};
  static const char *const problems[] = {"rosenbrock n=2", "rosenbrock n=100",
                                         "lstsq m=20 n=5"};
  for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
    for (size_t p = 0; p < 3; p++)
      if (!find_case(needed[i], problems[p]))
        fail_msg("case %s on %s missing from the reference", needed[i],
                 problems[p]);
  assert_non_null(find_case("adam_cosine_eta_min", "lstsq m=20 n=5"));
  assert_non_null(
      find_case("adam_reduce_on_plateau_patience", "rosenbrock n=2"));
  for (int i = 0; i < n_cases; i++) {
    const ref_case *c = &cases[i];
    assert_int_equal(c->n_lr, STEPS);
    assert_int_equal(c->n_loss, STEPS);
    assert_true(c->n_param >= 2);
    assert_non_null(strstr(c->scheduler_opts, "interval=step"));
  }
}

static void test_case(void **state) {
  const ref_case *c = *state;
  assert_true(c->n_lr == STEPS && c->n_loss == STEPS && c->n_param >= 2);
  const char *out = make_temp_dir();
  lk_config *cfg = case_config(c, STEPS);
  train(cfg, out, NULL);
  lk_config_free(cfg);
  check_against_torch(c, out);
}

/* ---- resume ----------------------------------------------------------------
 */

/* K steps, then a new run resumed from the checkpoint to STEPS: the same
 * rates, losses and checkpoint, bit for bit, as the straight run. */
static void resume_case(const char *name, const char *problem, int k) {
  const ref_case *c = find_case(name, problem);
  assert_non_null(c);
  const char *straight = make_temp_dir(), *resumed = make_temp_dir();
  lk_config *all = case_config(c, STEPS), *first = case_config(c, k);
  train(all, straight, NULL);
  train(first, resumed, NULL);
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/checkpoints/last.ckpt", resumed);
  train(all, resumed, ckpt);
  lk_config_free(all);
  lk_config_free(first);
  check_against_torch(c, resumed);
  char *a = dump(straight), *b = dump(resumed);
  bool same = strcmp(a, b) == 0;
  if (!same)
    fprintf(stderr, "straight:\n%s\nresumed:\n%s\n", a, b);
  free(a);
  free(b);
  assert_true(same);
}

static void test_resume_step_lr(void **state) {
  (void)state;
  resume_case("step_lr_gamma", "lstsq m=20 n=5", 25);
}

static void test_resume_cosine(void **state) {
  (void)state;
  resume_case("cosine_restart", "rosenbrock n=100", 11);
}

/* The resumed run's create multiplies the rate by start_factor again; the
 * checkpoint must win. */
static void test_resume_linear_warmup(void **state) {
  (void)state;
  resume_case("linear_warmup_long", "rosenbrock n=2", 9);
}

static void test_resume_reduce_on_plateau(void **state) {
  (void)state;
  resume_case("reduce_on_plateau_cooldown", "lstsq m=20 n=5", 30);
  drop_dirs();
  resume_case("reduce_on_plateau_max_abs", "rosenbrock n=2", 27);
}

/* ---- interval = epoch ------------------------------------------------------
 */

/* synthetic data (64 samples in batches of 8: 8 steps an epoch) and linreg,
 * sgd with step_lr's default interval. */
static lk_config *epoch_config(int max_epochs, const char *scheduler,
                               const char *options, const char *data) {
  char text[2048];
  snprintf(text, sizeof text,
           "[loop]\nmax_epochs = %d\n"
           "[plugins]\nstep = linreg\ndata = synthetic\noptimizer = sgd\n"
           "scheduler = %s\n[synthetic]\n%s\n[sgd]\nlr = 0.05\n"
           "momentum = 0.9\n[%s]\n%s\n",
           max_epochs, scheduler, data, scheduler, options);
  return parse_config(text);
}

/* The rate of epoch E: 0.05, decayed by gamma = 0.5 when E is a multiple of
 * step_size = 2, by repeated products as torch's recursion does. */
static double step_lr_rate(long e) {
  double lr = 0.05;
  for (long k = 1; k <= e; k++)
    if (k % 2 == 0)
      lr = lr * 0.5;
  return lr;
}

static void check_epoch_rates(const char *out, int epochs) {
  row rows[256];
  int n = read_rows(out, rows, 256), with_lr = 0;
  for (int i = 0; i < n; i++) {
    if (!rows[i].has_lr)
      continue; /* a validation row */
    if (rows[i].step != with_lr)
      fail_msg("row %d: step %ld, expected %d", i, rows[i].step, with_lr);
    assert_int_equal(rows[i].epoch, with_lr / 8);
    double want = step_lr_rate(rows[i].epoch);
    if (rows[i].lr != want)
      fail_msg("step %ld (epoch %ld): lr %.17g, expected %.17g", rows[i].step,
               rows[i].epoch, rows[i].lr, want);
    with_lr++;
  }
  assert_int_equal(with_lr, 8 * epochs);
}

static void test_epoch_interval(void **state) {
  (void)state;
  const char *out = make_temp_dir();
  lk_config *cfg = epoch_config(5, "step_lr", "step_size = 2\ngamma = 0.5", "");
  train(cfg, out, NULL);
  lk_config_free(cfg);
  check_epoch_rates(out, 5);
}

/* Two epochs, then resumed to five: the same rates and checkpoint. */
static void test_epoch_interval_resume(void **state) {
  (void)state;
  const char *straight = make_temp_dir(), *resumed = make_temp_dir();
  const char *opts = "step_size = 2\ngamma = 0.5";
  lk_config *all = epoch_config(5, "step_lr", opts, "");
  lk_config *first = epoch_config(2, "step_lr", opts, "");
  train(all, straight, NULL);
  train(first, resumed, NULL);
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/checkpoints/last.ckpt", resumed);
  train(all, resumed, ckpt);
  lk_config_free(all);
  lk_config_free(first);
  check_epoch_rates(resumed, 5);
  char *a = dump(straight), *b = dump(resumed);
  bool same = strcmp(a, b) == 0;
  free(a);
  free(b);
  assert_true(same);
}

/* Without a data plugin there are no epochs: an epoch scheduler never
 * steps, and the rate stays the optimizer's. */
static void test_epoch_interval_without_data(void **state) {
  (void)state;
  const char *out = make_temp_dir();
  lk_config *cfg = parse_config(
      "[loop]\nmax_steps = 20\n[plugins]\nstep = lstsq\noptimizer = sgd\n"
      "scheduler = cosine\n[sgd]\nlr = 0.1\n[cosine]\nT_max = 3\n");
  train(cfg, out, NULL);
  lk_config_free(cfg);
  row rows[32];
  int n = read_rows(out, rows, 32);
  assert_int_equal(n, 20);
  for (int i = 0; i < n; i++) {
    assert_true(rows[i].has_lr);
    assert_true(rows[i].lr == 0.1);
  }
}

/* reduce_on_plateau at the epoch interval, on the validation loss. */
static void test_plateau_on_val_loss(void **state) {
  (void)state;
  const char *out = make_temp_dir();
  lk_config *cfg =
      epoch_config(6, "reduce_on_plateau",
                   "patience = 0\nfactor = 0.5\nthreshold = 0.5", "");
  train(cfg, out, NULL);
  lk_config_free(cfg);
  row rows[256];
  int n = read_rows(out, rows, 256);
  /* Constant within each epoch, never increasing, and reduced at least
   * once: with threshold 0.5 a val_loss must halve to count as better. */
  double first = -1, prev = -1, epoch_lr[8] = {0};
  for (int i = 0; i < n; i++) {
    if (!rows[i].has_lr)
      continue;
    long e = rows[i].epoch;
    assert_true(e >= 0 && e < 6);
    if (first < 0)
      first = rows[i].lr;
    if (epoch_lr[e] == 0)
      epoch_lr[e] = rows[i].lr;
    assert_true(rows[i].lr == epoch_lr[e]);
    assert_true(prev < 0 || rows[i].lr <= prev);
    prev = rows[i].lr;
  }
  assert_true(first == 0.05);
  assert_true(prev < first);
}

/* ---- errors ----------------------------------------------------------------
 */

static void expect_train_failure(lk_config *cfg, const char *const *needles) {
  const char *out = make_temp_dir();
  char msg[2048];
  int rc = try_train(cfg, out, NULL, msg, sizeof msg);
  lk_config_free(cfg);
  assert_int_not_equal(rc, 0);
  for (; *needles; needles++)
    if (!strstr(msg, *needles))
      fail_msg("message \"%s\" should name \"%s\"", msg, *needles);
}

static void test_missing_monitor_epoch(void **state) {
  (void)state;
  /* No validation split: at the epoch's end there is only "loss". */
  static const char *const needles[] = {"reduce_on_plateau", "val_loss",
                                        "available: loss", NULL};
  expect_train_failure(epoch_config(3, "reduce_on_plateau", "", "n_val = 0"),
                       needles);
}

static void test_missing_monitor_step(void **state) {
  (void)state;
  static const char *const needles[] = {"reduce_on_plateau", "val_acc", "lr",
                                        "loss", NULL};
  expect_train_failure(
      parse_config("[loop]\nmax_steps = 5\n[plugins]\nstep = lstsq\n"
                   "optimizer = sgd\nscheduler = reduce_on_plateau\n"
                   "[sgd]\nlr = 0.001\n"
                   "[reduce_on_plateau]\ninterval = step\nmonitor = val_acc\n"),
      needles);
}

/* A refused option fails lk_run_new and names the plugin and the option. */
static void expect_refused(const char *scheduler, const char *options,
                           const char *needle) {
  char text[512];
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = 1\n[plugins]\nstep = lstsq\n"
           "optimizer = sgd\nscheduler = %s\n[sgd]\nlr = 0.001\n[%s]\n%s\n",
           scheduler, scheduler, options);
  lk_config *cfg = parse_config(text);
  const char *out = make_temp_dir();
  lk_run_options opts = {.out_dir = out};
  lk_run *run = NULL;
  int rc = lk_run_new(cfg, &opts, &run);
  lk_config_free(cfg);
  assert_int_equal(rc, LK_ECONFIG);
  assert_null(run);
  const char *msg = lk_last_error();
  if (!strstr(msg, needle) || !strstr(msg, scheduler))
    fail_msg("\"%s\": message \"%s\" should name %s and \"%s\"", options, msg,
             scheduler, needle);
  drop_dirs();
}

static void test_refused_options(void **state) {
  (void)state;
  /* Ranges the host enforces (inf and nan included); a scheduler's create
   * checks the rest. */
  expect_refused("step_lr", "", "step_size");
  expect_refused("step_lr", "step_size = 0",
                 "step_lr.step_size = 0: must be >= 1");
  expect_refused("step_lr", "step_size = 3\ngamma = -0.5",
                 "step_lr.gamma = -0.5: must be >= 0");
  expect_refused("step_lr", "step_size = 3\ngamma = nan",
                 "step_lr.gamma = nan: must be a finite number");
  expect_refused("step_lr", "step_size = 3\ninterval = batch", "batch");
  expect_refused("cosine", "", "T_max");
  expect_refused("cosine", "T_max = 0", "cosine.T_max = 0: must be >= 1");
  expect_refused("cosine", "T_max = 5\neta_min = -1",
                 "cosine.eta_min = -1: must be >= 0");
  expect_refused("cosine", "T_max = 5\neta_min = inf",
                 "cosine.eta_min = inf: must be a finite number");
  expect_refused("linear_warmup", "start_factor = 0",
                 "linear_warmup.start_factor = 0: must be > 0 and <= 1");
  expect_refused("linear_warmup", "start_factor = 1.5",
                 "linear_warmup.start_factor = 1.5: must be > 0 and <= 1");
  expect_refused("linear_warmup", "end_factor = 2",
                 "linear_warmup.end_factor = 2: must be >= 0 and <= 1");
  expect_refused("linear_warmup", "end_factor = -0.1",
                 "linear_warmup.end_factor = -0.1: must be >= 0 and <= 1");
  expect_refused("linear_warmup", "total_iters = 0",
                 "linear_warmup.total_iters = 0: must be >= 1");
  expect_refused("reduce_on_plateau", "factor = 1",
                 "reduce_on_plateau.factor = 1: must be >= 0 and < 1");
  expect_refused("reduce_on_plateau", "factor = -0.5",
                 "reduce_on_plateau.factor = -0.5: must be >= 0 and < 1");
  expect_refused("reduce_on_plateau", "mode = maximum", "maximum");
  expect_refused("reduce_on_plateau", "threshold_mode = pct", "pct");
  expect_refused("reduce_on_plateau", "threshold = inf",
                 "reduce_on_plateau.threshold = inf: must be a finite number");
  expect_refused("reduce_on_plateau", "patience = -1",
                 "reduce_on_plateau.patience = -1: must be >= 0");
  expect_refused("reduce_on_plateau", "cooldown = -2",
                 "reduce_on_plateau.cooldown = -2: must be >= 0");
  expect_refused("reduce_on_plateau", "min_lr = -1e-3",
                 "reduce_on_plateau.min_lr = -1e-3: must be >= 0");
  expect_refused("reduce_on_plateau", "eps = -1",
                 "reduce_on_plateau.eps = -1: must be >= 0");
}

/* ---- main ------------------------------------------------------------------
 */

#define CASE(i)                                                                \
  { cases[i].label, test_case, NULL, cleanup, &cases[i] }
#define CASES10(i)                                                             \
  CASE(i), CASE(i + 1), CASE(i + 2), CASE(i + 3), CASE(i + 4), CASE(i + 5),    \
      CASE(i + 6), CASE(i + 7), CASE(i + 8), CASE(i + 9)

int main(void) {
  if (load_reference() != 0)
    n_cases = 0; /* test_reference_complete fails, and every case */
  for (int i = n_cases; i < N_CASES; i++)
    snprintf(cases[i].label, sizeof cases[i].label, "case %d (missing)", i);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_complete),
      CASES10(0),
      CASES10(10),
      CASES10(20),
      CASES10(30),
      CASES10(40),
      cmocka_unit_test_teardown(test_resume_step_lr, cleanup),
      cmocka_unit_test_teardown(test_resume_cosine, cleanup),
      cmocka_unit_test_teardown(test_resume_linear_warmup, cleanup),
      cmocka_unit_test_teardown(test_resume_reduce_on_plateau, cleanup),
      cmocka_unit_test_teardown(test_epoch_interval, cleanup),
      cmocka_unit_test_teardown(test_epoch_interval_resume, cleanup),
      cmocka_unit_test_teardown(test_epoch_interval_without_data, cleanup),
      cmocka_unit_test_teardown(test_plateau_on_val_loss, cleanup),
      cmocka_unit_test_teardown(test_missing_monitor_epoch, cleanup),
      cmocka_unit_test_teardown(test_missing_monitor_step, cleanup),
      cmocka_unit_test_teardown(test_refused_options, cleanup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
