/* loopkit: train, list and inspect plugins, dump checkpoints. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

/* What every command printed on the standard output reached it, or
 * STATUS becomes a failure that says so: `loopkit plugins >/dev/full`
 * exits 1, not 0. One check at the end, whatever the command, since
 * stdio keeps a write error (ferror) until then; a command that failed
 * already keeps its own status and message. */
static int stdout_status(int status) {
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout))
    return status;
  if (status == 0) {
    if (errno)
      cli_error("cannot write to the standard output: %s", strerror(errno));
    else
      cli_error("cannot write to the standard output");
  }
  return status ? status : EXIT_FAILED;
}

static int run(int argc, char **argv) {
  if (argc < 2) {
    cli_print_usage(stderr, lk_plugin_dir());
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    cli_print_usage(stdout, lk_plugin_dir());
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("loopkit %s (plugin ABI %d.%d)\n", lk_version(), LK_ABI_MAJOR,
           LK_ABI_MINOR);
    return 0;
  }
  static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
  } handlers[] = {{"train", cli_train},       {"plugins", cli_plugins},
                  {"inspect", cli_inspect},   {"dump", cli_dump},
                  {"export", cli_export},     {"gradcheck", cli_gradcheck},
                  {"generate", cli_generate}, {"plot", cli_plot},
                  {"new", cli_new},           {"test", cli_test},
                  {"validate", cli_validate}, {"predict", cli_predict},
                  {"summary", cli_summary}};
  for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
    if (!strcmp(cmd, handlers[i].name))
      return handlers[i].run(argc - 2, argv + 2);
  char names[256] = "";
  for (const cli_command *c = cli_commands; c->name; c++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
             c == cli_commands ? "" : ", ", c->name);
  cli_error("unknown command \"%s\"; commands: %s (see loopkit --help)", cmd,
            names);
  return EXIT_USAGE;
}

int main(int argc, char **argv) {
  return stdout_status(run(argc, argv));
}
