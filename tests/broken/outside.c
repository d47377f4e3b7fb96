/* A descriptor string that is not in the plugin: the summary is the
 * address of libc's environ (a variable, not a string). */
#include <loopkit/loopkit.h>

extern char **environ;

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "outside",
    .version = "1.0",
    .summary = (const char *)&environ,
};
