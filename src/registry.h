/* The plugin instances of a run and the roles they play. A plugin named
 * by several roles is one instance (a model is step and backward); a
 * callback list names several. Instances are created in the kinds' order
 * (kinds.h) and destroyed in the reverse of it, before any is unloaded. */
#ifndef LK_REGISTRY_H
#define LK_REGISTRY_H

#include "kinds.h"
#include "options.h"

#define LK__MAX_CALLBACKS 16

typedef struct lk__env lk__env;
typedef struct lk__instance lk__instance;

/* Each plugin instance sees the host through its own handle, so that what
 * it logs, fails with or allocates is attributed to it. */
struct lk_host {
  lk__env *env;
  lk__instance *inst;
};

struct lk__instance {
  lk_plugin *plugin;
  const lk_descriptor *desc; /* the host's checked copy */
  unsigned minor;            /* the ABI minor it was built for */
  char *name;                /* as named in [plugins]: its config section */
  char *given;               /* a path as named in [plugins] (name is then the
                                descriptor's), so that roles naming it share it */
  lk_options *opts;
  void *self;
  bool created;
  lk_host host;
};

typedef struct lk__registry {
  lk__instance **all; /* one per distinct plugin name */
  size_t n;
  lk__instance **created; /* in creation order */
  size_t n_created;
  /* Slots held for creates still running: a create may create another
   * instance (sam its base optimizer), which must not take its slot. */
  size_t n_reserved;
  lk__instance *role[LK__N_KINDS]; /* who plays each role (callbacks: the
                                      first; see callbacks) */
  lk__instance *callbacks[LK__MAX_CALLBACKS + 1]; /* + the model's own */
  size_t n_callbacks;
} lk__registry;

/* The instance of plugin NAME, loaded the first time it is named; WHERE
 * prefixes a load error (the config line naming it). */
int lk__registry_find(lk__env *env, const char *name, const char *where,
                      lk__instance **out);

/* NAME as kind K, checked to have K's required entries. */
int lk__registry_assign(lk__env *env, lk__kind_id k, const char *name,
                        const char *where, lk__instance **out);

/* Creates IN (once), with its options parsed from env->src_cfg. */
int lk__registry_create(lk__env *env, lk__instance *in);

/* Creates every instance that plays a role, in the kinds' creation
 * order, the callbacks in their listed order last. */
int lk__registry_create_all(lk__env *env);

/* Destroys the instances (reverse creation order) and unloads them. */
void lk__registry_free(lk__registry *reg);

/* The entry I of IN's ops for kind K, NULL when absent or newer than the
 * plugin's ABI minor. */
void (*lk__entry_of(const lk__instance *in, lk__kind_id k, size_t i))(void);

/* IN's optimizer get_lr/set_lr, or NULL if it has none (or was built for
 * ABI 1.0, whose ops table ends before them). */
const lk_optimizer_ops *lk__lr_ops(const lk__instance *in);

#endif
