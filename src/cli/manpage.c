/* lk-manpage: writes loopkit(1) and loopkit.ini(5) from their templates
 * and from the declarations the program itself uses: the command table
 * (src/cli/commands.c), the [loop] and [plugins] keys (lk_run_loop_keys,
 * lk_run_plugin_keys) and each bundled plugin's option table, read through
 * the loader as loopkit inspect reads it. The manual cannot disagree with
 * the program, and tests/cli/man.sh checks that it does not.
 *
 *   lk-manpage cli TEMPLATE                 > loopkit.1
 *   lk-manpage ini TEMPLATE PLUGIN.so...    > loopkit.ini.5
 *
 * A template line ".\" @NAME@" is replaced by the generated text; @VERSION@
 * anywhere becomes loopkit's version; the lines from ".\" @TEMPLATE@" to
 * ".\" @END@" are left out: they tell a reader of the template itself (man
 * -l man/loopkit.1.in) that it lacks the generated parts and where the
 * built page is. Built at build time only: not installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#include "commands.h"

/* Text for roff: backslashes doubled as \e, '-' as \- (so flags and
 * numbers copy and paste), and a leading '.' or '\'' guarded. */
static void roff(FILE *f, const char *s) {
  if (*s == '.' || *s == '\'')
    fputs("\\&", f);
  for (; *s; s++) {
    if (*s == '\\')
      fputs("\\e", f);
    else if (*s == '-')
      fputs("\\-", f);
    else
      fputc(*s, f);
  }
}

/* One option or key: ".TP", then "\fBname\fR (type, default D)", then
 * its help. */
static void option_entry(FILE *f, const lk_option *o) {
  fputs(".TP\n\\fB", f);
  roff(f, o->name);
  fputs("\\fR (", f);
  roff(f, o->type == LK_OPT_ENUM ? o->choices : lk_option_type_name(o->type));
  if (o->type != LK_OPT_ENUM && o->choices) { /* a number's range */
    fputs(" in ", f);
    roff(f, o->choices);
  }
  if (o->def) {
    fputs(", default ", f);
    roff(f, *o->def ? o->def : "\"\"");
  } else {
    fputs(", no default", f);
  }
  fputs(")\n", f);
  if (o->help && *o->help) {
    roff(f, o->help);
    fputc('\n', f);
  }
}

static void command_sections(FILE *f) {
  for (const cli_command *c = cli_commands; c->name; c++) {
    fputs(".SS \"loopkit ", f);
    roff(f, c->name);
    if (*c->args) {
      fputc(' ', f);
      roff(f, c->args);
    }
    fputs("\"\n", f);
    roff(f, c->help);
    fputc('\n', f);
    for (const cli_option *o = c->options; o->flag; o++) {
      fputs(".TP\n\\fB", f);
      roff(f, o->flag);
      fputs("\\fR", f);
      if (o->arg) {
        fputs(" \\fI", f);
        roff(f, o->arg);
        fputs("\\fR", f);
      }
      fputc('\n', f);
      roff(f, o->help);
      fputc('\n', f);
    }
  }
}

static void key_list(FILE *f, const lk_option *keys) {
  for (const lk_option *o = keys; o->name; o++)
    option_entry(f, o);
}

/* A section per plugin: [NAME], its kinds and summary, its options. */
static int plugin_sections(FILE *f, char **paths, int n) {
  for (int i = 0; i < n; i++) {
    lk_plugin *p;
    if (lk_plugin_open(paths[i], &p) != 0) {
      fprintf(stderr, "lk-manpage: %s\n", lk_last_error());
      return 1;
    }
    const lk_descriptor *d = lk_plugin_desc(p);
    char kinds[128];
    fputs(".SS [", f);
    roff(f, d->name);
    fputs("]\n.RI \"", f);
    roff(f, lk_plugin_kinds(p, kinds, sizeof kinds));
    fputs(": \" \"", f);
    roff(f, d->summary ? d->summary : "");
    fputs("\"\n", f);
    if (!d->options || !d->options[0].name)
      fputs(".br\nNo options.\n", f);
    for (const lk_option *o = d->options; o && o->name; o++)
      option_entry(f, o);
    lk_plugin_close(p);
  }
  return 0;
}

/* Copies TEMPLATE to stdout, expanding @VERSION@ and the marker lines. */
static int expand(const char *template, char **plugins, int n_plugins) {
  FILE *in = fopen(template, "r");
  if (!in) {
    perror(template);
    return 1;
  }
  char line[4096];
  int rc = 0;
  bool note = false;
  while (rc == 0 && fgets(line, sizeof line, in)) {
    if (!strncmp(line, ".\\\" @TEMPLATE@", 14) || note) {
      note = strncmp(line, ".\\\" @END@", 9) != 0;
      continue;
    }
    if (!strncmp(line, ".\\\" @COMMANDS@", 14))
      command_sections(stdout);
    else if (!strncmp(line, ".\\\" @LOOP@", 10))
      key_list(stdout, lk_run_loop_keys());
    else if (!strncmp(line, ".\\\" @PLUGINS@", 13))
      key_list(stdout, lk_run_plugin_keys());
    else if (!strncmp(line, ".\\\" @SECTIONS@", 14))
      rc = plugin_sections(stdout, plugins, n_plugins);
    else {
      char *v = strstr(line, "@VERSION@");
      if (v) {
        *v = '\0';
        printf("%s%s%s", line, lk_version(), v + 9);
      } else {
        fputs(line, stdout);
      }
    }
  }
  if (ferror(in))
    rc = 1;
  fclose(in);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    perror("lk-manpage: stdout");
    rc = 1;
  }
  return rc;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "cli") && argc == 3)
    return expand(argv[2], NULL, 0);
  if (argc >= 3 && !strcmp(argv[1], "ini"))
    return expand(argv[2], argv + 3, argc - 3);
  fprintf(stderr, "usage: lk-manpage cli TEMPLATE\n"
                  "       lk-manpage ini TEMPLATE PLUGIN.so...\n");
  return 2;
}
