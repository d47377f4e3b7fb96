/* sequential.so serves two kinds, one per instance: the model (option
 * layers; sequential.c) and the scheduler torch calls SequentialLR
 * (options schedulers and milestones; sequential_lr.c). create decides
 * which from the options and refuses a role the instance cannot play; the
 * entries both kinds share (destroy, check_state) tell the two apart by
 * the first member of their self, a seq_what (0, what calloc gives, is the
 * model). */
#ifndef LOOPKIT_SEQUENTIAL_LR_H
#define LOOPKIT_SEQUENTIAL_LR_H

#include <stdbool.h>

#include <loopkit/loopkit.h>

typedef enum seq_what { SEQ_WHAT_MODEL = 0, SEQ_WHAT_LR = 1 } seq_what;

static inline bool seqlr_is(const void *self) {
  return self && *(const seq_what *)self == SEQ_WHAT_LR;
}

/* Which of the two the options of this instance make it (*LR), refusing
 * both, neither, and a role the one chosen cannot play. */
int seqlr_choose(lk_host *host, const lk_options *o, bool *lr);

int seqlr_create(lk_host *host, const lk_options *o, void **self);
void seqlr_destroy(void *self);
int seqlr_check_state(void *self);
extern const lk_scheduler_ops seqlr_scheduler_ops;

/* The scheduler's options, in sequential.c's table. */
#define SEQLR_OPTIONS                                                          \
  {"schedulers", LK_OPT_STRING, "",                                            \
   "the scheduler (torch's SequentialLR; not with layers): list of "           \
   "schedulers called one after the other, as named instances NAME:PLUGIN "    \
   "(options under [NAME]), comma separated: e.g. warm:linear_warmup, "        \
   "main:cosine",                                                              \
   NULL},                                                                      \
      {"milestones", LK_OPT_DOUBLES, "",                                       \
       "the scheduler: list of integers that reflects milestone points, one "  \
       "fewer than schedulers, increasing: the step (or epoch) at which each " \
       "scheduler after the first takes over",                                 \
       "[1, inf)"},                                                            \
  {                                                                            \
    "interval", LK_OPT_ENUM, "epoch",                                          \
        "the scheduler: when the rate changes, after every optimizer step "    \
        "or after every epoch and its validation (its schedulers step at "     \
        "the same one)",                                                       \
        "step|epoch"                                                           \
  }

#endif
