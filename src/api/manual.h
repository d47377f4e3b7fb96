/* The host API's part (src/api/): what host.c takes from manual.c, the
 * manual-optimization calls. The rest of the part is the public API
 * (include/loopkit/host.h, run.h). */
#ifndef LK_MANUAL_H
#define LK_MANUAL_H

#include "loop.h"

/* Whether OPT is one of the run's optimizers (lk_host_optimizer), and its
 * step from training_step (lk_optimizer_step gives it to this). */
bool lk__is_run_optimizer(const lk_optimizer *opt);
int lk__manual_step(lk_optimizer *opt, lk_tensor *const *params, size_t n,
                    lk_closure_fn closure);

#endif
