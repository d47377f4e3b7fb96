/* The rest of torch.optim.lr_scheduler (exponential, multistep, constant,
 * polynomial, cosine_warm_restarts, cyclic, onecycle) and its composites
 * (sequential, chained) against torch 1.13: every case of
 * tests/data/scheduler_sequences.ref (written by
 * tests/torch/scheduler_sequence_reference.py) is trained on lstsq through
 * the public API with interval = step: each step's learning rate and
 * momentum (metrics.csv's lr and momentum, lr_monitor's log_momentum) must
 * be torch's bit for bit, the losses and final parameters to 1e-10
 * relative. With interval = epoch the same rates (and momenta) come epoch
 * by epoch. A run resumed in the middle of a schedule (a milestone, a
 * restart, a cycle) equals the straight one bit for bit. Also: cyclic
 * cycles Adam's beta1 as SGD's momentum, onecycle stepped past total_steps
 * fails the run naming it, cycle_momentum without a momentum is refused,
 * and bad options are refused naming file:line. Torch is not needed. */
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
#define N_CASES 32
#define MAX_SECTIONS 6
#define MAX_PARAMS 16
#define TOLERANCE 1e-10

typedef struct ref_case {
  char name[64];
  char optimizer[32], optimizer_opts[256];
  char scheduler[64], scheduler_opts[512];
  char section[MAX_SECTIONS][32], section_opts[MAX_SECTIONS][256];
  int n_sections;
  double lr[STEPS], momentum[STEPS], loss[STEPS];
  int n_lr, n_momentum, n_loss;
  char param_name[MAX_PARAMS][16];
  double param[MAX_PARAMS];
  int n_param;
} ref_case;

static ref_case cases[N_CASES];
static int n_cases;
static bool reference_loaded;

/* ---- the reference --------------------------------------------------------
 */

static ref_case *find_case(const char *name) {
  for (int i = 0; i < n_cases; i++)
    if (strcmp(cases[i].name, name) == 0)
      return &cases[i];
  return NULL;
}

/* case NAME optimizer OPT "OPTS" scheduler SPEC "OPTS" */
static bool parse_case(const char *line, ref_case *c) {
  return sscanf(line,
                "case %63s optimizer %31s \"%255[^\"]\" scheduler %63s "
                "\"%511[^\"]\"",
                c->name, c->optimizer, c->optimizer_opts, c->scheduler,
                c->scheduler_opts) == 5;
}

static bool parse_section(const char *line, ref_case *c) {
  if (c->n_sections == MAX_SECTIONS)
    return false;
  int k = c->n_sections++;
  return sscanf(line, "section %31s \"%255[^\"]\"", c->section[k],
                c->section_opts[k]) == 2;
}

/* One value line "WHAT STEP VALUE" into its series, steps in order. */
static void add_value(double *series, int *n, int step, double v) {
  if (step == *n + 1 && step <= STEPS)
    series[(*n)++] = v;
}

static int load_reference(void) {
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/scheduler_sequences.ref",
           dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  char line[2048], name[16];
  ref_case *c = NULL;
  int i;
  double v;
  bool ok = true;
  while (ok && fgets(line, sizeof line, f)) {
    if (strncmp(line, "case ", 5) == 0) {
      c = n_cases < N_CASES ? &cases[n_cases++] : NULL;
      ok = c && parse_case(line, c);
    } else if (c && strncmp(line, "section ", 8) == 0) {
      ok = parse_section(line, c);
    } else if (c && sscanf(line, "lr %d %lf", &i, &v) == 2) {
      add_value(c->lr, &c->n_lr, i, v);
    } else if (c && sscanf(line, "momentum %d %lf", &i, &v) == 2) {
      add_value(c->momentum, &c->n_momentum, i, v);
    } else if (c && sscanf(line, "loss %d %lf", &i, &v) == 2) {
      add_value(c->loss, &c->n_loss, i, v);
    } else if (c && sscanf(line, "param %15s %lf", name, &v) == 2 &&
               c->n_param < MAX_PARAMS) {
      snprintf(c->param_name[c->n_param], sizeof c->param_name[0], "%s", name);
      c->param[c->n_param++] = v;
    }
  }
  fclose(f);
  if (!ok) {
    fprintf(stderr, "%s: bad or too many cases at: %s", path, line);
    return -1;
  }
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
  dirs[i] = strdup("/tmp/loopkit-seqs-XXXXXX");
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

typedef struct text {
  char s[8192];
  size_t used;
} text;

static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(t->s + t->used, sizeof t->s - t->used, fmt, ap);
  va_end(ap);
  assert_true(w >= 0 && (size_t)w < sizeof t->s - t->used);
  t->used += (size_t)w;
}

/* "[SECTION]" and a "key = value" line for each "k=v" of OPTIONS; with
 * EPOCH, interval=step becomes interval=epoch. */
static void put_section(text *t, const char *section, const char *options,
                        bool epoch) {
  char copy[512], *save = NULL;
  snprintf(copy, sizeof copy, "%s", options);
  put(t, "[%s]\n", section);
  for (char *kv = strtok_r(copy, " ", &save); kv;
       kv = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(kv, '=');
    assert_non_null(eq);
    *eq = '\0';
    bool interval = strcmp(kv, "interval") == 0;
    put(t, "%s = %s\n", kv, interval && epoch ? "epoch" : eq + 1);
  }
}

static lk_config *parse_config(const char *s) {
  lk_config *cfg = NULL;
  if (lk_config_parse("scheduler_sequences.ini", s, &cfg) != 0)
    fail_msg("config: %s\n%s", lk_last_error(), s);
  return cfg;
}

/* The section of SPEC (NAME:PLUGIN or PLUGIN). */
static const char *section_of(const char *spec) {
  const char *colon = strchr(spec, ':');
  static char name[64];
  snprintf(name, sizeof name, "%.*s",
           colon ? (int)(colon - spec) : (int)strlen(spec), spec);
  return name;
}

/* A case's config, on lstsq with max_steps (interval = step), or on
 * synthetic data and linreg with max_epochs, two steps an epoch (EPOCH);
 * lr_monitor logs the momentum when the case has one. */
static lk_config *case_config(const ref_case *c, const char *optimizer,
                              int length, bool epoch) {
  text t = {.used = 0};
  put(&t, "[loop]\n%s = %d\n[plugins]\n", epoch ? "max_epochs" : "max_steps",
      length);
  if (epoch)
    put(&t, "step = linreg\ndata = synthetic\n");
  else
    put(&t, "step = lstsq\n");
  put(&t, "optimizer = %s\nscheduler = %s\n", optimizer, c->scheduler);
  if (c->n_momentum)
    put(&t, "callbacks = lr_monitor\n[lr_monitor]\nlog_momentum = true\n");
  if (epoch)
    put(&t, "[synthetic]\nn_train = 16\nn_val = 0\nbatch_size = 8\n");
  else
    put(&t, "[lstsq]\nm = 20\nn = 5\n");
  /* The optimizer's options are for the case's; another (cyclic on adam)
   * keeps its defaults but for the rate. */
  if (strcmp(optimizer, c->optimizer) == 0)
    put_section(&t, optimizer, c->optimizer_opts, false);
  put_section(&t, section_of(c->scheduler), c->scheduler_opts, epoch);
  for (int i = 0; i < c->n_sections; i++)
    put_section(&t, c->section[i], c->section_opts[i], false);
  return parse_config(t.s);
}

/* Trains CFG in OUT (resuming from RESUME if not NULL); returns
 * lk_run_train's code, with its message in MSG. */
static int try_train(const lk_config *cfg, const char *out, const char *resume,
                     char *msg, size_t len) {
  lk_run_options opts = {.out_dir = resume ? NULL : out, .resume = resume};
  lk_run *run = NULL;
  int rc = lk_run_new(cfg, &opts, &run);
  if (rc != 0) {
    snprintf(msg, len, "%s", lk_last_error());
    return rc;
  }
  rc = lk_run_train(run);
  snprintf(msg, len, "%s", rc ? lk_last_error() : "");
  lk_run_free(run);
  return rc;
}

static void train(const lk_config *cfg, const char *out, const char *resume) {
  char msg[2048];
  if (try_train(cfg, out, resume, msg, sizeof msg) != 0)
    fail_msg("training: %s", msg);
}

/* ---- metrics.csv and checkpoints -------------------------------------------
 */

typedef struct row {
  long step, epoch;
  bool has_loss, has_lr, has_momentum;
  double loss, lr, momentum;
} row;

/* The column of NAME in header LINE, or -1. */
static int column(const char *line, const char *name) {
  size_t len = strlen(name);
  int col = 0;
  for (const char *p = line; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (strncmp(p, name, len) == 0 && strchr(",\r\n", p[len]))
      return col;
    else
      col++;
  return -1;
}

/* The rows of OUT/metrics.csv: step, epoch, and the loss, lr and momentum
 * cells. */
static int read_rows(const char *out, row *rows, int max) {
  char path[4096], line[8192];
  snprintf(path, sizeof path, "%s/metrics.csv", out);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof line, f));
  assert_int_equal(strncmp(line, "step,epoch,loss", 15), 0);
  int lr_col = column(line, "lr"), m_col = column(line, "momentum");
  assert_true(lr_col >= 3);
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    assert_true(n < max);
    row *r = &rows[n++];
    memset(r, 0, sizeof *r);
    char *p = line;
    for (int col = 0; p; col++) {
      char *end;
      double v = strtod(p, &end);
      bool set = end != p;
      if (col == 0)
        r->step = (long)v;
      else if (col == 1)
        r->epoch = (long)v;
      else if (col == 2 && set)
        r->has_loss = true, r->loss = v;
      else if (col == lr_col && set)
        r->has_lr = true, r->lr = v;
      else if (col == m_col && set)
        r->has_momentum = true, r->momentum = v;
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
  char *s = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&s, &size);
  assert_non_null(f);
  int rc = lk_checkpoint_dump(path, f);
  fclose(f);
  if (rc != 0) {
    free(s);
    fail_msg("lk_checkpoint_dump %s: %s", path, lk_last_error());
  }
  return s;
}

static void assert_close(double got, double want, const char *what,
                         const char *name, int step) {
  double scale = fmax(fabs(got), fabs(want));
  double err = got == want ? 0 : fabs(got - want) / scale;
  if (!(err <= TOLERANCE))
    fail_msg("%s: %s at step %d: loopkit %.17g, torch %.17g (relative "
             "error %.3g)",
             name, what, step, got, want, err);
}

/* Bit for bit. */
static void assert_same(double got, double want, const char *what,
                        const char *name, int at) {
  if (got != want)
    fail_msg("%s: %s at %d: loopkit %.17g, torch %.17g", name, what, at, got,
             want);
}

static void check_steps(const ref_case *c, const char *out) {
  row rows[STEPS + 1];
  int n = read_rows(out, rows, STEPS + 1);
  assert_int_equal(n, STEPS);
  for (int i = 0; i < STEPS; i++) {
    assert_int_equal(rows[i].step, i);
    assert_true(rows[i].has_lr && rows[i].has_loss);
    assert_same(rows[i].lr, c->lr[i], "lr of step", c->name, i + 1);
    if (c->n_momentum) {
      assert_true(rows[i].has_momentum);
      assert_same(rows[i].momentum, c->momentum[i], "momentum of step", c->name,
                  i + 1);
    }
    assert_close(rows[i].loss, c->loss[i], "loss", c->name, i + 1);
  }
  char *s = dump(out);
  int found = 0;
  char *save = NULL;
  for (char *line = strtok_r(s, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char name[64];
    double v;
    if (sscanf(line, "%63s %lf", name, &v) != 2)
      continue;
    for (int k = 0; k < c->n_param; k++)
      if (strcmp(name, c->param_name[k]) == 0) {
        assert_close(v, c->param[k], name, c->name, STEPS);
        found++;
      }
  }
  free(s);
  assert_int_equal(found, c->n_param);
}

/* ---- the cases: per step, per epoch ---------------------------------------
 */

static const char *const needed[] = {
    "exponential",
    "exponential_fast",
    "multistep",
    "multistep_counter",
    "constant",
    "constant_long",
    "constant_zero_iters",
    "polynomial",
    "polynomial_square",
    "polynomial_root",
    "warm_restarts",
    "warm_restarts_mult",
    "warm_restarts_eta",
    "cyclic",
    "cyclic_triangular2",
    "cyclic_exp_range",
    "cyclic_iterations",
    "cyclic_exp_cycle",
    "cyclic_no_momentum",
    "onecycle",
    "onecycle_three_phase",
    "onecycle_epochs",
    "onecycle_adam",
    "sequential_warmup_cosine",
    "sequential_constant_exponential",
    "sequential_three",
    "sequential_closed_forms",
    "sequential_cyclic",
    "sequential_onecycle",
    "chained_constant_exponential",
    "chained_warmup_cosine",
    "chained_sequential",
};

static void test_reference_complete(void **state) {
  (void)state;
  assert_true(reference_loaded);
  assert_int_equal(n_cases, N_CASES);
  for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
    if (!find_case(needed[i]))
      fail_msg("case %s missing from the reference", needed[i]);
  for (int i = 0; i < n_cases; i++) {
    const ref_case *c = &cases[i];
    assert_int_equal(c->n_lr, STEPS);
    assert_int_equal(c->n_loss, STEPS);
    assert_true(c->n_momentum == 0 || c->n_momentum == STEPS);
    assert_int_equal(c->n_param, 6); /* lstsq's x[5] and b */
    assert_non_null(strstr(c->scheduler_opts, "interval=step"));
  }
  /* The momentum is cycled where torch cycles it, Adam's beta1 included. */
  assert_int_equal(find_case("onecycle_adam")->n_momentum, STEPS);
  assert_int_equal(find_case("cyclic")->n_momentum, STEPS);
  assert_int_equal(find_case("cyclic_no_momentum")->n_momentum, 0);
}

static void test_steps(void **state) {
  const ref_case *c = *state;
  assert_true(c->n_lr == STEPS && c->n_loss == STEPS);
  const char *out = make_temp_dir();
  lk_config *cfg = case_config(c, c->optimizer, STEPS, false);
  train(cfg, out, NULL);
  lk_config_free(cfg);
  check_steps(c, out);
}

/* interval = epoch: the rate (and momentum) of epoch e is the one torch's
 * scheduler gives after e steps, on every row of the epoch. */
static void test_epochs(void **state) {
  const ref_case *c = *state;
  assert_true(c->n_lr == STEPS);
  const char *out = make_temp_dir();
  lk_config *cfg = case_config(c, c->optimizer, STEPS, true);
  train(cfg, out, NULL);
  lk_config_free(cfg);
  row rows[2 * STEPS + 8];
  int n = read_rows(out, rows, 2 * STEPS + 8), steps = 0;
  for (int i = 0; i < n; i++) {
    if (!rows[i].has_lr)
      continue; /* the test's row */
    long e = rows[i].epoch;
    assert_int_equal(e, steps++ / 2);
    assert_same(rows[i].lr, c->lr[e], "lr of epoch", c->name, (int)e);
    if (c->n_momentum)
      assert_same(rows[i].momentum, c->momentum[e], "momentum of epoch",
                  c->name, (int)e);
  }
  assert_int_equal(steps, 2 * STEPS);
}

/* ---- resume ----------------------------------------------------------------
 */

/* K steps, then a new run resumed from the checkpoint to STEPS: the same
 * rates, momenta, losses and checkpoint, bit for bit, as the straight
 * run. */
static void resume_case(const char *name, int k) {
  const ref_case *c = find_case(name);
  assert_non_null(c);
  const char *straight = make_temp_dir(), *resumed = make_temp_dir();
  lk_config *all = case_config(c, c->optimizer, STEPS, false);
  lk_config *first = case_config(c, c->optimizer, k, false);
  train(all, straight, NULL);
  train(first, resumed, NULL);
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/checkpoints/last.ckpt", resumed);
  train(all, resumed, ckpt);
  lk_config_free(all);
  lk_config_free(first);
  check_steps(c, resumed);
  char *a = dump(straight), *b = dump(resumed);
  bool same = strcmp(a, b) == 0;
  if (!same)
    fprintf(stderr, "straight:\n%s\nresumed:\n%s\n", a, b);
  free(a);
  free(b);
  assert_true(same);
  drop_dirs();
}

/* In the middle of a cycle, a restart's cycle, a phase, and each
 * composite's scheduler before and after a milestone. */
static void test_resume(void **state) {
  (void)state;
  resume_case("cyclic_triangular2", 17);
  resume_case("warm_restarts_mult", 14);
  resume_case("onecycle_three_phase", 31);
  resume_case("onecycle_adam", 9);
  resume_case("multistep_counter", 7);
  resume_case("constant_long", 11);
  resume_case("polynomial_square", 23);
  resume_case("exponential", 5);
  resume_case("sequential_three", 5);
  resume_case("sequential_three", 19);
  resume_case("sequential_three", 30);
  resume_case("sequential_onecycle", 12);
  resume_case("chained_sequential", 4);
  resume_case("chained_warmup_cosine", 21);
}

/* ---- momentum --------------------------------------------------------------
 */

/* cyclic on Adam cycles beta1 through the same values as SGD's momentum
 * (torch 2.2's CyclicLR; 1.13 refuses Adam), and the same rates. */
static void test_cyclic_adam_beta1(void **state) {
  (void)state;
  const ref_case *c = find_case("cyclic_triangular2");
  assert_non_null(c);
  const char *out = make_temp_dir();
  lk_config *cfg = case_config(c, "adam", STEPS, false);
  train(cfg, out, NULL);
  lk_config_free(cfg);
  row rows[STEPS + 1];
  assert_int_equal(read_rows(out, rows, STEPS + 1), STEPS);
  for (int i = 0; i < STEPS; i++) {
    assert_same(rows[i].lr, c->lr[i], "lr of step", "cyclic on adam", i + 1);
    assert_same(rows[i].momentum, c->momentum[i], "beta1 of step",
                "cyclic on adam", i + 1);
  }
}

/* ---- errors ----------------------------------------------------------------
 */

static void expect_failure(lk_config *cfg, int code,
                           const char *const *needles) {
  const char *out = make_temp_dir();
  char msg[2048];
  int rc = try_train(cfg, out, NULL, msg, sizeof msg);
  lk_config_free(cfg);
  assert_int_equal(rc, code);
  for (; *needles; needles++)
    if (!strstr(msg, *needles))
      fail_msg("message \"%s\" should name \"%s\"", msg, *needles);
  drop_dirs();
}

/* torch's ValueError at the (total_steps + 1)-th step() after the
 * constructor's: a run error naming the scheduler. */
static void test_onecycle_past_total_steps(void **state) {
  (void)state;
  static const char *const needles[] = {"scheduler onecycle",
                                        "tried to step 62 times",
                                        "total steps is 60", NULL};
  lk_config *cfg = case_config(find_case("onecycle"), "sgd", STEPS + 5, false);
  expect_failure(cfg, LK_EPLUGIN, needles);
  /* The same inside a sequential: the child is named. */
  static const char *const child[] = {"scheduler lrs:sequential",
                                      "scheduler cycle:onecycle",
                                      "tried to step 62 times", NULL};
  cfg = case_config(find_case("sequential_onecycle"), "sgd", 75, false);
  expect_failure(cfg, LK_EPLUGIN, child);
}

static lk_config *small(const char *plugins, const char *sections) {
  char s[2048];
  /* sgd's lr is required, as torch's. */
  bool sgd = strstr(plugins, "optimizer = sgd") && !strstr(sections, "[sgd]");
  snprintf(s, sizeof s,
           "[loop]\nmax_steps = 3\n[plugins]\nstep = lstsq\n%s\n%s\n%s",
           plugins, sections, sgd ? "[sgd]\nlr = 0.001\n" : "");
  return parse_config(s);
}

static void test_cycle_momentum_needs_momentum(void **state) {
  (void)state;
  static const char *const needles[] = {"plugin onecycle", "cycle_momentum",
                                        "set cycle_momentum = false", NULL};
  const char *plugins = "optimizer = adagrad\nscheduler = onecycle";
  expect_failure(small(plugins, "[onecycle]\nmax_lr = 0.1\ntotal_steps = 3"),
                 LK_ECONFIG, needles);
  static const char *const cyc[] = {"cycle_momentum", NULL};
  expect_failure(small("optimizer = adagrad\nscheduler = cyclic",
                       "[cyclic]\nbase_lr = 0.01\nmax_lr = 0.1"),
                 LK_ECONFIG, cyc);
  /* Without cycling, adagrad is fine. */
  const char *out = make_temp_dir();
  lk_config *cfg = small(plugins, "[onecycle]\nmax_lr = 0.1\ntotal_steps = 3\n"
                                  "cycle_momentum = false");
  train(cfg, out, NULL);
  lk_config_free(cfg);
}

/* Refused before anything is trained, naming the option and where. */
static void test_refused(void **state) {
  (void)state;
  struct {
    const char *plugins, *sections, *needle;
  } bad[] = {
      {"optimizer = sgd\nscheduler = onecycle",
       "[onecycle]\nmax_lr = 0.1\ntotal_steps = 0",
       "You must define either total_steps OR (epochs AND steps_per_epoch)"},
      {"optimizer = sgd\nscheduler = onecycle",
       "[onecycle]\nmax_lr = 0.1\nepochs = 3\ntotal_steps = 0",
       "You must define either total_steps"},
      /* total_steps = auto (its default) would win over them silently. */
      {"optimizer = sgd\nscheduler = onecycle",
       "[onecycle]\nmax_lr = 0.1\nepochs = 3\nsteps_per_epoch = 1",
       "set total_steps = 0 (torch's None) to use epochs * steps_per_epoch"},
      {"optimizer = sgd\nscheduler = onecycle",
       "[onecycle]\nmax_lr = 0.1\ntotal_steps = 10\npct_start = 0.1",
       "phase 1 of the cycle has no steps"},
      {"optimizer = sgd\nscheduler = multistep",
       "[multistep]\nmilestones = 3,4.5",
       "scheduler_sequences.ini:8: option multistep.milestones = 3,4.5: "
       "value 2 (4.5) must be a whole number"},
      {"optimizer = sgd\nscheduler = multistep",
       "[multistep]\nmilestones = 3,,4",
       "scheduler_sequences.ini:8: option multistep.milestones: expected a "
       "comma list of numbers"},
      {"optimizer = sgd\nscheduler = multistep",
       "[multistep]\nmilestones = 3,-4",
       "milestones = 3,-4: value 2 must be >= 0"},
      {"optimizer = sgd\nscheduler = constant", "[constant]\nfactor = 0",
       "constant.factor = 0: must be > 0 and <= 1"},
      {"optimizer = sgd\nscheduler = polynomial",
       "[polynomial]\ntotal_iters = 0", "polynomial.total_iters = 0"},
      {"optimizer = sgd\nscheduler = cosine_warm_restarts",
       "[cosine_warm_restarts]\nT_0 = 3\nT_mult = 0", "T_mult = 0"},
      {"optimizer = sgd\nscheduler = cyclic",
       "[cyclic]\nbase_lr = 0.1\nmax_lr = 1\nmode = triangular3",
       "triangular3"},
      {"optimizer = sgd\nscheduler = exponential", "", "gamma"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lk_config *cfg = small(bad[i].plugins, bad[i].sections);
    const char *out = make_temp_dir();
    char msg[2048];
    int rc = try_train(cfg, out, NULL, msg, sizeof msg);
    lk_config_free(cfg);
    if (rc != LK_ECONFIG || !strstr(msg, bad[i].needle))
      fail_msg("case %zu: code %d, message \"%s\" should name \"%s\"", i, rc,
               msg, bad[i].needle);
    drop_dirs();
  }
}

/* ---- main ------------------------------------------------------------------
 */

static char labels[2][N_CASES][96];

#define CASE(i)                                                                \
  {labels[0][i], test_steps, NULL, cleanup, &cases[i]}, {                      \
    labels[1][i], test_epochs, NULL, cleanup, &cases[i]                        \
  }
#define CASES8(i)                                                              \
  CASE(i), CASE(i + 1), CASE(i + 2), CASE(i + 3), CASE(i + 4), CASE(i + 5),    \
      CASE(i + 6), CASE(i + 7)

int main(void) {
  if (load_reference() != 0)
    n_cases = 0; /* test_reference_complete fails, and every case */
  for (int i = 0; i < N_CASES; i++) {
    const char *name = i < n_cases ? cases[i].name : "(missing)";
    snprintf(labels[0][i], sizeof labels[0][i], "%.63s, per step", name);
    snprintf(labels[1][i], sizeof labels[1][i], "%.63s, per epoch", name);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_complete),
      CASES8(0),
      CASES8(8),
      CASES8(16),
      CASES8(24),
      cmocka_unit_test_teardown(test_resume, cleanup),
      cmocka_unit_test_teardown(test_cyclic_adam_beta1, cleanup),
      cmocka_unit_test_teardown(test_onecycle_past_total_steps, cleanup),
      cmocka_unit_test_teardown(test_cycle_momentum_needs_momentum, cleanup),
      cmocka_unit_test_teardown(test_refused, cleanup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
