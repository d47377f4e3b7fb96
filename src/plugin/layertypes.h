/* The layer types of layer plugins (plugin.h's kind `layers`): what a
 * table must hold beyond the pointers the loader checks, and the lookup a
 * model makes by name among the built-ins and the plugins [plugins] layers
 * lists, with the checks of that list (a name twice is an error). */
#ifndef LK_LAYERTYPES_H
#define LK_LAYERTYPES_H

#include "internal.h"
#include "loopkit/layer.h"

typedef struct lk__registry lk__registry;

/* The smallest size a table may say: every field up to backward. */
#define LK__LAYER_TYPE_MIN_SIZE                                                \
  (offsetof(lk_layer_type, backward) + sizeof(void (*)(void)))

/* Whether T, a plugin's table whose pointers are checked (loader.c), is
 * one the host can use: its name an identifier, forward (and backward
 * unless the layer is a view), the inputs, the flags and the argument
 * table (names, types, flags, ranges, choices, defaults). 0, or LK_ELOAD
 * with a message naming the field; the caller names plugin and layer. */
int lk__layer_type_check(const lk_layer_type *t);

/* The type NAME [LEN] names, any case: a built-in, else one of the layer
 * plugins REG lists (the host's copies). NULL when none; REG may be NULL. */
const lk_layer_type *lk__layers_find(const lk__registry *reg, const char *name,
                                     size_t len);

/* Every name REG's lookup knows, "conv2d, ..., silu", into BUF [LEN]. */
const char *lk__layers_names(const lk__registry *reg, char *buf, size_t len);

/* The layer plugins REG lists, against each other and the built-ins: a
 * plugin of no layers, or a name (any case) a built-in or another plugin
 * also has, is a config error naming both; WHERE is [plugins] layers'
 * line. */
int lk__layers_check(const lk__registry *reg, const char *where);

#endif
