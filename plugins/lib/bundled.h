/* What the descriptor of every bundled plugin says alike: the ABI it was
 * built for, the descriptor's size, and version 1.0. A plugin initialises
 * its exported descriptor with BUNDLED_DESCRIPTOR(.name = "NAME",
 * .summary = "...", ...), the fields that are its own. */
#ifndef LOOPKIT_PLUGINS_BUNDLED_H
#define LOOPKIT_PLUGINS_BUNDLED_H

#include <loopkit/loopkit.h>

#define BUNDLED_DESCRIPTOR(...)                                                \
  {.abi_version = LK_ABI_VERSION,                                              \
   .size = sizeof(lk_descriptor),                                              \
   .version = "1.0",                                                           \
   __VA_ARGS__}

#endif
