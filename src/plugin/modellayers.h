/* The layers a model declares (lk_host_add_layer): names, types and output
 * shapes, for loopkit summary and the totals a run prints at start. The
 * tensors themselves are in tensors.h; a layer owns those whose names it
 * prefixes. */
#ifndef LK_MODELLAYERS_H
#define LK_MODELLAYERS_H

#include "internal.h"

typedef struct lk__model_layer {
  char *name; /* the prefix of its tensors' names: "3", "h.0" */
  char *type; /* "conv2d" */
  size_t ndim;
  size_t out[LK_MAX_DIMS]; /* one sample's output */
} lk__model_layer;

typedef struct lk__model_layers {
  lk__model_layer *v;
  size_t n, cap;
} lk__model_layers;

/* Appends a layer; WHO names the plugin in messages. */
int lk__model_layers_add(lk__model_layers *ls, const char *who,
                         const char *name, const char *type, size_t ndim,
                         const size_t *out);
void lk__model_layers_free(lk__model_layers *ls);

#endif
