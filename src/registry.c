/* The plugin instances of a run and the roles they play (see registry.h). */
#include <stdlib.h>
#include <string.h>

#include "env.h"

int lk__registry_find(lk__env *env, const char *name, const char *where,
                      lk__instance **out) {
  lk__registry *reg = &env->reg;
  for (size_t i = 0; i < reg->n; i++)
    if (strcmp(reg->all[i]->name, name) == 0 ||
        (reg->all[i]->given && strcmp(reg->all[i]->given, name) == 0)) {
      *out = reg->all[i];
      return 0;
    }
  lk__instance *in = calloc(1, sizeof *in);
  lk__instance **grown = realloc(reg->all, (reg->n + 1) * sizeof *grown);
  if (grown)
    reg->all = grown;
  if (!in || !grown || !(in->name = lk__strdup(name))) {
    free(in);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  int rc = lk_plugin_open(name, &in->plugin);
  if (rc != 0) {
    free(in->name);
    free(in);
    return lk__err_prefix(rc, "%s", where);
  }
  in->desc = lk_plugin_desc(in->plugin);
  in->minor = lk__plugin_minor(in->plugin);
  if (strchr(name, '/')) { /* a path: its section is the plugin's name */
    in->given = in->name;
    if (!(in->name = lk__strdup(in->desc->name))) {
      lk_plugin_close(in->plugin);
      free(in->given);
      free(in);
      return lk__err(LK_ENOMEM, "out of memory");
    }
  }
  in->host.env = env;
  in->host.inst = in;
  reg->all[reg->n++] = in;
  *out = in;
  return 0;
}

int lk__registry_assign(lk__env *env, lk__kind_id k, const char *name,
                        const char *where, lk__instance **out) {
  lk__instance *in = NULL;
  int rc = lk__registry_find(env, name, where, &in);
  if (rc != 0)
    return rc;
  if (!lk__kind_has(in->desc, in->minor, &lk__kinds[k])) {
    char kinds[128];
    return lk__err(
        LK_EKIND, "%s: plugin %s (%s) cannot be the %s: it implements %s",
        where, name, lk_plugin_path(in->plugin), lk__kinds[k].name,
        *lk_plugin_kinds(in->plugin, kinds, sizeof kinds) ? kinds : "no kind");
  }
  *out = in;
  return 0;
}

int lk__registry_create(lk__env *env, lk__instance *in) {
  lk__registry *reg = &env->reg;
  if (in->created)
    return 0;
  int rc = in->opts
               ? 0
               : lk__options_parse(in->desc, in->name, env->src_cfg, &in->opts);
  if (rc != 0)
    return rc;
  /* Room first, so that a created instance is always destroyed. The slot
   * is counted as reserved while create runs: instances created inside it
   * (sam's base) come first in the table and are destroyed after it. */
  lk__instance **grown = realloc(
      reg->created, (reg->n_created + reg->n_reserved + 1) * sizeof *grown);
  if (!grown)
    return lk__err(LK_ENOMEM, "out of memory");
  reg->created = grown;
  if (in->desc->create) {
    uint64_t mark = lk__err_mark();
    reg->n_reserved++;
    rc = in->desc->create(&in->host, in->opts, &in->self);
    reg->n_reserved--;
    if (rc != 0)
      return lk__entry_failed(rc, mark, "plugin %s (%s) failed to start",
                              in->name, lk_plugin_path(in->plugin));
  }
  in->created = true;
  reg->created[reg->n_created++] = in;
  return 0;
}

int lk__registry_create_all(lk__env *env) {
  lk__registry *reg = &env->reg;
  /* The table's creation ranks, 0 first; the callbacks (rank last) in
   * their listed order. */
  for (int rank = 0; rank < LK__N_KINDS; rank++)
    for (size_t k = 0; k < LK__N_KINDS; k++) {
      if (lk__kinds[k].created != rank)
        continue;
      int rc = 0;
      if (lk__kinds[k].many)
        for (size_t i = 0; i < reg->n_callbacks && rc == 0; i++)
          rc = lk__registry_create(env, reg->callbacks[i]);
      else if (reg->role[k])
        rc = lk__registry_create(env, reg->role[k]);
      if (rc != 0)
        return rc;
    }
  return 0;
}

void lk__registry_free(lk__registry *reg) {
  /* Destroy in reverse creation order, then unload. */
  for (size_t i = reg->n_created; i-- > 0;) {
    lk__instance *in = reg->created[i];
    if (in->desc->destroy)
      in->desc->destroy(in->self);
    in->created = false;
  }
  free(reg->created);
  for (size_t i = 0; i < reg->n; i++) {
    lk__instance *in = reg->all[i];
    lk__options_free(in->opts);
    lk_plugin_close(in->plugin);
    free(in->name);
    free(in->given);
    free(in);
  }
  free(reg->all);
  memset(reg, 0, sizeof *reg);
}

void (*lk__entry_of(const lk__instance *in, lk__kind_id k, size_t i))(void) {
  return lk__kind_entry(in->desc, in->minor, &lk__kinds[k], i);
}

const lk_optimizer_ops *lk__lr_ops(const lk__instance *in) {
  const lk_optimizer_ops *ops = in->desc->optimizer;
  if (!ops || in->minor < 1 || !ops->get_lr || !ops->set_lr)
    return NULL;
  return ops;
}
