/* loopkit plugins, inspect, dump. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h" /* LK_HAVE_MPI */
#include "loopkit/layer.h"
#include "loopkit/nn.h"

typedef struct listing {
  int broken; /* plugins that cannot be loaded */
  int listed; /* lines of the table */
} listing;

/* A layers plugin's layers on one line, each with its arguments' names:
 * "    layers: swish(beta), other". */
static void list_layers(const lk_plugin *p) {
  const lk_layer_type *t;
  for (size_t i = 0; (t = lk_plugin_layer(p, i)); i++) {
    printf("%s%s", i ? ", " : "    layers: ", t->name);
    for (int k = 0; t->args && k < LK_LAYER_MAX_ARGS && t->args[k].name; k++)
      printf("%s%s", k ? ", " : "(", t->args[k].name);
    printf("%s", t->args && t->args[0].name ? ")" : "");
  }
  if (lk_plugin_layer(p, 0))
    printf("\n");
}

static int list_one(void *user, const char *name, const char *path) {
  listing *l = user;
  int *broken = &l->broken;
  lk_plugin *p;
  l->listed++;
  if (lk_plugin_open(path, &p) != 0) {
    printf("%-16s %-28s %-8s %s\n", name, "(cannot load)", "-", path);
    fflush(stdout); /* the reason right after its line, in one file too */
    fprintf(stderr, "loopkit: %s\n", lk_last_error());
    (*broken)++;
    return 0;
  }
  const lk_descriptor *d = lk_plugin_desc(p);
  char kinds[128];
  printf("%-16s %-28s %-8s %s\n    %s\n", d->name,
         lk_plugin_kinds(p, kinds, sizeof kinds), d->version ? d->version : "?",
         path, d->summary ? d->summary : "");
  list_layers(p);
  lk_plugin_close(p);
  return 0;
}

/* One line of "searched:" below the table: a directory, where it comes
 * from, and why it gave nothing. */
static int show_dir(void *user, const char *dir, const char *source,
                    const char *skipped) {
  (void)user;
  printf("  %s (%s)%s%s\n", dir, source, skipped ? ": " : "",
         skipped ? skipped : "");
  return 0;
}

/* What the search looked at, so that an empty or short table says why. */
static int show_search(const listing *l) {
  if (l->listed == 0)
    printf("no plugins found; ");
  printf("searched, in order:\n");
  if (lk_plugin_search_dirs(show_dir, NULL) != 0)
    return -1;
  if (l->listed == 0)
    printf("set LOOPKIT_PLUGIN_PATH to directories of NAME.so files (in a "
           "build tree:\nbuild/plugins, whose .libs holds what libtool "
           "built)\n");
  return 0;
}

int cli_plugins(int argc, char **argv) {
  (void)argv;
  if (argc != 0) {
    cli_error("plugins takes no arguments");
    return EXIT_USAGE;
  }
  listing l = {0};
  printf("%-16s %-28s %-8s %s\n", "NAME", "KINDS", "VERSION", "PATH");
  if (lk_plugin_scan(list_one, &l) != 0) {
    cli_error("%s", lk_last_error());
    return EXIT_FAILED;
  }
  printf("\n");
  if (show_search(&l) != 0) {
    cli_error("%s", lk_last_error());
    return EXIT_FAILED;
  }
#ifndef LK_HAVE_MPI
  printf("\nmpi: not built: configure found no MPI (Debian: libopenmpi-dev "
         "openmpi-bin), so\nthis loopkit trains in one process only\n");
#endif
  return l.broken ? EXIT_FAILED : 0;
}

/* "real (0, inf)", "int [1, 16777216]", "word relu|gelu": A's type and
 * range, into BUF. */
static const char *layer_arg_type(const lk_layer_arg *a, char *buf,
                                  size_t len) {
  static const char *const names[] = {[LK_LAYER_INT] = "int",
                                      [LK_LAYER_PAIR] = "pair",
                                      [LK_LAYER_BOOL] = "bool",
                                      [LK_LAYER_REAL] = "real",
                                      [LK_LAYER_WORD] = "word"};
  const char *name = names[a->type];
  if (a->type == LK_LAYER_WORD)
    snprintf(buf, len, "%s %s", name, a->choices);
  else if (a->type == LK_LAYER_BOOL)
    snprintf(buf, len, "%s", name);
  else
    snprintf(buf, len, "%s %c%.17g, %.17g%c", name,
             a->flags & LK_LAYER_ARG_MIN_OPEN ? '(' : '[', a->min, a->max,
             a->flags & LK_LAYER_ARG_MAX_OPEN || isinf(a->max) ? ')' : ']');
  return buf;
}

/* A layers plugin's layers, each with its arguments as options are shown:
 * name, type and range, default, help. */
static void show_layers(const lk_plugin *p) {
  const lk_layer_type *t = lk_plugin_layer(p, 0);
  if (!t)
    return;
  printf("layers:\n");
  for (size_t i = 0; (t = lk_plugin_layer(p, i)); i++) {
    printf("  %s%s%s\n", t->name, t->summary ? ": " : "",
           t->summary ? t->summary : "");
    for (int k = 0; t->args && k < LK_LAYER_MAX_ARGS && t->args[k].name; k++) {
      const lk_layer_arg *a = &t->args[k];
      char type[128];
      printf("    %-22s %-16s default %s%s\n", a->name,
             layer_arg_type(a, type, sizeof type),
             a->def                             ? a->def
             : a->flags & LK_LAYER_ARG_REQUIRED ? "(required)"
             : a->flags & LK_LAYER_ARG_INPUT    ? "(inferred)"
                                                : "(none)",
             a->flags & LK_LAYER_ARG_POSITIONAL ? "" : ", by keyword only");
      if (a->help)
        printf("        %s\n", a->help);
    }
  }
}

int cli_inspect(int argc, char **argv) {
  if (argc != 1) {
    cli_error("usage: loopkit inspect NAME");
    return EXIT_USAGE;
  }
  lk_plugin *p;
  if (lk_plugin_open(argv[0], &p) != 0) {
    cli_error("%s", lk_last_error());
    return EXIT_USAGE;
  }
  const lk_descriptor *d = lk_plugin_desc(p);
  char kinds[128];
  printf("name:    %s\nkinds:   %s\nversion: %s\npath:    %s\nsummary: %s\n"
         "abi:     %u.%u\n",
         d->name, lk_plugin_kinds(p, kinds, sizeof kinds),
         d->version ? d->version : "?", lk_plugin_path(p),
         d->summary ? d->summary : "", d->abi_version >> 16,
         d->abi_version & 0xffff);
  if (!d->options || !d->options[0].name) {
    printf("options: none\n");
  } else {
    printf("options:\n");
    for (const lk_option *o = d->options; o->name; o++) {
      char type[96];
      if (o->type == LK_OPT_ENUM)
        snprintf(type, sizeof type, "%s", o->choices);
      else if (o->choices) /* a number's range (ABI 1.4) */
        snprintf(type, sizeof type, "%s %s", lk_option_type_name(o->type),
                 o->choices);
      else
        snprintf(type, sizeof type, "%s", lk_option_type_name(o->type));
      printf("  %-24s %-8s default %s\n", o->name, type,
             o->def ? o->def : "(required)");
      if (o->help)
        printf("      %s\n", o->help);
    }
  }
  show_layers(p);
  /* The host's own keys in the sections of these kinds (loopkit.ini(5),
   * PARAMETER GROUPS AND SEVERAL OPTIMIZERS). */
  if (strstr(kinds, "optimizer"))
    printf("host keys (any optimizer; see loopkit.ini(5)):\n"
           "  %-24s %-8s default %s\n      %s\n"
           "  %-24s %-8s default %s\n      %s\n"
           "  [%s.GROUP] params       string   (required)\n"
           "      a group's parameters, as params; its other keys are any "
           "of the options above, the rest inherited\n",
           "params", "string", "(every parameter no other optimizer takes)",
           "the parameters it steps: shell patterns over their names, or "
           "ndim<N / ndim>=N, comma separated",
           "groups", "string", "(none)",
           "its parameter groups, comma separated: each is a section "
           "[NAME.GROUP]",
           d->name);
  if (strstr(kinds, "scheduler"))
    printf("host keys (any scheduler; see loopkit.ini(5)):\n"
           "  %-24s %-8s default %s\n      %s\n",
           "optimizer", "string", "(the first optimizer)",
           "the name of the optimizer it drives, every group of it");
  if (strstr(kinds, "precision")) {
    /* What a precision plugin that takes the layer kit's products to bf16
     * (bf16-mixed) runs them on here. */
    const char *e = lk_nn_bf16_engine();
    printf("bf16 products on this CPU: %s\n",
           !e ? "none: it has neither AMX-BF16 nor AVX512_BF16, and the "
                "layer kit does not emulate them (bf16-mixed refuses to "
                "start)"
           : !strcmp(e, "amx_bf16")
               ? "amx_bf16 (the layer kit's kernels on the AMX tiles)"
               : "avx512_bf16 (the layer kit's AVX512-BF16 kernels)");
  }
  lk_plugin_close(p);
  return 0;
}

int cli_dump(int argc, char **argv) {
  if (argc != 1) {
    cli_error("usage: loopkit dump CKPT");
    return EXIT_USAGE;
  }
  if (lk_checkpoint_dump(argv[0], stdout) != 0) {
    cli_error("%s", lk_last_error());
    return EXIT_USAGE;
  }
  return 0;
}
