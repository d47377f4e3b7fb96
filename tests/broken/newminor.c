/* A plugin built for a newer minor version of this major: refused, since
 * it may rely on entries this host does not know. */
#include <loopkit/loopkit.h>

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = (LK_ABI_MAJOR << 16) | 999u,
    .size = sizeof(lk_descriptor),
    .name = "newminor",
    .version = "1.0",
    .summary = "built for a minor version from the future",
};
