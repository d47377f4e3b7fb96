/* The sgd and rosenbrock plugins against torch.optim.SGD 1.13: every case of
 * tests/data/sgd_rosenbrock.ref (written by tests/torch/sgd_reference.py)
 * is trained through the public API, and each step's loss (metrics.csv)
 * and the final parameters (the checkpoint) must equal torch's to 1e-12
 * relative. A resumed run must continue exactly, and bad options must be
 * refused with a message that names them. Torch is not needed here. */
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
#define MAX_N 16
#define TOLERANCE 1e-12

typedef struct ref_case {
  const char *name;
  int n;
  char options[256]; /* "lr=0.001 momentum=0.9" */
  double loss[STEPS];
  double param[MAX_N];
  int n_loss, n_param;
  bool found;
} ref_case;

/* The cases the reference file must hold, one test each. */
static ref_case cases[] = {
    {.name = "plain", .n = 2},      {.name = "momentum", .n = 2},
    {.name = "nesterov", .n = 2},   {.name = "weight_decay", .n = 2},
    {.name = "dampening", .n = 2},  {.name = "mixed", .n = 2},
    {.name = "plain", .n = 10},     {.name = "momentum", .n = 10},
    {.name = "nesterov", .n = 10},  {.name = "weight_decay", .n = 10},
    {.name = "dampening", .n = 10}, {.name = "mixed", .n = 10},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* ---- helpers ------------------------------------------------------------- */

static ref_case *find_case(const char *name, int n) {
  for (size_t i = 0; i < N_CASES; i++)
    if (strcmp(cases[i].name, name) == 0 && cases[i].n == n)
      return &cases[i];
  return NULL;
}

/* Reads the reference file once, in the group setup. */
static int load_reference(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/sgd_rosenbrock.ref",
           dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  char line[512], name[64], options[256];
  ref_case *c = NULL;
  int n, i;
  double v;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "case %63s n %d options \"%255[^\"]\"", name, &n,
               options) == 3) {
      c = find_case(name, n);
      if (c) {
        snprintf(c->options, sizeof c->options, "%s", options);
        c->found = true;
      }
    } else if (c && sscanf(line, "loss %d %lf", &i, &v) == 2) {
      if (i == c->n_loss + 1 && i <= STEPS)
        c->loss[c->n_loss++] = v;
    } else if (c && sscanf(line, "param x[%d] %lf", &i, &v) == 2) {
      if (i == c->n_param && i < MAX_N)
        c->param[c->n_param++] = v;
    }
  }
  fclose(f);
  return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void remove_tree(const char *dir) {
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void assert_close(double got, double want, const char *what, int i) {
  double scale = fmax(fabs(got), fabs(want));
  double err = got == want ? 0 : fabs(got - want) / scale;
  if (!(err <= TOLERANCE))
    fail_msg("%s %d: loopkit %.17g, torch %.17g (relative error %.3g)", what, i,
             got, want, err);
}

/* The config of a case: the loop, rosenbrock of size N, sgd's options. */
static lk_config *case_config(const ref_case *c, int max_steps) {
  char text[1024];
  int used = snprintf(text, sizeof text,
                      "[loop]\nmax_steps = %d\n"
                      "[plugins]\nstep = rosenbrock\noptimizer = sgd\n"
                      "[rosenbrock]\nn = %d\n[sgd]\n",
                      max_steps, c->n);
  char opts[256];
  snprintf(opts, sizeof opts, "%s", c->options);
  for (char *kv = strtok(opts, " "); kv; kv = strtok(NULL, " ")) {
    char *eq = strchr(kv, '=');
    assert_non_null(eq);
    *eq = '\0';
    used += snprintf(text + used, sizeof text - (size_t)used, "%s = %s\n", kv,
                     eq + 1);
    assert_true(used < (int)sizeof text);
  }
  lk_config *cfg = NULL;
  int rc = lk_config_parse("sgd_torch.ini", text, &cfg);
  if (rc != 0)
    fail_msg("config of %s: %s", c->name, lk_last_error());
  return cfg;
}

/* Trains CFG in OUT (resuming from RESUME if not NULL). */
static void train(const lk_config *cfg, const char *out, const char *resume) {
  lk_run_options opts = {.out_dir = resume ? NULL : out, .resume = resume};
  lk_run *run = NULL;
  int rc = lk_run_new(cfg, &opts, &run);
  if (rc != 0)
    fail_msg("lk_run_new: %s", lk_last_error());
  rc = lk_run_train(run);
  if (rc != 0) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    lk_run_free(run);
    fail_msg("lk_run_train: %s", msg);
  }
  lk_run_free(run);
}

/* The loss column of OUT/metrics.csv, in row order. */
static int read_losses(const char *out, double *loss, int max) {
  char path[4096], line[4096];
  snprintf(path, sizeof path, "%s/metrics.csv", out);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof line, f));
  assert_int_equal(strncmp(line, "step,epoch,loss", 15), 0);
  int n = 0;
  long last_step = -1;
  while (fgets(line, sizeof line, f) && n < max) {
    char *end;
    long step = strtol(line, &end, 10);
    assert_true(*end == ',' && step > last_step); /* steps increase */
    last_step = step;
    char *cell = strchr(end + 1, ','); /* after epoch */
    assert_non_null(cell);
    loss[n++] = strtod(cell + 1, &end);
    assert_true(end != cell + 1 && (*end == ',' || *end == '\n'));
  }
  fclose(f);
  return n;
}

/* x[0..] from OUT/checkpoints/last.ckpt, through lk_checkpoint_dump. */
static int read_params(const char *out, double *x, int max) {
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
  int n = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    int i;
    double v;
    if (sscanf(line, "x[%d] %lf", &i, &v) == 2) {
      assert_int_equal(i, n); /* in index order, nothing missing */
      assert_true(n < max);
      x[n++] = v;
    }
  }
  free(text);
  return n;
}

static void check_against_torch(const ref_case *c, const char *out) {
  double loss[STEPS + 1], x[MAX_N + 1];
  int n_loss = read_losses(out, loss, STEPS + 1);
  assert_int_equal(n_loss, STEPS);
  for (int i = 0; i < STEPS; i++)
    assert_close(loss[i], c->loss[i], "loss at step", i + 1);
  int n_x = read_params(out, x, MAX_N + 1);
  assert_int_equal(n_x, c->n);
  for (int i = 0; i < c->n; i++)
    assert_close(x[i], c->param[i], "final x", i);
}

/* The run directory of the current test: removed by its teardown even
 * when an assertion ends the test early. */
static char *current_dir;

static void drop_temp_dir(void) {
  if (current_dir) {
    remove_tree(current_dir);
    free(current_dir);
    current_dir = NULL;
  }
}

static const char *make_temp_dir(void) {
  drop_temp_dir();
  current_dir = strdup("/tmp/loopkit-sgd-XXXXXX");
  assert_non_null(current_dir);
  assert_non_null(mkdtemp(current_dir));
  return current_dir;
}

static int cleanup(void **state) {
  (void)state;
  drop_temp_dir();
  return 0;
}

/* ---- tests ----------------------------------------------------------------
 */

static void test_reference_complete(void **state) {
  (void)state;
  for (size_t i = 0; i < N_CASES; i++) {
    const ref_case *c = &cases[i];
    if (!c->found)
      fail_msg("case %s n %d missing from the reference", c->name, c->n);
    assert_int_equal(c->n_loss, STEPS);
    assert_int_equal(c->n_param, c->n);
    assert_true(strstr(c->options, "lr=") != NULL);
  }
}

static void test_case(void **state) {
  const ref_case *c = *state;
  assert_true(c->found && c->n_loss == STEPS && c->n_param == c->n);
  const char *out = make_temp_dir();
  lk_config *cfg = case_config(c, STEPS);
  train(cfg, out, NULL);
  check_against_torch(c, out);
  lk_config_free(cfg);
}

/* 25 steps, then a new run resumed from the checkpoint for the other 35:
 * the momentum buffers come back, so the iterates are still torch's. */
static void test_resume(void **state) {
  (void)state;
  const ref_case *c = find_case("nesterov", 10);
  assert_true(c->found);
  const char *out = make_temp_dir();
  lk_config *first = case_config(c, 25);
  train(first, out, NULL);
  lk_config_free(first);
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/checkpoints/last.ckpt", out);
  lk_config *rest = case_config(c, STEPS);
  train(rest, out, ckpt);
  check_against_torch(c, out);
  lk_config_free(rest);
}

/* A refused option fails lk_run_new and names the plugin and the option. */
static void expect_refused(const char *section, const char *options,
                           const char *needle) {
  char text[512];
  /* sgd's lr is required: a case that refuses something else gives one. */
  const char *lr = strstr(options, "lr =")       ? ""
                   : strcmp(section, "sgd") == 0 ? "lr = 0.01\n"
                                                 : "[sgd]\nlr = 0.01\n";
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = 1\n[plugins]\nstep = rosenbrock\n"
           "optimizer = sgd\n[%s]\n%s\n%s",
           section, options, lr);
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_parse("refused.ini", text, &cfg), 0);
  const char *out = make_temp_dir();
  lk_run_options opts = {.out_dir = out};
  lk_run *run = NULL;
  int rc = lk_run_new(cfg, &opts, &run);
  assert_int_equal(rc, LK_ECONFIG);
  assert_null(run);
  const char *msg = lk_last_error();
  if (!strstr(msg, needle) || !strstr(msg, section))
    fail_msg("\"%s\": message \"%s\" should name %s and \"%s\"", options, msg,
             section, needle);
  lk_config_free(cfg);
}

static void test_refused_options(void **state) {
  (void)state;
  /* torch's checks are the ranges, refused by the host in torch's order,
   * with inf and nan; nesterov is checked in create. */
  expect_refused("sgd", "lr = -0.1", "sgd.lr = -0.1: must be >= 0");
  expect_refused("sgd", "momentum = -0.5", "sgd.momentum = -0.5: must be >= 0");
  expect_refused("sgd", "weight_decay = -1",
                 "sgd.weight_decay = -1: must be >= 0");
  expect_refused("sgd", "lr = inf", "sgd.lr = inf: must be a finite number");
  expect_refused("sgd", "dampening = nan",
                 "sgd.dampening = nan: must be a finite number");
  expect_refused("sgd", "weight_decay = -1\nmomentum = -1\nlr = -1",
                 "sgd.lr = -1: must be >= 0");
  expect_refused("sgd", "weight_decay = -1\nmomentum = -1",
                 "sgd.momentum = -1: must be >= 0");
  expect_refused("sgd", "nesterov = true", "nesterov");
  expect_refused("sgd", "nesterov = true\nmomentum = 0.9\ndampening = 0.5",
                 "dampening");
  expect_refused("rosenbrock", "n = 1", "rosenbrock.n = 1: must be >= 2");
}

/* No default rate, as torch's SGD(params, lr=required): a config without
 * one is refused, naming the option and where to set it. */
static void test_lr_required(void **state) {
  (void)state;
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_parse("nolr.ini",
                                   "[loop]\nmax_steps = 1\n[plugins]\nstep = "
                                   "rosenbrock\noptimizer = sgd\n[sgd]\n"
                                   "momentum = 0.9\n",
                                   &cfg),
                   0);
  lk_run_options opts = {.out_dir = make_temp_dir()};
  lk_run *run = NULL;
  assert_int_equal(lk_run_new(cfg, &opts, &run), LK_ECONFIG);
  assert_null(run);
  const char *msg = lk_last_error();
  if (!strstr(msg, "missing required option \"lr\"") || !strstr(msg, "[sgd]"))
    fail_msg("message \"%s\" should name the missing lr and [sgd]", msg);
  lk_config_free(cfg);
}

#define CASE_TEST(i, label)                                                    \
  { label, test_case, NULL, cleanup, &cases[i] }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_complete),
      CASE_TEST(0, "sgd plain n=2"),
      CASE_TEST(1, "sgd momentum n=2"),
      CASE_TEST(2, "sgd nesterov n=2"),
      CASE_TEST(3, "sgd weight_decay n=2"),
      CASE_TEST(4, "sgd dampening n=2"),
      CASE_TEST(5, "sgd mixed n=2"),
      CASE_TEST(6, "sgd plain n=10"),
      CASE_TEST(7, "sgd momentum n=10"),
      CASE_TEST(8, "sgd nesterov n=10"),
      CASE_TEST(9, "sgd weight_decay n=10"),
      CASE_TEST(10, "sgd dampening n=10"),
      CASE_TEST(11, "sgd mixed n=10"),
      cmocka_unit_test_teardown(test_resume, cleanup),
      cmocka_unit_test_teardown(test_refused_options, cleanup),
      cmocka_unit_test_teardown(test_lr_required, cleanup),
  };
  return cmocka_run_group_tests(tests, load_reference, NULL);
}
