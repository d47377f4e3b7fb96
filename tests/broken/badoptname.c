/* An option whose name could not be written as a config key. */
#include <loopkit/loopkit.h>

static const lk_option options[] = {
    {"learning rate", LK_OPT_DOUBLE, "0.1", "a name with a space", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "badoptname",
    .version = "1.0",
    .summary = "an option with a space in its name",
    .options = options,
};
