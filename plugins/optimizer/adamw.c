/* adamw: AdamW as torch.optim.AdamW 1.13 (_single_tensor_adamw), with its
 * option names, defaults and checks: weight decay is decoupled from the
 * gradient (each step first multiplies the parameters by
 * 1 - lr * weight_decay). The update is shared with adam in adam_common.h,
 * which says how the iterates are made to match torch's bit for bit. */
#include "adam_common.h"
#include "bundled.h"

static int create(lk_host *host, const lk_options *o, void **self) {
  return adam_create(host, o, self, true);
}

static const lk_option options[] = {ADAM_OPTIONS(
    "0.01", "decoupled weight decay: each step scales the parameters by "
            "1 - lr * weight_decay")};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_PLUGIN(
    "adamw", "AdamW (Adam with decoupled weight decay), as torch.optim.AdamW",
    adam_destroy, adam_check_state, .optimizer = &adam_optimizer_ops);
