/* loopkit new: the kinds of project it starts (new_templates.c) and the
 * template files it writes them from (templates/, embedded at build time
 * as new_files.c by scripts/embed-templates.sh). */
#ifndef LK_CLI_NEW_TEMPLATES_H
#define LK_CLI_NEW_TEMPLATES_H

/* One file of templates/: NAME is its name there ("model.c"), LINES its
 * lines without their newlines, NULL-terminated; a .c file has the shared
 * preamble in place of its `#include "preamble.h"`. In the text, @NAME@
 * stands for the new plugin's name, @KIND@ for the --kind given and
 * @SUMMARY@ for the kind's summary. */
typedef struct cli_new_template {
  const char *name;
  const char *const *lines;
} cli_new_template;

/* Every embedded template; ends with name == NULL. */
extern const cli_new_template cli_new_templates[];

/* The template called NAME, or NULL. */
const cli_new_template *cli_new_template_find(const char *name);

/* What --kind KIND writes, from templates KIND.c and KIND.ini, the shared
 * project.mk (the Makefile) and project.md (README.md), and DATA when the
 * config reads a data file. */
typedef struct cli_new_kind {
  const char *kind;    /* a kind of plugin (src/plugin/kinds.h), or "model" */
  const char *summary; /* one line, for the usage text and README.md */
  const char *data;    /* the data file KIND.ini reads, or NULL */
} cli_new_kind;

/* Every kind, in the order the usage text lists them; ends with kind ==
 * NULL. tests/test_new.c holds it against the kinds of plugin. */
extern const cli_new_kind cli_new_kinds[];

#endif
