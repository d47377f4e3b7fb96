/* What the learning-rate scheduler plugins share: the interval option, the
 * state every one keeps (torch's last_epoch and base_lr), the start of
 * create and of step, the create/step/restart skeleton of a scheduler whose
 * rate follows its step count, and metric look-ups. Defined in
 * scheduler_common.c, built once into plugins/lib/libplugincommon.la; its
 * symbols are hidden, so that each plugin still exports nothing but its
 * descriptor.
 *
 * The schedulers reproduce torch.optim.lr_scheduler 1.13's recursive
 * ("chainable") get_lr: each new rate is computed from the optimizer's
 * current one, read with lk_host_lr, in the same operations and order as
 * torch's Python floats (compile with -ffp-contract=off: nothing is fused).
 * Everything a step depends on is host state, so a resumed run continues
 * the schedule exactly. */
#ifndef LOOPKIT_SCHEDULER_COMMON_H
#define LOOPKIT_SCHEDULER_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>

#include "bundled.h"

/* Python's math.pi (M_PI is not C11). */
#define SCHED_PI 3.14159265358979323846

#define SCHED_INTERVAL_OPTION                                                  \
  {                                                                            \
    "interval", LK_OPT_ENUM, "epoch",                                          \
        "when the rate changes: after every optimizer step, or after every "   \
        "epoch and its validation",                                            \
        "step|epoch"                                                           \
  }

typedef struct sched_kind sched_kind;

typedef struct sched_common {
  lk_host *host;
  lk_interval interval;
  lk_tensor *last_epoch;  /* [1]: torch's last_epoch, step() calls so far */
  lk_tensor *base_lr;     /* [1]: the optimizer's rate at create (initial_lr) */
  const sched_kind *kind; /* sched_create's, or NULL */
} sched_common;

/* An option sched_create reads into a member of the struct: an
 * LK_OPT_INT one into an int64_t, an LK_OPT_DOUBLE one into a double. */
typedef struct sched_field {
  const char *name;
  size_t offset;
  lk_option_type type;
} sched_field;

/* The field of option NAME, of TYPE (INT or DOUBLE), in member MEMBER of
 * struct T. */
#define SCHED_FIELD(T, MEMBER, NAME, TYPE)                                     \
  { NAME, offsetof(T, MEMBER), LK_OPT_##TYPE }

/* The most fields a sched_kind reads. */
#define SCHED_MAX_FIELDS 3

/* A scheduler whose rate follows its step count (sched_create). */
struct sched_kind {
  size_t size; /* its struct, which begins with a sched_common */
  /* The options read into the struct before init (the rest: NULL). */
  sched_field fields[SCHED_MAX_FIELDS];
  /* Its other options into SELF (NULL: none beyond the fields). */
  int (*init)(void *self, lk_host *host, const lk_options *o);
  /* torch's recursive get_lr at last_epoch E: E 0 is its initial step (at
   * create, and at a restart that is not closed_form), E > 0 a step. */
  int (*apply)(void *self, int64_t e);
  /* torch's step(0) at a closed_form restart: the rate, from base_lr
   * (NULL: the initial step, apply at 0, is the same). */
  double (*closed)(void *self);
  /* Frees what init allocated (NULL: nothing); SELF itself is freed after. */
  void (*fini)(void *self);
};

/* The interval an interval option names. */
lk_interval sched_interval(const lk_options *o);

/* Reads the interval and adds the common state: last_epoch = 0 and base_lr
 * = torch's initial_lr (the optimizer's rate before the first scheduler
 * changed it: the rate now, unless this is the child of a composite whose
 * earlier children did), as torch's constructor leaves them after its
 * initial step. */
int sched_init(sched_common *c, lk_host *host, const lk_options *o);

/* The start of create: *OUT gets a zeroed struct of SIZE bytes that begins
 * with a sched_common, set up by sched_init. The options' ranges are
 * declared in the option tables and enforced by the host (ABI 1.4). The
 * struct is freed with free(): a scheduler with nothing else to free has
 * .destroy = free. */
int sched_new(lk_host *host, const lk_options *o, size_t size, void **out);

/* create of a scheduler of KIND: sched_new, KIND's fields, KIND->init,
 * then torch's initial step (KIND->apply at 0). Such a scheduler's entries
 * are sched_destroy, sched_ops and sched_check_state. */
int sched_create(lk_host *host, const lk_options *o, const sched_kind *kind,
                 void **out);
void sched_destroy(void *self);

/* The create and the descriptor (bundled.h) of a scheduler of sched_kind
 * KIND whose option table is `options`, with CHECK its check_state. */
#define BUNDLED_SCHEDULER_OF(KIND, NAME, SUMMARY, CHECK)                       \
  static int create(lk_host *host, const lk_options *o, void **self) {         \
    return sched_create(host, o, &KIND, self);                                 \
  }                                                                            \
  LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor =                  \
      BUNDLED_SCHEDULER(NAME, SUMMARY, sched_destroy, CHECK, &sched_ops)

/* step: KIND->apply at the new last_epoch, when WHEN is its interval;
 * restart: last_epoch = 0, then KIND->closed or KIND->apply at 0. */
extern const lk_scheduler_ops sched_ops;

/* A checkpoint's values of the common state: torch's step count and the
 * initial rate. SELF starts with a sched_common (every scheduler's first
 * member), so that this is check_state for those with no state of their
 * own. */
int sched_check_state(void *self);

/* Whether a step() call is for this scheduler's interval. */
bool sched_mine(const sched_common *c, lk_interval when);

/* torch's `self.last_epoch += 1`; the new value. */
int64_t sched_advance(sched_common *c);

/* The start of step for a scheduler that needs no metric: false when WHEN
 * is not its interval; otherwise torch's `self.last_epoch += 1`, the new
 * value in *EPOCH. */
bool sched_tick(sched_common *c, lk_interval when, int64_t *epoch);

/* torch's last_epoch = 0 of a restart (lk_scheduler_ops.restart). */
void sched_rewind(sched_common *c);

double sched_base_lr(const sched_common *c);
double sched_lr(const sched_common *c);

/* The host's message names the plugin and the refused rate. */
int sched_set_lr(sched_common *c, double lr);

const char *sched_interval_name(lk_interval when);

/* The value of metric NAME among METRICS; false if it is not there. */
bool sched_metric(const lk_metric *metrics, size_t n, const char *name,
                  double *value);

/* Fails naming the metric that is missing and those that were there. */
int sched_missing_metric(const sched_common *c, lk_interval when,
                         const char *option, const char *name,
                         const lk_metric *metrics, size_t n);

/* For cycle_momentum: torch's ValueError when the optimizer has no
 * momentum (lk_host_momentum is NaN: no get_momentum/set_momentum). */
int sched_need_momentum(lk_host *host);

/* Option NAME, a comma list of whole numbers >= MIN (torch's list of
 * ints: milestones), into *OUT (malloc'd: free it; NULL when empty) and
 * *N; with INCREASING each must be larger than the one before. A value
 * the list's declared range cannot refuse fails naming where the config
 * gives it. */
int sched_int_list(lk_host *host, const lk_options *o, const char *name,
                   int64_t min, bool increasing, int64_t **out, size_t *n);

#endif
