/* loopkit train: config, overrides, run. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* SIGINT and SIGTERM: the first asks the run to stop after its step and
 * write a checkpoint; the handler then steps aside, so a second signal
 * ends the process at once. */
static lk_run *running;
static volatile sig_atomic_t caught;

static void on_signal(int sig) {
  caught = sig;
  if (running)
    lk_run_interrupt(running);
  signal(sig, SIG_DFL);
}

static void catch_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

static int value_of(int argc, char **argv, int *i, const char *opt,
                    const char **out) {
  if (*i + 1 >= argc) {
    cli_error("train: %s needs a value", opt);
    return -1;
  }
  *out = argv[++*i];
  return 0;
}

/* RUN_DIR/curves.png, when loopkit has cairo: a failure to draw is a
 * warning, never a failed run. */
static void write_curves(const lk_run *run) {
  if (!cli_plot_available())
    return;
  char path[4096];
  snprintf(path, sizeof path, "%s/curves.png", lk_run_dir(run));
  if (cli_plot_curves(lk_run_dir(run), path) != 0)
    fprintf(stderr, "loopkit: warning: curves.png not drawn\n");
}

/* A failure before anything was trained (a checkpoint that does not fit
 * the data, found at the first epoch) is one of the usage kind. */
static int status_of(const lk_run *run, int rc) {
  if (rc == 0)
    return EXIT_TRAINED;
  return lk_run_failed_before_training(run, rc) ? EXIT_USAGE : EXIT_FAILED;
}

static const char *signal_name(int sig) {
  return sig == SIGTERM ? "SIGTERM" : "SIGINT";
}

int cli_train(int argc, char **argv) {
  const char *config = NULL, *out = NULL, *resume = NULL;
  bool quiet = false;
  /* Overrides are applied after the file is read, in order. */
  const char *sets[256];
  int n_sets = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--set")) {
      if (n_sets == 256) {
        cli_error("train: too many --set");
        return EXIT_USAGE;
      }
      if (value_of(argc, argv, &i, a, &sets[n_sets]) != 0)
        return EXIT_USAGE;
      n_sets++;
    } else if (!strncmp(a, "--set=", 6) && n_sets < 256) {
      sets[n_sets++] = a + 6;
    } else if (!strcmp(a, "--out")) {
      if (value_of(argc, argv, &i, a, &out) != 0)
        return EXIT_USAGE;
    } else if (!strcmp(a, "--resume")) {
      if (value_of(argc, argv, &i, a, &resume) != 0)
        return EXIT_USAGE;
    } else if (!strcmp(a, "--quiet")) {
      quiet = true;
    } else if (a[0] == '-' && a[1]) {
      cli_error("train: unknown option \"%s\"; accepted: --set SECTION.KEY="
                "VALUE, --out DIR, --resume CKPT, --quiet",
                a);
      return EXIT_USAGE;
    } else if (!config) {
      config = a;
    } else {
      cli_error("train: more than one config (\"%s\" and \"%s\")", config, a);
      return EXIT_USAGE;
    }
  }
  if (!config) {
    cli_error("train: no config file (loopkit train CONFIG.ini)");
    return EXIT_USAGE;
  }
  lk_config *cfg = NULL;
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
  lk_run_options opts = {
      .out_dir = out,
      .resume = resume,
      .log = cli_log_stderr,
      .verbosity = quiet ? LK_LOG_ERROR : LK_LOG_INFO,
  };
  cli_bar bar = {.percent = -1};
  if (!quiet && isatty(STDERR_FILENO)) {
    opts.progress = cli_progress;
    opts.progress_user = &bar;
    opts.log = cli_progress_log;
    opts.log_user = &bar;
  }
  lk_run *run = NULL;
  if (lk_run_new(cfg, &opts, &run) != 0) {
    cli_error("%s", lk_last_error());
    lk_config_free(cfg);
    return EXIT_USAGE;
  }
  lk_config_free(cfg);
  running = run;
  catch_signals();
  int rc = lk_run_train(run);
  running = NULL;
  if (bar.drawn)
    fputc('\n', stderr);
  if (lk_run_rank(run) != 0) { /* rank 0 speaks for a distributed run */
    int status = status_of(run, rc);
    lk_run_free(run);
    return status;
  }
  write_curves(run);
  char summary[1024];
  lk_run_summary(run, summary, sizeof summary);
  if (rc == LK_EINTERRUPTED) {
    int sig = caught ? caught : SIGINT;
    cli_error("%s by %s", lk_last_error(), signal_name(sig));
    fprintf(stderr, "loopkit: resume with: loopkit train %s --resume %s\n",
            config, lk_run_checkpoint(run));
    lk_run_free(run);
    return 128 + sig;
  }
  if (rc == 0 && caught) {
    /* The signal came as the run ended (its last checkpoint being written,
     * curves.png drawn): nothing is lost, and the status still says that
     * the run was interrupted. */
    cli_error("%s came as the run ended: it is complete; %s",
              signal_name(caught), summary);
    lk_run_free(run);
    return 128 + caught;
  }
  if (rc != 0) {
    cli_error("training failed: %s", lk_last_error());
    fprintf(stderr, "loopkit: %s\n", summary);
  } else {
    printf("%s\n", summary);
  }
  int status = status_of(run, rc);
  lk_run_free(run);
  return status;
}
