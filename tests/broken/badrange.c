/* A numeric option whose range is not an interval: refused at load. */
#include <loopkit/loopkit.h>

static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.1", "learning rate", ">= 0"},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "badrange",
    .version = "1.0",
    .summary = "an option with a range that does not parse",
    .options = options,
};
