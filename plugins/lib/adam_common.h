/* adam_common.h: Adam and AdamW as torch.optim.Adam and torch.optim.AdamW
 * 1.13 (_single_tensor_adam, _single_tensor_adamw), shared by
 * plugins/optimizer/adam.c and plugins/optimizer/adamw.c, which differ only in
 * how weight decay is applied (added to the gradient, or "decoupled": the
 * parameter shrinks by 1 - lr * weight_decay first) and in its default.
 *
 * The iterates match torch's to the last bit. Torch's CPU kernels fuse
 * exp_avg.mul_(b1).add_(g, alpha=1-b1) into fma(1-b1, g, m*b1),
 * exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2) into fma((1-b2)*g, g, v*b2)
 * and grad.add(p, alpha=wd) into fma(wd, p, g); everything else rounds at
 * each operation (param.addcdiv_(m, denom, value=-s) is p + (-s*m)/denom),
 * so the including file must be compiled with -ffp-contract=off. The bias
 * corrections are Python float powers, which are C's pow(). f32 parameters
 * are updated in float with each scalar rounded to float, as torch does.
 *
 * beta1 is host state that a scheduler may change (ABI 1.5's set_momentum,
 * as torch's OneCycleLR sets group['betas']), read at every step.
 *
 * Defined in adam_common.c, built once into plugins/lib/libadamcommon.la
 * with the layer kit's vectorizer flags (see adam_update_f32). */
#ifndef LOOPKIT_PLUGINS_ADAM_COMMON_H
#define LOOPKIT_PLUGINS_ADAM_COMMON_H

#include <stdbool.h>

#include <loopkit/loopkit.h>

#include "optim_common.h"

/* create, for both plugins: DECOUPLED selects AdamW's weight decay. */
int adam_create(lk_host *host, const lk_options *o, void **self,
                bool decoupled);
void adam_destroy(void *self);
int adam_check_state(void *self);
extern const lk_optimizer_ops adam_optimizer_ops;

/* The options, in the order torch checks them (the host refuses the first
 * bad one); WEIGHT_DECAY_DEFAULT and _HELP are the plugins' own. */
/* clang-format off */
#define ADAM_OPTIONS(weight_decay_default, weight_decay_help)                  \
  {"lr", LK_OPT_DOUBLE, "0.001", "learning rate", "[0, inf)"},                \
  {"eps", LK_OPT_DOUBLE, "1e-8",                                              \
   "added to the denominator for numerical stability", "[0, inf)"},           \
  {"betas", LK_OPT_DOUBLES, "0.9,0.999",                                      \
   "beta1,beta2: decay rates of the running averages of the gradient and "    \
   "of its square", "[0, 1)"},                                                \
  {"weight_decay", LK_OPT_DOUBLE, weight_decay_default, weight_decay_help,    \
   "[0, inf)"},                                                               \
  {"amsgrad", LK_OPT_BOOL, "false",                                           \
   "divide by the largest second moment so far (AMSGrad)", NULL},             \
  OPTIM_MAXIMIZE_OPTION,                                                      \
  {NULL, 0, NULL, NULL, NULL}
/* clang-format on */

#endif
