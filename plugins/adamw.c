/* adamw: AdamW as torch.optim.AdamW 1.13 (_single_tensor_adamw), with its
 * option names, defaults and checks: weight decay is decoupled from the
 * gradient (each step first multiplies the parameters by
 * 1 - lr * weight_decay). The update is shared with adam in adam_common.h,
 * which says how the iterates are made to match torch's bit for bit. */
#include "adam_common.h"

static int create(lk_host *host, const lk_options *o, void **self) {
  return adam_create(host, o, self, true);
}

static const lk_option options[] = {
    {"lr", LK_OPT_DOUBLE, "0.001", "learning rate, >= 0", NULL},
    {"betas", LK_OPT_DOUBLES, "0.9,0.999",
     "beta1,beta2: decay rates of the running averages of the gradient and "
     "of its square, each in [0, 1)",
     NULL},
    {"eps", LK_OPT_DOUBLE, "1e-8",
     "added to the denominator for numerical stability, >= 0", NULL},
    {"weight_decay", LK_OPT_DOUBLE, "0.01",
     "decoupled weight decay: each step scales the parameters by "
     "1 - lr * weight_decay, >= 0",
     NULL},
    {"amsgrad", LK_OPT_BOOL, "false",
     "divide by the largest second moment so far (AMSGrad)", NULL},
    {"maximize", LK_OPT_BOOL, "false",
     "maximize the objective instead of minimizing it", NULL},
    {NULL, 0, NULL, NULL, NULL}};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "adamw",
    .version = "1.0",
    .summary = "AdamW (Adam with decoupled weight decay), as torch.optim.AdamW",
    .options = options,
    .create = create,
    .destroy = adam_destroy,
    .optimizer = &adam_optimizer_ops,
    .check_state = adam_check_state,
};
