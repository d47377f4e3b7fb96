/* loopkit new: the kinds of plugin it starts and the files it writes for
 * each (new_templates.c). */
#ifndef LK_CLI_NEW_TEMPLATES_H
#define LK_CLI_NEW_TEMPLATES_H

#include <stdio.h>

/* One file. In its name and its lines "@NAME@" stands for the new
 * plugin's name. Its text is LINES, each followed by a newline, or what
 * WRITE puts out. */
typedef struct cli_new_file {
  const char *name;
  const char *const *lines; /* NULL-terminated */
  void (*write)(FILE *f);
} cli_new_file;

typedef struct cli_new_kind {
  const char *kind;    /* as --kind names it */
  const char *summary; /* one line, for the usage text */
  /* The other plugins the written config loads: the new plugin may not
   * take one of their names, or its [NAME] section would be theirs too. */
  const char *const *uses;   /* NULL-terminated */
  const cli_new_file *files; /* ends with name == NULL */
} cli_new_kind;

/* Every kind, in the order the usage text lists them; ends with kind ==
 * NULL. */
extern const cli_new_kind cli_new_kinds[];

#endif
