/* The layer types of layer plugins (layertypes.h): the lookup by name,
 * built-ins first, then the plugins [plugins] layers lists, in its order,
 * and the checks of that list. What a table must say is layercheck.c's. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "layertypes.h"
#include "registry.h"

/* ---- the lookup ---------------------------------------------------------- */

static bool named(const lk_layer_type *t, const char *name, size_t len) {
  return strlen(t->name) == len && !strncasecmp(t->name, name, len);
}

static const lk__listed *layer_plugins(const lk__registry *reg) {
  return reg ? &reg->listed[LK__KIND_LAYERS] : NULL;
}

const lk_layer_type *lk__layers_find(const lk__registry *reg, const char *name,
                                     size_t len) {
  const lk_layer_type *t = lk_layer_find(name, len);
  const lk__listed *l = layer_plugins(reg);
  for (size_t i = 0; name && !t && l && i < l->n; i++)
    for (size_t j = 0; (t = lk_plugin_layer(l->in[i]->plugin, j)); j++)
      if (named(t, name, len))
        return t;
  return t;
}

static void append(char *buf, size_t len, const char *name) {
  size_t used = strlen(buf);
  if (used < len)
    snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
}

const char *lk__layers_names(const lk__registry *reg, char *buf, size_t len) {
  if (!len)
    return buf;
  buf[0] = '\0';
  for (size_t i = 0; i < lk_layer_count(); i++)
    append(buf, len, lk_layer_at(i)->name);
  const lk__listed *l = layer_plugins(reg);
  const lk_layer_type *t;
  for (size_t i = 0; l && i < l->n; i++)
    for (size_t j = 0; (t = lk_plugin_layer(l->in[i]->plugin, j)); j++)
      append(buf, len, t->name);
  return buf;
}

/* Layer T of IN against what comes before it: the built-ins, the plugins
 * listed before IN, and IN's layers before T (I of them). */
static int check_one(const lk__listed *l, size_t at, const lk_layer_type *t,
                     size_t i, const char *where) {
  const lk__instance *in = l->in[at];
  const lk_layer_type *b = lk_layer_find(t->name, strlen(t->name));
  if (b)
    return lk__err(LK_ECONFIG,
                   "%s: layer %s of plugin %s (%s) has the name of the "
                   "built-in layer %s (layer names are matched in any case): "
                   "rename it",
                   where, t->name, in->label, lk_plugin_path(in->plugin),
                   b->name);
  for (size_t k = 0; k <= at; k++) {
    const lk__instance *other = l->in[k];
    const lk_layer_type *o;
    for (size_t j = 0; (o = lk_plugin_layer(other->plugin, j)); j++) {
      if (k == at && j == i)
        break;
      if (named(o, t->name, strlen(t->name)))
        return lk__err(LK_ECONFIG,
                       "%s: layer %s of plugin %s (%s) has the name of layer "
                       "%s of plugin %s (%s) (layer names are matched in any "
                       "case): list one of them only, or rename one",
                       where, t->name, in->label, lk_plugin_path(in->plugin),
                       o->name, other->label, lk_plugin_path(other->plugin));
    }
  }
  return 0;
}

int lk__layers_check(const lk__registry *reg, const char *where) {
  const lk__listed *l = layer_plugins(reg);
  for (size_t i = 0; l && i < l->n; i++) {
    const lk__instance *in = l->in[i];
    const lk_layer_type *t = lk_plugin_layer(in->plugin, 0);
    if (!t)
      return lk__err(LK_ECONFIG,
                     "%s: plugin %s (%s) lists no layers: its layers ops "
                     "table's types is empty",
                     where, in->label, lk_plugin_path(in->plugin));
    for (size_t j = 0; (t = lk_plugin_layer(in->plugin, j)); j++) {
      int rc = check_one(l, i, t, j, where);
      if (rc != 0)
        return rc;
    }
  }
  return 0;
}
