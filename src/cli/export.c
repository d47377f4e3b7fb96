/* loopkit export CKPT -o FILE.safetensors: a checkpoint's parameters for
 * torch and the Hugging Face tools. FILE is written as every output is
 * (lk_output_open): - is the standard output. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] = "usage: loopkit export CKPT -o FILE.safetensors";

/* The step plugin of the run CKPT belongs to, from RUN_DIR/config.ini when
 * CKPT is RUN_DIR/checkpoints/NAME; NULL when there is none to read. The
 * string is malloc'd. */
static char *step_plugin(const char *ckpt) {
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
  lk_config *cfg;
  char *name = NULL;
  if (lk_config_load(config, &cfg) == 0) {
    const lk_config_entry *e = lk_config_find(cfg, "plugins", "step");
    if (e && e->value)
      name = strdup(e->value);
    lk_config_free(cfg);
  }
  free(config);
  return name;
}

int cli_export(int argc, char **argv) {
  const char *ckpt = NULL, *out = NULL;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      puts(usage);
      return 0;
    }
    if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
      if (i + 1 == argc || out) {
        cli_error("export: %s", out ? "-o given twice" : "-o needs a FILE");
        return EXIT_USAGE;
      }
      out = argv[++i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      cli_error("export: unknown option %s; %s", argv[i], usage);
      return EXIT_USAGE;
    } else if (ckpt) {
      cli_error("export: one checkpoint at a time; %s", usage);
      return EXIT_USAGE;
    } else
      ckpt = argv[i];
  }
  if (!ckpt || !out || !*out) {
    cli_error("%s", usage);
    return EXIT_USAGE;
  }
  char *plugin = step_plugin(ckpt);
  int rc = lk_checkpoint_export(ckpt, out, plugin);
  free(plugin);
  if (rc != 0) {
    cli_error("export: %s", lk_last_error());
    return EXIT_USAGE;
  }
  if (strcmp(out, "-") != 0) /* - is the file itself */
    printf("wrote %s\n", out);
  return 0;
}
