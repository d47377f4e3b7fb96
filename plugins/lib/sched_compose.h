/* What the composite schedulers (chained, and sequential's scheduler)
 * share: their children, named instances NAME:PLUGIN listed in an option
 * (torch's list of scheduler objects), each created by the host with its
 * options from [NAME] and its state checkpointed under NAME. Defined in
 * sched_compose.c, built once into plugins/lib/libplugincommon.la. */
#ifndef LOOPKIT_SCHED_COMPOSE_H
#define LOOPKIT_SCHED_COMPOSE_H

#include <stdbool.h>

#include <loopkit/loopkit.h>

/* The names of option NAME's comma list, trimmed, in *OUT (one
 * allocation: free(*OUT) frees them all) and *N. An empty item (a, , b)
 * is refused, naming where the config gives it. */
int compose_names(lk_host *host, const lk_options *o, const char *name,
                  char ***out, size_t *n);

/* The children NAMES[0..N), created in that order, as torch's
 * constructors run before the composite's: *OUT (free it; the host
 * destroys the children). */
int compose_children(lk_host *host, char *const *names, size_t n,
                     lk_scheduler ***out);

/* For check_state: the step count of CHILD, its last_epoch (checked by its
 * own check_state, which runs first), in *OUT and its tensor in *T; false
 * when it keeps none (a chained, a foreign scheduler): nothing to hold it
 * to. */
bool compose_last_epoch(const lk_scheduler *child, double *out,
                        const lk_tensor **t);

#endif
