/* The layers a model declares, kept for its summary (modellayers.h). */
#include <stdlib.h>
#include <string.h>

#include "modellayers.h"

int lk__model_layers_add(lk__model_layers *ls, const char *who,
                         const char *name, const char *type, size_t ndim,
                         const size_t *out) {
  if (!name || !*name || !type || !*type || ndim > LK_MAX_DIMS ||
      (ndim && !out))
    return lk__err(LK_EINVAL,
                   "plugin %s: lk_host_add_layer(\"%s\", \"%s\", %zu): a "
                   "name, a type and at most %d dimensions are needed",
                   who, name ? name : "(null)", type ? type : "(null)", ndim,
                   LK_MAX_DIMS);
  for (size_t i = 0; i < ls->n; i++)
    if (strcmp(ls->v[i].name, name) == 0)
      return lk__err(LK_EINVAL, "plugin %s: layer \"%s\" declared twice", who,
                     name);
  for (size_t d = 0; d < ndim; d++)
    if (out[d] == 0)
      return lk__err(LK_EINVAL,
                     "plugin %s: layer \"%s\": output dimension %zu is 0", who,
                     name, d);
  if (ls->n == ls->cap) {
    size_t cap = ls->cap ? 2 * ls->cap : 16;
    lk__model_layer *v = realloc(ls->v, cap * sizeof *v);
    if (!v)
      return lk__err(LK_ENOMEM, "out of memory");
    ls->v = v;
    ls->cap = cap;
  }
  lk__model_layer *l = &ls->v[ls->n];
  memset(l, 0, sizeof *l);
  l->name = strdup(name);
  l->type = strdup(type);
  if (!l->name || !l->type) {
    free(l->name);
    free(l->type);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  l->ndim = ndim;
  if (ndim)
    memcpy(l->out, out, ndim * sizeof *out);
  ls->n++;
  return 0;
}

void lk__model_layers_free(lk__model_layers *ls) {
  for (size_t i = 0; i < ls->n; i++) {
    free(ls->v[i].name);
    free(ls->v[i].type);
  }
  free(ls->v);
  memset(ls, 0, sizeof *ls);
}
