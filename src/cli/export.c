/* loopkit export CKPT -o FILE.safetensors: a checkpoint's parameters and
 * its model's buffers (batch norm's running statistics) for torch and the
 * Hugging Face tools, torch's state_dict() of the same network. Which
 * states are buffers only the model knows: the run's config.ini (or
 * CONFIG --ckpt CKPT) is built into a run, as predict builds it; a lone
 * checkpoint exports its parameters only. FILE.onnx (by its extension)
 * is the model's forward as an ONNX model instead (lk_run_export_onnx),
 * which needs the model. FILE is written as every output is
 * (lk_output_open): - is the standard output. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "usage: loopkit export CKPT -o FILE.safetensors|FILE.onnx, or loopkit "
    "export CONFIG --ckpt CKPT -o FILE.safetensors|FILE.onnx";

/* Whether OUT names an ONNX model: FILE.onnx, any case. */
static bool onnx_path(const char *out) {
  size_t n = strlen(out);
  return n > 5 && !strcasecmp(out + n - 5, ".onnx");
}

/* RUN_DIR/config.ini when CKPT is RUN_DIR/checkpoints/NAME and that file
 * exists; NULL otherwise. The string is malloc'd. */
static char *run_config(const char *ckpt) {
  const char *slash = strrchr(ckpt, '/');
  size_t dir_len = slash ? (size_t)(slash - ckpt) : 0;
  static const char sub[] = "checkpoints";
  size_t sub_len = sizeof sub - 1;
  /* DIR/checkpoints/NAME, or checkpoints/NAME from within the run. */
  if (!slash || dir_len < sub_len ||
      memcmp(ckpt + dir_len - sub_len, sub, sub_len) != 0 ||
      (dir_len > sub_len && ckpt[dir_len - sub_len - 1] != '/'))
    return NULL;
  size_t run_len = dir_len - sub_len; /* "DIR/" or "" */
  char *config = malloc(run_len + sizeof "config.ini");
  if (!config)
    return NULL;
  memcpy(config, ckpt, run_len);
  strcpy(config + run_len, "config.ini");
  if (access(config, R_OK) != 0) {
    free(config);
    return NULL;
  }
  return config;
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
  if (!arg || !out || !*out) {
    cli_error("%s", usage);
    return EXIT_USAGE;
  }
  /* CONFIG --ckpt CKPT, or CKPT (and its run's config.ini, if any). */
  char *config = ckpt ? strdup(arg) : run_config(arg);
  int rc = export_with(config, ckpt ? ckpt : arg, out);
  if (rc != 0) {
    free(config);
    if (rc == -1) /* -2: said */
      cli_error("export: %s", lk_last_error());
    return EXIT_USAGE;
  }
  free(config);
  if (strcmp(out, "-") != 0) /* - is the file itself */
    printf("wrote %s\n", out);
  return 0;
}
