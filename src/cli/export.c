/* loopkit export CKPT -o FILE.safetensors: a checkpoint's parameters and
 * its model's buffers (batch norm's running statistics) for torch and the
 * Hugging Face tools, torch's state_dict() of the same network. Which
 * states are buffers only the model knows: the config.ini of the run the
 * checkpoint is in (lk_checkpoint_run_config, as the other commands that
 * use a trained model find it), or CONFIG --ckpt CKPT, is built into a
 * run, as predict builds it; a lone checkpoint exports its parameters
 * only. FILE.onnx (by its extension) is the model's forward as an ONNX
 * model instead (lk_run_export_onnx), which needs the model. FILE is
 * written as every output is (lk_output_open): - is the standard output. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "usage: loopkit export CKPT -o FILE.safetensors|FILE.onnx, or loopkit "
    "export [CONFIG] --ckpt CKPT -o FILE.safetensors|FILE.onnx";

/* Whether OUT names an ONNX model: FILE.onnx, any case. */
static bool onnx_path(const char *out) {
  size_t n = strlen(out);
  return n > 5 && !strcasecmp(out + n - 5, ".onnx");
}

/* The config.ini of the run CKPT is in (lk_checkpoint_run_config) into
 * BUF, or "" when it is in none: its parameters alone are exported. 0, or
 * -1 after cli_error. */
static int run_config(const char *ckpt, char *buf, size_t len) {
  int rc = lk_checkpoint_run_config(ckpt, buf, len);
  if (rc == 0 || (rc == LK_ENOTFOUND && access(ckpt, F_OK) == 0)) {
    if (rc != 0)
      buf[0] = '\0';
    return 0;
  }
  cli_error("export: %s", lk_last_error());
  return -1;
}

/* CKPT into OUT: with CONFIG, through its model (the parameters and the
 * model's buffers, lk_run_export; FILE.onnx: its forward,
 * lk_run_export_onnx); without, the parameters only. */
static int export_with(const char *config, const char *ckpt, const char *out) {
  if (!config && onnx_path(out)) {
    cli_error("export: %s: an ONNX model needs the model's config: CKPT in "
              "a run directory (RUN/checkpoints/, beside RUN/config.ini), "
              "or CONFIG --ckpt CKPT",
              ckpt);
    return -2;
  }
  if (!config)
    return lk_checkpoint_export(ckpt, out, NULL) == 0 ? 0 : -1;
  lk_config *cfg = NULL;
  lk_run *run = NULL;
  int rc = lk_config_load(config, &cfg);
  lk_run_options ro = {
      .no_run_dir = true, .log = cli_log_stderr, .verbosity = LK_LOG_WARN};
  if (rc == 0)
    rc = lk_run_new(cfg, &ro, &run);
  lk_config_free(cfg);
  if (rc == 0)
    rc = onnx_path(out) ? lk_run_export_onnx(run, ckpt, out)
                        : lk_run_export(run, ckpt, out);
  lk_run_free(run);
  return rc == 0 ? 0 : -1;
}

int cli_export(int argc, char **argv) {
  const char *arg = NULL, *ckpt = NULL, *out = NULL;
  for (int i = 0; i < argc; i++) {
    const char **valued = !strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")
                              ? &out
                          : !strcmp(argv[i], "--ckpt") ? &ckpt
                                                       : NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      puts(usage);
      return 0;
    }
    if (valued) {
      if (i + 1 == argc || *valued) {
        cli_error("export: %s %s", argv[i],
                  *valued ? "given twice" : "needs a value");
        return EXIT_USAGE;
      }
      *valued = argv[++i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      cli_error("export: unknown option %s; %s", argv[i], usage);
      return EXIT_USAGE;
    } else if (arg) {
      cli_error("export: one checkpoint at a time; %s", usage);
      return EXIT_USAGE;
    } else
      arg = argv[i];
  }
  if ((!arg && !ckpt) || !out || !*out) {
    cli_error("%s", usage);
    return EXIT_USAGE;
  }
  /* CONFIG --ckpt CKPT; or CKPT, or --ckpt CKPT, with its run's
   * config.ini if it is in a run directory. */
  char found[CLI_MAX_PATH];
  const char *config = ckpt && arg ? arg : found;
  if (!ckpt)
    ckpt = arg;
  if (config == found && run_config(ckpt, found, sizeof found) != 0)
    return EXIT_USAGE;
  int rc = export_with(*config ? config : NULL, ckpt, out);
  if (rc != 0) {
    if (rc == -1) /* -2: said */
      cli_error("export: %s", lk_last_error());
    return EXIT_USAGE;
  }
  if (strcmp(out, "-") != 0) /* - is the file itself */
    printf("wrote %s\n", out);
  return 0;
}
