/* The command table: what loopkit --help and loopkit(1) are made from. */
#ifndef LK_CLI_COMMANDS_H
#define LK_CLI_COMMANDS_H

#include <stdio.h>

typedef struct cli_option {
  const char *flag; /* "--out" */
  const char *arg;  /* "DIR", or NULL for a switch */
  const char *help;
} cli_option;

typedef struct cli_command {
  const char *name;    /* "train" */
  const char *args;    /* "CONFIG.ini" */
  const char *summary; /* a few words, for --help */
  const char *help;    /* sentences, for the manual */
  const cli_option *options; /* ends with flag == NULL */
} cli_command;

extern const cli_command cli_commands[]; /* ends with name == NULL */

void cli_print_usage(FILE *f, const char *plugin_dir);
const cli_command *cli_command_named(const char *name);

#endif
