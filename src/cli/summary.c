/* loopkit summary CONFIG: the model's layers with their output shapes and
 * parameter counts, then the totals, as Lightning's ModelSummary prints
 * them (lk_run_model_summary). Nothing is trained or written. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: loopkit summary CONFIG.ini [--set SECTION.KEY=VALUE]...";

/* "[32, 14, 14]", or "-" when the model did not say. */
static const char *shape_text(const lk_model_summary_row *r, char *buf,
                              size_t len) {
  if (!r->ndim)
    return "-";
  size_t used = 0;
  for (size_t d = 0; d < r->ndim && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, "%s%zu", d ? ", " : "[",
                             r->out[d]);
  if (used < len)
    snprintf(buf + used, len - used, "]");
  return buf;
}

static void print(const lk_model_summary *s) {
  int name_w = 4, type_w = 4;
  for (size_t i = 0; i < s->n_rows; i++) {
    int n = (int)strlen(s->rows[i].name), t = (int)strlen(s->rows[i].type);
    name_w = n > name_w ? n : name_w;
    type_w = t > type_w ? t : type_w;
  }
  printf("%4s  %-*s  %-*s  %-18s %12s %10s\n", "#", name_w, "name", type_w,
         "type", "output", "params", "buffers");
  for (size_t i = 0; i < s->n_rows; i++) {
    const lk_model_summary_row *r = &s->rows[i];
    char shape[96];
    printf("%4zu  %-*s  %-*s  %-18s %12zu %10zu\n", i, name_w, r->name, type_w,
           r->type, shape_text(r, shape, sizeof shape), r->params, r->buffers);
  }
  char totals[256];
  printf("\n%s\n", lk_model_summary_totals(s, totals, sizeof totals));
  if (s->declared == 0 && s->n_rows)
    printf("(the model declares no layers: rows by its tensors' names, no "
           "output shapes)\n");
}

int cli_summary(int argc, char **argv) {
  if (argc == 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
    puts(usage);
    return 0;
  }
  cli_model_args a = {.untrained = true};
  if (cli_model_args_parse("summary", usage, argc, argv, false, &a) != 0)
    return EXIT_USAGE;
  lk_run *run = NULL;
  if (cli_open_model(&a, &run) != 0)
    return EXIT_USAGE;
  lk_model_summary s;
  int rc = lk_run_model_summary(run, &s);
  if (rc == 0)
    print(&s);
  else
    cli_error("summary: %s", lk_last_error());
  lk_model_summary_free(&s);
  lk_run_free(run);
  return rc == 0 ? 0 : EXIT_FAILED;
}
