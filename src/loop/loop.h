/* The loop's part (src/loop/): the training run, lk_run, which
 * lk_run_new (run/setup.c) builds and lk_run_train drives, and the
 * functions of the loop's files. The run is made of parts, each owned by
 * one file (docs/architecture.md has the map):
 *
 *   env      instances, roles, tensors, generator, processes, log (env.h)
 *   loop     the [loop] section, parsed               (loopconfig.c)
 *   calls    the entries the loop calls, profiled or not (calls.c)
 *   chain    the optimizer's closure and what wraps it (chain.c)
 *   state    everything the loop knows, checkpointed  (loop.c)
 *   rd       the run directory and its checkpoints    (rundir.c; when
 *            they are written: ckpt_policy.c)
 *   rows     metrics.csv rows and callbacks' additions (rows.c)
 *   loggers  the logger plugins every row also goes to (loggers.c)
 *   meter    progress of an epoch                     (progress.c)
 *   optim    the optimizers, their groups, schedulers (run/optim.c makes
 *            them, optim_step.c steps them)
 *
 * The files that own no part work on them: clip.c, strategy.c,
 * evaluate.c, resume.c, predict.c, export.c here; hooks.c below; setup.c, run.c
 * and launcher.c above (run/setup.h); host.c, manual.c, gradcheck.c (api/).
 * Nothing here reaches up to those parts. */
#ifndef LK_LOOP_H
#define LK_LOOP_H

#include <signal.h>

#include "calls.h"
#include "checkpoint.h"
#include "clip.h"
#include "closures.h"
#include "env.h"
#include "hooks.h"
#include "metrics.h"
#include "optim.h"
#include "shard.h"

/* ---- loopconfig.c: [loop] ------------------------------------------------ */

typedef struct lk__loop_config {
  int64_t max_epochs; /* -1: no limit (max_steps bounds the run) */
  int64_t max_steps;  /* -1: no limit */
  int64_t accumulate;
  double clip_val;
  int64_t clip_algorithm; /* LK__CLIP_NORM or LK__CLIP_VALUE */
  bool terminate_on_nan;
  bool manual;
  int64_t seed;
  int64_t val_every;
  int64_t val_check; /* validate every N steps of an epoch too; 0: not */
  int64_t ckpt_every;
  int64_t keep_last; /* step-N.ckpt files kept besides last.ckpt */
  int64_t log_every; /* steps between progress lines in the log */
  int64_t threads;   /* 0: one per CPU */
  int64_t test_ckpt; /* LK__TEST_LAST or LK__TEST_BEST */
} lk__loop_config;

/* [loop] test_ckpt, in the order of its choices. */
enum { LK__TEST_LAST, LK__TEST_BEST };

/* Parses and checks [loop] of CFG into L. */
int lk__loop_config_parse(const lk_config *cfg, lk__loop_config *l);
/* Writes every [loop] key (given or default) into the effective config. */
int lk__loop_config_export(const lk_config *cfg, lk_config *out);
/* [loop] threads made a count (0: the CPUs this process may run on). */
int lk__threads_resolve(int64_t threads);

/* ---- chain.c: the optimizer's closure ------------------------------------ */

typedef struct lk__chain {
  lk_closure *closure; /* step, zero_grad, backward */
  lk_wrap *wraps[4];   /* what the chain stacks on it, freed with it */
  size_t n_wraps;
  lk_closure_fn opt_closure;   /* what the optimizer receives */
  lk_closure_fn plain_closure; /* what the loop calls between steps */
  lk_batch no_data_batch;
  bool accumulating;      /* a batch inside an accumulation window */
  bool precision_skip;    /* the gradients just unscaled overflowed */
  bool step_skipped;      /* ... so the optimizer gets NaN */
  bool in_training_step;  /* manual-optimization calls are valid */
  bool in_optimizer_step; /* a nested optimizer's step is not a run step */
} lk__chain;

/* Builds the closure chain for RUN's roles and [loop] (after profiling
 * has made run->calls). */
int lk__chain_build(lk_run *run);
void lk__chain_free(lk__chain *c);
/* After every backward (inside the closure, and from lk_host_backward):
 * the gradients reduced over the processes, unscaled, on_after_backward. */
int lk__chain_after_backward(lk_run *run);
/* The precision plugin's loss scale, in *S: refused unless a finite
 * number > 0 (backward in the closure and lk_host_backward both ask). */
int lk__chain_loss_scale(const lk_run *run, double *s);
/* The precision plugin's unscale of the N gradients PARAMS, zeroed when
 * they overflowed (*SKIP: the step is skipped). */
int lk__chain_unscale(lk_run *run, lk_tensor *const *params, size_t n,
                      bool *skip);
/* The result of the closure's last evaluation, with the first failure of
 * the evaluation or of what wraps it (one record: the closure's). */
int lk__chain_consume(lk_run *run, lk_step_result *r);

/* ---- rows.c: metrics.csv ------------------------------------------------- */

#define LK__MAX_EXTRA 16 /* metrics callbacks add to one row */

typedef struct lk__rows {
  lk__metrics *csv; /* NULL: not rank 0, or no run directory */
  /* What callbacks add to the next row (lk_host_log_metric). */
  lk__named_value extra[LK__MAX_EXTRA];
  size_t n_extra;
} lk__rows;

/* Metrics with names made at run time ("val_loss"): the names live here. */
#define LK__MAX_NAMED                                                          \
  (LK_MAX_METRICS + 2 + LK__MAX_EXTRA + LK__MAX_PARTS + LK__MAX_OPTIMIZERS)
typedef struct lk__named {
  lk_metric cells[LK__MAX_NAMED];
  char names[LK__MAX_NAMED][LK__NAME_MAX];
  size_t n;
} lk__named;

void lk__named_add(lk__named *nm, const char *prefix, const char *name,
                   double v);
void lk__named_result(lk__named *nm, const char *prefix,
                      const lk_step_result *r);
/* A row of metrics.csv at STEP (LOSS may be NULL); lk_host_metric sees
 * every cell. */
int lk__rows_log(lk_run *run, uint64_t step, const double *loss,
                 const lk__named *nm);
/* An evaluation's row, and its line in the log, both under EPOCH: the
 * epoch (counted from 0) whose weights were evaluated. */
int lk__rows_log_evaluation(lk_run *run, uint64_t epoch, const char *prefix,
                            const lk__named *nm);
/* The latest value logged under NAME (the loop state's). */
void lk__rows_seen(lk_run *run, const char *name, double value);
int lk__rows_extra(lk_run *run, const char *who, const char *name,
                   double value);

/* ---- loggers.c: the logger plugins -------------------------------------- */

typedef struct lk__loggers {
  size_t started; /* the first STARTED loggers have started */
} lk__loggers;

/* Starts every logger (rank 0, with a run directory): before
 * on_train_start. */
int lk__loggers_start(lk_run *run);
/* A row of metrics.csv, to every started logger (LOSS may be NULL). */
int lk__loggers_log(lk_run *run, uint64_t step, uint64_t epoch,
                    const double *loss, const lk__named *nm);
/* A checkpoint is about to be written: each logger's save. */
int lk__loggers_save(lk_run *run);
/* The session ended with RC (0, LK_EINTERRUPTED or a failure): each
 * started logger's finalize. Returns RC, or finalize's failure when RC
 * was 0. */
int lk__loggers_finalize(lk_run *run, int rc);

/* ---- progress.c ---------------------------------------------------------- */

typedef struct lk__meter {
  double t0;          /* when this epoch (or the run, without data) started */
  uint64_t first;     /* batch it started at (a resumed epoch) */
  uint64_t n_batches; /* 0: no epochs, steps are counted */
  uint64_t samples;
  double last_loss;
} lk__meter;

/* An epoch starts at batch FIRST of N_BATCHES (0 without data); a
 * training batch ended (BATCH NULL without data). */
void lk__meter_start(lk_run *run, uint64_t first, uint64_t n_batches);
void lk__meter_batch(lk_run *run, const lk_batch *batch, uint64_t step_before);
double lk__now(void);

/* ---- rundir.c ------------------------------------------------------------ */

#define LK__MAX_PENDING 8 /* checkpoints asked for at once */

typedef struct lk__rundir {
  char *dir;       /* NULL: this process writes no run directory */
  char *ckpt_dir;  /* DIR/checkpoints */
  char *last_ckpt; /* DIR/checkpoints/last.ckpt */
  int lock_fd;     /* DIR/.lock, held for the run's life; -1 before */
  bool in_place;   /* a resume continuing the run that wrote the checkpoint */
  char *source;    /* a resume in a new directory: the run directory that
                      wrote the checkpoint, if it is one; else NULL */
  /* A resume in place: the config.ini it goes on with, written before its
   * first checkpoint (a resume that fails before one leaves the file as
   * it was); NULL when there is nothing to write. */
  char *config_text, *config_tail;
  size_t config_len;
  bool saved; /* it has a last.ckpt: written, or resumed in place */
  /* Checkpoints callbacks asked for, written where the state is whole. */
  char *pending[LK__MAX_PENDING];
  size_t n_pending;
} lk__rundir;

/* Chooses, locks and fills the run directory (a resumed run's checkpoint
 * has status CK_ST), opens metrics.csv. CFG is the config the run was made
 * from: its path names a new run directory, and its --set arguments are
 * recorded in config.ini. */
int lk__rundir_open(lk_run *run, const lk_config *cfg,
                    const struct stat *ck_st);
void lk__rundir_close(lk__rundir *rd);
/* last.ckpt (and step-N.ckpt with keep_last): the "checkpoint_save" phase. */
int lk__rundir_save(lk_run *run);
/* A checkpoint a plugin asked for, written at the next whole point. */
int lk__rundir_request(lk_run *run, const char *who, const char *dir,
                       const char *file);
int lk__rundir_write_pending(lk_run *run);
/* Whether the run directory has a last.ckpt of this run (true without a
 * run directory: rank 0 writes it). */
bool lk__rundir_has_last(const lk_run *run);
/* DIR when checkpoint CKPT is DIR/checkpoints/FILE or
 * DIR/checkpoints/NAME/FILE of a run directory (DIR holds a config.ini),
 * as written or, for a symbolic link, as it points; *OUT NULL when it is
 * in none. The run a checkpoint belongs to (lk_checkpoint_run_config, a
 * model that does not fit its checkpoint). */
int lk__ckpt_run_dir(const char *ckpt, char **out);

/* ---- ckpt_policy.c: when checkpoints are written, what callbacks keep ---- */

/* The checkpoints callbacks asked for, written now. */
int lk__ckpt_pending(lk_run *run);
/* Between windows (STEP_BEFORE the step count before this one): the
 * checkpoints asked for, and last.ckpt every checkpoint_every_n_steps. */
int lk__ckpt_after_window(lk_run *run, uint64_t step_before);
/* At an epoch's end: the checkpoints asked for, and last.ckpt unless
 * checkpoint_every_n_steps. */
int lk__ckpt_after_epoch(lk_run *run);
/* Whether callback CB keeps checkpoints of its own, and best.ckpt among
 * them (what it declared, else what its options say). */
bool lk__ckpt_keeps(const lk__instance *cb);
bool lk__ckpt_keeps_best(const lk__instance *cb);
/* The directory CB keeps them in, as the run directory's files are named
 * (relative to it unless absolute; no "./", no trailing '/'), into BUF. */
void lk__ckpt_keeper_dir(const lk__instance *cb, char *buf, size_t len);
/* CB's best.ckpt in run directory RUN_DIR (malloc'd; NULL: no memory). */
char *lk__ckpt_best_path(const lk__instance *cb, const char *run_dir);
/* The callback whose best.ckpt [loop] test_ckpt = best tests: the first
 * listed that keeps one, as Lightning's trainer.checkpoint_callback. */
const lk__instance *lk__ckpt_best_keeper(const lk_run *run);
/* The config's checks of them: test_ckpt = best has a callback to test
 * (run->best_keeper) and one process; no two callbacks keep theirs in
 * one directory. CFG names the lines. */
int lk__ckpt_check(lk_run *run, const lk_config *cfg);

/* ---- resume.c ------------------------------------------------------------ */

/* What a config's instances start with (run/setup.c's lk__start_values,
 * which lk__resume is given: the loop makes no runs). */
typedef int (*lk__starts_fn)(const lk_config *cfg, lk__ckpt **out);

/* Restores RUN from the checkpoint at PATH, every value checked first (the
 * host's, then each plugin's check_state). ST gets the file's status. CFG
 * (the config RUN was made from, or NULL) gives the --set arguments, whose
 * effect on the checkpoint's values is decided there, with what STARTS
 * says CFG without each would start with (setup.c gives it: resume.c
 * does not make runs). */
int lk__resume(lk_run *run, const lk_config *cfg, lk__starts_fn starts,
               const char *path, struct stat *st);

/* Instance IN checks the state it now holds, loaded from the checkpoint
 * PATH (ABI 1.4's check_state; nothing for a plugin without one). Fails
 * with LK_EFORMAT, its message naming PATH and the plugin. */
int lk__check_state(const lk__instance *in, const char *path);

/* ---- strategy.c: processes ----------------------------------------------- */

/* The strategy's rank and world, then its setup. */
int lk__strategy_setup(lk_run *run);
/* Sums N values over the processes (nothing to do in one). */
int lk__reduce_sum(lk_run *run, double *values, size_t n);
/* A failed process stops the others, which would wait for it forever. */
void lk__abort_others(lk_run *run, int status, const char *message);

/* ---- evaluate.c ---------------------------------------------------------- */

/* Evaluates SPLIT (validation or test); *RAN false when it has no
 * batches. MEAN gets the loss and metrics averaged over its samples. */
int lk__evaluate(lk_run *run, lk_split split, bool *ran, lk_step_result *mean);
/* A step result is the plugin's: checked before anything uses it. */
int lk__check_result(const lk_step_result *r, const char *entry,
                     const char *plugin);

/* ---- predict.c ----------------------------------------------------------- */

/* The model's tensors (every parameter, the model plugins' states) kept
 * aside, then put back: the test on best.ckpt leaves the trained model
 * as it was for the last checkpoint. */
typedef struct lk__model_copy lk__model_copy;
int lk__model_keep(const lk_run *run, lk__model_copy **out);
void lk__model_restore(const lk__model_copy *c);
void lk__model_copy_free(lk__model_copy *c);
/* Whether tensor NAME is a state of the model's plugins (the step's or
 * the backward's, named PLUGIN.NAME): batch norm's running statistics. */
bool lk__model_state(const lk_run *run, const char *name);
/* lk_run_load_params on an environment with or without a run
 * (lk_model_open's): the checkpoint PATH's parameters and model states
 * into ENV's step (and backward) plugin, checked by name, dtype and shape
 * both ways first. */
int lk__env_load_params(lk__env *env, const char *path);

/* ---- optim_step.c: stepping the optimizers and schedulers ---------------- */

/* One step of optimizer OP: every group, on one evaluation of CLOSURE
 * (NULL in manual optimization: the gradients are there). */
int lk__optim_step(lk_run *run, lk__optimizer *op, lk_closure_fn closure);
/* Several optimizers, automatic: OP's closure runs next (NULL: none). */
void lk__optim_turn(lk_run *run, lk__optimizer *op);
/* The parameters the active optimizer steps (all, with one), and those
 * its zero_grad clears. */
lk_tensor *const *lk__optim_active_params(const lk_run *run, size_t *n);
lk_tensor *const *lk__optim_zero_set(const lk_run *run, size_t *n);
/* Several optimizers: before the active one's backward (KEEP) the others'
 * gradients are kept, after it put back. Nothing with one. */
int lk__optim_stash(lk_run *run, bool keep);
/* Every group's rate before a step; its lr columns (with a scheduler);
 * every scheduler's step, with its groups' copies. */
void lk__optim_note_lr(lk_run *run);
void lk__optim_add_lr(const lk_run *run, lk__named *nm);
int lk__optim_schedule(lk_run *run, lk_interval when, const lk__named *nm);

/* ---- loop.c -------------------------------------------------------------- */

int lk__train_epoch(lk_run *run);

/* ---- the run ------------------------------------------------------------- */

struct lk_run {
  lk__env env;          /* instances, roles, tensors, generator, log */
  lk_run_options opts;  /* setup.c */
  lk_config *cfg;       /* the effective config, defaults filled in */
  lk__loop_config loop; /* loopconfig.c */
  lk__calls calls;      /* calls.c */
  lk__profiling prof;   /* calls.c: the wrappers to free */
  lk__chain chain;      /* chain.c */
  lk__loop_state state; /* loop.c: everything a checkpoint carries */
  lk__rundir rd;        /* rundir.c */
  lk__rows rows;        /* rows.c */
  lk__loggers loggers;  /* loggers.c */
  lk__meter meter;      /* progress.c */
  lk__optim optim;      /* run/optim.c: optimizers, groups, schedulers */
  volatile sig_atomic_t interrupted;
  bool interrupt_agreed; /* by every process, at the last window's end */
  bool trained;          /* this process trained a batch */
  bool complete;         /* resumed from a complete run: nothing to do */
  bool resumed;
  bool warned_shards;
  bool noted_batch;  /* several processes: the batch size per step said */
  char *set_effects; /* resume.c: what --set changed in the checkpoint's
                        values, for config.ini's history line; or NULL */
  double seconds;
  /* [loop] test_ckpt = best: the checkpoint callback whose best.ckpt the
   * test runs on (ckpt_policy.c); NULL otherwise. */
  const lk__instance *best_keeper;
};

/* The instance playing role K (NULL: none). */
static inline lk__instance *lk__role(const lk_run *run, lk__kind_id k) {
  return run->env.reg.role[k];
}

#endif
