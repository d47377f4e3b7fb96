/* loopkit train: config, overrides, run; the run a --resume continues,
 * and the exact command that resumes an interrupted one. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* ---- what --resume names ------------------------------------------------ */

/* The run directory holding checkpoint CKPT (DIR/checkpoints/FILE, or
 * DIR/checkpoints/NAME/FILE: a named checkpoint callback's), into BUF, or
 * false. */
static bool run_of_checkpoint(const char *ckpt, char *buf, size_t len) {
  char copy[PATH_MAX];
  if (snprintf(copy, sizeof copy, "%s", ckpt) >= (int)sizeof copy)
    return false;
  char *dir = dirname(copy), *base = strrchr(dir, '/');
  base = base ? base + 1 : dir;
  if (strcmp(base, "checkpoints") != 0 && base != dir &&
      strcmp(base, ".") != 0 && strcmp(base, "..") != 0) {
    base[-1] = '\0'; /* up from NAME */
    base = strrchr(dir, '/');
    base = base ? base + 1 : dir;
    if (strcmp(base, "checkpoints") != 0)
      return false;
  }
  if (strcmp(base, "checkpoints") == 0) {
    if (base == dir)
      return snprintf(buf, len, ".") < (int)len;
    base[-1] = '\0';
    return snprintf(buf, len, "%s", *dir ? dir : "/") < (int)len;
  }
  /* From inside DIR/checkpoints ("last.ckpt", "./last.ckpt"). */
  char real[PATH_MAX];
  const char *name = realpath(dir, real) ? strrchr(real, '/') : NULL;
  return name && strcmp(name + 1, "checkpoints") == 0 &&
         snprintf(buf, len, "%s/..", dir) < (int)len;
}

/* --resume TARGET: a run directory (its checkpoints/last.ckpt) or a
 * checkpoint. Without a CONFIG the run's own config.ini is the config, so
 * that `loopkit train --resume RUN_DIR` goes on exactly as the run was. */
static int resume_target(const char *target, const char **config, char *ckpt,
                         size_t ckpt_len, char *cfg_buf, size_t cfg_len) {
  struct stat st;
  char run[PATH_MAX];
  size_t n = strlen(target);
  while (n > 1 && target[n - 1] == '/')
    n--; /* "runs/x-1/" names runs/x-1 */
  if (stat(target, &st) == 0 && S_ISDIR(st.st_mode)) {
    if (snprintf(run, sizeof run, "%.*s", (int)n, target) >= (int)sizeof run ||
        snprintf(ckpt, ckpt_len, "%s/checkpoints/last.ckpt", run) >=
            (int)ckpt_len) {
      cli_error("train: --resume %s: path too long", target);
      return -1;
    }
    if (access(ckpt, F_OK) != 0) {
      cli_error("train: --resume %s: %s has no checkpoint to resume (%s: "
                "%s)",
                target, run, ckpt, strerror(errno));
      return -1;
    }
  } else {
    if (snprintf(ckpt, ckpt_len, "%s", target) >= (int)ckpt_len) {
      cli_error("train: --resume %s: path too long", target);
      return -1;
    }
    if (*config)
      return 0;
    if (!run_of_checkpoint(target, run, sizeof run)) {
      cli_error("train: --resume %s: no config: the checkpoint is not in a "
                "run directory's checkpoints/; give the config it was "
                "trained with: loopkit train CONFIG.ini --resume %s",
                target, target);
      return -1;
    }
  }
  if (*config)
    return 0;
  if (snprintf(cfg_buf, cfg_len, "%s/config.ini", run) >= (int)cfg_len) {
    cli_error("train: --resume %s: path too long", target);
    return -1;
  }
  if (access(cfg_buf, F_OK) != 0) {
    cli_error("train: --resume %s: %s is not a run directory (no config.ini: "
              "%s); give the config it was trained with: loopkit train "
              "CONFIG.ini --resume %s",
              target, run, strerror(errno), target);
    return -1;
  }
  *config = cfg_buf;
  return 0;
}

/* PATH as one shell word: as it is when nothing in it is special to a
 * shell, single-quoted otherwise; "./" before a leading '-'. */
static void shell_word(const char *path, char *buf, size_t len) {
  bool plain = *path != '\0';
  for (const char *p = path; *p; p++)
    plain = plain && (strchr("_-./+,:=@%^", *p) || (*p >= '0' && *p <= '9') ||
                      (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'));
  const char *pre = path[0] == '-' ? "./" : "";
  if (plain) {
    snprintf(buf, len, "%s%s", pre, path);
    return;
  }
  size_t used = (size_t)snprintf(buf, len, "'%s", pre);
  for (const char *p = path; *p && used + 5 < len; p++)
    if (*p == '\'') {
      memcpy(buf + used, "'\\''", 4);
      used += 4;
    } else {
      buf[used++] = *p;
    }
  if (used + 2 <= len)
    memcpy(buf + used, "'", 2);
  else
    buf[len - 1] = '\0';
}

/* The command that resumes RUN where its last checkpoint left it: its own
 * config.ini is the config it trained with, --set overrides included. */
static void print_resume_hint(const lk_run *run) {
  char word[2 * PATH_MAX];
  shell_word(lk_run_dir(run), word, sizeof word);
  fprintf(stderr, "loopkit: resume with: loopkit train --resume %s\n", word);
}

/* What the command line asks for. */
typedef struct train_args {
  const char *config, *out, *resume;
  bool quiet;
  /* Overrides are applied after the file is read, in order. */
  const char *sets[256];
  int n_sets;
} train_args;

/* ARGV into *A; -1 after a message on a usage error. */
static int parse_args(int argc, char **argv, train_args *a) {
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "--set")) {
      if (a->n_sets == 256) {
        cli_error("train: too many --set");
        return -1;
      }
      if (value_of(argc, argv, &i, s, &a->sets[a->n_sets]) != 0)
        return -1;
      a->n_sets++;
    } else if (!strncmp(s, "--set=", 6) && a->n_sets < 256) {
      a->sets[a->n_sets++] = s + 6;
    } else if (!strcmp(s, "--out")) {
      if (value_of(argc, argv, &i, s, &a->out) != 0)
        return -1;
    } else if (!strcmp(s, "--resume")) {
      if (value_of(argc, argv, &i, s, &a->resume) != 0)
        return -1;
    } else if (!strcmp(s, "--quiet")) {
      a->quiet = true;
    } else if (s[0] == '-' && s[1]) {
      cli_error("train: unknown option \"%s\"; accepted: --set SECTION.KEY="
                "VALUE, --out DIR, --resume CKPT|RUN_DIR, --quiet",
                s);
      return -1;
    } else if (!a->config) {
      a->config = s;
    } else {
      cli_error("train: more than one config (\"%s\" and \"%s\")", a->config,
                s);
      return -1;
    }
  }
  return 0;
}

/* The config A names, its overrides applied, made a run in *OUT (its
 * progress drawn on BAR); -1 after a message. */
static int open_run(const train_args *a, cli_bar *bar, lk_run **out) {
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
  lk_run_options opts = {
      .out_dir = a->out,
      .resume = a->resume,
      .log = cli_log_stderr,
      .verbosity = a->quiet ? LK_LOG_ERROR : LK_LOG_INFO,
  };
  if (!a->quiet && isatty(STDERR_FILENO)) {
    opts.progress = cli_progress;
    opts.progress_user = bar;
    opts.log = cli_progress_log;
    opts.log_user = bar;
  }
  int rc = lk_run_new(cfg, &opts, out);
  if (rc != 0)
    cli_error("%s", lk_last_error());
  lk_config_free(cfg);
  return rc != 0 ? -1 : 0;
}

/* What rank 0 says of a run lk_run_train ended with RC, and the status. */
static int report(const lk_run *run, int rc) {
  write_curves(run);
  char summary[1024];
  lk_run_summary(run, summary, sizeof summary);
  if (rc == LK_EINTERRUPTED) {
    int sig = caught ? caught : SIGINT;
    cli_error("%s by %s", lk_last_error(), signal_name(sig));
    print_resume_hint(run);
    return 128 + sig;
  }
  if (rc == 0 && caught) {
    /* The signal came as the run ended (its last checkpoint being written,
     * curves.png drawn): nothing is lost, and the status still says that
     * the run was interrupted. */
    cli_error("%s came as the run ended: it is complete; %s",
              signal_name(caught), summary);
    return 128 + caught;
  }
  int status = status_of(run, rc);
  if (rc != 0) {
    cli_error("training failed: %s", lk_last_error());
    fprintf(stderr, "loopkit: %s\n", summary);
    /* From its last checkpoint, if it wrote one: nothing after it was
     * kept. */
    if (status == EXIT_FAILED && lk_run_checkpoint(run) &&
        access(lk_run_checkpoint(run), F_OK) == 0)
      print_resume_hint(run);
  } else {
    printf("%s\n", summary);
  }
  return status;
}

int cli_train(int argc, char **argv) {
  train_args a = {.n_sets = 0};
  if (parse_args(argc, argv, &a) != 0)
    return EXIT_USAGE;
  char ckpt[PATH_MAX], run_config[PATH_MAX];
  if (a.resume && resume_target(a.resume, &a.config, ckpt, sizeof ckpt,
                                run_config, sizeof run_config) != 0)
    return EXIT_USAGE;
  if (a.resume)
    a.resume = ckpt;
  if (!a.config) {
    cli_error("train: no config file (loopkit train CONFIG.ini, or "
              "loopkit train --resume RUN_DIR)");
    return EXIT_USAGE;
  }
  cli_bar bar = {.percent = -1};
  lk_run *run = NULL;
  if (open_run(&a, &bar, &run) != 0)
    return EXIT_USAGE;
  running = run;
  catch_signals();
  int rc = lk_run_train(run);
  running = NULL;
  if (bar.drawn)
    fputc('\n', stderr);
  /* rank 0 speaks for a distributed run */
  int status = lk_run_rank(run) != 0 ? status_of(run, rc) : report(run, rc);
  lk_run_free(run);
  return status;
}
