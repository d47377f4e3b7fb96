/* loopkit new: the kinds of project it starts. Their files are real files
 * in templates/ (built by the tests as they are), embedded into the
 * command at build time (new_files.c). */
#include <stddef.h>
#include <string.h>

#include "new_templates.h"

/* One row per kind of plugin (src/plugin/kinds.h; tests/test_new.c fails when a
 * kind has no row, or a row no templates), and model, a step and its
 * backward in one plugin. */
const cli_new_kind cli_new_kinds[] = {
    {"model", "linear regression, its step and its backward in one plugin",
     "features.csv"},
    {"step", "the squared error of a parabola, a step alone (numeric backward)",
     "data.csv"},
    {"backward",
     "the gradient of the Rosenbrock function, for rosenbrock's step", NULL},
    {"zero_grad", "sets every gradient to zero", NULL},
    {"optimizer", "SGD with momentum, its learning rate open to schedulers",
     NULL},
    {"scheduler", "exponential decay of the learning rate", NULL},
    {"profiler", "counts and times every action, a table in the run directory",
     NULL},
    {"data", "a seeded synthetic data set that declares its sample shape",
     NULL},
    {"strategy", "one process, with every entry of a data-parallel strategy",
     NULL},
    {"callback", "every hook: logs progress and a grad_norm column",
     "data.csv"},
    {"precision", "dynamic loss scaling, float16 overflow emulated", NULL},
    {"logger", "every metrics.csv row as a line of JSON, resumed in place",
     "data.csv"},
    {"layers",
     "Swish, a layer for sequential, with an argument (or --kind layer)",
     "features.csv"},
    {NULL, NULL, NULL}};

const cli_new_template *cli_new_template_find(const char *name) {
  for (const cli_new_template *t = cli_new_templates; t->name; t++)
    if (strcmp(t->name, name) == 0)
      return t;
  return NULL;
}
