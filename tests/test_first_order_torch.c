/* The first-order optimizer plugins against torch.optim 1.13: every case
 * of tests/data/first_order.ref (written by
 * tests/torch/first_order_reference.py: Rosenbrock n=2 and n=100 and least
 * squares in f64, Rosenbrock n=2 and least squares in f32) is trained
 * through the public API, and each step's loss (metrics.csv), the final
 * parameters (the checkpoint) and the optimizer's final state (written by
 * the test callback statedump) must equal torch's bit for bit. A case with
 * a schedule has the test scheduler momsched change the momentum (beta1)
 * before every step, through lk_host_set_momentum (ABI 1.5).
 *
 * Then, for each optimizer: a resumed run continues bit for bit (the
 * checkpoint is byte-identical to the straight run's), the learning rate is
 * read at every step and survives a resume, f32 parameters train, a NaN
 * from the closure leaves parameters and state untouched, a NULL closure
 * (manual optimization) uses the gradients as they are, and bad options are
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
#include <sys/stat.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>

#define STEPS 60
#define MAX_PARAMS 128
#define MAX_STATE 64

/* ---- the reference ------------------------------------------------------- */

typedef struct ref_case {
  const char *optimizer, *name, *problem; /* problem: "rosenbrock n=2" */
  char label[128];                        /* the test's name */
  char options[256];                      /* "lr=0.01 betas=0.8,0.95" */
  char schedule[128]; /* momsched's values ("0.9,0.5"), or empty */
  double loss[STEPS];
  int n_loss;
  char param_name[MAX_PARAMS][8]; /* "x", "b" */
  int param_index[MAX_PARAMS];
  double param[MAX_PARAMS];
  int n_param;
  char state_name[MAX_STATE][48]; /* "adam.exp_avg.x[3]" */
  double state[MAX_STATE];
  int n_state;
  bool found;
} ref_case;

/* The cases the reference file must hold: every setting of every optimizer
 * on every problem. */
static const char *const sgd_settings[] = {"momentum_schedule", "late_momentum",
                                           "nesterov_schedule", NULL};
static const char *const adam_settings[] = {
    "defaults", "lr_betas", "eps_weight_decay", "amsgrad",
    "maximize", "mixed",    "beta1_schedule",   NULL};
static const char *const adamw_settings[] = {
    "defaults",        "lr_betas",       "eps_weight_decay",
    "no_weight_decay", "amsgrad",        "maximize",
    "mixed",           "beta1_schedule", NULL};
static const char *const rmsprop_settings[] = {"defaults",
                                               "alpha",
                                               "eps_weight_decay",
                                               "momentum",
                                               "centered",
                                               "centered_momentum",
                                               "maximize",
                                               "momentum_schedule",
                                               NULL};
static const char *const adagrad_settings[] = {
    "defaults", "lr_decay", "weight_decay", "initial_accumulator",
    "eps",      "maximize", "mixed",        NULL};
static const char *const adadelta_settings[] = {
    "defaults", "rho_eps", "weight_decay", "maximize", "mixed", NULL};
static const char *const adamax_settings[] = {"defaults",         "lr_betas",
                                              "eps_weight_decay", "maximize",
                                              "beta1_schedule",   NULL};
static const char *const asgd_settings[] = {
    "small_lr", "t0", "lambd_alpha", "weight_decay", "maximize", NULL};
static const char *const nadam_settings[] = {
    "defaults",       "lr_betas",       "eps_weight_decay",
    "momentum_decay", "beta1_schedule", NULL};
static const char *const radam_settings[] = {
    "defaults", "lr_betas", "eps_weight_decay", "beta1_schedule", NULL};
static const char *const rprop_settings[] = {"defaults", "etas",  "step_sizes",
                                             "maximize", "mixed", NULL};

/* Each optimizer: its settings, its default lr, the case its own tests
 * use (all of its state in play), the options of its f32 test (every
 * branch), and the schedule case its resume test uses (NULL: it has no
 * momentum). */
static const struct optimizer {
  const char *name;
  const char *const *settings;
  double default_lr;
  const char *rich, *rich_problem, *f32_options, *scheduled;
} optimizers[] = {
    {"sgd", sgd_settings, 0.001, "nesterov_schedule", "lstsq m=20 n=5",
     "lr=0.01 momentum=0.9 nesterov=true weight_decay=0.01",
     "momentum_schedule"},
    {"adam", adam_settings, 0.001, "mixed", "lstsq m=20 n=5",
     "lr=0.01 weight_decay=0.01 amsgrad=true", "beta1_schedule"},
    {"adamw", adamw_settings, 0.001, "mixed", "rosenbrock n=100",
     "lr=0.01 amsgrad=true", "beta1_schedule"},
    {"rmsprop", rmsprop_settings, 0.01, "centered_momentum", "lstsq m=20 n=5",
     "lr=0.005 momentum=0.5 centered=true weight_decay=0.01",
     "momentum_schedule"},
    {"adagrad", adagrad_settings, 0.01, "mixed", "rosenbrock n=2",
     "lr=0.05 lr_decay=0.01 weight_decay=0.01 initial_accumulator_value=0.1",
     NULL},
    {"adadelta", adadelta_settings, 1, "mixed", "lstsq m=20 n=5",
     "rho=0.9 eps=1e-4 weight_decay=0.01", NULL},
    {"adamax", adamax_settings, 0.002, "eps_weight_decay", "lstsq m=20 n=5",
     "lr=0.01 eps=1e-3 weight_decay=0.01", "beta1_schedule"},
    {"asgd", asgd_settings, 0.01, "lambd_alpha", "lstsq m=20 n=5",
     "lr=0.01 lambd=0.1 alpha=0.5 t0=5 weight_decay=0.01", NULL},
    {"nadam", nadam_settings, 0.002, "eps_weight_decay", "lstsq m=20 n=5",
     "lr=0.01 weight_decay=0.01 momentum_decay=0.1", "beta1_schedule"},
    {"radam", radam_settings, 0.001, "eps_weight_decay", "lstsq m=20 n=5",
     "lr=0.01 weight_decay=0.01", "beta1_schedule"},
    {"rprop", rprop_settings, 0.01, "mixed", "lstsq m=20 n=5",
     "lr=0.05 etas=0.6,1.1 step_sizes=1e-4,1", NULL},
};
#define N_OPTIMIZERS (sizeof optimizers / sizeof optimizers[0])

static const struct optimizer *optimizer_named(const char *name) {
  for (size_t i = 0; i < N_OPTIMIZERS; i++)
    if (strcmp(optimizers[i].name, name) == 0)
      return &optimizers[i];
  fail_msg("no optimizer %s", name);
  return NULL;
}

static const char *const problems[] = {
    "rosenbrock n=2", "rosenbrock n=100", "lstsq m=20 n=5",
    "rosenbrock n=2 dtype=f32", "lstsq m=20 n=5 dtype=f32"};
#define N_PROBLEMS (sizeof problems / sizeof problems[0])

static ref_case *cases;
static size_t n_cases;

static ref_case *find_case(const char *optimizer, const char *name,
                           const char *problem) {
  for (size_t i = 0; i < n_cases; i++)
    if (strcmp(cases[i].optimizer, optimizer) == 0 &&
        strcmp(cases[i].name, name) == 0 &&
        strcmp(cases[i].problem, problem) == 0)
      return &cases[i];
  return NULL;
}

/* Whether the reference holds the state of PROBLEM's runs. */
static bool problem_has_state(const char *problem) {
  return strcmp(problem, "rosenbrock n=100") != 0;
}

/* The number of parameters a problem has: n, or lstsq's x[n] and b[1]. */
static int problem_params(const char *problem) {
  int m, n;
  if (sscanf(problem, "rosenbrock n=%d", &n) == 1)
    return n;
  if (sscanf(problem, "lstsq m=%d n=%d", &m, &n) == 2)
    return n + 1;
  return -1;
}

static int build_cases(void) {
  for (size_t o = 0; o < N_OPTIMIZERS; o++)
    for (const char *const *s = optimizers[o].settings; *s; s++)
      n_cases += N_PROBLEMS;
  if (!(cases = calloc(n_cases, sizeof *cases)))
    return -1;
  ref_case *c = cases;
  for (size_t o = 0; o < N_OPTIMIZERS; o++)
    for (const char *const *s = optimizers[o].settings; *s; s++)
      for (size_t p = 0; p < N_PROBLEMS; p++, c++) {
        c->optimizer = optimizers[o].name;
        c->name = *s;
        c->problem = problems[p];
        snprintf(c->label, sizeof c->label, "%s %s %s", c->optimizer, c->name,
                 c->problem);
      }
  return 0;
}

/* Reads the reference file once, in the group setup. */
static int load_reference(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/first_order.ref",
           dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  char line[1024], name[64], opt[32], problem[64], pname[8], sname[48];
  ref_case *c = NULL;
  int i, at;
  double v;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "case %63s optimizer %31s problem \"%63[^\"]\" options %n",
               name, opt, problem, &at) == 3) {
      c = find_case(opt, name, problem);
      char *open = line + at, *close = strchr(open + 1, '"');
      if (c && *open == '"' && close) {
        snprintf(c->options, sizeof c->options, "%.*s", (int)(close - open - 1),
                 open + 1);
        char *sched = strstr(close, " schedule \"");
        if (sched) {
          sched += strlen(" schedule \"");
          snprintf(c->schedule, sizeof c->schedule, "%.*s",
                   (int)strcspn(sched, "\""), sched);
        }
        c->found = true;
      } else {
        c = NULL;
      }
    } else if (c && sscanf(line, "state %47s %lf", sname, &v) == 2) {
      if (c->n_state < MAX_STATE) {
        snprintf(c->state_name[c->n_state], sizeof c->state_name[0], "%s",
                 sname);
        c->state[c->n_state] = v;
      }
      c->n_state++;
    } else if (c && sscanf(line, "loss %d %lf", &i, &v) == 2) {
      if (i == c->n_loss + 1 && i <= STEPS)
        c->loss[c->n_loss++] = v;
    } else if (c && sscanf(line, "param %7[a-z][%d] %lf", pname, &i, &v) == 3) {
      if (c->n_param < MAX_PARAMS) {
        snprintf(c->param_name[c->n_param], sizeof c->param_name[0], "%s",
                 pname);
        c->param_index[c->n_param] = i;
        c->param[c->n_param++] = v;
      }
    }
  }
  fclose(f);
  return 0;
}

static int free_reference(void **state) {
  (void)state;
  free(cases);
  return 0;
}

/* ---- runs ------------------------------------------------------------------
 */

/* The run directories of the current test live under one temporary root,
 * removed by the test's teardown even when an assertion ends it early. */
static char *root;

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static int cleanup(void **state) {
  (void)state;
  if (root) {
    nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(root);
    root = NULL;
  }
  return 0;
}

/* A new empty directory ROOT/NAME; the path is static until the next call
 * with the same slot. */
static const char *run_dir(int slot) {
  static char paths[4][4200];
  if (!root) {
    root = strdup("/tmp/loopkit-first-order-XXXXXX");
    assert_non_null(root);
    assert_non_null(mkdtemp(root));
  }
  assert_true(slot >= 0 && slot < 4);
  snprintf(paths[slot], sizeof paths[slot], "%s/run%d", root, slot);
  assert_int_equal(mkdir(paths[slot], 0700), 0);
  return paths[slot];
}

/* Appends "key = value" lines for the space-separated KEY=VALUE list. */
static void append_options(char *text, size_t size, const char *list) {
  char copy[512];
  snprintf(copy, sizeof copy, "%s", list);
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

/* A config: LOOP lines for [loop], PROBLEM ("rosenbrock n=2": the step
 * plugin and its options), OPTIMIZER with OPTIONS; with a SCHEDULE (not
 * NULL or empty), the scheduler momsched sets the momentum from it; with
 * STATE (not NULL), the callback statedump writes the state there. */
static lk_config *make_config_with(const char *loop, const char *problem,
                                   const char *optimizer, const char *options,
                                   const char *schedule, const char *state) {
  char step[32], text[4096];
  const char *problem_opts = strchr(problem, ' ');
  size_t len =
      problem_opts ? (size_t)(problem_opts - problem) : strlen(problem);
  assert_true(len < sizeof step);
  memcpy(step, problem, len);
  step[len] = '\0';
  bool scheduled = schedule && *schedule;
  snprintf(text, sizeof text,
           "[loop]\n%s\n[plugins]\nstep = %s\noptimizer = %s\n%s%s[%s]\n", loop,
           step, optimizer, scheduled ? "scheduler = momsched\n" : "",
           state ? "callbacks = statedump\n" : "", step);
  append_options(text, sizeof text, problem_opts ? problem_opts + 1 : "");
  size_t used = strlen(text);
  if (scheduled)
    used += (size_t)snprintf(text + used, sizeof text - used,
                             "[momsched]\nvalues = %s\n", schedule);
  if (state)
    used += (size_t)snprintf(text + used, sizeof text - used,
                             "[statedump]\npath = %s\n", state);
  assert_true(used < sizeof text);
  /* sgd's lr is required, as torch's: where a case gives none, the rate
   * the other optimizers default to (its default_lr below). */
  bool no_lr = !strcmp(optimizer, "sgd") && !strstr(options, "lr=");
  snprintf(text + used, sizeof text - used, "[%s]\n%s", optimizer,
           no_lr ? "lr = 0.001\n" : "");
  append_options(text, sizeof text, options);
  lk_config *cfg = NULL;
  if (lk_config_parse("first_order.ini", text, &cfg) != 0)
    fail_msg("config:\n%s\n%s", text, lk_last_error());
  return cfg;
}

static lk_config *make_config(const char *loop, const char *problem,
                              const char *optimizer, const char *options) {
  return make_config_with(loop, problem, optimizer, options, NULL, NULL);
}

/* Case C's config for MAX_STEPS steps; with STATE, the state is written
 * there. */
static lk_config *case_config(const ref_case *c, int max_steps,
                              const char *state) {
  char loop[64];
  snprintf(loop, sizeof loop, "max_steps = %d", max_steps);
  return make_config_with(loop, c->problem, c->optimizer, c->options,
                          c->schedule, state);
}

static lk_run *new_run(const lk_config *cfg, const char *out,
                       const char *resume) {
  lk_run_options opts = {.out_dir = resume ? NULL : out, .resume = resume};
  lk_run *run = NULL;
  if (lk_run_new(cfg, &opts, &run) != 0)
    fail_msg("lk_run_new: %s", lk_last_error());
  return run;
}

static void train_run(lk_run *run) {
  if (lk_run_train(run) != 0) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    lk_run_free(run);
    fail_msg("lk_run_train: %s", msg);
  }
  lk_run_free(run);
}

/* Trains CFG in OUT, or resumes OUT's last checkpoint. */
static void train(const lk_config *cfg, const char *out, bool resume) {
  char ckpt[4300];
  snprintf(ckpt, sizeof ckpt, "%s/checkpoints/last.ckpt", out);
  train_run(new_run(cfg, out, resume ? ckpt : NULL));
}

/* The loss column of OUT/metrics.csv, in row order. */
static int read_losses(const char *out, double *loss, int max) {
  char path[4300], line[4096];
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

/* lk_checkpoint_dump of OUT/checkpoints/last.ckpt, as a string to free. */
static char *dump(const char *out) {
  char path[4300];
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

/* The values of a dump, in order; names must be NAME[INDEX]. */
static int dump_values(const char *text, char names[][8], int *index,
                       double *value, int max) {
  int n = 0;
  for (const char *line = text; *line; line = strchr(line, '\n') + 1) {
    char name[8];
    int i;
    double v;
    assert_int_equal(sscanf(line, "%7[a-z][%d] %lf", name, &i, &v), 3);
    assert_true(n < max);
    if (names)
      snprintf(names[n], sizeof names[0], "%s", name);
    if (index)
      index[n] = i;
    value[n++] = v;
    if (!strchr(line, '\n'))
      break;
  }
  return n;
}

static bool same_file(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  bool same = fa && fb;
  while (same) {
    int ca = fgetc(fa), cb = fgetc(fb);
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

/* The same double, bit for bit (a -0 is not a 0). */
static bool same_bits(double a, double b);

/* Every state value of case C's reference is in the file STATE (written
 * by statedump) with the same bits. */
static void check_state(const ref_case *c, const char *state) {
  FILE *f = fopen(state, "r");
  if (!f)
    fail_msg("%s: no state file %s", c->label, state);
  static char names[512][48];
  static double values[512];
  int n = 0;
  char line[256];
  while (n < 512 && fgets(line, sizeof line, f))
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

/* The same double, bit for bit (a -0 is not a 0). */
static bool same_bits(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

/* The same float, bit for bit, once both are rounded to float. */
static bool same_float(double a, double b) {
  float fa = (float)a, fb = (float)b;
  return memcmp(&fa, &fb, sizeof fa) == 0;
}

/* Compares OUT's run with torch's, bit for bit: the losses, the final
 * parameters, and, when STATE is not NULL, the state written there. */
static void check_against_torch(const ref_case *c, const char *out,
                                const char *state) {
  double loss[STEPS + 1];
  int n_loss = read_losses(out, loss, STEPS + 1);
  assert_int_equal(n_loss, STEPS);
  for (int i = 0; i < STEPS; i++)
    if (!same_bits(loss[i], c->loss[i]))
      fail_msg("%s: loss at step %d: loopkit %.17g, torch %.17g", c->label,
               i + 1, loss[i], c->loss[i]);
  static char names[MAX_PARAMS + 1][8];
  int index[MAX_PARAMS + 1];
  double x[MAX_PARAMS + 1];
  char *text = dump(out);
  int n = dump_values(text, names, index, x, MAX_PARAMS + 1);
  free(text);
  assert_int_equal(n, c->n_param);
  for (int i = 0; i < n; i++) {
    assert_string_equal(names[i], c->param_name[i]);
    assert_int_equal(index[i], c->param_index[i]);
    /* loopkit dump prints an f32 with %.9g, which only a float reads back
     * exactly. */
    if (strstr(c->problem, "dtype=f32") ? !same_float(x[i], c->param[i])
                                        : !same_bits(x[i], c->param[i]))
      fail_msg("%s: final %s[%d]: loopkit %.17g, torch %.17g", c->label,
               names[i], index[i], x[i], c->param[i]);
  }
  if (state)
    check_state(c, state);
}

/* ---- the reference cases ---------------------------------------------------
 */

static void test_reference_complete(void **state) {
  (void)state;
  assert_int_equal(n_cases, 310);
  for (size_t i = 0; i < n_cases; i++) {
    const ref_case *c = &cases[i];
    if (!c->found)
      fail_msg("case %s missing from the reference", c->label);
    assert_int_equal(c->n_loss, STEPS);
    assert_int_equal(c->n_param, problem_params(c->problem));
    /* The defaults case gives no option; every other case gives some. */
    assert_int_equal(strcmp(c->name, "defaults") == 0, c->options[0] == '\0');
    /* The schedule cases are named so. */
    assert_int_equal(strstr(c->name, "schedule") != NULL ||
                         strcmp(c->name, "late_momentum") == 0,
                     c->schedule[0] != '\0');
    /* The state: at least the rate, and nothing left out. */
    assert_true(c->n_state <= MAX_STATE);
    assert_true(problem_has_state(c->problem) ? c->n_state >= 1
                                              : c->n_state == 0);
  }
}

/* OUT/state.txt, for statedump, in a buffer of the caller's. */
static const char *state_path(const char *out, char *buf, size_t size) {
  snprintf(buf, size, "%s/state.txt", out);
  return buf;
}

static void test_case(void **state) {
  const ref_case *c = *state;
  assert_true(c->found && c->n_loss == STEPS);
  const char *out = run_dir(0);
  char path[4300];
  const char *st = c->n_state ? state_path(out, path, sizeof path) : NULL;
  lk_config *cfg = case_config(c, STEPS, st);
  train(cfg, out, false);
  lk_config_free(cfg);
  check_against_torch(c, out, st);
}

/* ---- per optimizer --------------------------------------------------------
 */

/* The case each optimizer's own tests use: all of its state in play. */
static const ref_case *rich_case(const char *optimizer) {
  const struct optimizer *o = optimizer_named(optimizer);
  const ref_case *c = find_case(optimizer, o->rich, o->rich_problem);
  assert_true(c && c->found);
  return c;
}

static void assert_same_dump(const char *a, const char *b, const char *what) {
  char *ta = dump(a), *tb = dump(b);
  bool same = strcmp(ta, tb) == 0;
  if (!same) {
    char msg[4096];
    snprintf(msg, sizeof msg, "%s:\n%.1500s\nversus\n%.1500s", what, ta, tb);
    free(ta);
    free(tb);
    fail_msg("%s", msg);
  }
  free(ta);
  free(tb);
}

/* 25 steps, then a new run resumed from the checkpoint for the other 35:
 * the checkpoint equals the straight run's byte for byte (parameters and
 * every state tensor), and the iterates are still torch's. */
static void resume_case(const ref_case *c) {
  const char *straight = run_dir(0), *resumed = run_dir(1);
  lk_config *all = case_config(c, STEPS, NULL),
            *first = case_config(c, 25, NULL);
  train(all, straight, false);
  train(first, resumed, false);
  train(all, resumed, true);
  lk_config_free(all);
  lk_config_free(first);
  char a[4300], b[4300];
  snprintf(a, sizeof a, "%s/checkpoints/last.ckpt", straight);
  snprintf(b, sizeof b, "%s/checkpoints/last.ckpt", resumed);
  assert_true(same_file(a, b));
  assert_same_dump(straight, resumed, "straight and resumed runs");
  check_against_torch(c, resumed, NULL);
}

static void test_resume(void **state) {
  resume_case(rich_case(*state));
}

/* The momentum a scheduler set is host state: a run resumed after step 25
 * continues with schedule[25 mod n], not with the configured momentum or
 * the schedule's first value (what the scheduler sets at create), and
 * equals the straight run and torch's. An optimizer without momentum has
 * neither get_momentum nor set_momentum. */
static void test_momentum_resume(void **state) {
  const struct optimizer *o = optimizer_named(*state);
  if (!o->scheduled) {
    lk_config *cfg = make_config("max_steps = 1", "lstsq", o->name, "");
    lk_run *run = new_run(cfg, run_dir(0), NULL);
    const lk_descriptor *desc = NULL;
    lk_run_instance(run, "optimizer", &desc);
    assert_non_null(desc);
    assert_null(desc->optimizer->get_momentum);
    assert_null(desc->optimizer->set_momentum);
    lk_run_free(run);
    lk_config_free(cfg);
    return;
  }
  const ref_case *c = find_case(o->name, o->scheduled, "lstsq m=20 n=5");
  assert_true(c && c->found);
  resume_case(c);
}

/* get_lr gives the configured rate; a rate set with set_lr is used at every
 * step and is restored by a resume, whatever the resumed config says. */
static void test_lr_state(void **state) {
  const char *opt = *state;
  double def = optimizer_named(opt)->default_lr;
  const char *problem = "lstsq m=20 n=5";
  const char *want = run_dir(0), *got = run_dir(1);

  lk_config *set = make_config("max_steps = 30", problem, opt, "lr=0.05");
  train(set, want, false);
  lk_config_free(set);

  lk_config *first = make_config("max_steps = 10", problem, opt, "");
  lk_run *run = new_run(first, got, NULL);
  const lk_descriptor *desc = NULL;
  void *self = lk_run_instance(run, "optimizer", &desc);
  assert_non_null(desc);
  assert_non_null(desc->optimizer);
  assert_non_null(desc->optimizer->get_lr);
  assert_non_null(desc->optimizer->set_lr);
  assert_true(desc->optimizer->get_lr(self) == def);
  desc->optimizer->set_lr(self, 0.05);
  assert_true(desc->optimizer->get_lr(self) == 0.05);
  train_run(run);
  lk_config_free(first);

  lk_config *rest = make_config("max_steps = 30", problem, opt, "");
  train(rest, got, true);
  lk_config_free(rest);
  assert_same_dump(want, got, "lr = 0.05 and a rate set to 0.05");
}

/* f32 parameters: the run works in float, stays finite, decreases the loss
 * and ends near the f64 run. The options exercise every branch. */
static void test_f32(void **state) {
  const char *opt = *state;
  const char *options = optimizer_named(opt)->f32_options;
  const char *f32 = run_dir(0), *f64 = run_dir(1);
  lk_config *c32 =
      make_config("max_steps = 60", "lstsq m=20 n=5 dtype=f32", opt, options);
  lk_config *c64 =
      make_config("max_steps = 60", "lstsq m=20 n=5 dtype=f64", opt, options);
  train(c32, f32, false);
  train(c64, f64, false);
  lk_config_free(c32);
  lk_config_free(c64);

  double loss[STEPS + 1];
  assert_int_equal(read_losses(f32, loss, STEPS + 1), STEPS);
  for (int i = 0; i < STEPS; i++)
    assert_true(isfinite(loss[i]));
  if (!(loss[STEPS - 1] < loss[0] - 1e-3))
    fail_msg("%s f32: loss %g at the end, %g at the start", opt,
             loss[STEPS - 1], loss[0]);

  double x32[8], x64[8];
  char *t32 = dump(f32), *t64 = dump(f64);
  int n32 = dump_values(t32, NULL, NULL, x32, 8);
  int n64 = dump_values(t64, NULL, NULL, x64, 8);
  free(t32);
  free(t64);
  assert_int_equal(n32, 6);
  assert_int_equal(n64, 6);
  for (int i = 0; i < 6; i++) {
    assert_true(isfinite(x32[i]));
    if (!(fabs(x32[i] - x64[i]) <= 1e-4 * fmax(1, fabs(x64[i]))))
      fail_msg("%s: parameter %d is %.9g in f32, %.17g in f64", opt, i, x32[i],
               x64[i]);
  }
}

/* A NaN from the closure: the step returns at once. The parameters keep
 * their initial value w0 = 1, and the state too: a second, clean step then
 * gives what a first clean step gives. */
static void test_nan_closure(void **state) {
  const char *opt = *state;
  const char *one = run_dir(0), *two = run_dir(1), *clean = run_dir(2);
  lk_config *c1 = make_config("max_steps = 1", "probe nan_loss_at=0", opt, "");
  lk_config *c2 = make_config("max_steps = 2", "probe nan_loss_at=0", opt, "");
  lk_config *c3 = make_config("max_steps = 1", "probe", opt, "");
  train(c1, one, false);
  train(c2, two, false);
  train(c3, clean, false);
  lk_config_free(c1);
  lk_config_free(c2);
  lk_config_free(c3);

  double w[4];
  char *text = dump(one);
  int n = dump_values(text, NULL, NULL, w, 4);
  free(text);
  assert_int_equal(n, 2);
  assert_true(w[0] == 1 && w[1] == 1);
  text = dump(clean);
  n = dump_values(text, NULL, NULL, w, 4);
  free(text);
  assert_true(n == 2 && w[0] < 1); /* the clean step did move */
  assert_same_dump(two, clean, "NaN then a step, and one step");
}

/* Manual optimization: the step plugin calls the optimizer with no closure
 * after its own backward; the update is the automatic one. */
static void test_null_closure(void **state) {
  const char *opt = *state;
  const char *manual = run_dir(0), *automatic = run_dir(1);
  lk_config *cm = make_config("max_steps = 3\nmanual_optimization = true",
                              "probe manual=true", opt, "lr=0.1");
  lk_config *ca = make_config("max_steps = 3", "probe", opt, "lr=0.1");
  train(cm, manual, false);
  train(ca, automatic, false);
  lk_config_free(cm);
  lk_config_free(ca);
  assert_same_dump(manual, automatic, "manual and automatic optimization");
}

/* A refused option fails lk_run_new and names the optimizer and what. */
static void expect_refused(const char *optimizer, const char *options,
                           const char *needle) {
  lk_config *cfg =
      make_config("max_steps = 1", "rosenbrock", optimizer, options);
  lk_run_options opts = {.out_dir = run_dir(3)};
  lk_run *run = NULL;
  int rc = lk_run_new(cfg, &opts, &run);
  lk_config_free(cfg);
  if (rc != LK_ECONFIG)
    fail_msg("%s with \"%s\": lk_run_new gave %d, not LK_ECONFIG (%s)",
             optimizer, options, rc, rc ? lk_last_error() : "");
  assert_null(run);
  const char *msg = lk_last_error();
  if (!strstr(msg, needle) || !strstr(msg, optimizer))
    fail_msg("%s with \"%s\": message \"%s\" should name %s and \"%s\"",
             optimizer, options, msg, optimizer, needle);
  cleanup(NULL); /* run_dir(3) again */
}

/* NEEDLE with "%s" for the optimizer's name. */
static void expect_refused_as(const char *optimizer, const char *options,
                              const char *needle) {
  char text[256];
  snprintf(text, sizeof text, needle, optimizer);
  expect_refused(optimizer, options, text);
}

/* torch's checks are the options' ranges, which the host enforces before
 * create, in torch's order (the first bad option is the one torch names);
 * inf and nan are refused too. What a range cannot say (how many betas)
 * the plugin refuses in create. */
static void test_refused_options(void **state) {
  (void)state;
  static const char *const adams[] = {"adam", "adamw"};
  for (int i = 0; i < 2; i++) {
    const char *o = adams[i];
    expect_refused_as(o, "lr=-0.1", "%s.lr = -0.1: must be >= 0");
    expect_refused_as(o, "lr=inf", "%s.lr = inf: must be a finite number");
    expect_refused_as(o, "eps=-1e-8", "%s.eps = -1e-8: must be >= 0");
    expect_refused_as(o, "eps=nan", "%s.eps = nan: must be a finite number");
    expect_refused_as(o, "betas=-0.1,0.999",
                      "%s.betas = -0.1,0.999: value 1 must be >= 0 and < 1");
    expect_refused_as(o, "betas=0.9,1",
                      "%s.betas = 0.9,1: value 2 must be >= 0 and < 1");
    expect_refused_as(o, "betas=1,0.999",
                      "%s.betas = 1,0.999: value 1 must be >= 0 and < 1");
    expect_refused_as(o, "betas=0.9", "betas has 1 values");
    expect_refused_as(o, "betas=0.9,0.99,0.999", "betas has 3 values");
    expect_refused_as(o, "weight_decay=-0.01",
                      "%s.weight_decay = -0.01: must be >= 0");
    /* torch's order: eps before betas, betas before weight_decay. */
    expect_refused_as(o, "weight_decay=-1 betas=2,0 eps=-1",
                      "%s.eps = -1: must be >= 0");
    expect_refused_as(o, "weight_decay=-1 betas=2,0",
                      "%s.betas = 2,0: value 1 must be >= 0 and < 1");
  }
  expect_refused("rmsprop", "lr=-1", "rmsprop.lr = -1: must be >= 0");
  expect_refused("rmsprop", "eps=-1", "rmsprop.eps = -1: must be >= 0");
  expect_refused("rmsprop", "momentum=-0.9",
                 "rmsprop.momentum = -0.9: must be >= 0");
  expect_refused("rmsprop", "weight_decay=-1",
                 "rmsprop.weight_decay = -1: must be >= 0");
  expect_refused("rmsprop", "alpha=-0.5", "rmsprop.alpha = -0.5: must be >= 0");
  expect_refused("rmsprop", "alpha=inf",
                 "rmsprop.alpha = inf: must be a finite number");
  /* torch's order: lr, eps, momentum, weight_decay, alpha. */
  expect_refused("rmsprop", "alpha=-1 weight_decay=-1 momentum=-1 eps=-1",
                 "rmsprop.eps = -1: must be >= 0");
  expect_refused("rmsprop", "alpha=-1 weight_decay=-1 momentum=-1",
                 "rmsprop.momentum = -1: must be >= 0");
  expect_refused("rmsprop", "alpha=-1 weight_decay=-1",
                 "rmsprop.weight_decay = -1: must be >= 0");
  expect_refused("adagrad", "lr=-1", "adagrad.lr = -1: must be >= 0");
  expect_refused("adagrad", "lr_decay=-1",
                 "adagrad.lr_decay = -1: must be >= 0");
  expect_refused("adagrad", "weight_decay=-1",
                 "adagrad.weight_decay = -1: must be >= 0");
  expect_refused("adagrad", "initial_accumulator_value=-1",
                 "adagrad.initial_accumulator_value = -1: must be >= 0");
  expect_refused("adagrad", "eps=-1", "adagrad.eps = -1: must be >= 0");
  expect_refused("adagrad", "lr_decay=nan",
                 "adagrad.lr_decay = nan: must be a finite number");
  /* torch's order: lr, lr_decay, weight_decay, initial_accumulator_value,
   * eps. */
  expect_refused("adagrad", "eps=-1 initial_accumulator_value=-1 lr_decay=-1",
                 "adagrad.lr_decay = -1: must be >= 0");
  expect_refused("adagrad", "eps=-1 initial_accumulator_value=-1",
                 "adagrad.initial_accumulator_value = -1: must be >= 0");

  expect_refused("adadelta", "lr=-1", "adadelta.lr = -1: must be >= 0");
  expect_refused("adadelta", "rho=1.5",
                 "adadelta.rho = 1.5: must be >= 0 and <= 1");
  expect_refused("adadelta", "rho=-0.1",
                 "adadelta.rho = -0.1: must be >= 0 and <= 1");
  expect_refused("adadelta", "eps=-1", "adadelta.eps = -1: must be >= 0");
  expect_refused("adadelta", "weight_decay=-1",
                 "adadelta.weight_decay = -1: must be >= 0");
  /* torch's order: lr, rho, eps, weight_decay. */
  expect_refused("adadelta", "weight_decay=-1 eps=-1 rho=2",
                 "adadelta.rho = 2: must be >= 0 and <= 1");
  expect_refused("adadelta", "weight_decay=-1 eps=-1",
                 "adadelta.eps = -1: must be >= 0");

  /* Adamax, NAdam and RAdam check as Adam does. */
  static const char *const betas[] = {"adamax", "nadam", "radam"};
  for (int i = 0; i < 3; i++) {
    const char *o = betas[i];
    expect_refused_as(o, "lr=-0.1", "%s.lr = -0.1: must be >= 0");
    expect_refused_as(o, "eps=-1e-8", "%s.eps = -1e-8: must be >= 0");
    expect_refused_as(o, "betas=-0.1,0.999",
                      "%s.betas = -0.1,0.999: value 1 must be >= 0 and < 1");
    expect_refused_as(o, "betas=0.9,1",
                      "%s.betas = 0.9,1: value 2 must be >= 0 and < 1");
    expect_refused_as(o, "betas=0.9", "betas has 1 values");
    expect_refused_as(o, "betas=0.9,0.99,0.999", "betas has 3 values");
    expect_refused_as(o, "weight_decay=-0.01",
                      "%s.weight_decay = -0.01: must be >= 0");
    expect_refused_as(o, "weight_decay=-1 betas=2,0 eps=-1",
                      "%s.eps = -1: must be >= 0");
    expect_refused_as(o, "weight_decay=-1 betas=2,0",
                      "%s.betas = 2,0: value 1 must be >= 0 and < 1");
  }
  expect_refused("nadam", "momentum_decay=-1",
                 "nadam.momentum_decay = -1: must be >= 0");
  expect_refused("nadam", "momentum_decay=-1 weight_decay=-1",
                 "nadam.weight_decay = -1: must be >= 0");

  /* ASGD checks lr and weight_decay only. */
  expect_refused("asgd", "lr=-1", "asgd.lr = -1: must be >= 0");
  expect_refused("asgd", "weight_decay=-1",
                 "asgd.weight_decay = -1: must be >= 0");
  expect_refused("asgd", "weight_decay=-1 lr=-1", "asgd.lr = -1: must be >= 0");
  expect_refused("asgd", "t0=nan", "asgd.t0 = nan: must be a finite number");

  /* Rprop: lr, then 0 < etaminus < 1 < etaplus. */
  expect_refused("rprop", "lr=-1", "rprop.lr = -1: must be >= 0");
  expect_refused("rprop", "etas=0,1.2",
                 "rprop.etas = 0,1.2: value 1 must be > 0");
  expect_refused("rprop", "etas=1,1.2",
                 "option etas = 1,1.2: invalid eta values, 0 < etaminus < 1 "
                 "< etaplus is needed");
  expect_refused("rprop", "etas=0.5,1",
                 "option etas = 0.5,1: invalid eta values");
  expect_refused("rprop", "etas=0.5", "etas has 1 values");
  expect_refused("rprop", "step_sizes=1e-6", "step_sizes has 1 values");
  expect_refused("rprop", "etas=1,1 lr=-1", "rprop.lr = -1: must be >= 0");
}

/* The rest of a run's message, in a buffer of the caller's: CFG trained
 * in a new directory, its status returned. */
static int try_train(const lk_config *cfg, char *msg, size_t len) {
  lk_run *run = new_run(cfg, run_dir(0), NULL);
  int rc = lk_run_train(run);
  snprintf(msg, len, "%s", rc ? lk_last_error() : "");
  lk_run_free(run);
  cleanup(NULL);
  return rc;
}

/* sgd and rmsprop created with momentum = 0 under a scheduler that sets
 * the momentum in its create (momsched, as onecycle and cyclic) keep
 * momentum buffers: sgd starts them at the first step with momentum != 0,
 * as torch's SGD, and so trains as if created with any momentum (the
 * scheduler's replaces it); rmsprop's first step decides, as torch's
 * RMSprop: one with momentum 0 makes none, and a later step with momentum
 * > 0 fails as torch's raises KeyError, whatever the momentum at create.
 * A scheduler that first sets a momentum while the run trains finds no
 * buffers to make, and is refused naming the optimizer. */
static void test_momentum_without_buffers(void **state) {
  (void)state;
  char msg[1024];
  lk_config *zero = make_config_with("max_steps = 3", "lstsq", "sgd",
                                     "lr=0.001", "0,0.9", NULL);
  lk_config *some = make_config_with("max_steps = 3", "lstsq", "sgd",
                                     "lr=0.001 momentum=0.5", "0,0.9", NULL);
  const char *a = run_dir(0), *b = run_dir(1);
  train(zero, a, false);
  train(some, b, false);
  lk_config_free(zero);
  lk_config_free(some);
  char ca[4300], cb[4300];
  snprintf(ca, sizeof ca, "%s/checkpoints/last.ckpt", a);
  snprintf(cb, sizeof cb, "%s/checkpoints/last.ckpt", b);
  assert_true(same_file(ca, cb));
  cleanup(NULL);

  static const char *const created[] = {"lr=0.001", "lr=0.001 momentum=0.5"};
  for (int i = 0; i < 2; i++) {
    lk_config *cfg = make_config_with("max_steps = 3", "lstsq", "rmsprop",
                                      created[i], "0,0.9", NULL);
    int rc = try_train(cfg, msg, sizeof msg);
    lk_config_free(cfg);
    if (rc != LK_ECONFIG ||
        !strstr(msg, "momentum 0.9 at step 2, but the first step had "
                     "momentum 0") ||
        !strstr(msg, "KeyError"))
      fail_msg("rmsprop (%s): momentum 0.9 after a first step without: rc "
               "%d, message \"%s\"",
               created[i], rc, msg);
  }

  static const char *const opts[] = {"sgd", "rmsprop"};
  for (int i = 0; i < 2; i++) {
    lk_config *cfg = make_config_with("max_steps = 3", "lstsq", opts[i],
                                      "lr=0.001", "0.9\ncreate = false", NULL);
    int rc = try_train(cfg, msg, sizeof msg);
    lk_config_free(cfg);
    if (rc != LK_ECONFIG ||
        !strstr(msg, "momentum 0.9 set while the run "
                     "trains") ||
        !strstr(msg, opts[i]) || !strstr(msg, "momentum > 0"))
      fail_msg("%s: momentum first set after setup: rc %d, message \"%s\"",
               opts[i], rc, msg);
  }
}

/* ---- main ------------------------------------------------------------------
 */

int main(void) {
  if (build_cases() != 0)
    return 1;
  typedef struct {
    const char *name;
    CMUnitTestFunction fn;
  } per_optimizer;
  static const per_optimizer per[] = {{"resume", test_resume},
                                      {"momentum resume", test_momentum_resume},
                                      {"lr state", test_lr_state},
                                      {"f32", test_f32},
                                      {"NaN closure", test_nan_closure},
                                      {"NULL closure", test_null_closure}};
  size_t n_per = sizeof per / sizeof per[0];
  size_t n_tests = 3 + n_cases + n_per * N_OPTIMIZERS;
  struct CMUnitTest *tests = calloc(n_tests, sizeof *tests);
  char(*names)[64] = calloc(n_per * N_OPTIMIZERS, sizeof *names);
  if (!tests || !names) {
    free(tests);
    free(names);
    free(cases);
    return 1;
  }
  size_t k = 0;
  tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_reference_complete);
  for (size_t i = 0; i < n_cases; i++)
    tests[k++] = (struct CMUnitTest){cases[i].label, test_case, NULL, cleanup,
                                     &cases[i]};
  for (size_t o = 0; o < N_OPTIMIZERS; o++)
    for (size_t p = 0; p < n_per; p++) {
      char *name = names[o * n_per + p];
      snprintf(name, sizeof names[0], "%s %s", optimizers[o].name, per[p].name);
      tests[k++] = (struct CMUnitTest){name, per[p].fn, NULL, cleanup,
                                       (void *)optimizers[o].name};
    }
  tests[k++] = (struct CMUnitTest)cmocka_unit_test_teardown(
      test_refused_options, cleanup);
  tests[k++] = (struct CMUnitTest)cmocka_unit_test_teardown(
      test_momentum_without_buffers, cleanup);
  int failed = _cmocka_run_group_tests("first_order_torch", tests, k,
                                       load_reference, free_reference);
  free(tests);
  free(names);
  return failed;
}
