/* adam: Adam as torch.optim.Adam 1.13 (_single_tensor_adam), with its option
 * names, defaults and checks; weight decay is added to the gradient (an L2
 * penalty). The update is shared with adamw in adam_common.h, which says how
 * the iterates are made to match torch's bit for bit. */
#include "adam_common.h"
#include "bundled.h"

static int create(lk_host *host, const lk_options *o, void **self) {
  return adam_create(host, o, self, false);
}

static const lk_option options[] = {
    ADAM_OPTIONS("0", "L2 penalty added to the gradient")};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =
    BUNDLED_PLUGIN("adam", "Adam, as torch.optim.Adam", adam_destroy,
                   adam_check_state, .optimizer = &adam_optimizer_ops);
