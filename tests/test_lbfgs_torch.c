/* The lbfgs plugin against torch.optim.LBFGS 1.13: every case of
 * tests/data/lbfgs.ref (written by tests/torch/lbfgs_reference.py) is
 * trained through the public API on rosenbrock (n = 2, 100) and lstsq
 * (m = 20, n = 5: two parameter tensors), and
 *  - each step's loss (metrics.csv: the last closure call's) and the final
 *    parameters (the checkpoint) must equal torch's to 1e-10 relative;
 *  - the closure, training_step, zero_grad and backward rows of the simple
 *    profiler's profile.txt must count as many calls as torch's closure got;
 *  - driven step by step through a counting wrapper around the run's
 *    closure, every optimizer step must call the closure exactly as often as
 *    torch's step did.
 * The reference closure evaluates loss and gradient with the plugins'
 * arithmetic, so the comparison is of the optimizers alone (the iterates
 * come out bitwise equal). Also: a resumed run continues exactly, f32 runs,
 * NaN from the closure leaves the parameters alone, bad options are refused
 * with a message that names them. Torch is not needed here. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, nftw, open_memstream */
#endif
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>

#define STEPS 50
#define MAX_PARAMS 128
#define MAX_CASES 40
#define TOLERANCE 1e-10

typedef struct ref_case {
  char name[64];
  char problem[64];  /* "rosenbrock n=2" */
  char options[256]; /* "line_search_fn=strong_wolfe history_size=5" */
  double loss[STEPS];
  int evals[STEPS];
  char param_name[MAX_PARAMS][64]; /* "x[3]" */
  double param[MAX_PARAMS];
  int n_steps, n_param;
  long n_iter, func_evals;
} ref_case;

static ref_case cases[MAX_CASES];
static int n_cases;

/* The settings and problems the reference must hold. */
static const char *const settings[] = {
    "defaults",        "strong_wolfe",
    "history5",        "history5_wolfe",
    "max_iter5_eval7", "max_iter5_eval7_wolfe",
    "max_iter8",       "lr05",
    "lr05_wolfe",      "tolerances",
    "tolerances_wolfe"};
static const char *const problems[] = {"rosenbrock n=2", "rosenbrock n=100",
                                       "lstsq m=20 n=5"};
#define N_SETTINGS (sizeof settings / sizeof settings[0])
#define N_PROBLEMS (sizeof problems / sizeof problems[0])

/* ---- helpers ------------------------------------------------------------- */

static ref_case *find_case(const char *name, const char *problem) {
  for (int i = 0; i < n_cases; i++)
    if (strcmp(cases[i].name, name) == 0 &&
        strcmp(cases[i].problem, problem) == 0)
      return &cases[i];
  return NULL;
}

/* Reads the reference file once, in the group setup. */
static int load_reference(void) {
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/lbfgs.ref", dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  char line[1024], word[64];
  ref_case *c = NULL;
  int i, e;
  double v;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "case ", 5) == 0) {
      /* case NAME problem PROBLEM... options "OPTIONS" */
      char *prob = strstr(line, " problem "),
           *opt = strstr(line, " options \"");
      char *end = opt ? strchr(opt + 10, '"') : NULL;
      if (!prob || !end || n_cases == MAX_CASES) {
        fprintf(stderr, "%s: bad case line (or too many): %s", path, line);
        fclose(f);
        return -1;
      }
      c = &cases[n_cases++];
      snprintf(c->name, sizeof c->name, "%.*s", (int)(prob - line - 5),
               line + 5);
      snprintf(c->problem, sizeof c->problem, "%.*s", (int)(opt - prob - 9),
               prob + 9);
      snprintf(c->options, sizeof c->options, "%.*s", (int)(end - opt - 10),
               opt + 10);
    } else if (c &&
               sscanf(line, "step %d loss %lf evals %d", &i, &v, &e) == 3) {
      if (i == c->n_steps + 1 && i <= STEPS) {
        c->loss[c->n_steps] = v;
        c->evals[c->n_steps++] = e;
      }
    } else if (c && sscanf(line, "param %63s %lf", word, &v) == 2) {
      if (c->n_param < MAX_PARAMS) {
        snprintf(c->param_name[c->n_param], sizeof c->param_name[0], "%s",
                 word);
        c->param[c->n_param++] = v;
      }
    } else if (c && sscanf(line, "state n_iter %ld func_evals %ld", &c->n_iter,
                           &c->func_evals) == 2) {
      continue;
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

/* The temp directory of the current test: removed by its teardown even
 * when an assertion ends the test early. */
static char *current_dir;

static void drop_temp_dir(void) {
  if (current_dir) {
    nftw(current_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(current_dir);
    current_dir = NULL;
  }
}

static int cleanup(void **state) {
  (void)state;
  drop_temp_dir();
  return 0;
}

/* DIR/SUB in the test's temp directory (made on first use). */
static void temp_path(char *buf, size_t len, const char *sub) {
  if (!current_dir) {
    current_dir = strdup("/tmp/loopkit-lbfgs-XXXXXX");
    assert_non_null(current_dir);
    assert_non_null(mkdtemp(current_dir));
  }
  snprintf(buf, len, "%s/%s", current_dir, sub);
}

static void assert_close(double got, double want, const char *what,
                         const char *where) {
  double scale = fmax(fabs(got), fabs(want));
  double err = got == want ? 0 : fabs(got - want) / scale;
  if (!(err <= TOLERANCE))
    fail_msg("%s %s: loopkit %.17g, torch %.17g (relative error %.3g)", what,
             where, got, want, err);
}

/* Appends "key = value" lines for "k=v k=v" to TEXT. */
static void put_options(char *text, size_t len, const char *options) {
  char copy[256];
  snprintf(copy, sizeof copy, "%s", options);
  for (char *kv = strtok(copy, " "); kv; kv = strtok(NULL, " ")) {
    char *eq = strchr(kv, '=');
    assert_non_null(eq);
    *eq = '\0';
    size_t used = strlen(text);
    assert_true((size_t)snprintf(text + used, len - used, "%s = %s\n", kv,
                                 eq + 1) < len - used);
  }
}

/* The config of a case: max_steps, the problem, lbfgs's options, then
 * EXTRA ("[section]\nkey = value\n..."). */
static lk_config *case_config(const ref_case *c, int max_steps,
                              const char *extra) {
  char text[2048], problem[64];
  snprintf(problem, sizeof problem, "%s", c->problem);
  char *space = strchr(problem, ' ');
  assert_non_null(space);
  *space = '\0';
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = %d\n[plugins]\nstep = %s\noptimizer = lbfgs\n"
           "%s\n[%s]\n",
           max_steps, problem, extra ? extra : "", problem);
  put_options(text, sizeof text, space + 1);
  strncat(text, "[lbfgs]\n", sizeof text - strlen(text) - 1);
  put_options(text, sizeof text, c->options);
  lk_config *cfg = NULL;
  if (lk_config_parse("lbfgs_torch.ini", text, &cfg) != 0)
    fail_msg("config of %s %s: %s", c->name, c->problem, lk_last_error());
  return cfg;
}

static lk_run *open_run(const lk_config *cfg, const char *out,
                        const char *resume) {
  lk_run_options opts = {.out_dir = resume ? NULL : out, .resume = resume};
  lk_run *run = NULL;
  if (lk_run_new(cfg, &opts, &run) != 0)
    fail_msg("lk_run_new: %s", lk_last_error());
  return run;
}

/* Trains CFG in OUT (resuming from RESUME if not NULL). */
static void train(const lk_config *cfg, const char *out, const char *resume) {
  lk_run *run = open_run(cfg, out, resume);
  if (lk_run_train(run) != 0) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    lk_run_free(run);
    fail_msg("lk_run_train: %s", msg);
  }
  lk_run_free(run);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    fail_msg("cannot open %s", path);
  char *text = NULL;
  size_t cap = 0, len = 0;
  int ch;
  while ((ch = fgetc(f)) != EOF) {
    if (len + 2 > cap) {
      cap = cap ? 2 * cap : 4096;
      text = realloc(text, cap);
      assert_non_null(text);
    }
    text[len++] = (char)ch;
  }
  fclose(f);
  if (!text)
    text = calloc(1, 1);
  assert_non_null(text);
  text[len] = '\0';
  return text;
}

/* The loss column of OUT/metrics.csv, in row order. */
static int read_losses(const char *out, double *loss, int max) {
  char path[4096];
  snprintf(path, sizeof path, "%s/metrics.csv", out);
  char *text = read_text(path), *save = NULL;
  char *line = strtok_r(text, "\n", &save);
  assert_non_null(line);
  assert_int_equal(strncmp(line, "step,epoch,loss", 15), 0);
  int n = 0;
  while ((line = strtok_r(NULL, "\n", &save)) && n < max) {
    char *cell = strchr(line, ',');
    assert_non_null(cell);
    cell = strchr(cell + 1, ','); /* after epoch */
    assert_non_null(cell);
    char *end;
    loss[n++] = strtod(cell + 1, &end);
    assert_true(end != cell + 1);
  }
  free(text);
  return n;
}

/* OUT/checkpoints/last.ckpt through lk_checkpoint_dump, as text. */
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

/* "Num calls" of ACTION in OUT/profile.txt. */
static long profiled_calls(const char *out, const char *action) {
  char path[4096];
  snprintf(path, sizeof path, "%s/profile.txt", out);
  char *text = read_text(path), *save = NULL;
  long calls = -1;
  for (char *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char name[64];
    long n;
    if (sscanf(line, "| %63s |%*[^|]| %ld", name, &n) == 2 &&
        strcmp(name, action) == 0)
      calls = n;
  }
  free(text);
  if (calls < 0)
    fail_msg("no %s row in %s", action, path);
  return calls;
}

static void check_params(const ref_case *c, const char *out) {
  char *text = dump(out), *save = NULL;
  int n = 0;
  for (char *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char name[64];
    double v;
    assert_int_equal(sscanf(line, "%63s %lf", name, &v), 2);
    assert_true(n < c->n_param);
    assert_string_equal(name, c->param_name[n]); /* same order, none missing */
    assert_close(v, c->param[n], "final", name);
    n++;
  }
  free(text);
  assert_int_equal(n, c->n_param);
}

static void check_losses(const ref_case *c, const char *out) {
  double loss[STEPS + 1];
  assert_int_equal(read_losses(out, loss, STEPS + 1), STEPS);
  for (int i = 0; i < STEPS; i++) {
    char where[32];
    snprintf(where, sizeof where, "at step %d", i + 1);
    assert_close(loss[i], c->loss[i], "loss", where);
  }
}

/* ---- counting the closure's calls per step ------------------------------ */

typedef struct counter {
  long calls;
  double last;
} counter;

static int count_call(void *ctx, double loss) {
  counter *k = ctx;
  k->calls++;
  k->last = loss;
  return 0;
}

/* Steps the run's optimizer by hand STEPS times through a wrapper that
 * counts the closure's calls. */
static void check_evals_per_step(const ref_case *c, const char *out) {
  lk_config *cfg = case_config(c, STEPS, NULL);
  lk_run *run = open_run(cfg, out, NULL);
  lk_config_free(cfg);
  const lk_descriptor *desc = NULL;
  void *self = lk_run_instance(run, "optimizer", &desc);
  assert_non_null(desc);
  assert_string_equal(desc->name, "lbfgs");
  size_t n = 0;
  lk_tensor *const *params = lk_run_params(run, &n);
  counter k = {0};
  lk_wrap *w = NULL;
  assert_int_equal(lk_closure_then(lk_run_closure(run), count_call, &k, &w), 0);
  for (int i = 0; i < STEPS; i++) {
    k.calls = 0;
    int rc = desc->optimizer->step(self, params, n, lk_wrap_function(w));
    if (rc != 0 || k.calls != c->evals[i]) {
      lk_wrap_free(w);
      lk_run_free(run);
      fail_msg("step %d: rc %d, %ld closure calls, torch made %d", i + 1, rc,
               k.calls, c->evals[i]);
    }
    char where[32];
    snprintf(where, sizeof where, "at step %d", i + 1);
    assert_close(k.last, c->loss[i], "last closure loss", where);
  }
  lk_wrap_free(w);
  lk_run_free(run);
}

/* ---- tests ----------------------------------------------------------------
 */

static void test_reference_complete(void **state) {
  (void)state;
  for (size_t p = 0; p < N_PROBLEMS; p++)
    for (size_t s = 0; s < N_SETTINGS; s++) {
      const ref_case *c = find_case(settings[s], problems[p]);
      if (!c)
        fail_msg("case %s %s missing from the reference", settings[s],
                 problems[p]);
      assert_int_equal(c->n_steps, STEPS);
      assert_true(c->n_param > 0);
      long total = 0;
      for (int i = 0; i < STEPS; i++)
        total += c->evals[i];
      assert_int_equal(total, c->func_evals); /* torch's own count */
    }
}

static void test_case(void **state) {
  const ref_case *c = *state;
  assert_non_null(c); /* test_reference_complete says which is missing */
  char out[4096], direct[4096];
  temp_path(out, sizeof out, "train");
  temp_path(direct, sizeof direct, "direct");
  lk_config *cfg = case_config(c, STEPS, "profiler = simple\n");
  train(cfg, out, NULL);
  lk_config_free(cfg);
  check_losses(c, out);
  check_params(c, out);
  /* every closure call ran the step, zero_grad and backward once */
  assert_int_equal(profiled_calls(out, "closure"), c->func_evals);
  assert_int_equal(profiled_calls(out, "training_step"), c->func_evals);
  assert_int_equal(profiled_calls(out, "zero_grad"), c->func_evals);
  assert_int_equal(profiled_calls(out, "backward"), c->func_evals);
  assert_int_equal(profiled_calls(out, "optimizer_step"), STEPS);
  check_evals_per_step(c, direct);
}

/* 12 steps, then a run resumed from the checkpoint for the other 38: the
 * history (5 pairs, so its ring has wrapped), d, t and the counters come
 * back, and the iterates are still torch's and the straight run's. */
static void test_resume(void **state) {
  (void)state;
  const ref_case *c = find_case("history5_wolfe", "rosenbrock n=100");
  assert_non_null(c);
  assert_true(c->loss[12] != c->loss[11]); /* still moving at the cut */
  char straight[4096], resumed[4096], ckpt[4096 + 32];
  temp_path(straight, sizeof straight, "straight");
  temp_path(resumed, sizeof resumed, "resumed");
  lk_config *all = case_config(c, STEPS, NULL);
  train(all, straight, NULL);
  lk_config *first = case_config(c, 12, NULL);
  train(first, resumed, NULL);
  lk_config_free(first);
  snprintf(ckpt, sizeof ckpt, "%s/checkpoints/last.ckpt", resumed);
  train(all, resumed, ckpt);
  lk_config_free(all);
  check_losses(c, resumed);
  check_params(c, resumed);
  char *a = dump(straight), *b = dump(resumed);
  assert_string_equal(a, b);
  free(a);
  free(b);
}

/* f32 parameters, computed in float as torch does for float tensors: the
 * runs end where the f64 ones do, to float's precision. */
static void test_f32(void **state) {
  (void)state;
  const char *configs[] = {
      "[loop]\nmax_steps = 5\n[plugins]\nstep = lstsq\noptimizer = lbfgs\n"
      "[lstsq]\ndtype = f32\n",
      "[loop]\nmax_steps = 20\n[plugins]\nstep = rosenbrock\n"
      "optimizer = lbfgs\n[rosenbrock]\ndtype = f32\nn = 10\n"
      "[lbfgs]\nline_search_fn = strong_wolfe\nhistory_size = 3\n"};
  const ref_case *lstsq = find_case("defaults", "lstsq m=20 n=5");
  assert_non_null(lstsq);
  for (int k = 0; k < 2; k++) {
    char out[4096], sub[16];
    snprintf(sub, sizeof sub, "f32-%d", k);
    temp_path(out, sizeof out, sub);
    lk_config *cfg = NULL;
    assert_int_equal(lk_config_parse("f32.ini", configs[k], &cfg), 0);
    train(cfg, out, NULL);
    lk_config_free(cfg);
    double loss[32];
    int n = read_losses(out, loss, 32);
    assert_int_equal(n, k ? 20 : 5);
    if (k == 0) /* the minimum of the f64 run */
      assert_true(fabs(loss[n - 1] - lstsq->loss[STEPS - 1]) < 1e-7);
    else /* from 24.2 * 9 at (-1.2, 1, ...) to the minimum at (1, ...) */
      assert_true(loss[n - 1] < 1e-7);
    char *text = dump(out), *save = NULL;
    int i = 0;
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), i++) {
      char name[64];
      double v;
      assert_int_equal(sscanf(line, "%63s %lf", name, &v), 2);
      if (k == 0) {
        assert_string_equal(name, lstsq->param_name[i]);
        assert_true(fabs(v - lstsq->param[i]) < 1e-6);
      } else {
        assert_true(fabs(v - 1) < 1e-4);
      }
    }
    assert_int_equal(i, k ? 10 : 6);
    free(text);
  }
}

/* probe: loss = sum(w^2)/2 from w = 1. */
static void run_probe(const char *out, const char *lbfgs, const char *probe,
                      int expect_rc) {
  char text[512];
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = 1\n[plugins]\nstep = probe\noptimizer = "
           "lbfgs\n[probe]\n%s\n[lbfgs]\n%s\n",
           probe, lbfgs);
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_parse("probe.ini", text, &cfg), 0);
  lk_run *run = open_run(cfg, out, NULL);
  lk_config_free(cfg);
  int rc = lk_run_train(run);
  lk_run_free(run);
  if (expect_rc == 0 && rc != 0)
    fail_msg("lk_run_train: %s", lk_last_error());
  assert_int_equal(rc, expect_rc);
}

static void test_nan_first_call(void **state) {
  (void)state;
  const char *modes[] = {"", "line_search_fn = strong_wolfe"};
  for (int k = 0; k < 2; k++) {
    char out[4096];
    temp_path(out, sizeof out, k ? "nan-wolfe" : "nan");
    run_probe(out, modes[k], "nan_loss_at = 0", 0);
    char *text = dump(out);
    assert_string_equal(text, "w[0] 1\nw[1] 1\n");
    free(text);
  }
}

/* A NaN at the fourth call (the third iteration's evaluation) puts the
 * parameters back where that iteration started: after two moves, as a step
 * of max_iter = 2 leaves them (max_eval 100: its default, 2 * 5 / 4, would
 * stop that step after one move). */
static void test_nan_later_call(void **state) {
  (void)state;
  char nan_out[4096], two_out[4096];
  temp_path(nan_out, sizeof nan_out, "nan3");
  temp_path(two_out, sizeof two_out, "two");
  run_probe(nan_out, "lr = 0.1", "nan_loss_at = 3", 0);
  run_probe(two_out, "lr = 0.1\nmax_iter = 2\nmax_eval = 100", "", 0);
  char *a = dump(nan_out), *b = dump(two_out);
  assert_null(strstr(a, "nan"));
  assert_string_equal(a, b);
  assert_string_not_equal(a, "w[0] 1\nw[1] 1\n"); /* it did move */
  free(a);
  free(b);
}

/* Manual optimization without a closure: refused, naming why. */
static void test_needs_closure(void **state) {
  (void)state;
  char out[4096];
  temp_path(out, sizeof out, "manual");
  lk_config *cfg = NULL;
  assert_int_equal(
      lk_config_parse("manual.ini",
                      "[loop]\nmax_steps = 1\nmanual_optimization = true\n"
                      "[plugins]\nstep = probe\noptimizer = lbfgs\n"
                      "[probe]\nmanual = true\n",
                      &cfg),
      0);
  lk_run *run = open_run(cfg, out, NULL);
  lk_config_free(cfg);
  int rc = lk_run_train(run);
  lk_run_free(run);
  assert_true(rc < 0);
  if (!strstr(lk_last_error(), "needs a closure") ||
      !strstr(lk_last_error(), "lbfgs"))
    fail_msg("message \"%s\" should say that lbfgs needs a closure",
             lk_last_error());
}

/* get_lr and set_lr act on the rate every step reads. */
static void test_lr(void **state) {
  (void)state;
  char out[4096];
  temp_path(out, sizeof out, "lr");
  lk_config *cfg = NULL;
  assert_int_equal(
      lk_config_parse("lr.ini",
                      "[loop]\nmax_steps = 1\n[plugins]\nstep = probe\n"
                      "optimizer = lbfgs\n[lbfgs]\nlr = 0.5\nmax_iter = 1\n"
                      "[probe]\nn = 1\nw0 = 0.01\n",
                      &cfg),
      0);
  lk_run *run = open_run(cfg, out, NULL);
  lk_config_free(cfg);
  const lk_descriptor *desc = NULL;
  void *self = lk_run_instance(run, "optimizer", &desc);
  assert_non_null(desc->optimizer->get_lr);
  assert_true(desc->optimizer->get_lr(self) == 0.5);
  desc->optimizer->set_lr(self, 0.25);
  assert_true(desc->optimizer->get_lr(self) == 0.25);
  size_t n = 0;
  lk_tensor *const *params = lk_run_params(run, &n);
  /* first iteration: t = min(1, 1/|g|) * lr = 0.25 and d = -g = -0.01 */
  assert_int_equal(desc->optimizer->step(self, params, n, lk_run_closure(run)),
                   0);
  assert_true(((double *)params[0]->data)[0] == fma(0.25, -0.01, 0.01));
  lk_run_free(run);
}

static void expect_refused(const char *options, const char *needle) {
  char text[512], out[4096];
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = 1\n[plugins]\nstep = rosenbrock\n"
           "optimizer = lbfgs\n[lbfgs]\n%s\n",
           options);
  lk_config *cfg = NULL;
  assert_int_equal(lk_config_parse("refused.ini", text, &cfg), 0);
  temp_path(out, sizeof out, "refused");
  lk_run_options opts = {.out_dir = out};
  lk_run *run = NULL;
  int rc = lk_run_new(cfg, &opts, &run);
  lk_config_free(cfg);
  assert_int_equal(rc, LK_ECONFIG);
  assert_null(run);
  const char *msg = lk_last_error();
  if (!strstr(msg, needle) || !strstr(msg, "lbfgs"))
    fail_msg("\"%s\": message \"%s\" should name lbfgs and \"%s\"", options,
             msg, needle);
}

static void test_refused_options(void **state) {
  (void)state;
  /* Ranges the host enforces, inf and nan included. */
  expect_refused("lr = -1", "lbfgs.lr = -1: must be >= 0");
  expect_refused("lr = nan", "lbfgs.lr = nan: must be a finite number");
  expect_refused("max_iter = 0", "lbfgs.max_iter = 0: must be >= 1");
  expect_refused("max_eval = -3", "lbfgs.max_eval = -3: must be >= 0");
  expect_refused("history_size = 0", "lbfgs.history_size = 0: must be >= 1");
  expect_refused("tolerance_grad = -1e-7",
                 "lbfgs.tolerance_grad = -1e-7: must be >= 0");
  expect_refused("tolerance_change = -1",
                 "lbfgs.tolerance_change = -1: must be >= 0");
  expect_refused("tolerance_change = inf",
                 "lbfgs.tolerance_change = inf: must be a finite number");
  expect_refused("line_search_fn = backtracking", "line_search_fn");
}

int main(void) {
  if (load_reference() != 0)
    return 1;
  static char names[N_PROBLEMS * N_SETTINGS][160];
  struct CMUnitTest tests[1 + N_PROBLEMS * N_SETTINGS + 7] = {
      cmocka_unit_test(test_reference_complete)};
  size_t n = 1;
  for (size_t p = 0; p < N_PROBLEMS; p++)
    for (size_t s = 0; s < N_SETTINGS; s++, n++) {
      snprintf(names[n - 1], sizeof names[0], "lbfgs %s %s", settings[s],
               problems[p]);
      tests[n] = (struct CMUnitTest){names[n - 1], test_case, NULL, cleanup,
                                     find_case(settings[s], problems[p])};
    }
  const struct CMUnitTest rest[] = {
      cmocka_unit_test_teardown(test_resume, cleanup),
      cmocka_unit_test_teardown(test_f32, cleanup),
      cmocka_unit_test_teardown(test_nan_first_call, cleanup),
      cmocka_unit_test_teardown(test_nan_later_call, cleanup),
      cmocka_unit_test_teardown(test_needs_closure, cleanup),
      cmocka_unit_test_teardown(test_lr, cleanup),
      cmocka_unit_test_teardown(test_refused_options, cleanup)};
  for (size_t k = 0; k < sizeof rest / sizeof rest[0]; k++)
    tests[n++] = rest[k];
  return cmocka_run_group_tests(tests, NULL, NULL);
}
