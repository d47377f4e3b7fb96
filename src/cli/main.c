/* loopkit: train, list and inspect plugins, dump checkpoints. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: loopkit train CONFIG.ini [--set SECTION.KEY=VALUE]... [--out DIR]\n"
    "                                [--resume CKPT] [--quiet]\n"
    "       loopkit plugins          every plugin on the search path\n"
    "       loopkit inspect NAME     one plugin's kinds, version, path, "
    "options\n"
    "       loopkit dump CKPT        every parameter in a checkpoint\n"
    "       loopkit gradcheck CONFIG.ini [--set SECTION.KEY=VALUE]...\n"
    "                                [--batches N] [--samples N]\n"
    "                                backward against central differences\n"
    "       loopkit plot RUN_DIR [-o FILE]\n"
    "                                training curves from metrics.csv into\n"
    "                                FILE (.png or .svg; default\n"
    "                                RUN_DIR/curves.png)\n"
    "       loopkit --version | --help\n"
    "\n"
    "Plugins are searched in LOOPKIT_PLUGIN_PATH (colon separated), then in\n"
    "%s.\n"
    "Exit status: 0 success, 1 the run started and failed, 2 nothing was "
    "trained.\n";

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("loopkit: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, usage, lk_plugin_dir());
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    printf(usage, lk_plugin_dir());
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("loopkit %s (plugin ABI %d.%d)\n", lk_version(), LK_ABI_MAJOR,
           LK_ABI_MINOR);
    return 0;
  }
  if (!strcmp(cmd, "train"))
    return cli_train(argc - 2, argv + 2);
  if (!strcmp(cmd, "plugins"))
    return cli_plugins(argc - 2, argv + 2);
  if (!strcmp(cmd, "inspect"))
    return cli_inspect(argc - 2, argv + 2);
  if (!strcmp(cmd, "dump"))
    return cli_dump(argc - 2, argv + 2);
  if (!strcmp(cmd, "gradcheck"))
    return cli_gradcheck(argc - 2, argv + 2);
  if (!strcmp(cmd, "plot"))
    return cli_plot(argc - 2, argv + 2);
  cli_error("unknown command \"%s\"; commands: train, plugins, inspect, dump, "
            "gradcheck, plot "
            "(see loopkit --help)",
            cmd);
  return EXIT_USAGE;
}
