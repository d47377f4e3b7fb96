/* loopkit test and loopkit validate: a checkpoint's model evaluated on the
 * test or the validation split, as training evaluates them (the same
 * steps, the same means over the samples), its metrics printed one a
 * line, NAME VALUE with the names metrics.csv gives them (test_loss,
 * val_acc). The run that made the checkpoint is only read: no run
 * directory is made, no callback is called, nothing is written. */
#include <stdio.h>

#include "cli.h"

static void print_metric(const char *prefix, const char *name, double v) {
  printf("%s_%s %.17g\n", prefix, name, v);
}

static int evaluate(int argc, char **argv, const char *cmd, lk_split split) {
  const char *prefix = split == LK_SPLIT_TEST ? "test" : "val";
  char usage[160];
  snprintf(usage, sizeof usage,
           "usage: loopkit %s [CONFIG.ini] --ckpt CKPT [--set S.K=V]...", cmd);
  cli_model_args a = {0};
  if (cli_model_args_parse(cmd, usage, argc, argv, false, &a) != 0)
    return EXIT_USAGE;
  lk_run *run = NULL;
  if (cli_open_model(&a, &run) != 0)
    return EXIT_USAGE;
  bool ran = false;
  lk_step_result mean;
  int rc = lk_run_evaluate(run, split, &ran, &mean);
  int status = EXIT_TRAINED;
  if (rc != 0) {
    cli_error("%s: %s", cmd, lk_last_error());
    status = cli_model_status(rc);
  } else if (!ran) {
    const lk_descriptor *d = NULL;
    lk_run_instance(run, "data", &d);
    cli_error("%s: data plugin %s has no %s split in %s (a data file for "
              "it is an option of the plugin: see loopkit inspect %s; "
              "--set overrides it)",
              cmd, d ? d->name : "?",
              split == LK_SPLIT_TEST ? "test" : "validation", a.config,
              d ? d->name : "NAME");
    status = EXIT_USAGE;
  } else {
    if (mean.has_loss)
      print_metric(prefix, "loss", mean.loss);
    for (size_t m = 0; m < mean.n_metrics; m++)
      print_metric(prefix, mean.metrics[m].name, mean.metrics[m].value);
  }
  lk_run_free(run);
  return status;
}

int cli_test(int argc, char **argv) {
  return evaluate(argc, argv, "test", LK_SPLIT_TEST);
}

int cli_validate(int argc, char **argv) {
  return evaluate(argc, argv, "validate", LK_SPLIT_VAL);
}
