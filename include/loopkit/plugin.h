/* loopkit — the plugin ABI.
 *
 * A plugin is a shared object that exports exactly one symbol,
 * lk_plugin_descriptor, of type lk_descriptor. The host checks
 * abi_version and size before it calls any plugin code. One plugin may
 * implement several kinds (a model is usually step and backward); roles of a
 * config that name the same plugin share one instance of it.
 *
 * Compatibility: abi_version is (major << 16 | minor). A host loads plugins
 * of its own major and any minor up to its own; new kinds and new entries
 * are only ever appended (to the descriptor and to the ops tables), and the
 * host reads nothing past what the plugin's minor version defines. */
#ifndef LOOPKIT_PLUGIN_H
#define LOOPKIT_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loopkit/export.h"
#include "loopkit/onnx.h"
#include "loopkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LK_ABI_MAJOR 1
#define LK_ABI_MINOR 7
#define LK_ABI_VERSION ((uint32_t)((LK_ABI_MAJOR << 16) | LK_ABI_MINOR))
#define LK_PLUGIN_SYMBOL "lk_plugin_descriptor"

typedef struct lk_host lk_host; /* the host, as one plugin instance sees it */
typedef struct lk_options lk_options; /* an instance's validated options */

/* The closure an optimizer receives: one evaluation of the model. It returns
 * the loss, or NaN when the evaluation failed, gave no loss or gave a
 * non-finite one; an optimizer that gets NaN returns at once without
 * touching the parameters. */
typedef double (*lk_closure_fn)(void);

/* ---- options --------------------------------------------------------- */

typedef enum lk_option_type {
  LK_OPT_INT = 1,
  LK_OPT_DOUBLE,
  LK_OPT_BOOL, /* true | false */
  LK_OPT_STRING,
  LK_OPT_ENUM,    /* one of choices, "a|b|c" */
  LK_OPT_DOUBLES, /* comma list of doubles: "0.9,0.999" */
  /* Since ABI 1.4: a file or directory the plugin reads, as a string. The
   * host makes it absolute before create: a relative path written in a
   * config file is relative to that file's directory, one given with --set
   * (or a default) to the current directory. Empty stays empty. */
  LK_OPT_PATH,
  /* Since ABI 1.6: a comma list of paths, each made absolute as
   * LK_OPT_PATH's; read as a string, the items joined with commas. The
   * plugin may take an item as a shell pattern (text does). */
  LK_OPT_PATHS
} lk_option_type;

/* One declared option. def is the default as it would be written in a config
 * file; NULL makes the option required. The table ends with name == NULL.
 * choices: for LK_OPT_ENUM the values, "a|b|c"; since ABI 1.4, for
 * LK_OPT_INT, LK_OPT_DOUBLE and LK_OPT_DOUBLES the range, in interval
 * notation ("[0, inf)", "(0, 1]", "[1, 16777216]"; NULL: any). The host
 * refuses a value outside it, naming the option and the range, before
 * create; a double (each value of a list) must also be finite unless the
 * range closes on an infinite bound ("(0, inf]").
 * Since ABI 1.6, an LK_OPT_INT whose range ends with " or auto" ("[1, inf)
 * or auto") also
 * takes the word auto, which the host makes a number before create: in a
 * scheduler, the number of times it will step (the run's optimizer steps,
 * or epochs at interval = epoch; a composite's child: its part of its
 * parent's); in a data plugin, the model's (step plugin's) integer option
 * of the same name. The plugin reads the number with lk_opt_int, and
 * lk_opt_where then says "auto (...)"; the effective config records it. */
typedef struct lk_option {
  const char *name;
  lk_option_type type;
  const char *def;
  const char *help;
  const char *choices;
} lk_option;

/* ---- step results and batches ------------------------------------------ */

#define LK_MAX_METRICS 16

/* Metric names must outlive the run (string literals). */
typedef struct lk_metric {
  const char *name;
  double value;
} lk_metric;

typedef struct lk_step_result {
  bool has_loss;
  double loss;
  size_t n_metrics;
  lk_metric metrics[LK_MAX_METRICS];
} lk_step_result;

typedef enum lk_split {
  LK_SPLIT_TRAIN = 0,
  LK_SPLIT_VAL = 1,
  LK_SPLIT_TEST = 2
} lk_split;

/* A batch belongs to the data plugin and stays valid until its next call.
 * Without a data plugin the loop passes a batch with size 0 and no tensors:
 * the step works on the whole problem. */
typedef struct lk_batch {
  lk_split split;
  uint64_t epoch;
  size_t index; /* within this epoch of this split */
  size_t size;  /* samples */
  lk_tensor x;  /* [size, ...] inputs */
  lk_tensor y;  /* [size] labels (LK_I32) or [size, ...] targets */
} lk_batch;

/* ---- kinds ------------------------------------------------------------- */
/* Every entry returns 0 or a negative LK_E* code after lk_fail(). */

/* step: the model's forward pass. validation_step and test_step may be NULL
 * (test then uses validation_step).
 * Since ABI 1.4: predict_step (Lightning's name; NULL: the model does not
 * predict), the model's output for BATCH's inputs x alone: no loss, no
 * dropout, nothing kept for backward, y not read. OUT gets a tensor the
 * plugin owns (grad NULL), valid until its next call. A language model
 * (gpt) takes context tokens, x i32 [B, T] with T up to its block size,
 * and gives the logits of the token that follows each context, f32
 * [B, V]: what `loopkit generate` samples from. A classifier names its
 * tensor "logits" ([B, classes]: loopkit predict writes the class and its
 * softmax); any other name is a regression's output ([B, ...]: written as
 * it is).
 * Since ABI 1.6: evaluation_end (NULL: none), after the last batch of a
 * validation or test (in training, loopkit test and validate): MEAN holds
 * the split's loss and metrics, averaged over its samples and the
 * processes; OUT (empty) gets the metrics of the whole split that are not
 * means of its batches', which the host adds to MEAN's in the split's
 * row: a language model's perplexity, exp(mean loss); a classifier's macro
 * F1 from the counts its validation_step summed (over the processes with
 * lk_host_reduce_sum, which every process reaches here). Names as a step
 * result's, none of MEAN's.
 * Since ABI 1.7: onnx (NULL: the model cannot be exported to ONNX), the
 * model's forward in evaluation mode as an ONNX graph (loopkit/onnx.h),
 * for `loopkit export CKPT -o FILE.onnx`, with the checkpoint's
 * parameters loaded: it declares the graph's input and output
 * (lk_onnx_input, lk_onnx_output; the batch dimension -1) and adds the
 * nodes from the value "input" to the value "output", and its weights as
 * initializers under their parameters' names. What predict_step gives,
 * before any cropping or selection: a classifier's logits, a regression's
 * output; no loss. A layer or a part it cannot express is refused (a
 * negative LK_E* code, lk_fail's message naming it). */
typedef struct lk_step_ops {
  int (*training_step)(void *self, const lk_batch *batch, lk_step_result *out);
  int (*validation_step)(void *self, const lk_batch *batch,
                         lk_step_result *out);
  int (*test_step)(void *self, const lk_batch *batch, lk_step_result *out);
  int (*predict_step)(void *self, const lk_batch *batch, lk_tensor *out);
  int (*evaluation_end)(void *self, lk_split split, const lk_step_result *mean,
                        lk_step_result *out);
  int (*onnx)(void *self, lk_onnx *g);
} lk_step_ops;

/* backward: adds scale * d(loss)/d(param) into every param's grad, for the
 * step that was just computed on batch (scale is 1/N under accumulation). */
typedef struct lk_backward_ops {
  int (*backward)(void *self, const lk_batch *batch, double scale);
} lk_backward_ops;

typedef struct lk_zero_grad_ops {
  int (*zero_grad)(void *self, lk_tensor *const *params, size_t n);
} lk_zero_grad_ops;

/* optimizer: updates params. closure may be NULL in manual optimization
 * (the gradients are already there); otherwise the optimizer must call it
 * at least once. State that must survive a resume is allocated with
 * lk_host_add_state at create time — the learning rate included, since a
 * scheduler changes it during the run.
 * Since ABI 1.1: get_lr and set_lr (NULL: the optimizer has no single
 * learning rate, and no scheduler can drive it).
 * Since ABI 1.5: get_momentum and set_momentum, what torch's OneCycleLR and
 * CyclicLR cycle: the momentum of an optimizer whose defaults have one
 * (sgd, rmsprop), beta1 of one that has betas (the adam family). NULL:
 * the optimizer has neither, and cycle_momentum is refused. Since ABI 1.6
 * set_momentum returns 0 (in ABI 1.5 it returned nothing, and the host
 * calls a 1.5 plugin's as such), or refuses (a negative LK_E* code, lk_fail's
 * message) a value the optimizer cannot step with (what create refuses for its
 * option: beta1 >= 1), or state it cannot make: called during setup (a
 * scheduler's create), it may still add state (the momentum buffers an
 * optimizer created with momentum 0 keeps only if a scheduler drives the
 * momentum). */
typedef struct lk_optimizer_ops {
  int (*step)(void *self, lk_tensor *const *params, size_t n,
              lk_closure_fn closure);
  double (*get_lr)(void *self);
  void (*set_lr)(void *self, double lr);
  double (*get_momentum)(void *self);
  int (*set_momentum)(void *self, double momentum);
} lk_optimizer_ops;

/* profiler: action ids are asked for once, when the run is set up. report
 * runs at the end of training with the run directory. */
typedef struct lk_profiler_ops {
  int (*action)(void *self, const char *name); /* >= 0: the action's id */
  void (*start)(void *self, int id);
  void (*stop)(void *self, int id);
  int (*report)(void *self, const char *run_dir);
} lk_profiler_ops;

/* What one sample looks like (since ABI 1.4): a model sizes itself from it,
 * or checks it at create, so that a mismatch is a config error found
 * before anything is trained. x is one sample's input (a batch's x is
 * [size, x_shape...]), y one sample's target (a batch's y is [size,
 * y_shape...]; y_ndim 0: one value per sample; y_dtype 0: no targets).
 * n_classes > 0: y holds class labels in [0, n_classes), LK_I32: one per
 * sample (y_ndim 0), or one per position of a sequence (y_ndim 1: a
 * language model's next tokens; x then holds tokens of the same range). */
typedef struct lk_sample_shape {
  lk_dtype x_dtype;
  size_t x_ndim;
  size_t x_shape[LK_MAX_DIMS];
  lk_dtype y_dtype;
  size_t y_ndim;
  size_t y_shape[LK_MAX_DIMS];
  size_t n_classes;
} lk_sample_shape;

/* data: epoch() starts an epoch of a split and says how many batches it has
 * (0: the split does not exist); batch() fills batch number index of it.
 * Shuffling is reproducible: the bundled plugins draw the order of epoch E
 * from a stream of [loop] seed of their own (lk_rng_seed(&r, seed, E ...)),
 * so a run resumed in the middle of an epoch sees the same order.
 * Since ABI 1.4: shape() says what a training sample looks like (NULL: the
 * plugin does not say; models then find out at the first batch). */
typedef struct lk_data_ops {
  int (*epoch)(void *self, lk_split split, uint64_t epoch, size_t *n_batches);
  int (*batch)(void *self, lk_split split, size_t index, lk_batch *out);
  int (*shape)(void *self, lk_sample_shape *out);
} lk_data_ops;

/* strategy: how the run is spread over processes (data parallel: every
 * process holds the whole model and trains on its own shard of each
 * batch). All entries optional; without a strategy plugin the run is a
 * single process.
 * - setup: after every plugin is created and before a checkpoint is
 *   loaded: make every process start from the same parameters and state
 *   (lk_host_states has the state), e.g. broadcast them from rank 0.
 * - reduce_gradients: after every backward, before clipping and the
 *   update, inside the closure: average the gradients over the processes.
 * - reduce_metrics: SUM values over the processes, in place (the host
 *   divides where it wants means). Every process calls it at the same
 *   points with the same N.
 * - rank, world_size: this process's number (0 writes the run directory)
 *   and how many there are.
 * - abort (since ABI 1.2): this process failed with MESSAGE: log it
 *   naming the rank and stop every process with exit status STATUS (1: the
 *   run failed, 2: nothing was trained), instead of leaving the others
 *   waiting in a collective. It does not return. */
typedef struct lk_strategy_ops {
  int (*setup)(void *self, lk_tensor *const *params, size_t n);
  int (*reduce_gradients)(void *self, lk_tensor *const *params, size_t n);
  int (*reduce_metrics)(void *self, double *values, size_t n);
  int (*rank)(void *self);
  int (*world_size)(void *self);
  void (*abort)(void *self, int status, const char *message);
} lk_strategy_ops;

/* callback: hooks, in the order the loop calls them; all optional.
 * Callbacks run before the model's own hooks (a step plugin that also
 * implements the callback kind). */
typedef struct lk_callback_ops {
  int (*on_train_start)(void *self);
  int (*on_train_epoch_start)(void *self, uint64_t epoch);
  int (*on_train_batch_start)(void *self, const lk_batch *batch);
  int (*on_before_zero_grad)(void *self);
  int (*on_before_backward)(void *self, double loss);
  int (*on_after_backward)(void *self);
  int (*on_before_optimizer_step)(void *self);
  int (*on_after_optimizer_step)(void *self);
  int (*on_train_batch_end)(void *self, const lk_step_result *result);
  int (*on_validation_end)(void *self, const lk_step_result *result);
  int (*on_train_epoch_end)(void *self, uint64_t epoch);
  int (*on_train_end)(void *self);
  /* Since ABI 1.2: before the validation split is evaluated (after
   * on_train_epoch_end); on_validation_end follows it. */
  int (*on_validation_start)(void *self);
} lk_callback_ops;

/* scheduler (since ABI 1.1): changes the optimizer's learning rate with
 * lk_host_lr / lk_host_set_lr. create runs after the optimizer's and sets
 * the initial rate (as torch's constructors do). step is called after every
 * optimizer step (LK_INTERVAL_STEP) and after every epoch and its
 * validation (LK_INTERVAL_EPOCH); a plugin acts on the interval its options
 * name and ignores the other. METRICS are the values just logged: "loss"
 * and the step's metrics, or at an epoch's end the epoch's mean "loss" and
 * the validation's "val_*". */
typedef enum lk_interval {
  LK_INTERVAL_STEP = 1,
  LK_INTERVAL_EPOCH = 2
} lk_interval;

typedef struct lk_scheduler_ops {
  int (*step)(void *self, lk_interval when, const lk_metric *metrics, size_t n);
  /* Since ABI 1.5, what sequential (torch's SequentialLR) does to its
   * children: start the schedule again at torch's last_epoch 0, from the
   * optimizer's current rate. CLOSED_FORM false: torch's `last_epoch -= 1;
   * _initial_step()` (the value of the constructor's initial step, computed
   * again, as SequentialLR does to its first scheduler); true: torch's
   * step(0), the closed form at epoch 0 where the class has one (what
   * SequentialLR does at a milestone). NULL: the scheduler cannot be a
   * child of sequential (torch's ReduceLROnPlateau, ChainedScheduler and
   * SequentialLR cannot). */
  int (*restart)(void *self, bool closed_form);
} lk_scheduler_ops;

/* precision (since ABI 1.3): how the loss is scaled for backward and the
 * gradients brought back, as mixed-precision training's dynamic loss
 * scaling does. At most one per run; automatic optimization only.
 * - loss_scale: the factor backward's scale is multiplied by, asked before
 *   every backward.
 * - unscale_gradients: once per optimizer step, after the last backward of
 *   the accumulation window (and after the strategy's reduce_gradients),
 *   before on_after_backward, clipping and the update: divide the gradients
 *   by the scale they were computed with, and set *SKIP when they
 *   overflowed. A skipped step leaves the parameters alone: the host zeroes
 *   the gradients and the closure returns NaN to the optimizer, which
 *   returns at once; the step's loss is still logged. The plugin adapts its
 *   scale here (state kept with lk_host_add_state survives a resume). */
typedef struct lk_precision_ops {
  double (*loss_scale)(void *self);
  int (*unscale_gradients)(void *self, lk_tensor *const *params, size_t n,
                           bool *skip);
} lk_precision_ops;

/* logger (since ABI 1.5): where the rows of metrics.csv also go. A run
 * has any number of loggers ([plugins] loggers = a, b), each fed every
 * row, in the listed order; metrics.csv is written as it always is. Only
 * the process that writes the run directory (rank 0) calls them. Every
 * entry but log_metrics is optional.
 * - start: once a training session starts (a resumed run's too), before
 *   on_train_start and the first row; RUN says where and from what.
 * - log_metrics: one row, as metrics.csv has it: the optimizer step
 *   (metrics.csv's step column), the epoch, and the row's cells under
 *   their column names ("loss", a step metric, "lr", "val_loss",
 *   "test_acc", what a callback logged), empty cells left out. The names
 *   and values are the host's, valid during the call.
 * - save: a checkpoint is about to be written. Make every row logged so
 *   far durable, and record in state tensors (lk_host_add_state) what a
 *   run resumed from this checkpoint needs, e.g. the length of the
 *   logger's file: the checkpoint carries them. A resumed run logs again
 *   every row after its checkpoint (a killed run's last rows included):
 *   start gets it, and a logger drops what it wrote after that point.
 * - finalize: the session ended; STATUS is "success", "failed" or
 *   "interrupted" (a signal; the checkpoint is written). Flush and close.
 *   Not called when start was not. */
typedef struct lk_logger_start {
  const char *run_dir; /* the run directory this run writes */
  const char *config;  /* the effective config, as config.ini holds it
                          (without its "# resumed" lines) */
  bool resumed;        /* the run continues from a checkpoint */
  /* With resumed: whether the run goes on in the run directory that wrote
   * the checkpoint (from its latest checkpoint), appending to what is
   * there. Otherwise it writes a new run directory (a resume from any
   * other checkpoint does), and resumed_from is the run directory that
   * wrote the checkpoint, whose metrics.csv rows up to the checkpoint
   * begin the new one's: copy from there what the new directory needs.
   * resumed_from is NULL when the checkpoint is not in a run directory
   * (metrics.csv then starts at the checkpoint's step). */
  bool in_place;
  const char *resumed_from;
  uint64_t epoch, step; /* where the run starts: epochs and steps done */
  uint64_t rows;        /* metrics.csv's data rows before the first row this
                           session logs */
} lk_logger_start;

typedef struct lk_logger_ops {
  int (*start)(void *self, const lk_logger_start *run);
  int (*log_metrics)(void *self, uint64_t step, uint64_t epoch,
                     const lk_metric *metrics, size_t n);
  int (*save)(void *self);
  int (*finalize)(void *self, const char *status);
} lk_logger_ops;

/* layers (since ABI 1.6): layer types for networks described in a config
 * (sequential's `layers = ...`), each one table, lk_layer_type
 * (loopkit/layer.h). TYPES is a NULL-terminated array of them, at most
 * LK_LAYERS_MAX. `[plugins] layers = NAME, ...` loads such plugins for the
 * run; their layer names are then usable as the built-ins' are, in any
 * case, and one named like a built-in or like another plugin's is a config
 * error. The host checks every table before it uses one (its size, a name
 * [A-Za-z_][A-Za-z0-9_]*, forward and backward, the inputs, the argument
 * table, every pointer inside the plugin) and keeps its own copy of it,
 * zero past the table's size. Unlike the other kinds' tables, this one
 * holds data, not entries; a plugin of this kind needs no create. */
#define LK_LAYERS_MAX 64
struct lk_layer_type;
typedef struct lk_layers_ops {
  const struct lk_layer_type *const *types;
} lk_layers_ops;

/* ---- the descriptor ----------------------------------------------------- */

typedef struct lk_descriptor {
  uint32_t abi_version; /* LK_ABI_VERSION */
  uint32_t size;        /* sizeof(lk_descriptor) */
  const char *name;
  const char *version;
  const char *summary; /* one line */
  const lk_option *options;

  /* create may be NULL (stateless plugin: self is NULL). It receives its
   * own host handle, valid until destroy. */
  int (*create)(lk_host *host, const lk_options *opts, void **self);
  void (*destroy)(void *self);

  const lk_step_ops *step;
  const lk_backward_ops *backward;
  const lk_zero_grad_ops *zero_grad;
  const lk_optimizer_ops *optimizer;
  const lk_profiler_ops *profiler;
  const lk_data_ops *data;
  const lk_strategy_ops *strategy;
  const lk_callback_ops *callback;
  const lk_scheduler_ops *scheduler; /* since ABI 1.1 */
  const lk_precision_ops *precision; /* since ABI 1.3 */

  /* Since ABI 1.4, for every kind: a checkpoint has just restored this
   * instance's state (the tensors it added with lk_host_add_state), before
   * anything else uses it. Check every value the plugin will rely on
   * (counts, indices, flags, rates: lk_state_check does one tensor) and
   * refuse a bad one with lk_fail(host, LK_EFORMAT, ...) naming it; rebuild
   * anything derived from the state. The checkpoint's format and the
   * tensors' names, shapes and finiteness are checked already. NULL: the
   * state needs no check (any finite value is valid). */
  int (*check_state)(void *self);
  const lk_logger_ops *logger; /* since ABI 1.5 */
  const lk_layers_ops *layers; /* since ABI 1.6 */
  /* new kinds and entries go here, at the end */
} lk_descriptor;

#ifdef __cplusplus
}
#endif
#endif
