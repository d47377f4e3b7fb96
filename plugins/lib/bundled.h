/* What the descriptor of every bundled plugin says alike: the ABI it was
 * built for, the descriptor's size, and version 1.0. A plugin initialises
 * its exported descriptor with BUNDLED_DESCRIPTOR(.name = "NAME",
 * .summary = "...", ...), the fields that are its own; one with options
 * with BUNDLED_PLUGIN, which names its option table and create as every
 * such plugin does; an optimizer, a callback or a scheduler with
 * BUNDLED_OPTIMIZER, BUNDLED_CALLBACK or BUNDLED_SCHEDULER, which name its
 * kind (tests/cli/structure.sh reads a
 * source's kinds from these words as from a .optimizer = &... of its own). */
#ifndef LOOPKIT_PLUGINS_BUNDLED_H
#define LOOPKIT_PLUGINS_BUNDLED_H

#include <loopkit/loopkit.h>

#define BUNDLED_DESCRIPTOR(...)                                                \
  {                                                                            \
    .abi_version = LK_ABI_VERSION, .size = sizeof(lk_descriptor),              \
    .version = "1.0", __VA_ARGS__                                              \
  }

/* The descriptor of a plugin whose option table is `options` and whose
 * create is `create` (every bundled plugin with options names them so);
 * DESTROY and CHECK (NULL: none) its entries, and then the rest of its own
 * fields: the ops of its kinds (.callback = &callback_ops, ...). */
#define BUNDLED_PLUGIN(NAME, SUMMARY, DESTROY, CHECK, ...)                     \
  BUNDLED_DESCRIPTOR(.name = NAME, .summary = SUMMARY, .options = options,     \
                     .create = create, .destroy = DESTROY,                     \
                     .check_state = CHECK, __VA_ARGS__)

/* The same for an optimizer, given its optimizer's entries (.step = step,
 * ...). */
#define BUNDLED_OPTIMIZER(NAME, SUMMARY, DESTROY, CHECK, ...)                  \
  BUNDLED_PLUGIN(NAME, SUMMARY, DESTROY, CHECK,                                \
                 .optimizer = &(const lk_optimizer_ops){__VA_ARGS__})

/* The same for a callback, given its hooks (.on_train_end = on_train_end,
 * ...). */
#define BUNDLED_CALLBACK(NAME, SUMMARY, DESTROY, CHECK, ...)                   \
  BUNDLED_PLUGIN(NAME, SUMMARY, DESTROY, CHECK,                                \
                 .callback = &(const lk_callback_ops){__VA_ARGS__})

/* The same for a scheduler; OPS points to its scheduler's entries. */
#define BUNDLED_SCHEDULER(NAME, SUMMARY, DESTROY, CHECK, OPS)                  \
  BUNDLED_PLUGIN(NAME, SUMMARY, DESTROY, CHECK, .scheduler = OPS)

#endif
