/* An ops table whose function is data: zero_grad points at a string. */
#include <loopkit/loopkit.h>

static const char not_code[] = "not a function";

static const union {
  lk_zero_grad_ops ops;
  const void *raw[1];
} zero_grad = {.raw = {not_code}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "badops",
    .version = "1.0",
    .summary = "a zero_grad entry that points at data",
    .zero_grad = &zero_grad.ops,
};
