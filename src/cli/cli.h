/* The loopkit command: one file per group of subcommands. */
#ifndef LK_CLI_H
#define LK_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include <loopkit/loopkit.h>

/* Exit statuses, as loopkit(1) documents them. */
enum { EXIT_TRAINED = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

int cli_train(int argc, char **argv);
int cli_plugins(int argc, char **argv);
int cli_inspect(int argc, char **argv);
int cli_dump(int argc, char **argv);
int cli_export(int argc, char **argv);
int cli_gradcheck(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_new(int argc, char **argv);
int cli_plot(int argc, char **argv);
int cli_test(int argc, char **argv);
int cli_validate(int argc, char **argv);
int cli_predict(int argc, char **argv);
int cli_summary(int argc, char **argv);

/* model.c: the arguments of the commands that use a trained model
 * ([CONFIG] --ckpt CKPT [--set S.K=V]... [-o FILE]), and the model they
 * name. */
#define CLI_MAX_SETS 256
#define CLI_MAX_PATH 4096
typedef struct cli_model_args {
  const char *config, *ckpt, *out;
  const char *sets[CLI_MAX_SETS];
  int n_sets;
  bool untrained;                /* set before parsing: no --ckpt (summary) */
  char run_config[CLI_MAX_PATH]; /* CONFIG when none is given */
} cli_model_args;
/* 0, or -1 after cli_error (USAGE ends it); OUT: -o FILE is accepted.
 * Without CONFIG, CONFIG is the config.ini of the run CKPT belongs to
 * (cli_run_config). */
int cli_model_args_parse(const char *cmd, const char *usage, int argc,
                         char **argv, bool out, cli_model_args *a);
/* The config CKPT was trained with, for command CMD given no CONFIG: the
 * config.ini of its run directory, into BUF (LEN bytes). 0, or -1 after
 * cli_error saying why a CONFIG is needed (USAGE ends it). */
int cli_run_config(const char *cmd, const char *usage, const char *ckpt,
                   char *buf, size_t len);
/* The config's run, without a run directory, with the checkpoint's
 * parameters (as create made them when untrained): 0, or non-zero after
 * cli_error (nothing was evaluated: EXIT_USAGE). */
int cli_open_model(const cli_model_args *a, lk_run **run);
/* input.c (predict --input): the model of A's config (its --set applied)
 * with A's checkpoint, as lk_model_open_config opens it, and the data
 * plugin's batch_size: 0, or an exit status after cli_error. */
int cli_open_infer(const cli_model_args *a, lk_model **m, size_t *batch);
/* The samples of file PATH (.npy, else CSV; no labels) for M's input, in
 * its dtype: *DATA (free it), *N samples. 0, or -1 after cli_error. */
int cli_read_samples(const char *path, const lk_model *m, void **data,
                     size_t *n);
/* The exit status of library code RC: EXIT_USAGE for a config or a
 * checkpoint that does not fit or a plugin without the entry needed,
 * EXIT_FAILED otherwise. */
int cli_model_status(int rc);

/* plot.c: draws RUN_DIR/metrics.csv into OUT (.png or .svg). 0 or
 * EXIT_FAILED after cli_error; EXIT_USAGE when built without cairo. */
int cli_plot_curves(const char *run_dir, const char *out);
/* Whether loopkit was built with cairo. */
bool cli_plot_available(void);

/* messages.c: "loopkit: MESSAGE" on stderr. */
void cli_error(const char *fmt, ...) LK_PRINTF(1, 2);

/* progress.c: a progress bar on a terminal. cli_progress is an
 * lk_progress_fn; cli_progress_log an lk_log_fn that clears the bar before
 * it prints, so that log lines and the bar do not mix. */
typedef struct cli_bar {
  bool drawn; /* the bar is on the current line */
  int percent;
  double last_draw;
} cli_bar;
void cli_progress(void *bar, const lk_progress *p);
void cli_progress_log(void *bar, lk_log_level level, const char *msg);
void cli_log_stderr(void *user, lk_log_level level, const char *msg);

#endif
