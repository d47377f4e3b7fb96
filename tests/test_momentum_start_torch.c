/* sgd and rmsprop created with momentum = 0 under a scheduler that cycles
 * the momentum (onecycle, cyclic) against torch 1.13: every case of
 * tests/data/momentum_start.ref (written by
 * tests/torch/momentum_start_reference.py) is trained through the public
 * API with interval = step, and each step's rate and momentum (metrics.csv,
 * lr_monitor's log_momentum), each step's loss, the final parameters and
 * the optimizer's final state (the test callback statedump) must be
 * torch's bit for bit: sgd starts its buffers at the first step whose
 * momentum is not 0, rmsprop's first step decides whether it has them,
 * and where torch's RMSprop raises KeyError the run fails at that step.
 * A run stopped after step 1 (before the momentum starts, in the late
 * cases) or step 23 and resumed ends as the straight run, checkpoint and
 * metrics.csv byte for byte. Torch is not needed here. */
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

#define STEPS 40
#define N_CASES 21 /* 7 settings on 3 problems */
#define MAX_PARAMS 8
#define MAX_STATE 32

typedef struct ref_case {
  char name[64], label[160];
  char problem[64]; /* "lstsq m=20 n=5 dtype=f32": the plugin, then options */
  char optimizer[32], optimizer_opts[256];
  char scheduler[32], scheduler_opts[256];
  double lr[STEPS], momentum[STEPS], loss[STEPS];
  int n_lr, n_momentum, n_loss;
  int fails; /* the step at which torch raised, or 0 */
  char param_name[MAX_PARAMS][16];
  double param[MAX_PARAMS];
  int n_param;
  char state_name[MAX_STATE][48];
  double state[MAX_STATE];
  int n_state;
} ref_case;

static ref_case cases[N_CASES];
static int n_cases;
static bool reference_loaded;

/* ---- the reference --------------------------------------------------------
 */

/* case NAME problem "PROB" optimizer OPT "OPTS" scheduler SCHED "OPTS" */
static bool parse_case(const char *line, ref_case *c) {
  if (sscanf(line,
             "case %63s problem \"%63[^\"]\" optimizer %31s \"%255[^\"]\" "
             "scheduler %31s \"%255[^\"]\"",
             c->name, c->problem, c->optimizer, c->optimizer_opts, c->scheduler,
             c->scheduler_opts) != 6)
    return false;
  char label[sizeof c->label];
  snprintf(label, sizeof label, "%s on %s", c->name, c->problem);
  memcpy(c->label, label, sizeof label);
  return true;
}

/* One value line "WHAT STEP VALUE" into its series, steps in order. */
static void add_value(double *series, int *n, int step, double v) {
  if (step == *n + 1 && step <= STEPS)
    series[(*n)++] = v;
}

static int load_reference(void) {
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/momentum_start.ref",
           dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  char line[1024], name[48], pname[16];
  ref_case *c = NULL;
  int i;
  double v;
  bool ok = true;
  while (ok && fgets(line, sizeof line, f)) {
    if (strncmp(line, "case ", 5) == 0) {
      c = n_cases < N_CASES ? &cases[n_cases++] : NULL;
      ok = c && parse_case(line, c);
    } else if (c && sscanf(line, "lr %d %lf", &i, &v) == 2) {
      add_value(c->lr, &c->n_lr, i, v);
    } else if (c && sscanf(line, "momentum %d %lf", &i, &v) == 2) {
      add_value(c->momentum, &c->n_momentum, i, v);
    } else if (c && sscanf(line, "loss %d %lf", &i, &v) == 2) {
      add_value(c->loss, &c->n_loss, i, v);
    } else if (c && sscanf(line, "fails %d", &i) == 1) {
      c->fails = i;
    } else if (c && sscanf(line, "param %15s %lf", pname, &v) == 2) {
      ok = c->n_param < MAX_PARAMS;
      if (ok) {
        memcpy(c->param_name[c->n_param], pname, sizeof pname);
        c->param[c->n_param++] = v;
      }
    } else if (c && sscanf(line, "state %47s %lf", name, &v) == 2) {
      ok = c->n_state < MAX_STATE;
      if (ok) {
        memcpy(c->state_name[c->n_state], name, sizeof name);
        c->state[c->n_state++] = v;
      }
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

static int cleanup(void **state) {
  (void)state;
  for (size_t i = 0; i < 4; i++)
    if (dirs[i]) {
      nftw(dirs[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
      free(dirs[i]);
      dirs[i] = NULL;
    }
  return 0;
}

static const char *make_temp_dir(void) {
  size_t i = 0;
  while (i < 4 && dirs[i])
    i++;
  assert_true(i < 4);
  dirs[i] = strdup("/tmp/loopkit-mstart-XXXXXX");
  assert_non_null(dirs[i]);
  assert_non_null(mkdtemp(dirs[i]));
  return dirs[i];
}

/* ---- configs and runs ------------------------------------------------------
 */

typedef struct text {
  char s[4096];
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

/* "[SECTION]" and a "key = value" line for each "k=v" of the space
 * separated OPTIONS. */
static void put_section(text *t, const char *section, const char *options) {
  char copy[256], *save = NULL;
  snprintf(copy, sizeof copy, "%s", options);
  put(t, "[%s]\n", section);
  for (char *kv = strtok_r(copy, " ", &save); kv;
       kv = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(kv, '=');
    assert_non_null(eq);
    *eq = '\0';
    put(t, "%s = %s\n", kv, eq + 1);
  }
}

/* Case C's config for STEPS_RUN steps, the state written to OUT/state.txt
 * when training ends; where torch raises, a checkpoint after every step
 * (the last one before the failure). */
static lk_config *case_config(const ref_case *c, int steps_run,
                              const char *out) {
  text t = {.used = 0};
  char step[32];
  const char *opts = strchr(c->problem, ' ');
  snprintf(step, sizeof step, "%.*s", (int)(opts - c->problem), c->problem);
  put(&t,
      "[loop]\nmax_steps = %d\ncheckpoint_every_n_steps = %d\n[plugins]\n"
      "step = %s\noptimizer = %s\nscheduler = %s\n"
      "callbacks = lr_monitor, statedump\n[lr_monitor]\nlog_momentum = "
      "true\n[statedump]\npath = %s/state.txt\n",
      steps_run, c->fails ? 1 : 0, step, c->optimizer, c->scheduler, out);
  put_section(&t, step, opts + 1);
  put_section(&t, c->optimizer, c->optimizer_opts);
  put_section(&t, c->scheduler, c->scheduler_opts);
  lk_config *cfg = NULL;
  if (lk_config_parse("momentum_start.ini", t.s, &cfg) != 0)
    fail_msg("config: %s\n%s", lk_last_error(), t.s);
  return cfg;
}

/* Trains CFG in OUT, or resumes OUT's last checkpoint; lk_run_train's code,
 * its message in MSG. */
static int try_train(const lk_config *cfg, const char *out, bool resume,
                     char *msg, size_t len) {
  char ckpt[4200];
  snprintf(ckpt, sizeof ckpt, "%s/checkpoints/last.ckpt", out);
  lk_run_options opts = {.out_dir = resume ? NULL : out,
                         .resume = resume ? ckpt : NULL};
  lk_run *run = NULL;
  int rc = lk_run_new(cfg, &opts, &run);
  if (rc == 0) {
    rc = lk_run_train(run);
    lk_run_free(run);
  }
  snprintf(msg, len, "%s", rc ? lk_last_error() : "");
  return rc;
}

static void train(const ref_case *c, int steps_run, const char *out,
                  bool resume) {
  lk_config *cfg = case_config(c, steps_run, out);
  char msg[2048];
  int rc = try_train(cfg, out, resume, msg, sizeof msg);
  lk_config_free(cfg);
  if (rc != 0)
    fail_msg("%s: training: %s", c->label, msg);
}

/* ---- comparing -------------------------------------------------------------
 */

/* The same double, bit for bit (a -0 is not a 0). */
static bool same_bits(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

static void assert_same(const ref_case *c, double got, double want,
                        const char *what, int step) {
  if (!same_bits(got, want))
    fail_msg("%s: %s at step %d: loopkit %.17g, torch %.17g", c->label, what,
             step, got, want);
}

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

/* Each row of OUT/metrics.csv: its loss, lr and momentum are torch's for
 * that step; as many rows as steps ran. */
static void check_rows(const ref_case *c, const char *out, int steps) {
  char path[4200], line[4096];
  snprintf(path, sizeof path, "%s/metrics.csv", out);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof line, f));
  int want[3] = {2, column(line, "lr"), column(line, "momentum")};
  const double *ref[3] = {c->loss, c->lr, c->momentum};
  static const char *const what[3] = {"loss", "lr", "momentum"};
  assert_true(want[1] > 2 && want[2] > 2);
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    assert_true(n < steps);
    char *p = line;
    for (int col = 0; p; col++) {
      for (int k = 0; k < 3; k++)
        if (col == want[k])
          assert_same(c, strtod(p, NULL), ref[k][n], what[k], n + 1);
      p = strchr(p, ',');
      p = p ? p + 1 : NULL;
    }
    n++;
  }
  fclose(f);
  assert_int_equal(n, steps);
}

/* The parameters of OUT's last checkpoint are torch's final ones (an f32
 * printed with %.9g, which only a float reads back exactly). */
static void check_params(const ref_case *c, const char *out) {
  char path[4200], *s = NULL;
  size_t size = 0;
  snprintf(path, sizeof path, "%s/checkpoints/last.ckpt", out);
  FILE *f = open_memstream(&s, &size);
  assert_non_null(f);
  int rc = lk_checkpoint_dump(path, f);
  fclose(f);
  bool f32 = strstr(c->problem, "dtype=f32") != NULL;
  int found = 0;
  char *save = NULL;
  for (char *line = strtok_r(rc == 0 ? s : NULL, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char name[64];
    double v;
    if (sscanf(line, "%63s %lf", name, &v) != 2)
      continue;
    for (int k = 0; k < c->n_param; k++)
      if (strcmp(name, c->param_name[k]) == 0) {
        found++;
        if (f32 ? (float)v != (float)c->param[k] : !same_bits(v, c->param[k]))
          fail_msg("%s: final %s: loopkit %.17g, torch %.17g", c->label, name,
                   v, c->param[k]);
      }
  }
  free(s);
  if (rc != 0)
    fail_msg("lk_checkpoint_dump %s failed", path);
  assert_int_equal(found, c->n_param);
}

/* Every state value of the reference is in OUT/state.txt (statedump's)
 * with the same bits. */
static void check_state(const ref_case *c, const char *out) {
  char path[4200], line[256], names[64][48];
  double values[64];
  snprintf(path, sizeof path, "%s/state.txt", out);
  FILE *f = fopen(path, "r");
  if (!f)
    fail_msg("%s: no state file %s", c->label, path);
  int n = 0;
  while (n < 64 && fgets(line, sizeof line, f))
    if (sscanf(line, "%47s %lf", names[n], &values[n]) == 2)
      n++;
  fclose(f);
  for (int i = 0; i < c->n_state; i++) {
    int k = 0;
    while (k < n && strcmp(names[k], c->state_name[i]) != 0)
      k++;
    if (k == n)
      fail_msg("%s: loopkit has no state %s", c->label, c->state_name[i]);
    if (!same_bits(values[k], c->state[i]))
      fail_msg("%s: state %s: loopkit %.17g, torch %.17g", c->label,
               c->state_name[i], values[k], c->state[i]);
  }
}

static bool same_file(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa && fb;
  while (same) {
    int ca = getc(fa), cb = getc(fb);
    same = ca == cb;
    if (ca == EOF)
      break;
  }
  if (fa)
    fclose(fa);
  if (fb)
    fclose(fb);
  return same;
}

/* ---- the tests -------------------------------------------------------------
 */

static const char *const settings[] = {
    "sgd_onecycle",     "sgd_onecycle_late", "sgd_cyclic",   "sgd_cyclic_late",
    "rmsprop_onecycle", "rmsprop_cyclic",    "rmsprop_late", NULL};

static void test_reference_complete(void **state) {
  (void)state;
  assert_true(reference_loaded);
  assert_int_equal(n_cases, N_CASES);
  for (const char *const *s = settings; *s; s++) {
    int found = 0;
    for (int i = 0; i < n_cases; i++)
      found += strcmp(cases[i].name, *s) == 0;
    if (found != 3)
      fail_msg("setting %s: %d problems in the reference, not 3", *s, found);
  }
  for (int i = 0; i < n_cases; i++) {
    const ref_case *c = &cases[i];
    int steps = c->fails ? c->fails : STEPS;
    assert_non_null(strstr(c->optimizer_opts, "momentum=0.0"));
    assert_int_equal(c->n_lr, steps);
    assert_int_equal(c->n_momentum, steps);
    assert_int_equal(c->n_loss, c->fails ? c->fails - 1 : STEPS);
    /* Only rmsprop_late raises, at its second step: its momentum is 0 at
     * the first and not at the second. */
    assert_int_equal(c->fails, strcmp(c->name, "rmsprop_late") ? 0 : 2);
    /* The late cases start the momentum at step 2, the others at 1. */
    bool late = strstr(c->name, "late") != NULL;
    assert_true(late ? c->momentum[0] == 0 && c->momentum[1] > 0
                     : c->momentum[0] > 0);
    assert_true(c->n_param > 0 && c->n_state > 3);
  }
}

/* torch's KeyError: the run in OUT fails at that step, naming it, and its
 * checkpoint of the step before holds torch's parameters; RESUME: that
 * checkpoint, which cannot step either, is refused. */
static void check_fails(const ref_case *c, const char *out, bool resume) {
  lk_config *cfg = case_config(c, STEPS, out);
  char msg[2048], want[128];
  int rc = try_train(cfg, out, resume, msg, sizeof msg);
  lk_config_free(cfg);
  snprintf(want, sizeof want, "at step %d, but the first step had momentum 0",
           c->fails);
  if (resume)
    snprintf(want, sizeof want,
             "has_momentum_buffer[0] = 0 says the first step had momentum 0");
  if (rc != (resume ? LK_EFORMAT : LK_ECONFIG) || !strstr(msg, want) ||
      !strstr(msg, "KeyError") || !strstr(msg, "rmsprop"))
    fail_msg("%s (%s): rc %d, message \"%s\"", c->label,
             resume ? "resumed" : "straight", rc, msg);
  check_rows(c, out, c->fails - 1);
  check_params(c, out);
}

/* The straight run, against torch. */
static void test_case(void **state) {
  const ref_case *c = *state;
  const char *out = make_temp_dir();
  if (c->fails) {
    check_fails(c, out, false);
    return;
  }
  train(c, STEPS, out, false);
  check_rows(c, out, STEPS);
  check_params(c, out);
  check_state(c, out);
}

/* Stopped after K steps and resumed to STEPS: the checkpoint and
 * metrics.csv of the straight run, byte for byte, and torch's state. K = 1
 * stops a late case before its momentum starts; where torch raises, the
 * checkpoint before that step is refused (the first step's decision is
 * state). */
static void test_resume(void **state) {
  const ref_case *c = *state;
  if (c->fails) {
    const char *out = make_temp_dir();
    train(c, c->fails - 1, out, false);
    check_fails(c, out, true);
    return;
  }
  const char *straight = make_temp_dir();
  train(c, STEPS, straight, false);
  static const int stops[] = {1, 23};
  for (size_t i = 0; i < 2; i++) {
    const char *resumed = make_temp_dir();
    train(c, stops[i], resumed, false);
    train(c, STEPS, resumed, true);
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/checkpoints/last.ckpt", straight);
    snprintf(b, sizeof b, "%s/checkpoints/last.ckpt", resumed);
    if (!same_file(a, b))
      fail_msg("%s: stopped after step %d and resumed: last.ckpt differs",
               c->label, stops[i]);
    snprintf(a, sizeof a, "%s/metrics.csv", straight);
    snprintf(b, sizeof b, "%s/metrics.csv", resumed);
    if (!same_file(a, b))
      fail_msg("%s: stopped after step %d and resumed: metrics.csv differs",
               c->label, stops[i]);
    check_state(c, resumed);
  }
}

/* ---- main ------------------------------------------------------------------
 */

static char labels[2][N_CASES][180];

#define CASE(i)                                                                \
  {labels[0][i], test_case, NULL, cleanup, &cases[i]}, {                       \
    labels[1][i], test_resume, NULL, cleanup, &cases[i]                        \
  }
#define CASES7(i)                                                              \
  CASE(i), CASE(i + 1), CASE(i + 2), CASE(i + 3), CASE(i + 4), CASE(i + 5),    \
      CASE(i + 6)

int main(void) {
  if (load_reference() != 0)
    n_cases = 0; /* test_reference_complete fails, and every case */
  for (int i = 0; i < N_CASES; i++) {
    const char *label = i < n_cases ? cases[i].label : "(missing)";
    snprintf(labels[0][i], sizeof labels[0][i], "%s", label);
    snprintf(labels[1][i], sizeof labels[1][i], "%s, resumed", label);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_complete),
      CASES7(0),
      CASES7(7),
      CASES7(14),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
