/* The kinds of plugin, as data. One row per kind drives everything that
 * depends on the kinds: which plugin can play a role (its required
 * entries), the [plugins] keys and their defaults, the order in which
 * instances are created, the effective config, the kinds loopkit plugins
 * and inspect print, the man pages, and the ABI guards (which entry each
 * minor version added). Adding a kind is one row of LK__KINDS below, its
 * entries, and its ops struct in plugin.h. */
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
    "how backward's arithmetic runs: bf16-mixed (the layer kit's products "   \
    "in bf16, all else f32), or a plugin that scales the loss for backward "   \
    "and unscales the gradients (default: none)")                                                                   \
  X(LOGGER, logger, "loggers", true, 5, NULL, 10,                              \
    "comma-separated logger plugins, each given every metrics.csv row "        \
    "(default: none; tensorboard)")

typedef enum lk__kind_id {
#define LK__KIND_ENUM(ID, ...) LK__KIND_##ID,
  LK__KINDS(LK__KIND_ENUM)
#undef LK__KIND_ENUM
      LK__N_KINDS
} lk__kind_id;

typedef struct lk__kind {
  const char *name;
  const char *role;
  bool many;
  unsigned since;
  const char *def;
  int created;
  const char *help;
  size_t field; /* offsetof(lk_descriptor, NAME) */
  const lk__entry *entries;
  size_t n_entries;
} lk__kind;

extern const lk__kind lk__kinds[LK__N_KINDS];

/* The kind whose [plugins] key is ROLE, or NULL. */
const lk__kind *lk__kind_of_role(const char *role);

/* D's ops table for kind K (NULL when it has none, or K is newer than
 * D's minor version MINOR). */
const void *lk__kind_ops(const lk_descriptor *d, unsigned minor,
                         const lk__kind *k);

/* Entry I of D's ops table for K, NULL when absent or newer than MINOR:
 * the one ABI guard every caller goes through. */
void (*lk__kind_entry(const lk_descriptor *d, unsigned minor, const lk__kind *k,
                      size_t i))(void);

/* The index of entry FIELD in ops struct TYPE, for lk__kind_entry. */
#define LK__ENTRY(type, field) (offsetof(type, field) / sizeof(void (*)(void)))

/* Whether D can play K's role: the kind's ops with every required entry. */
bool lk__kind_has(const lk_descriptor *d, unsigned minor, const lk__kind *k);

/* "step,backward": the kinds D implements, in descriptor order, into BUF. */
const char *lk__kind_list(const lk_descriptor *d, char *buf, size_t len);

/* The [plugins] keys, declared as options are (for loopkit.ini(5), the
 * config checks and the effective config), in key order. */
extern const lk_option lk__plugin_keys[];

#endif
