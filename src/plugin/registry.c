/* The plugin instances of a run and the roles they play (see registry.h). */
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "loader.h"

/* An instance name: what a plugin name may be ([A-Za-z0-9_-]+), and not a
 * section of the host's own. */
static bool valid_instance_name(const char *s) {
  if (!*s || !strcmp(s, "loop") || !strcmp(s, "plugins"))
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
      return false;
  return true;
}

static char *trimmed(const char *s, size_t len) {
  while (len && (*s == ' ' || *s == '\t'))
    s++, len--;
  while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
    len--;
  char *out = malloc(len + 1);
  if (out) {
    memcpy(out, s, len);
    out[len] = '\0';
  }
  return out;
}

/* SPEC as NAME (NULL when it gives none) and PLUGIN. A colon after a slash
 * is a path's. */
static int split_spec(const char *spec, const char *where, char **name,
                      char **plugin) {
  const char *whole = spec;
  const char *colon = strchr(spec, ':');
  const char *slash = strchr(spec, '/');
  *name = NULL;
  if (colon && (!slash || colon < slash)) {
    *name = trimmed(spec, (size_t)(colon - spec));
    spec = colon + 1;
  }
  *plugin = trimmed(spec, strlen(spec));
  if (!*plugin || (colon && !*name)) {
    free(*name);
    free(*plugin);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  if (*name && !valid_instance_name(*name)) {
    int rc = lk__err(LK_ECONFIG,
                     "%s: instance name \"%s\" in \"%s\": a name is letters, "
                     "digits, _ and - (and not loop or plugins), as in "
                     "best_loss:checkpoint",
                     where, *name, whole);
    free(*name);
    free(*plugin);
    return rc;
  }
  return 0;
}

/* Whether IN is an instance of PLUGIN (a name, or the path it came from). */
static bool is_of(const lk__instance *in, const char *plugin) {
  return !strcmp(in->given, plugin) || !strcmp(in->desc->name, plugin);
}

static void instance_free(lk__instance *in) {
  if (!in)
    return;
  lk__options_free(in->opts);
  if (in->plugin)
    lk_plugin_close(in->plugin);
  free(in->name);
  free(in->given);
  free(in->spec);
  free(in->label);
  free(in->where);
  free(in->own_params);
  free(in->keeps.dir);
  free(in);
}

/* The name SPEC's instance has (after load for a path), its spec and
 * label. */
static int name_instance(lk__instance *in, char *name) {
  in->named = name && strcmp(name, in->desc->name) != 0;
  in->name =
      name ? name
           : lk__strdup(strchr(in->given, '/') ? in->desc->name : in->given);
  if (!in->name)
    return LK_ENOMEM;
  in->spec = in->named ? lk__asprintf("%s:%s", in->name, in->given)
                       : lk__strdup(in->given);
  in->label = in->named ? lk__asprintf("%s:%s", in->name, in->desc->name)
                        : lk__strdup(in->name);
  return in->spec && in->label ? 0 : LK_ENOMEM;
}

static int twice(const lk__instance *in, const char *name, const char *plugin,
                 const char *where) {
  return lk__err(LK_ECONFIG,
                 "%s: name %s is used twice: for plugin %s here and for "
                 "plugin %s (%s); give each instance its own name: "
                 "NAME:PLUGIN",
                 where, name, plugin, in->desc->name, in->where);
}

int lk__registry_find(lk__env *env, const char *spec, const char *where,
                      lk__instance **out) {
  lk__registry *reg = &env->reg;
  char *name, *plugin;
  int rc = split_spec(spec, where, &name, &plugin);
  if (rc != 0)
    return rc;
  /* The instance of that name; a path without one is found by its path. */
  const char *key = name ? name : strchr(plugin, '/') ? NULL : plugin;
  for (size_t i = 0; i < reg->n; i++) {
    lk__instance *in = reg->all[i];
    if (key ? strcmp(in->name, key) != 0
            : in->named || strcmp(in->given, plugin) != 0)
      continue;
    rc = is_of(in, plugin) ? 0 : twice(in, in->name, plugin, where);
    free(name);
    free(plugin);
    if (rc == 0)
      *out = in;
    return rc;
  }
  lk__instance *in = calloc(1, sizeof *in);
  lk__instance **grown = realloc(reg->all, (reg->n + 1) * sizeof *grown);
  if (grown)
    reg->all = grown;
  if (!in || !grown || !(in->where = lk__strdup(where))) {
    free(in);
    free(name);
    free(plugin);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  in->given = plugin;
  rc = lk_plugin_open(plugin, &in->plugin);
  if (rc != 0) {
    free(name);
    instance_free(in);
    return lk__err_prefix(rc, "%s", where);
  }
  in->desc = lk__plugin_host_desc(in->plugin);
  in->minor = lk__plugin_minor(in->plugin);
  if (name_instance(in, name) != 0) {
    instance_free(in);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  /* A path's instance is named only now: after its descriptor's name. */
  for (size_t i = 0; !key && i < reg->n; i++)
    if (!strcmp(reg->all[i]->name, in->name)) {
      rc = twice(reg->all[i], in->name, plugin, where);
      instance_free(in);
      return rc;
    }
  in->host.env = env;
  in->host.inst = in;
  reg->all[reg->n++] = in;
  *out = in;
  return 0;
}

int lk__registry_clone(lk__env *env, const lk__instance *base, const char *spec,
                       lk__instance **out) {
  lk__registry *reg = &env->reg;
  const char *colon = strchr(spec, ':');
  char *name = colon ? trimmed(spec, (size_t)(colon - spec)) : NULL;
  if (!name)
    return lk__err(LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < reg->n; i++)
    if (!strcmp(reg->all[i]->name, name)) {
      int rc = twice(reg->all[i], name, base->desc->name, base->where);
      free(name);
      return rc;
    }
  lk__instance *in = calloc(1, sizeof *in);
  lk__instance **grown = realloc(reg->all, (reg->n + 1) * sizeof *grown);
  if (grown)
    reg->all = grown;
  if (!in || !grown || !(in->where = lk__strdup(base->where)) ||
      !(in->given = lk__strdup(base->given))) {
    free(name);
    instance_free(in);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  /* Its own handle on the plugin, as every instance has. */
  int rc = lk_plugin_open(in->given, &in->plugin);
  if (rc != 0) {
    free(name);
    instance_free(in);
    return lk__err_prefix(rc, "%s", base->where);
  }
  in->desc = lk__plugin_host_desc(in->plugin);
  in->minor = lk__plugin_minor(in->plugin);
  if (name_instance(in, name) != 0) {
    instance_free(in);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  in->host.env = env;
  in->host.inst = in;
  in->roles = base->roles;
  reg->all[reg->n++] = in;
  *out = in;
  return 0;
}

int lk__registry_assign(lk__env *env, lk__kind_id k, const char *spec,
                        const char *where, lk__instance **out) {
  lk__instance *in = NULL;
  int rc = lk__registry_find(env, spec, where, &in);
  if (rc != 0)
    return rc;
  if (!lk__kind_has(in->desc, &lk__kinds[k])) {
    char kinds[128];
    return lk__err(
        LK_EKIND, "%s: plugin %s (%s) cannot be the %s: it implements %s",
        where, in->label, lk_plugin_path(in->plugin), lk__kinds[k].name,
        *lk_plugin_kinds(in->plugin, kinds, sizeof kinds) ? kinds : "no kind");
  }
  in->roles |= 1u << k;
  *out = in;
  return 0;
}

/* Where in the config a failed create of IN points: the line of the
 * option its message names ("option betas ..."), else its section's
 * first line, else where [plugins] names it. A plugin refuses what its
 * option table cannot say (two values, an order between them) with a
 * message naming the option; the host adds the file and line. */
static const char *create_where(const lk__env *env, const lk__instance *in,
                                const char *msg) {
  const lk_config *cfg = env->src_cfg;
  const char *section = in->original ? in->original->name : in->name;
  for (const char *p = msg; cfg && (p = strstr(p, "option ")) != NULL;) {
    p += 7;
    char key[64];
    size_t n = 0;
    while (n + 1 < sizeof key &&
           ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z') ||
            (p[n] >= '0' && p[n] <= '9') || p[n] == '_' || p[n] == '-'))
      n++;
    memcpy(key, p, n);
    key[n] = '\0';
    const lk_config_entry *e = lk_config_find(cfg, section, key);
    if (e)
      return e->where;
  }
  const char *where = cfg ? lk__config_section_where(cfg, section) : NULL;
  return where ? where : in->where;
}

int lk__registry_create(lk__env *env, lk__instance *in) {
  lk__registry *reg = &env->reg;
  if (in->created)
    return 0;
  int rc = in->opts
               ? 0
               : lk__options_parse(in->desc, in->name, env->src_cfg, &in->opts);
  if (rc == 0 && env->prepare)
    rc = env->prepare(env, in);
  for (size_t k = 0; rc == 0 && k < lk__options_count(in->opts); k++)
    if (lk__options_is_auto(in->opts, k))
      rc = lk__err(LK_ECONFIG,
                   "%s: option %s.%s = auto: nothing here to take it from "
                   "(auto is a scheduler's length in a training run, or a "
                   "data plugin's size that the model's option of the same "
                   "name gives); give a number",
                   lk_opt_where(in->opts, lk__options_decl(in->opts, k)->name),
                   in->name, lk__options_decl(in->opts, k)->name);
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
    if (rc != 0) {
      rc = lk__entry_failed(rc, mark, "plugin %s (%s) failed to start",
                            in->label, lk_plugin_path(in->plugin));
      return lk__err_prefix(rc, "%s", create_where(env, in, lk_last_error()));
    }
  }
  in->created = true;
  reg->created[reg->n_created++] = in;
  return 0;
}

int lk__registry_create_all(lk__env *env, lk__create_role create_role) {
  lk__registry *reg = &env->reg;
  /* The table's creation ranks, 0 first; the instances of a kind of
   * several in their listed order. */
  for (int rank = 0; rank < LK__N_KINDS; rank++)
    for (size_t k = 0; k < LK__N_KINDS; k++) {
      if (lk__kinds[k].created != rank)
        continue;
      int rc = 0;
      if (lk__kinds[k].many)
        for (size_t i = 0; i < reg->listed[k].n && rc == 0; i++)
          rc = lk__registry_create(env, reg->listed[k].in[i]);
      else if (create_role && create_role(env, (lk__kind_id)k, &rc))
        ; /* the hook created the role's instances, or failed */
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
  for (size_t i = 0; i < reg->n; i++)
    instance_free(reg->all[i]);
  free(reg->all);
  memset(reg, 0, sizeof *reg);
}

void (*lk__entry_of(const lk__instance *in, lk__kind_id k, size_t i))(void) {
  return lk__kind_entry(in->desc, &lk__kinds[k], i);
}

/* The host's copy of the ops has no entry newer than the plugin's minor
 * (kinds.h): get_lr and set_lr are NULL for ABI 1.0, the momentum's
 * before 1.5. */
const lk_optimizer_ops *lk__lr_ops(const lk__instance *in) {
  const lk_optimizer_ops *ops = in->desc->optimizer;
  return ops && ops->get_lr && ops->set_lr ? ops : NULL;
}

const lk_optimizer_ops *lk__momentum_ops(const lk__instance *in) {
  const lk_optimizer_ops *ops = in->desc->optimizer;
  return ops && ops->get_momentum && ops->set_momentum ? ops : NULL;
}
