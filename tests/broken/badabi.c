/* A plugin built for a future major version of the ABI. */
#include <loopkit/loopkit.h>

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = (99u << 16) | 3u,
    .size = sizeof(lk_descriptor),
    .name = "badabi",
    .version = "1.0",
    .summary = "built for ABI 99.3",
};
