/* loopkit — training runs, plugins and checkpoints, for hosts such as the
 * loopkit command. */
#ifndef LOOPKIT_RUN_H
#define LOOPKIT_RUN_H

#include <stdio.h>

#include "loopkit/config.h"
#include "loopkit/export.h"
#include "loopkit/host.h"
#include "loopkit/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- plugins ------------------------------------------------------------ */

typedef struct lk_plugin lk_plugin; /* a loaded shared object */

/* Loads NAME: a name ([A-Za-z0-9_-]+) searched in LOOPKIT_PLUGIN_PATH and
 * then the installed plugin directory, or a path containing '/'. Errors name
 * the plugin, every path tried and dlerror's text. */
LK_API int lk_plugin_open(const char *name, lk_plugin **out);
LK_API void lk_plugin_close(lk_plugin *p);
LK_API const lk_descriptor *lk_plugin_desc(const lk_plugin *p);
LK_API const char *lk_plugin_path(const lk_plugin *p);
/* A layers plugin's I-th layer type (since ABI 1.6), the host's checked
 * copy of its table (loopkit/layer.h); NULL past the last or when P has
 * none. */
LK_API const struct lk_layer_type *lk_plugin_layer(const lk_plugin *p,
                                                   size_t i);

/* "step,backward" — the kinds P implements, into BUF. */
LK_API const char *lk_plugin_kinds(const lk_plugin *p, char *buf, size_t len);

/* Calls EACH with the path of every NAME.so on the search path, in search
 * order; a name found twice is reported once (the first wins). */
LK_API int lk_plugin_scan(int (*each)(void *user, const char *name,
                                      const char *path),
                          void *user);

/* Calls EACH with every directory of the plugin search path, in search
 * order: DIR; SOURCE, where it comes from ("LOOPKIT_PLUGIN_PATH", its
 * libtool .libs subdirectory, the build tree an uninstalled loopkit runs
 * from, "the installed plugin directory"); and SKIPPED, NULL when DIR
 * holds a NAME.so, otherwise why the search finds nothing there ("no such
 * directory", "holds no NAME.so file"). A non-zero return of EACH stops
 * the walk and is returned. Fails as lk_plugin_scan does on a refused
 * LOOPKIT_PLUGIN_PATH. */
LK_API int lk_plugin_search_dirs(int (*each)(void *user, const char *dir,
                                             const char *source,
                                             const char *skipped),
                                 void *user);

/* The installed plugin directory: LIBDIR/loopkit beside the libloopkit.so
 * loaded, where there is one (an installed tree, wherever it landed);
 * else the configured $(pkglibdir), compiled in. */
LK_API const char *lk_plugin_dir(void);

/* "int", "double", "bool", "string", "enum", "doubles", "path", "paths". */
LK_API const char *lk_option_type_name(lk_option_type type);

/* ---- runs --------------------------------------------------------------- */

/* Where a training epoch is, for a host that draws a progress bar. */
typedef struct lk_progress {
  uint64_t epoch;     /* 0-based */
  int64_t max_epochs; /* 0 without a data plugin (no epochs); -1: no limit */
  uint64_t batch;     /* batches of this epoch done (steps without data) */
  uint64_t n_batches; /* in this epoch; without data: max_steps */
  uint64_t global_step;
  double loss;       /* the last step's; NaN before the first */
  double per_second; /* samples (steps without data) per second */
  double elapsed;    /* seconds since this epoch started */
  double eta;        /* seconds left in this epoch */
  bool epoch_done;   /* the epoch's last batch */
} lk_progress;
typedef void (*lk_progress_fn)(void *user, const lk_progress *p);

typedef struct lk_run_options {
  const char *out_dir; /* NULL: a new runs/<config name>-<N> */
  /* Checkpoint to resume from, or NULL. The run continues in the run
   * directory that wrote it when it is that run's latest
   * (DIR/checkpoints/last.ckpt, with no out_dir or out_dir = DIR), and
   * otherwise in a new one (out_dir, or runs/<config name>-<N>). */
  const char *resume;
  lk_log_fn log; /* NULL: messages are dropped */
  void *log_user;
  lk_log_level verbosity;
  bool no_run_dir; /* set up the run without a run directory (gradcheck) */
  /* Called after every training batch: a host on a terminal draws a
   * progress bar. Without it the run logs a line every [loop]
   * log_every_n_steps optimizer steps instead. */
  lk_progress_fn progress;
  void *progress_user;
} lk_run_options;

typedef struct lk_run lk_run;

/* Validates CFG, loads and creates the plugins, restores the checkpoint
 * to resume from (every value checked), makes or reopens the run directory
 * and locks it, opens metrics.csv. Fails (nothing trained) on any config,
 * plugin, checkpoint or run directory error. */
LK_API int lk_run_new(const lk_config *cfg, const lk_run_options *opts,
                      lk_run **out);

/* Trains. 0 when training finished (or was stopped by a callback);
 * LK_EINTERRUPTED after lk_run_interrupt, once the current step finished
 * and a checkpoint was written. */
LK_API int lk_run_train(lk_run *run);

/* Whether lk_run_train's failure RC came before anything was trained in
 * this process (a checkpoint or config that does not fit the data, found
 * at the first epoch): the loopkit command exits with 2 for it, as for a
 * failure of lk_run_new, and with 1 for a run that started and failed. */
LK_API bool lk_run_failed_before_training(const lk_run *run, int rc);

/* Asks a training run to stop after its current step, write a checkpoint
 * and return LK_EINTERRUPTED. It only stores to a sig_atomic_t, so a
 * signal handler may call it. */
LK_API void lk_run_interrupt(lk_run *run);

/* The checkpoint a run writes ("DIR/checkpoints/last.ckpt"), NULL if none. */
LK_API const char *lk_run_checkpoint(const lk_run *run);

/* NULL on a process other than rank 0 of a distributed run: only rank 0
 * writes the run directory. */
LK_API const char *lk_run_dir(const lk_run *run);
/* This process's rank (0 without a strategy plugin). */
LK_API int lk_run_rank(const lk_run *run);

/* Gradient check: compares the backward plugin's gradients with central
 * differences of the step's loss, on the first BATCHES training batches
 * (the whole problem without data), for at most SAMPLES elements of each
 * parameter (spread over it deterministically). REPORT gets each
 * parameter's largest relative error |a - n| / max(|a|, |n|, 1e-3) and the
 * number of elements checked. An element w steps by h = STEP * max(1, |w|),
 * STEP by the parameter's dtype: LK_GRADCHECK_STEP_F64, near the optimum
 * of central differences in double, or LK_GRADCHECK_STEP_F32, larger as
 * f32's rounding is. LK_GRADCHECK_TOLERANCE_* are the relative errors such
 * steps are good to on a smooth model (what loopkit gradcheck accepts by
 * default): an f32 check cannot tell a small error in a backward from its
 * own, and a step across a kink (ReLU, max) can exceed it too, but a wrong
 * term is off by O(1). */
#define LK_GRADCHECK_STEP_F64 1e-6
#define LK_GRADCHECK_STEP_F32 3e-3
#define LK_GRADCHECK_TOLERANCE_F64 1e-6
#define LK_GRADCHECK_TOLERANCE_F32 1e-2
typedef void (*lk_gradcheck_fn)(void *user, const char *param,
                                double max_rel_error, size_t checked);
LK_API int lk_run_gradcheck(lk_run *run, size_t batches, size_t samples,
                            lk_gradcheck_fn report, void *user);
/* The same check, each parameter's row with the elements it skipped. Each
 * element is differenced with the dtype's step h and with h / 8: h's
 * answer stands when its one-sided differences agree (no kink: a ReLU's
 * zero or a max's tie between w - h and w + h) and h / 8's central
 * difference agrees with it to half the dtype's default tolerance;
 * otherwise h / 8's stands, and the element is skipped when h / 8's
 * one-sided differences disagree too. The differences' own rounding r,
 * LK_GRADCHECK_NOISE_ULPS units of the dtype's in each loss over the step,
 * bounds what they resolve: the error's scale is max(|a|, |n|, 1e-3,
 * r / tolerance). The one-sided differences count as disagreeing past the
 * f32 tolerance in f32, 0.1 in f64. An element over tolerance is judged
 * again against the backward's own values over the window (at w - h,
 * w - h/2, w, w + h/2, w + h, its gradients overwritten and restored):
 * the difference is the mean of the derivative over the window, which
 * moves where units flip inside it, and its error is the distance outside
 * their range. Every evaluation starts from the same generator state:
 * dropout draws the same masks each time (train mode, randomness frozen).
 */
#define LK_GRADCHECK_NOISE_ULPS 8.0
typedef struct lk_gradcheck_row {
  const char *param;
  double max_rel_error; /* over the elements checked */
  size_t checked;
  size_t skipped; /* at a kink */
} lk_gradcheck_row;
typedef void (*lk_gradcheck_row_fn)(void *user, const lk_gradcheck_row *row);
LK_API int lk_run_gradcheck_rows(lk_run *run, size_t batches, size_t samples,
                                 lk_gradcheck_row_fn report, void *user);

/* Using a trained model (loopkit generate, test, validate, predict), in a
 * run set up with no_run_dir. lk_run_load_params: every parameter of the
 * run, and every state of the model's plugins (the step's and the
 * backward's: batch norm's running statistics), from checkpoint CKPT,
 * which must hold exactly the ones the config's model has (names, dtypes,
 * shapes; the optimizer's and callbacks' state is not read); otherwise
 * LK_EFORMAT naming CKPT and the tensor, and nothing is loaded. The model
 * plugins' check_state then checks what they hold. lk_run_predict: the
 * step plugin's predict_step (ABI 1.4) on BATCH, OUT as it says (the
 * plugin's tensor, [BATCH->size, ...], valid until the next call);
 * LK_EKIND when the plugin has none. */
LK_API int lk_run_load_params(lk_run *run, const char *ckpt);
LK_API int lk_run_predict(lk_run *run, const lk_batch *batch, lk_tensor *out);

/* Evaluates split SPLIT (LK_SPLIT_VAL or LK_SPLIT_TEST) as training does
 * at an epoch's end or after the last: the step plugin's validation_step
 * (test_step for the test, when it has one) on every batch, MEAN the loss
 * and metrics averaged over the samples. No callback is called and
 * nothing is written. *RAN false when the split has no batches;
 * LK_ECONFIG without a data plugin. */
LK_API int lk_run_evaluate(lk_run *run, lk_split split, bool *ran,
                           lk_step_result *mean);

/* lk_run_predict on every batch of split SPLIT (LK_SPLIT_VAL or
 * LK_SPLIT_TEST) in order, each output handed to EACH with its batch;
 * a non-zero return of EACH stops and is returned. LK_ECONFIG without a
 * data plugin; a split without batches calls EACH never. */
typedef int (*lk_predict_fn)(void *user, const lk_batch *batch,
                             const lk_tensor *out);
LK_API int lk_run_predict_split(lk_run *run, lk_split split, lk_predict_fn each,
                                void *user);

/* "trained N steps (E epochs) in T s; last loss L; run directory D". */
LK_API int lk_run_summary(const lk_run *run, char *buf, size_t len);

/* The model's summary, as Lightning's ModelSummary gives it (loopkit
 * summary): a row per layer the model declared (lk_host_add_layer), in
 * the order of its forward, with the parameters and buffers it owns; the
 * tensors of no declared layer in rows named by their names' first part
 * ("wte", "h.0"), TYPE "-" and no output shape; then the totals. */
typedef struct lk_model_summary_row {
  const char *name; /* the prefix of its tensors' names */
  const char *type; /* "conv2d"; "-": not declared */
  size_t ndim;      /* of OUT, one sample's output; 0: not said */
  size_t out[LK_MAX_DIMS];
  size_t params;  /* elements of its parameters */
  size_t buffers; /* elements of its buffers (running_mean, ...) */
} lk_model_summary_row;

typedef struct lk_model_summary {
  lk_model_summary_row *rows;
  size_t n_rows;
  size_t params, trainable; /* elements; trainable: an optimizer steps them
                               (all of them when none does: manual) */
  size_t param_bytes;
  size_t buffers, buffer_bytes;
  /* elements of every declared layer's output for one sample, what a
   * forward for training keeps (f32): 0 when no layer said its shape */
  size_t activations;
  size_t declared; /* rows the model declared */
} lk_model_summary;

/* RUN's model summary into OUT (free it with lk_model_summary_free):
 * valid while RUN is. */
LK_API int lk_run_model_summary(lk_run *run, lk_model_summary *out);
LK_API void lk_model_summary_free(lk_model_summary *s);
/* The totals as one line: "1,199,882 parameters (all trainable, 4.6 MiB),
 * 0 buffers, activations 52,554 values (205 KiB) a sample". */
LK_API const char *lk_model_summary_totals(const lk_model_summary *s, char *buf,
                                           size_t len);

/* Introspection for hosts, tests and benchmarks: the closure pointer the
 * optimizer receives (with whatever wrapping the config asks for), the
 * parameters, and the instance (self) playing ROLE with its descriptor. */
LK_API lk_closure_fn lk_run_closure(lk_run *run);
LK_API lk_tensor *const *lk_run_params(lk_run *run, size_t *n);
LK_API void *lk_run_instance(lk_run *run, const char *role,
                             const lk_descriptor **desc);
LK_API void lk_run_free(lk_run *run);

/* The keys of [loop] and of [plugins], declared as plugin options are
 * (name, type, default as written in a config, help; the table ends with
 * name == NULL): what a config may hold besides plugin sections. A NULL
 * default in [plugins]: the role is empty unless named. */
LK_API const lk_option *lk_run_loop_keys(void);
LK_API const lk_option *lk_run_plugin_keys(void);

/* ---- optimizers outside a run ------------------------------------------ */

/* Loads optimizer plugin NAME and creates it for PARAMS, which the caller
 * owns: each has data and grad of numel elements, f32 or f64, and they
 * stay valid until lk_optimizer_close. Options come from CFG's section
 * [NAME] (CFG may be NULL: every default). There is no run: no data, no
 * run directory, no checkpoints, no scheduler; randomness is seeded with 0.
 * lk_optimizer_step(OPT, PARAMS, N, CLOSURE) then minimises any closure
 * that fills the gradients and returns the loss, one made with lk_bind
 * from a plain C function for instance. */
LK_API int lk_optimizer_open(const char *name, const lk_config *cfg,
                             lk_tensor *const *params, size_t n,
                             lk_optimizer **out);
/* Destroys the optimizer and unloads its plugin. OPT may be NULL. */
LK_API void lk_optimizer_close(lk_optimizer *opt);

/* ---- checkpoints -------------------------------------------------------- */

/* Prints every parameter of the checkpoint at PATH, one value a line:
 * NAME[INDEX] VALUE (%.17g for f64, %.9g for f32). */
LK_API int lk_checkpoint_dump(const char *path, FILE *out);

/* Writes every parameter of checkpoint CKPT (not the optimizer's or the
 * host's state) to PATH as safetensors, atomically: each with its name,
 * dtype (F32, F64) and shape, in the order they were added, and
 * "__metadata__" {"format": "pt", "step": global step, "epoch": epochs
 * completed, "plugin": PLUGIN (omitted when NULL or empty)}. Refuses to
 * overwrite CKPT itself (LK_EINVAL). */
LK_API int lk_checkpoint_export(const char *ckpt, const char *path,
                                const char *plugin);

/* As lk_checkpoint_export, with the buffers of RUN's model (the step's and
 * the backward's plugins' lk_host_add_buffer: batch norm's running_mean,
 * running_var and num_batches_tracked) after the parameters, under their
 * names without the plugin's prefix and a count as I64: torch's
 * state_dict() of the same network, which load_state_dict(strict=True)
 * takes. CKPT is first loaded into RUN (lk_run_load_params: it must be a
 * checkpoint of RUN's model); "plugin" is the step's plugin. */
LK_API int lk_run_export(lk_run *run, const char *ckpt, const char *path);

#ifdef __cplusplus
}
#endif
#endif
