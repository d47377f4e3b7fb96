/* A terminated options table of 257 options: one more than the host
 * accepts. */
#include <loopkit/loopkit.h>

#define E1                                                                     \
  { "x", LK_OPT_INT, "0", NULL, NULL }
#define E4 E1, E1, E1, E1
#define E16 E4, E4, E4, E4
#define E64 E16, E16, E16, E16
#define E256 E64, E64, E64, E64

static const lk_option options[] = {E256, E1, {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "manyopts",
    .version = "1.0",
    .summary = "257 options",
    .options = options,
};
