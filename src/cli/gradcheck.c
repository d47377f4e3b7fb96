/* loopkit gradcheck: the backward plugin against central differences.
 * Each parameter passes or fails against a tolerance: --tolerance for all,
 * or by default the one its dtype's differences are good to (run.h:
 * LK_GRADCHECK_TOLERANCE_F64, _F32); the exit status says whether all
 * passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct verdict {
  double tolerance; /* < 0: by each parameter's dtype */
  lk_run *run;
  int over;
  int f32;        /* parameters checked in f32 */
  int n;          /* parameters checked */
  size_t skipped; /* elements skipped at kinks, over all parameters */
} verdict;

static lk_dtype dtype_of(lk_run *run, const char *param) {
  size_t n = 0;
  lk_tensor *const *ps = lk_run_params(run, &n);
  for (size_t i = 0; i < n; i++)
    if (strcmp(ps[i]->name, param) == 0)
      return ps[i]->dtype;
  return LK_F64;
}

static void report(void *user, const lk_gradcheck_row *row) {
  verdict *v = user;
  bool f32 = dtype_of(v->run, row->param) == LK_F32;
  double tol = v->tolerance >= 0 ? v->tolerance
               : f32             ? LK_GRADCHECK_TOLERANCE_F32
                                 : LK_GRADCHECK_TOLERANCE_F64;
  /* NaN fails, and so does a parameter no element of which was checked */
  bool bad = !(row->max_rel_error <= tol) || (row->skipped && !row->checked);
  v->over += bad;
  v->f32 += f32;
  v->n++;
  v->skipped += row->skipped;
  char skips[48] = "";
  if (row->skipped)
    snprintf(skips, sizeof skips, " (%zu skipped at kinks)", row->skipped);
  if (bad)
    printf("%-24s %-14.6g %-8zu over tolerance %g%s\n", row->param,
           row->max_rel_error, row->checked, tol, skips);
  else
    printf("%-24s %-14.6g %zu%s\n", row->param, row->max_rel_error,
           row->checked, skips);
}

/* What the check could tell, and its verdict. */
static void conclude(const verdict *v) {
  if (v->f32)
    printf("\nnote: %d parameter%s f32: the differences step by %g * "
           "max(1, |w|) and are\ngood to about %g relative, so smaller errors "
           "in the backward cannot be seen; a step across a kink\n(ReLU, "
           "max) is re-checked 8 times smaller\n",
           v->f32, v->f32 == 1 ? " is" : "s are", LK_GRADCHECK_STEP_F32,
           LK_GRADCHECK_TOLERANCE_F32);
  if (v->skipped)
    printf("\nnote: %zu element%s skipped: their one-sided differences "
           "disagreed at a step\n8 times smaller too (a ReLU's zero or a "
           "max's tie within it): not judged\n",
           v->skipped, v->skipped == 1 ? "" : "s");
  char tol[96];
  if (v->tolerance >= 0)
    snprintf(tol, sizeof tol, "tolerance %g", v->tolerance);
  else if (v->f32 == 0 || v->f32 == v->n)
    snprintf(tol, sizeof tol, "tolerance %g for %s",
             v->f32 ? LK_GRADCHECK_TOLERANCE_F32 : LK_GRADCHECK_TOLERANCE_F64,
             v->f32 ? "f32" : "f64");
  else
    snprintf(tol, sizeof tol, "tolerance %g for f64, %g for f32",
             LK_GRADCHECK_TOLERANCE_F64, LK_GRADCHECK_TOLERANCE_F32);
  if (v->over)
    printf("\ngradcheck: FAILED: %d parameter%s over %s\n", v->over,
           v->over == 1 ? "" : "s", tol);
  else
    printf("\ngradcheck: passed (%s)\n", tol);
}

static int number(const char *opt, const char *s, double *out) {
  char *end;
  *out = strtod(s, &end);
  if (end == s || *end || *out < 0) {
    cli_error("gradcheck: %s \"%s\": expected a number >= 0", opt, s);
    return -1;
  }
  return 0;
}

int cli_gradcheck(int argc, char **argv) {
  const char *config = NULL;
  double batches = 2, samples = 20;
  verdict v = {.tolerance = -1};
  lk_config *cfg = NULL;
  const char *sets[256];
  int n_sets = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    bool valued = !strcmp(a, "--set") || !strcmp(a, "--batches") ||
                  !strcmp(a, "--samples") || !strcmp(a, "--tolerance");
    if (valued && i + 1 >= argc) {
      cli_error("gradcheck: %s needs a value", a);
      return EXIT_USAGE;
    }
    if (!strcmp(a, "--set") && n_sets < 256)
      sets[n_sets++] = argv[++i];
    else if (!strcmp(a, "--batches")) {
      if (number(a, argv[++i], &batches) != 0)
        return EXIT_USAGE;
    } else if (!strcmp(a, "--samples")) {
      if (number(a, argv[++i], &samples) != 0)
        return EXIT_USAGE;
    } else if (!strcmp(a, "--tolerance")) {
      if (number(a, argv[++i], &v.tolerance) != 0)
        return EXIT_USAGE;
    } else if (a[0] == '-' || config) {
      cli_error("gradcheck: unexpected \"%s\"; usage: loopkit gradcheck "
                "CONFIG.ini [--set S.K=V]... [--batches N] [--samples N] "
                "[--tolerance T]",
                a);
      return EXIT_USAGE;
    } else
      config = a;
  }
  if (!config) {
    cli_error("gradcheck: no config file");
    return EXIT_USAGE;
  }
  if (lk_config_load(config, &cfg) != 0) {
    cli_error("%s", lk_last_error());
    return EXIT_USAGE;
  }
  for (int i = 0; i < n_sets; i++)
    if (lk_config_set(cfg, sets[i]) != 0) {
      cli_error("%s", lk_last_error());
      lk_config_free(cfg);
      return EXIT_USAGE;
    }
  lk_run_options opts = {.no_run_dir = true, .verbosity = LK_LOG_ERROR};
  lk_run *run = NULL;
  int rc = lk_run_new(cfg, &opts, &run);
  lk_config_free(cfg);
  if (rc != 0) {
    cli_error("%s", lk_last_error());
    return EXIT_USAGE;
  }
  v.run = run;
  printf("%-24s %-14s %s\n", "PARAMETER", "MAX_REL_ERROR", "CHECKED");
  rc = lk_run_gradcheck_rows(run, (size_t)batches, (size_t)samples, report, &v);
  if (rc != 0)
    cli_error("gradcheck failed: %s", lk_last_error());
  else
    conclude(&v);
  lk_run_free(run);
  return rc != 0 || v.over ? EXIT_FAILED : 0;
}
