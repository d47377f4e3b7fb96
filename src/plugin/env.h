/* What a plugin's host handle reaches: the instances, the tensors, the
 * generator, the processes and the log, with or without a training run
 * around them. lk_optimizer_open gives one optimizer an environment and
 * no run; a training run (lk_run) holds one as its first part. */
#ifndef LK_ENV_H
#define LK_ENV_H

#include "claims.h"
#include "modellayers.h"
#include "registry.h"
#include "tensors.h"

typedef struct lk__logger {
  lk_log_fn fn; /* NULL: messages are dropped */
  void *user;
  lk_log_level verbosity;
} lk__logger;

struct lk__env {
  lk__registry reg;
  lk__tensors tensors;
  lk__model_layers layers; /* lk_host_add_layer: for the model's summary */
  lk__claims claims;       /* lk_host_section_value: sections plugins read */
  lk_rng rng;
  uint64_t seed;
  int rank, world; /* from the strategy: 0 and 1 without one */
  int threads;     /* lk_host_threads: always >= 1 */
  lk__logger log;
  const lk_config *src_cfg; /* during creation: where options come from */
  lk_run *run;              /* the training run; NULL outside one */
  /* Without a data plugin: the samples' shape lk_host_data_shape gives
   * (lk_model_open's, read from the config's data plugin and that plugin
   * then freed); NULL: none. */
  const lk_sample_shape *sample_shape;
  /* Before an instance's create: its options' auto values made numbers
   * (auto.c's lk__auto_options, set by a run). NULL: none can be. */
  int (*prepare)(lk__env *env, lk__instance *in);
};

/* log.c: a message of the host's own, when LEVEL is logged. */
void lk__log(const lk__env *env, lk_log_level level, const char *fmt, ...)
    LK_PRINTF(3, 4);

#endif
