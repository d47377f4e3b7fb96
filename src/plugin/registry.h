/* The plugin instances of a run and the roles they play. [plugins] names
 * an instance NAME:PLUGIN, or PLUGIN, which is then its name too; the name
 * is the instance's config section and prefixes its state, so that two
 * instances of one plugin (two checkpoint callbacks) keep theirs apart.
 * Roles that name the same instance share it (a model is step and
 * backward); a name is one plugin's, in the whole config. Instances are
 * created in the kinds' order (kinds.h) and destroyed in the reverse of
 * it, before any is unloaded. */
#ifndef LK_REGISTRY_H
#define LK_REGISTRY_H

#include "kinds.h"
#include "options.h"

/* Instances a key of several (callbacks, loggers) may list. */
#define LK__MAX_LISTED 16

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
  const lk_descriptor *desc; /* the host's copy: the ABI guard (kinds.h) */
  unsigned minor;            /* the ABI minor it was built for */
  char *name;  /* its config section and state prefix: NAME of NAME:PLUGIN,
                  else the plugin's name (a path's descriptor name) */
  char *given; /* the plugin as [plugins] names it: a name or a path */
  char *spec;  /* NAME:PLUGIN, or PLUGIN when NAME is the plugin's own:
                  what the effective config records */
  char *label; /* for messages: NAME, or NAME:PLUGIN when they differ */
  char *where; /* where the config first names it */
  bool named;  /* the config gave it a name of its own */
  lk_options *opts;
  void *self;
  bool created;
  /* The optimizer lk_host_lr and lk_host_momentum reach for it; NULL: the
   * run's (the optimizer role). */
  lk__instance *driven;
  unsigned roles; /* bit K: it plays kind K's role (one of the instances
                     of a role of several, or a group's copy of one) */
  /* An optimizer's instance (its default group's or a group's, optim.c):
   * the parameters lk_host_params gives it. Otherwise every parameter. */
  bool has_own_params;
  lk_tensor **own_params;
  size_t n_own_params;
  struct lk__optimizer *optimizer; /* the run's optimizer it is part of */
  bool replica;           /* a scheduler's copy for a group: its options are its
                             original's, which the effective config records */
  lk__instance *original; /* a replica's: the instance it copies */
  const char *suffix;     /* a replica's: the group (the end of its name) */
  size_t n_children;      /* children it created (lk_host_scheduler_new) */
  /* A scheduler created by another (lk_host_scheduler_new): that one. */
  lk__instance *parent;
  /* On an optimizer: torch's param_group['initial_lr'] once a scheduler
   * has asked for it (lk_host_initial_lr). */
  double initial_lr;
  bool has_initial_lr;
  /* What a callback said it keeps (lk_host_keep_checkpoints; the policy
   * is loop/ckpt_policy.c's). */
  struct {
    bool declared; /* it said; otherwise its options are read */
    bool files;    /* it keeps checkpoints of its own ... */
    char *dir;     /* ... in DIR (NULL: checkpoints) */
    bool best;     /* ... best.ckpt among them */
  } keeps;
  lk_host host;
};

typedef struct lk__listed {
  lk__instance *in[LK__MAX_LISTED + 1]; /* + the model's own callback */
  size_t n;
} lk__listed;

typedef struct lk__registry {
  lk__instance **all; /* one per distinct plugin name */
  size_t n;
  lk__instance **created; /* in creation order */
  size_t n_created;
  /* Slots held for creates still running: a create may create another
   * instance (sam its base optimizer), which must not take its slot. */
  size_t n_reserved;
  lk__instance *role[LK__N_KINDS]; /* who plays each role of one plugin */
  /* The instances of a kind of several (MANY in kinds.h), in the order
   * their key lists them; the callbacks then the model's own. */
  lk__listed listed[LK__N_KINDS];
} lk__registry;

/* The instance SPEC names (NAME:PLUGIN or PLUGIN), its plugin loaded the
 * first time it is named. A name already given to another plugin is an
 * error. WHERE prefixes errors (the config line naming it). */
int lk__registry_find(lk__env *env, const char *spec, const char *where,
                      lk__instance **out);

/* SPEC's instance as kind K, checked to have K's required entries. */
int lk__registry_assign(lk__env *env, lk__kind_id k, const char *spec,
                        const char *where, lk__instance **out);

/* Creates IN (once), with its options parsed from env->src_cfg. */
int lk__registry_create(lk__env *env, lk__instance *in);

/* A second instance of BASE's plugin, named as SPEC (NAME:PLUGIN, NAME
 * may be OPT.GROUP), not created: a parameter group's optimizer, or a
 * scheduler's copy for one. A name taken is an error. */
int lk__registry_clone(lk__env *env, const lk__instance *base, const char *spec,
                       lk__instance **out);

/* Creates every instance that plays a role, in the kinds' creation
 * order, the instances of a kind of several in their listed order.
 * CREATE_ROLE (NULL: none) may create a role's instances itself: it
 * returns true when it did, its status in *RC (optim.c creates the
 * optimizers, partitioning the parameters, and the schedulers with their
 * groups' copies). */
typedef bool (*lk__create_role)(lk__env *env, lk__kind_id k, int *rc);
int lk__registry_create_all(lk__env *env, lk__create_role create_role);

/* Destroys the instances (reverse creation order) and unloads them. */
void lk__registry_free(lk__registry *reg);

/* The entry I of IN's ops for kind K, NULL when absent or newer than the
 * plugin's ABI minor. */
void (*lk__entry_of(const lk__instance *in, lk__kind_id k, size_t i))(void);

/* IN's optimizer get_lr/set_lr, or NULL if it has none (or was built for
 * ABI 1.0, whose ops table ends before them). */
const lk_optimizer_ops *lk__lr_ops(const lk__instance *in);
/* IN's optimizer get_momentum/set_momentum, or NULL if it has none (or was
 * built for an ABI before 1.5). */
const lk_optimizer_ops *lk__momentum_ops(const lk__instance *in);

#endif
