/* The loopkit command: one file per group of subcommands. */
#ifndef LK_CLI_H
#define LK_CLI_H

#include <loopkit/loopkit.h>

/* Exit statuses of DESIGN.md section 1. */
enum { EXIT_TRAINED = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

int cli_train(int argc, char **argv);
int cli_plugins(int argc, char **argv);
int cli_inspect(int argc, char **argv);
int cli_dump(int argc, char **argv);
int cli_gradcheck(int argc, char **argv);

void cli_error(const char *fmt, ...) LK_PRINTF(1, 2);

#endif
