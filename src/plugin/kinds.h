/* The kinds of plugin, as data. One row per kind drives everything that
 * depends on the kinds: which plugin can play a role (its required
 * entries), the [plugins] keys and their defaults, the order in which
 * instances are created, the effective config, the kinds loopkit plugins
 * and inspect print, the man pages, and the ABI guard (which kind, entry
 * or feature each minor version added). Adding a kind is one row of
 * LK__KINDS below, its entries, and its ops struct in plugin.h.
 *
 * The ABI guard is here, in one place: what each minor version of ABI 1
 * added is the SINCE of a kind (LK__KINDS) or of an entry (kinds.c), or a
 * row of LK__ABI_FEATURES. The loader makes the host's copy of a
 * descriptor hold exactly what the plugin's minor defines
 * (lk__abi_desc_size, lk__abi_copy_ops): every field and ops entry newer
 * than it reads as NULL, so that the rest of the host tests a pointer and
 * never a minor. What is not a pointer asks lk__abi_has. */
#ifndef LK_KINDS_H
#define LK_KINDS_H

#include "internal.h"

/* One entry of an ops table, in the table's order. */
typedef struct lk__entry {
  const char *name;
  unsigned since; /* the ABI minor that added it */
  bool required;  /* a plugin without it cannot play the kind's role */
} lk__entry;

/* X(ID, NAME, ROLE, MANY, SINCE, DEFAULT, CREATED, HELP):
 * ID     the kind's index (LK__KIND_ID);
 * NAME   its name, and the descriptor field that points to its ops;
 * ROLE   its [plugins] key ("callbacks" for the callback kind);
 * MANY   whether the key lists several instances;
 * SINCE  the ABI minor that added the kind;
 * DEFAULT the plugin the role takes when the key is absent (NULL: none);
 * CREATED the rank in creation order (data first: a model may size itself
 *        from it; with it the strategy, so that the processes are known
 *        when a scheduler counts the run's steps (auto.c); then the model;
 *        then what works on its parameters);
 * HELP   the key's help, for loopkit.ini(5) and messages.
 * Rows are in [plugins] key order. */
#define LK__KINDS(X)                                                           \
  X(STEP, step, "step", false, 0, NULL, 1,                                     \
    "the model: computes the loss and metrics of a batch (required)")          \
  X(BACKWARD, backward, "backward", false, 0, NULL, 2,                         \
    "computes the gradients (default: the step's plugin)")                     \
  X(ZERO_GRAD, zero_grad, "zero_grad", false, 0, "zero", 3,                    \
    "clears the gradients")                                                    \
  X(OPTIMIZER, optimizer, "optimizer", false, 0, NULL, 4,                      \
    "updates the parameters, calling the closure (required unless "            \
    "manual_optimization); several as NAME:PLUGIN, ... each over its "         \
    "section's params")                                                        \
  X(SCHEDULER, scheduler, "scheduler", false, 1, NULL, 5,                      \
    "changes the optimizer's learning rate (default: none); several as "       \
    "NAME:PLUGIN, ... each driving its section's optimizer")                   \
  X(PROFILER, profiler, "profiler", false, 0, NULL, 7,                         \
    "times every plugin entry and loop phase (default: none; simple, "         \
    "trace)")                                                                  \
  X(DATA, data, "data", false, 0, NULL, 0,                                     \
    "the batches; without one each step works on the whole problem and "       \
    "there are no epochs")                                                     \
  X(STRATEGY, strategy, "strategy", false, 0, NULL, 0,                         \
    "how the run spreads over processes (default: none, one process as "       \
    "with single; mpi)")                                                       \
  X(CALLBACK, callback, "callbacks", true, 0, NULL, 9,                         \
    "comma-separated callback plugins, called in this order, before the "      \
    "model's own hooks")                                                       \
  X(PRECISION, precision, "precision", false, 3, NULL, 6,                      \
    "how backward's arithmetic runs: bf16-mixed (the layer kit's products "    \
    "in bf16, all else f32), or a plugin that scales the loss for backward "   \
    "and unscales the gradients (default: none)")                              \
  X(LOGGER, logger, "loggers", true, 5, NULL, 10,                              \
    "comma-separated logger plugins, each given every metrics.csv row "        \
    "(default: none; tensorboard)")                                            \
  X(LAYERS, layers, "layers", true, 6, NULL, 0,                                \
    "comma-separated layer plugins, whose layers a network described in the "  \
    "config (sequential's layers) may then name as it names the built-ins "    \
    "(default: none)")

typedef enum lk__kind_id {
#define LK__KIND_ENUM(ID, ...) LK__KIND_##ID,
  LK__KINDS(LK__KIND_ENUM)
#undef LK__KIND_ENUM
      LK__N_KINDS
} lk__kind_id;

/* X(ID, SINCE, WHAT): what minor SINCE added that is neither a kind nor
 * an entry: a descriptor field, or what a value means. */
#define LK__ABI_FEATURES(X)                                                    \
  X(CHECK_STATE, 4, "the descriptor's check_state")                            \
  X(OPT_PATH, 4, "options of type LK_OPT_PATH")                                \
  X(OPT_RANGE, 4, "a number option's choices are its range")                   \
  X(OPT_PATHS, 6, "options of type LK_OPT_PATHS")                              \
  X(MOMENTUM_STATUS, 6, "the optimizer's set_momentum returns a status")

typedef enum lk__abi_feature {
#define LK__ABI_ENUM(ID, ...) LK__ABI_##ID,
  LK__ABI_FEATURES(LK__ABI_ENUM)
#undef LK__ABI_ENUM
      LK__N_ABI_FEATURES
} lk__abi_feature;

/* Whether a plugin built for ABI minor MINOR has feature F. */
bool lk__abi_has(unsigned minor, lk__abi_feature f);
/* The ABI minor D was built for. */
unsigned lk__abi_minor(const lk_descriptor *d);
/* The size of the descriptor ABI minor MINOR defines: its last field the
 * newest kind's, or check_state. */
size_t lk__abi_desc_size(unsigned minor);

/* The host's copies of a plugin's ops tables, one of each kind. */
typedef struct lk__ops_copy {
#define LK__OPS_COPY(ID, NAME, ...) lk_##NAME##_ops NAME;
  LK__KINDS(LK__OPS_COPY)
#undef LK__OPS_COPY
} lk__ops_copy;

/* Points every ops table of D (the host's copy of a descriptor checked
 * for MINOR) at one in COPY holding the entries MINOR defines, NULL past
 * them: a plugin built before an entry was added never has it. */
void lk__abi_copy_ops(lk_descriptor *d, unsigned minor, lk__ops_copy *copy);

/* The entries of kind K's ops table ABI minor MINOR defines (those
 * before the first one newer than it). */
size_t lk__abi_entries(lk__kind_id k, unsigned minor);

typedef struct lk__kind {
  const char *name;
  const char *role;
  bool many;
  unsigned since;
  const char *def;
  int created;
  const char *help;
  size_t field; /* offsetof(lk_descriptor, NAME) */
  size_t copy;  /* offsetof(lk__ops_copy, NAME) */
  const lk__entry *entries;
  size_t n_entries;
} lk__kind;

extern const lk__kind lk__kinds[LK__N_KINDS];

/* The kind whose [plugins] key is ROLE, or NULL. */
const lk__kind *lk__kind_of_role(const char *role);

/* D's ops table for kind K (NULL when it has none). D is the host's copy
 * (lk_plugin_desc): a kind newer than the plugin's minor is NULL there. */
const void *lk__kind_ops(const lk_descriptor *d, const lk__kind *k);

/* Entry I of D's ops table for K, NULL when absent (or newer than the
 * plugin's minor: the host's copy has none of those). */
void (*lk__kind_entry(const lk_descriptor *d, const lk__kind *k,
                      size_t i))(void);

/* The index of entry FIELD in ops struct TYPE, for lk__kind_entry. */
#define LK__ENTRY(type, field) (offsetof(type, field) / sizeof(void (*)(void)))

/* Whether D can play K's role: the kind's ops with every required entry. */
bool lk__kind_has(const lk_descriptor *d, const lk__kind *k);

/* "step,backward": the kinds D implements, in descriptor order, into BUF. */
const char *lk__kind_list(const lk_descriptor *d, char *buf, size_t len);

/* The [plugins] keys, declared as options are (for loopkit.ini(5), the
 * config checks and the effective config), in key order. */
extern const lk_option lk__plugin_keys[];

#endif
