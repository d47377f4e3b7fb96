/* An option with a type lk_option_type does not have. */
#include <loopkit/loopkit.h>

static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.1", "learning rate", NULL},
    {"beta", (lk_option_type)99, "0.9", "a type from nowhere", NULL},
    {NULL, 0, NULL, NULL, NULL},
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "badtype",
    .version = "1.0",
    .summary = "an option of an unknown type",
    .options = options,
};
