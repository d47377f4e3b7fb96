/* An options table without its terminator: two good entries, then memory
 * that is not an lk_option (here 40 bytes of 'A', so the third "name" is
 * 0x4141414141414141). The host must stop at the third entry, not print
 * its "name". They share one object so that the compiler keeps the order. */
#include <loopkit/loopkit.h>

static const struct {
  lk_option options[2];
  unsigned char after[sizeof(lk_option)];
} table = {
    .options = {{"lr", LK_OPT_DOUBLE, "0.1", "learning rate", NULL},
                {"steps", LK_OPT_INT, "10", "steps", NULL}},
    .after = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "unterminated",
    .version = "1.0",
    .summary = "an options table without its terminator",
    .options = table.options,
};
