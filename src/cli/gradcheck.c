/* loopkit gradcheck: the backward plugin against central differences. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct verdict {
  double tolerance; /* < 0: report only */
  int over;
} verdict;

static void report(void *user, const char *param, double err, size_t n) {
  verdict *v = user;
  bool bad = v->tolerance >= 0 && !(err <= v->tolerance);
  v->over += bad;
  printf("%-24s %-14.6g %-8zu%s\n", param, err, n,
         bad ? " over tolerance" : "");
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
  printf("%-24s %-14s %s\n", "PARAMETER", "MAX_REL_ERROR", "CHECKED");
  rc = lk_run_gradcheck(run, (size_t)batches, (size_t)samples, report, &v);
  if (rc != 0)
    cli_error("gradcheck failed: %s", lk_last_error());
  lk_run_free(run);
  return rc != 0 || v.over ? EXIT_FAILED : 0;
}
