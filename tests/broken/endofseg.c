/* An options table without its terminator that runs to the end of its
 * segment: a .bss table (filled by a constructor, which a real plugin must
 * not have) is the last object of the plugin's writable segment, and is
 * placed so that it ends at a page boundary too. A host that walks on past
 * its four entries reads the page after the plugin: unmapped (a crash) or
 * another object's. */
#include <loopkit/loopkit.h>

#define N 4
static struct {
  char pad[4096 - N * sizeof(lk_option)];
  lk_option options[N];
} table __attribute__((aligned(4096)));

__attribute__((constructor)) static void fill(void) {
  static const char *const names[N] = {"a", "b", "c", "d"};
  for (int i = 0; i < N; i++)
    table.options[i] =
        (lk_option){names[i], LK_OPT_INT, "0", "an option", NULL};
}

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "endofseg",
    .version = "1.0",
    .summary = "an options table that runs to the end of its segment",
    .options = table.options,
};
