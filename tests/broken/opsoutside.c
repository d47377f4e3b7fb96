/* An ops table that is not in the plugin: step points at libc's environ. */
#include <loopkit/loopkit.h>

extern char **environ;

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "opsoutside",
    .version = "1.0",
    .summary = "a step ops table outside the plugin",
    .step = (const lk_step_ops *)&environ,
};
