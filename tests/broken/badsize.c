/* A descriptor that claims to be smaller than ABI 1.0's. */
#include <loopkit/loopkit.h>

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = 8,
    .name = "badsize",
};
