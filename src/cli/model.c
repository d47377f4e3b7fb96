/* What the commands that use a trained model share (generate, test,
 * validate, predict; export's config): the config (given, or the one the
 * checkpoint's run was trained with) and its overrides made into a run
 * without a run directory, the checkpoint's parameters loaded into it.
 * Nothing is written anywhere: the run that made the checkpoint is only
 * read. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_open_model(const cli_model_args *a, lk_run **run) {
  lk_config *cfg = NULL;
  if (lk_config_load(a->config, &cfg) != 0) {
    cli_error("%s", lk_last_error());
    return -1;
  }
  for (int i = 0; i < a->n_sets; i++)
    if (lk_config_set(cfg, a->sets[i]) != 0) {
      cli_error("%s", lk_last_error());
      lk_config_free(cfg);
      return -1;
    }
  lk_run_options ro = {
      .no_run_dir = true, .log = cli_log_stderr, .verbosity = LK_LOG_WARN};
  int rc = lk_run_new(cfg, &ro, run);
  lk_config_free(cfg);
  if (rc == 0 && a->ckpt && (rc = lk_run_load_params(*run, a->ckpt)) != 0)
    lk_run_free(*run);
  if (rc != 0)
    cli_error("%s", lk_last_error());
  return rc;
}

/* "--set" and "--ckpt" take a value; so does "-o" where OUT is allowed. */
int cli_model_args_parse(const char *cmd, const char *usage, int argc,
                         char **argv, bool out, cli_model_args *a) {
  for (int i = 0; i < argc; i++) {
    const char *o = argv[i];
    bool is_out = out && (!strcmp(o, "-o") || !strcmp(o, "--output"));
    bool is_ckpt = !a->untrained && !strcmp(o, "--ckpt");
    bool valued = is_ckpt || !strcmp(o, "--set") || is_out;
    if (valued && i + 1 >= argc) {
      cli_error("%s: %s needs a value", cmd, o);
      return -1;
    }
    const char *v = valued ? argv[++i] : NULL;
    if (is_ckpt)
      a->ckpt = v;
    else if (is_out)
      a->out = v;
    else if (!strcmp(o, "--set")) {
      if (a->n_sets == CLI_MAX_SETS) {
        cli_error("%s: more than %d --set", cmd, CLI_MAX_SETS);
        return -1;
      }
      a->sets[a->n_sets++] = v;
    } else if (o[0] == '-' || a->config) {
      cli_error("%s: unexpected \"%s\"; %s", cmd, o, usage);
      return -1;
    } else
      a->config = o;
  }
  if (!a->config && a->ckpt && !a->untrained) {
    if (cli_run_config(cmd, usage, a->ckpt, a->run_config,
                       sizeof a->run_config) != 0)
      return -1;
    a->config = a->run_config;
  }
  if (!a->config || (!a->ckpt && !a->untrained)) {
    /* With --ckpt, CONFIG may go: the checkpoint is what is missing. */
    cli_error("%s: %s; %s", cmd,
              a->untrained ? "no config file" : "no --ckpt: which checkpoint?",
              usage);
    return -1;
  }
  return 0;
}

int cli_run_config(const char *cmd, const char *usage, const char *ckpt,
                   char *buf, size_t len) {
  int rc = lk_checkpoint_run_config(ckpt, buf, len);
  if (rc == 0)
    return 0;
  if (rc == LK_ENOTFOUND && access(ckpt, F_OK) == 0)
    cli_error("%s: a CONFIG is needed: %s is in no run directory, so the "
              "config it was trained with is not known (a run keeps it as "
              "RUN/config.ini beside RUN/checkpoints/), and a checkpoint "
              "holds values, not what model they are of; %s",
              cmd, ckpt, usage);
  else
    cli_error("%s: %s", cmd, lk_last_error());
  return -1;
}

int cli_model_status(int rc) {
  return rc == LK_ECONFIG || rc == LK_EFORMAT || rc == LK_EKIND ? EXIT_USAGE
                                                                : EXIT_FAILED;
}
