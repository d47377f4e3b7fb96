/* The run: what lk_run_new builds and lk_run_train drives. Shared by run.c
 * (setup), loop.c (training) and host.c (what plugins may call). */
#ifndef LK_RUN_PRIVATE_H
#define LK_RUN_PRIVATE_H

#include <signal.h>

#include "internal.h"
#include "metrics.h"
#include "options.h"

typedef struct lk__instance lk__instance;

/* Each plugin instance sees the run through its own handle, so that what it
 * logs, fails with or allocates is attributed to it. */
struct lk_host {
  lk_run *run;
  lk__instance *inst;
};

struct lk__instance {
  lk_plugin *plugin;
  const lk_descriptor *desc;
  char *name;  /* as named in [plugins]: its config section */
  char *given; /* a path as named in [plugins] (name is then the
                  descriptor's), so that roles naming it share it */
  lk_options *opts;
  void *self;
  bool created;
  lk_host host;
};

/* The entries the loop calls: the plugins' own functions, or with a
 * profiler the wrappers that time them (profile.h). The last three are the
 * loop's own phases, wrapped the same way. */
typedef struct lk__calls {
  int (*training_step)(void *self, const lk_batch *batch, lk_step_result *out);
  int (*validation_step)(void *self, const lk_batch *batch,
                         lk_step_result *out);
  int (*test_step)(void *self, const lk_batch *batch, lk_step_result *out);
  int (*zero_grad)(void *self, lk_tensor *const *params, size_t n);
  int (*backward)(void *self, const lk_batch *batch, double scale);
  int (*optimizer_step)(void *self, lk_tensor *const *params, size_t n,
                        lk_closure_fn closure);
  int (*data_epoch)(void *self, lk_split split, uint64_t epoch, size_t *n);
  int (*data_batch)(void *self, lk_split split, size_t index, lk_batch *out);
  int (*scheduler_step)(void *self, lk_interval when, const lk_metric *m,
                        size_t n);
  int (*train_epoch)(lk_run *run);
  int (*validate)(lk_run *run, lk_split split, bool *ran, lk_step_result *r);
  int (*test)(lk_run *run, lk_split split, bool *ran, lk_step_result *r);
  int (*save)(lk_run *run);
} lk__calls;

#define LK__MAX_PROFILED 16

/* Progress within an epoch (progress.c). */
typedef struct lk__meter {
  double t0;          /* when this epoch (or the run, without data) started */
  uint64_t first;     /* batch it started at (a resumed epoch) */
  uint64_t n_batches; /* 0: no epochs, steps are counted */
  uint64_t samples;
  double last_loss;
} lk__meter;

enum { LK__CLIP_NORM, LK__CLIP_VALUE };

typedef struct lk__loop_config {
  int64_t max_epochs;
  int64_t max_steps; /* -1: no limit */
  int64_t accumulate;
  double clip_val;
  int clip_algorithm;
  bool terminate_on_nan;
  bool manual;
  uint64_t seed;
  int64_t val_every;
  int64_t ckpt_every;
  int64_t keep_last; /* step-N.ckpt files kept besides last.ckpt */
  int64_t log_every; /* steps between progress lines in the log */
} lk__loop_config;

#define LK__MAX_CALLBACKS 16
#define LK__MAX_EXTRA 16  /* metrics callbacks add to one row */
#define LK__MAX_PENDING 8 /* checkpoints asked for at once */
#define LK__MAX_NESTED 16 /* plugins created by plugins (sam's base) */

/* The run directory and the checkpoints asked for (rundir.c). */
typedef struct lk__rundir {
  char *dir;       /* NULL: this process writes no run directory */
  char *ckpt_dir;  /* DIR/checkpoints */
  char *last_ckpt; /* DIR/checkpoints/last.ckpt */
  int lock_fd;     /* DIR/.lock, held for the run's life; -1 before */
  bool in_place;   /* a resume continuing the run that wrote the checkpoint */
  /* Checkpoints callbacks asked for, written where the state is whole. */
  char *pending[LK__MAX_PENDING];
  size_t n_pending;
} lk__rundir;

struct lk_run {
  lk_config *cfg; /* the effective config, defaults filled in */
  lk_run_options opts;
  lk__loop_config loop;

  lk__instance **instances; /* one per distinct plugin name */
  size_t n_instances;
  lk__instance *step, *backward, *zero_grad, *optimizer, *scheduler, *profiler,
      *data, *strategy, *precision;
  lk__instance **created; /* in creation order */
  size_t n_created;
  const lk_config *src_cfg; /* during creation: where options come from */
  lk__instance *callbacks[LK__MAX_CALLBACKS + 1]; /* + the model's own */
  size_t n_callbacks;

  lk_tensor **params;
  size_t n_params;
  lk_tensor **states;
  size_t n_states;
  bool setup_done; /* no more params or state after creation */

  lk_rng rng;
  lk__rundir rd;

  lk_batch no_data_batch;
  lk_closure *closure;
  lk_wrap *after_wrap, *mean_wrap, *skip_wrap;
  lk_closure_fn opt_closure;   /* what the optimizer receives */
  lk_closure_fn plain_closure; /* what the loop calls between steps */

  lk__calls calls;
  lk__meter meter;
  struct lk__profiled *profiled[LK__MAX_PROFILED]; /* wrappers to free */
  size_t n_profiled;

  int rank, world;      /* from the strategy: 0 and 1 without one */
  lk__loop_state state; /* everything a checkpoint carries but tensors */
  bool trained;         /* this process trained a batch */
  bool complete;        /* resumed from a complete run: nothing to do */
  volatile sig_atomic_t interrupted;
  bool interrupt_agreed; /* by every process, at the last window's end */
  bool accumulating;     /* a batch inside an accumulation window */
  bool precision_skip;   /* the gradients just unscaled overflowed */
  bool step_skipped;     /* ... so the optimizer gets NaN */
  bool warned_shards;
  bool resumed;
  bool in_training_step;  /* manual-optimization calls are valid */
  bool in_optimizer_step; /* a nested optimizer's step is not a run step */
  int hook_rc;            /* a failure after the closure (hooks, clipping) */
  char hook_msg[1024];
  lk__metrics *metrics;
  double seconds;

  /* What callbacks add to the next row (lk_host_log_metric). */
  lk__named_value extra[LK__MAX_EXTRA];
  size_t n_extra;
};

/* run.c */
int lk__instance_for(lk_run *run, const char *name, const char *where,
                     lk__instance **out);
int lk__instance_create(lk_run *run, lk__instance *in);
bool lk__has_kind(const lk__instance *in, const char *role);

/* host.c: an optimizer's get_lr/set_lr, or NULL if it has none (or was
 * built for ABI 1.0, whose ops table ends before them). */
const lk_optimizer_ops *lk__optimizer_lr_ops(const lk__instance *in);

/* progress.c: an epoch starts at batch FIRST of N_BATCHES (0 without
 * data); a training batch ended (BATCH NULL without data). */
void lk__meter_start(lk_run *run, uint64_t first, uint64_t n_batches);
void lk__meter_batch(lk_run *run, const lk_batch *batch, uint64_t step_before);
double lk__now(void);

/* rundir.c: chooses, locks and fills the run directory (a resumed run's
 * checkpoint has status CK_ST), opens metrics.csv; writes last.ckpt (and
 * step-N.ckpt with keep_last), the checkpoints callbacks asked for. */
int lk__rundir_open(lk_run *run, const char *config_path,
                    const struct stat *ck_st);
void lk__rundir_close(lk__rundir *rd);
int lk__rundir_save(lk_run *run);
int lk__rundir_request(lk_run *run, const char *who, const char *file);
int lk__rundir_write_pending(lk_run *run);

/* resume.c: restores RUN from the checkpoint at PATH, every value checked
 * first (the host's, then each plugin's check_state): a checkpoint that
 * does not fit loads nothing. ST gets the file's status. */
int lk__resume(lk_run *run, const char *path, struct stat *st);

/* loop.c */
int lk__loop_run(lk_run *run);
int lk__clip_gradients(lk_run *run, double value, int algorithm);
int lk__save_checkpoint(lk_run *run);
int lk__train_epoch(lk_run *run);
int lk__evaluate(lk_run *run, lk_split split, bool *ran, lk_step_result *mean);

/* host.c */
int lk__add_tensor(lk_run *run, lk__instance *inst, const char *name,
                   lk_dtype dtype, size_t ndim, const size_t *shape, bool param,
                   lk_tensor **out);
void lk__free_tensors(lk_run *run);
int lk__hook(lk_run *run, size_t offset, const char *hook);
int lk__hook_before_backward(lk_run *run, double loss);
int lk__after_backward(lk_run *run);
int lk__reduce_sum(lk_run *run, double *values, size_t n);
void lk__abort_others(lk_run *run, int status, const char *message);
void lk__log(lk_run *run, lk_log_level level, const char *fmt, ...)
    LK_PRINTF(3, 4);
void lk__metric_seen(lk_run *run, const char *name, double value);

#endif
