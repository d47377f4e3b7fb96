/* The closure matrix against torch 1.13: every cell of tests/data/matrix.ref
 * (written by tests/torch/matrix_reference.py) is trained through the
 * public API on the multi test model, and every parameter must equal
 * torch's bit for bit. The cells: every optimizer x {automatic, manual} x
 * {accumulate 1, 4} x {no clipping, norm clipping} with two parameter
 * groups (every first-order optimizer: lbfgs refuses groups as torch's
 * LBFGS does, sam is not torch's); every optimizer with three groups;
 * schedulers driving groups (a SequentialLR, a OneCycleLR with momentum);
 * two optimizers in automatic (Lightning 1.x: in turn, each with its own
 * closure) and manual optimization. The reference must hold every cell
 * the test expects. Torch is not needed here. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, nftw */
#endif
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>

#define MAX_CELLS 256
#define MAX_VALUES 16

/* The optimizers every group cell is expected for. */
static const char *const optimizers[] = {
    "sgd",    "adam", "adamw", "rmsprop", "adagrad", "adadelta",
    "adamax", "asgd", "nadam", "radam",   "rprop"};
#define N_OPTIMIZERS (sizeof optimizers / sizeof optimizers[0])

typedef struct cell {
  char name[64];
  char *config;
  char param[MAX_VALUES][16]; /* "w[0]" */
  double value[MAX_VALUES];
  int n;
} cell;

static cell cells[MAX_CELLS];
static size_t n_cells;

static int load_reference(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/matrix.ref",
           dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  char line[1024];
  cell *c = NULL;
  bool in_config = false;
  size_t used = 0, cap = 0;
  while (fgets(line, sizeof line, f)) {
    char name[64], param[16];
    double v;
    if (sscanf(line, "cell %63s", name) == 1 && n_cells < MAX_CELLS) {
      c = &cells[n_cells++];
      snprintf(c->name, sizeof c->name, "%s", name);
      in_config = true;
      used = cap = 0;
    } else if (c && in_config && strcmp(line, "end\n") == 0) {
      in_config = false;
    } else if (c && in_config) {
      size_t len = strlen(line);
      if (used + len + 1 > cap) {
        cap = 2 * (used + len + 1);
        char *grown = realloc(c->config, cap);
        if (!grown)
          break;
        c->config = grown;
      }
      memcpy(c->config + used, line, len + 1);
      used += len;
    } else if (c && sscanf(line, "param %15s %lf", param, &v) == 2 &&
               c->n < MAX_VALUES) {
      snprintf(c->param[c->n], sizeof c->param[0], "%s", param);
      c->value[c->n++] = v;
    }
  }
  fclose(f);
  return 0;
}

static int free_reference(void **state) {
  (void)state;
  for (size_t i = 0; i < n_cells; i++)
    free(cells[i].config);
  return 0;
}

static const cell *find(const char *name) {
  for (size_t i = 0; i < n_cells; i++)
    if (strcmp(cells[i].name, name) == 0)
      return &cells[i];
  return NULL;
}

/* Every cell the matrix must have is in the reference, with every
 * parameter (12 values). */
static void test_reference_complete(void **state) {
  (void)state;
  size_t expected = 0;
  for (size_t o = 0; o < N_OPTIMIZERS; o++) {
    for (int manual = 0; manual < 2; manual++)
      for (int acc = 1; acc <= 4; acc += 3)
        for (int clip = 0; clip < 2; clip++) {
          char name[64];
          snprintf(name, sizeof name, "%s-%s-acc%d-%s", optimizers[o],
                   manual ? "manual" : "auto", acc, clip ? "clip" : "noclip");
          if (!find(name))
            fail_msg("matrix.ref has no cell %s", name);
          expected++;
        }
    char name[64];
    snprintf(name, sizeof name, "%s-3groups", optimizers[o]);
    if (!find(name))
      fail_msg("matrix.ref has no cell %s", name);
  }
  for (size_t i = 0; i < n_cells; i++)
    if (cells[i].n != 12 || !cells[i].config)
      fail_msg("cell %s: %d values", cells[i].name, cells[i].n);
  print_message("# %zu cells, %zu of them the closure matrix\n", n_cells,
                expected);
}

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

static void test_cell(void **state) {
  const cell *c = *state;
  lk_config *cfg = NULL;
  char label[80];
  snprintf(label, sizeof label, "%s.ini", c->name);
  if (lk_config_parse(label, c->config, &cfg) != 0)
    fail_msg("%s", lk_last_error());
  root = strdup("/tmp/loopkit-matrix-XXXXXX");
  assert_non_null(root);
  assert_non_null(mkdtemp(root));
  char out[4200];
  snprintf(out, sizeof out, "%s/run", root);
  lk_run_options opts = {.out_dir = out};
  lk_run *run = NULL;
  if (lk_run_new(cfg, &opts, &run) != 0) {
    lk_config_free(cfg);
    fail_msg("lk_run_new: %s", lk_last_error());
  }
  lk_config_free(cfg);
  if (lk_run_train(run) != 0) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    lk_run_free(run);
    fail_msg("lk_run_train: %s", msg);
  }
  size_t n;
  lk_tensor *const *params = lk_run_params(run, &n);
  int k = 0, bad = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < params[i]->numel; j++, k++) {
      char name[96];
      snprintf(name, sizeof name, "%s[%zu]", params[i]->name, j);
      double got = ((const double *)params[i]->data)[j];
      if (k >= c->n || strcmp(c->param[k], name) != 0 || got != c->value[k]) {
        print_error("%s: %s = %.17g, torch %s = %.17g\n", c->name, name, got,
                    k < c->n ? c->param[k] : "?", k < c->n ? c->value[k] : 0);
        bad++;
      }
    }
  lk_run_free(run);
  assert_int_equal(bad, 0);
  assert_int_equal(k, c->n);
}

int main(void) {
  void *st = NULL;
  if (load_reference(&st) != 0)
    return 1;
  struct CMUnitTest *tests = calloc(n_cells + 1, sizeof *tests);
  if (!tests) {
    free_reference(&st);
    return 1;
  }
  size_t k = 0;
  tests[k++] = (struct CMUnitTest)cmocka_unit_test(test_reference_complete);
  for (size_t i = 0; i < n_cells; i++)
    tests[k++] =
        (struct CMUnitTest){cells[i].name, test_cell, NULL, cleanup, &cells[i]};
  int failed = _cmocka_run_group_tests("matrix_torch", tests, k, NULL, NULL);
  free(tests);
  free_reference(&st);
  return failed;
}
