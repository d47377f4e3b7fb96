/* loopkit — what the host offers a plugin through its lk_host handle. */
#ifndef LOOPKIT_HOST_H
#define LOOPKIT_HOST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loopkit/export.h"
#include "loopkit/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lk_log_level {
  LK_LOG_ERROR = 0,
  LK_LOG_WARN = 1,
  LK_LOG_INFO = 2,
  LK_LOG_DEBUG = 3
} lk_log_level;

/* Where a host sends log messages. */
typedef void (*lk_log_fn)(void *user, lk_log_level level, const char *msg);

/* Logging goes through the host; a plugin never prints. */
LK_API void lk_log(lk_host *host, lk_log_level level, const char *fmt, ...)
    LK_PRINTF(3, 4);

/* Records why an entry fails (the host adds the plugin's name) and returns
 * CODE, so that `return lk_fail(host, LK_EINVAL, "...", ...);` reads well. */
LK_API int lk_fail(lk_host *host, int code, const char *fmt, ...)
    LK_PRINTF(3, 4);

/* Options, validated against the plugin's declarations before create. */
LK_API int64_t lk_opt_int(const lk_options *opts, const char *name);
LK_API double lk_opt_double(const lk_options *opts, const char *name);
LK_API bool lk_opt_bool(const lk_options *opts, const char *name);
LK_API const char *lk_opt_string(const lk_options *opts, const char *name);
LK_API const double *lk_opt_doubles(const lk_options *opts, const char *name,
                                    size_t *n);
/* Since ABI 1.5: where option NAME's value comes from, for messages about
 * a value its range cannot refuse (a list that must increase): "FILE:LINE"
 * or "--set SECTION.KEY=VALUE" as the config names it, "default" for a
 * default, NULL for an undeclared name. Valid as long as OPTS. */
LK_API const char *lk_opt_where(const lk_options *opts, const char *name);

/* Appends metric NAME (a string literal) to a step result. */
LK_API int lk_result_metric(lk_step_result *result, const char *name,
                            double value);

/* Parameters: allocated and owned by the host, zero-filled, checkpointed.
 * Names are unique within a run. */
LK_API int lk_host_add_param(lk_host *host, const char *name, lk_dtype dtype,
                             size_t ndim, const size_t *shape, lk_tensor **out);

/* State that must survive a resume (optimizer buffers, counters): like a
 * parameter, checkpointed, but never optimized. The host prefixes name with
 * the plugin's name. grad is NULL. */
LK_API int lk_host_add_state(lk_host *host, const char *name, lk_dtype dtype,
                             size_t ndim, const size_t *shape, lk_tensor **out);

/* Since ABI 1.4, for check_state: 0 when every element of state T is in
 * [MIN, MAX] (and a whole number with INTEGER); otherwise LK_EFORMAT after
 * a message naming the tensor, the index, the value and what is accepted. */
LK_API int lk_state_check(lk_host *host, const lk_tensor *t, double min,
                          double max, bool integer);
/* The largest count an f64 state holds exactly (2^53): a bound for step
 * counters in check_state. */
#define LK_STATE_MAX_COUNT 9007199254740992.0

/* Since ABI 1.4: one state tensor per parameter (optimizer buffers, EMA
 * weights): OUT[i] gets "PREFIX.NAME" (then prefixed with the plugin's
 * name, as every state) with the dtype and shape of parameter i, for the
 * first N parameters, zero-filled. Only during create. */
LK_API int lk_host_add_param_states(lk_host *host, const char *prefix,
                                    lk_tensor **out, size_t n);

/* Since ABI 1.6: a module buffer, as torch's register_buffer (batch norm's
 * running_mean, running_var, num_batches_tracked): state, added and
 * checkpointed exactly as lk_host_add_state adds it (named PLUGIN.NAME in
 * the checkpoint, never optimized, grad NULL), that is also part of the
 * model: `loopkit export` writes it beside the parameters under NAME
 * (torch's state_dict() name), and lk_host_load_params reads it from a file
 * by NAME. FLAGS is 0 or LK_BUFFER_COUNT: an f64 tensor of whole numbers
 * that torch holds as int64 (num_batches_tracked), exported as I64 and
 * read from I64 (or from F32/F64 holding whole numbers). Only during
 * create. */
#define LK_BUFFER_COUNT 1u
LK_API int lk_host_add_buffer(lk_host *host, const char *name, lk_dtype dtype,
                              size_t ndim, const size_t *shape, unsigned flags,
                              lk_tensor **out);

/* Since ABI 1.6: declares one layer of the model, for `loopkit summary`
 * and the totals a run prints at start (Lightning's ModelSummary): NAME is
 * the prefix of the layer's parameters' and buffers' names ("3" for
 * "3.weight", "h.0" for "h.0.attn.c_attn.weight"; the layer owns the
 * tensors named NAME or NAME.*), TYPE its kind ("conv2d"), OUT [NDIM] the
 * output shape of one sample, the batch dimension apart (NDIM 0: not
 * said). In the order of the forward; a layer with no tensors (relu) is
 * declared too. A model that declares none is summarised by its tensors'
 * names alone. Only during create; LK_EINVAL for an empty or repeated
 * name, an empty type, more than LK_MAX_DIMS dimensions or a 0 among
 * them. */
LK_API int lk_host_add_layer(lk_host *host, const char *name, const char *type,
                             size_t ndim, const size_t *out);

/* Since ABI 1.6, only during create: the value of KEY in config section
 * SECTION, a section of the plugin's own that no plugin instance owns (a
 * network's block: sequential's [res64] with its layers key), into *VALUE,
 * and where it was given ("FILE:LINE" or the --set) into *WHERE (NULL: not
 * wanted); both live as long as the run's config. LK_ENOTFOUND when the
 * section has no KEY; LK_EINVAL for [loop], [plugins] or a plugin
 * instance's section. A section read so is the plugin's: the run accepts
 * it (a section nothing owns is refused), refuses a key of it that no
 * plugin read, naming it, and config.ini records every key read. */
LK_API int lk_host_section_value(lk_host *host, const char *section,
                                 const char *key, const char **value,
                                 const char **where);
/* Since ABI 1.6: the layer type (loopkit/layer.h) NAME [LEN] names, in any
 * case: a built-in (lk_layer_find), else a layer of the layer plugins the
 * run's `[plugins] layers` lists (the host's checked copy of its table,
 * valid while the run lasts). NULL when none. */
struct lk_layer_type;
struct lk_layer;
LK_API const struct lk_layer_type *
lk_host_find_layer(lk_host *host, const char *name, size_t len);
/* Since ABI 1.6: lk_layer_parse of TEXT [LEN] ("silu", "conv2d(32, 3)")
 * into L, its type found by lk_host_find_layer; an unknown name is an
 * LK_ECONFIG that lists every layer name the run knows. */
LK_API int lk_host_parse_layer(lk_host *host, struct lk_layer *l,
                               const char *text, size_t len);

/* Since ABI 1.4: fills every parameter THIS plugin has added (call it in
 * create, after adding them) from the safetensors file PATH, by name.
 * Refused, naming the file and the tensor: a parameter the file lacks, a
 * tensor whose shape differs (both shapes named), a tensor of the file
 * that is no parameter of this plugin (another plugin's included) unless
 * its name is in IGNORE (a NULL-terminated list, or NULL: a tied head's
 * second copy, say), a dtype
 * other than F32 and F64 (either converts to the parameter's dtype, f64 to
 * f32 rounding to nearest), a value that is not finite (or beyond f32's
 * range), and any file the strict reader refuses (LK_EFORMAT: a lying
 * header, offsets out of bounds, holes, overlaps, truncation). On failure
 * the parameters' values are unspecified: fail create. The file is mapped
 * and read once.
 * Since ABI 1.6 the plugin's buffers (lk_host_add_buffer) are read too, by
 * their names, as torch's load_state_dict(strict=True) reads them: a file
 * that holds one of them must hold them all (a buffer it lacks is refused,
 * naming it); a file that holds none of them (named_parameters() only, as
 * loopkit exported before buffers) leaves every buffer as create made it.
 * A count buffer (LK_BUFFER_COUNT) is read from I64, F32 or F64 and must
 * be a whole number in [0, 2^53]. */
LK_API int lk_host_load_params(lk_host *host, const char *path,
                               const char *const *ignore);

/* The parameters of the run, in the order they were added. */
LK_API lk_tensor *const *lk_host_params(lk_host *host, size_t *n);
/* Since ABI 1.2: every state tensor (optimizer buffers, EMA weights, the
 * host's own), in the order they were added: what a strategy makes equal
 * on every process. */
LK_API lk_tensor *const *lk_host_states(lk_host *host, size_t *n);
/* Since ABI 1.2: this process's rank and the number of processes, from
 * the strategy plugin (0 and 1 without one). Valid after creation. */
LK_API int lk_host_rank(lk_host *host);
LK_API int lk_host_world_size(lk_host *host);

/* Randomness: the run's one generator, seeded from [loop] seed and saved in
 * every checkpoint. A plugin takes randomness from nowhere else. */
typedef struct lk_rng {
  uint64_t s[4];
} lk_rng;
LK_API lk_rng *lk_host_rng(lk_host *host);
LK_API uint64_t lk_host_seed(lk_host *host);

/* Since ABI 1.4: how many threads a plugin's kernels should use, from
 * [loop] threads (0, the default: one per CPU the process may run on,
 * divided among the processes a launcher started on its node; at most
 * LK_NN_MAX_THREADS of loopkit/nn.h, as many as lk_nn_create takes).
 * Always >= 1; 1 in an environment without a run (lk_optimizer_open). */
LK_API int lk_host_threads(lk_host *host);
/* The generator (xoshiro256**): its state set from SEED and STREAM
 * (streams of one seed give different sequences), and its draws: 64 bits,
 * uniform in [0, 1), normal with mean 0 and variance 1. */
LK_API void lk_rng_seed(lk_rng *rng, uint64_t seed, uint64_t stream);
LK_API uint64_t lk_rng_u64(lk_rng *rng);
LK_API double lk_rng_uniform(lk_rng *rng); /* [0, 1) */
LK_API double lk_rng_normal(lk_rng *rng);  /* mean 0, variance 1 */

/* The learning rate of the run's optimizer (NaN if it has none), and a new
 * one: what a scheduler drives. */
LK_API double lk_host_lr(lk_host *host);
LK_API int lk_host_set_lr(lk_host *host, double lr);
/* Since ABI 1.5: the optimizer's momentum (beta1 for the adam family; see
 * lk_optimizer_ops), NaN if it has none, and a new one: what a scheduler
 * that cycles momentum drives (onecycle, cyclic). */
LK_API double lk_host_momentum(lk_host *host);
LK_API int lk_host_set_momentum(lk_host *host, double momentum);
/* Since ABI 1.5: torch's param_group['initial_lr'] of that optimizer, what
 * a scheduler takes as its base rate: the first scheduler that asks sets it
 * to the optimizer's rate then (torch's setdefault, in its constructor), so
 * that the children of a composite scheduler (sequential, chained) share
 * the rate the optimizer had before the first of them changed it. NaN
 * without a learning rate. lk_host_set_initial_lr replaces it, as torch's
 * OneCycleLR does (max_lr / div_factor). Not checkpointed: every create of
 * a resumed run asks again in the same order. */
LK_API double lk_host_initial_lr(lk_host *host);
LK_API int lk_host_set_initial_lr(lk_host *host, double lr);

/* Another optimizer plugin, for optimizers that wrap one (sam): NAME is
 * loaded like a [plugins] name, takes its options from the config section
 * [NAME] and its state is checkpointed under its own name. Only during
 * create; the host destroys it with the run. */
typedef struct lk_optimizer lk_optimizer;
LK_API int lk_host_optimizer_new(lk_host *host, const char *name,
                                 lk_optimizer **out);
/* In manual optimization, a step taken from training_step counts as one
 * of the run's steps (max_steps, metrics' step), as one through
 * lk_host_optimizer_step does; a step inside another optimizer's does not. */
LK_API int lk_optimizer_step(lk_optimizer *opt, lk_tensor *const *params,
                             size_t n, lk_closure_fn closure);
LK_API double lk_optimizer_lr(lk_optimizer *opt);
LK_API void lk_optimizer_set_lr(lk_optimizer *opt, double lr);

/* Since ABI 1.5: the run's optimizers, as [plugins] optimizer lists them
 * (several: optimizer = gen:adam, disc:adam, each over the parameters its
 * section's params selects), for a step plugin in manual optimization (a
 * GAN's two players), as Lightning's self.optimizers(): how many there
 * are, and optimizer I (NULL past the end) as a handle for
 * lk_optimizer_step (PARAMS NULL: its own parameters, every group of
 * them), lk_optimizer_zero_grad and lk_optimizer_clip_gradients. */
LK_API size_t lk_host_optimizer_count(lk_host *host);
LK_API lk_optimizer *lk_host_optimizer(lk_host *host, size_t i);
/* Since ABI 1.5: its instance name ([plugins] NAME:PLUGIN, or PLUGIN). */
LK_API const char *lk_optimizer_name(const lk_optimizer *opt);
/* Since ABI 1.5, manual optimization: clears the gradients of the
 * parameters OPT (one of the run's) steps, on_before_zero_grad first, as
 * torch's optimizer.zero_grad(). */
LK_API int lk_optimizer_zero_grad(lk_optimizer *opt);
/* Since ABI 1.5, manual optimization: clips the gradients of the
 * parameters OPT steps, by norm (over those only) or by value, as
 * Lightning's clip_gradients(optimizer, ...); with a precision plugin they
 * are unscaled first (once until the next backward). */
LK_API int lk_optimizer_clip_gradients(lk_optimizer *opt, double value,
                                       const char *algorithm);
/* Since ABI 1.5, automatic optimization with several optimizers: the
 * index of the one whose closure is running (each steps in turn, its
 * training_step called for it: Lightning 1.x's optimizer_idx); -1 with
 * one optimizer, in manual optimization and outside a closure. */
LK_API int lk_host_optimizer_index(lk_host *host);
/* Since ABI 1.5: another scheduler, for schedulers that compose others
 * (sequential, chained): NAME is NAME:PLUGIN (or PLUGIN) as a [plugins]
 * value, takes its options from section [NAME] and its state is
 * checkpointed under NAME. Only during create; the host destroys it with
 * the run. It drives the optimizer its parent drives. Its interval is its
 * parent's: [NAME] may leave interval out, or must give the parent's. An
 * instance is the child of one parent, and plays no [plugins] role. */
typedef struct lk_scheduler lk_scheduler;
LK_API int lk_host_scheduler_new(lk_host *host, const char *name,
                                 lk_scheduler **out);
/* Its step, with the parent's arguments. */
LK_API int lk_scheduler_step(lk_scheduler *s, lk_interval when,
                             const lk_metric *metrics, size_t n);
/* Whether it has restart (lk_scheduler_ops), and that entry:
 * LK_EKIND without it. */
LK_API bool lk_scheduler_can_restart(const lk_scheduler *s);
LK_API int lk_scheduler_restart(lk_scheduler *s, bool closed_form);
/* Its state tensor NAME, as it added it ("last_epoch"), or NULL if it has
 * none: for a composite's check_state, which holds its children's step
 * counts to its own. */
LK_API const lk_tensor *lk_scheduler_state(const lk_scheduler *s,
                                           const char *name);

/* Evaluates the run's step plugin on BATCH, with no backward: LOSS gets
 * the loss (NaN if it gave none). For backwards that differentiate the
 * model from the outside (numeric). */
LK_API int lk_host_evaluate(lk_host *host, const lk_batch *batch, double *loss);

/* Since ABI 1.4: what a training sample of the run's data plugin looks
 * like, for a model's create (data is created first). LK_ENOTFOUND when
 * there is no data plugin or it does not say. */
LK_API int lk_host_data_shape(lk_host *host, lk_sample_shape *out);
/* Since ABI 1.6: the most samples a training batch of the run's data
 * plugin holds, as its integer option batch_size says (torch's
 * DataLoader's name, which every bundled data plugin declares; a split
 * smaller than it gives smaller batches), so that a model's create can
 * refuse batches it cannot take, before anything is trained. *WHERE, if
 * WHERE is not NULL, gets where the value comes from ("FILE:LINE", "--set
 * SECTION.batch_size=N" or "default"), for messages. LK_ENOTFOUND when
 * there is no data plugin or it declares no integer batch_size. */
LK_API int lk_host_data_batch_size(lk_host *host, size_t *out,
                                   const char **where);

/* Since ABI 1.4: opens PATH for reading into *FD, refusing anything but a
 * regular file (a FIFO would block the run forever, /dev/zero never ends).
 * Messages name WHAT ("data file", "init file") and PATH. For data and
 * model plugins that read files. */
LK_API int lk_open_input(const char *path, const char *what, int *fd);

/* Since ABI 1.6: a file being written whole, from lk_output_open to
 * lk_output_close. */
typedef struct lk_output lk_output;
/* Since ABI 1.6: opens PATH to be written whole, as loopkit writes every
 * file. "-" is the standard output; a character device or a FIFO is
 * written as it is (opened without creating or truncating it, never
 * replaced); a regular file, new or existing, is written to a new
 * temporary file beside it, of a name nobody can predict and created
 * without following links, which lk_output_close renames over PATH once
 * all of it is written and synced: an existing file keeps its content on
 * any failure, and its mode. A symbolic link, a directory, a socket, a
 * block device or anything else is refused (LK_EINVAL), naming PATH and
 * what it is. Messages name WHAT ("profile") and PATH; WHAT may be NULL.
 * Write to lk_output_stream; always end with lk_output_close. */
LK_API int lk_output_open(const char *path, const char *what, lk_output **out);
/* Since ABI 1.6: the stream to write an lk_output_open file to; the
 * caller never closes it. */
LK_API FILE *lk_output_stream(lk_output *out);
/* Since ABI 1.6: ends what lk_output_open began and frees OUT (NULL:
 * nothing). With KEEP, the file is flushed, synced and put in place: 0,
 * or LK_EIO naming PATH when any of it failed, and then PATH is as it
 * was. Without KEEP, a temporary file is removed and PATH left as it was
 * (what went to the standard output, a device or a FIFO stays sent). */
LK_API int lk_output_close(lk_output *out, bool keep);

/* Asks the loop to stop after the current batch (early stopping). */
LK_API void lk_host_request_stop(lk_host *host);

/* Since ABI 1.2, for callbacks. The latest value logged under NAME, as a
 * metrics.csv column: "loss", a step metric, "lr", "val_loss",
 * "val_<metric>", "test_...". LK_ENOTFOUND while NAME has not been logged
 * in this run (resumed runs included). */
LK_API int lk_host_metric(lk_host *host, const char *name, double *value);
/* Adds NAME = VALUE (NAME is copied) to the metrics.csv row the loop writes
 * next: called from on_train_batch_end, the row of that step. */
LK_API int lk_host_log_metric(lk_host *host, const char *name, double value);
/* Since ABI 1.6: sums the N VALUES over the run's processes, in place (each
 * gets the sums); nothing to do in one process. Every process must call it
 * at the same point with the same N: from evaluation_end, for counts summed
 * over a split's batches, which the processes share out. */
LK_API int lk_host_reduce_sum(lk_host *host, double *values, size_t n);
/* Where the loop is: epochs completed and optimizer steps taken. */
LK_API void lk_host_progress(lk_host *host, uint64_t *epoch,
                             uint64_t *global_step);
/* Asks for a checkpoint RUN_DIR/checkpoints/FILE (a plain file name, not
 * last.ckpt). The loop writes it, atomically, at the next point where its
 * state is whole: after the current optimizer step, or, asked from
 * on_train_epoch_end or on_validation_end, after the epoch's validation and
 * scheduler step; resuming from it continues exactly from there. A failed
 * write fails the run. */
LK_API int lk_host_save_checkpoint(lk_host *host, const char *file);
/* Since ABI 1.4. As lk_host_save_checkpoint, in directory DIR instead of
 * RUN_DIR/checkpoints: DIR absolute, or relative to the run directory
 * (NULL: checkpoints), created with its parents when the checkpoint is
 * written. */
LK_API int lk_host_save_checkpoint_in(lk_host *host, const char *dir,
                                      const char *file);
/* Since ABI 1.6, for a callback, from its create: it keeps checkpoints of
 * its own (lk_host_save_checkpoint_in) in DIR, absolute or relative to the
 * run directory (NULL: checkpoints), and with BEST, DIR/best.ckpt is the
 * best of them. The host refuses two callbacks keeping theirs in one
 * directory, and [loop] test_ckpt = best tests the best.ckpt of the first
 * callback listed that keeps one. A callback that says nothing is taken as
 * Lightning's ModelCheckpoint is, by its options: dirpath and filename (its
 * files in dirpath, else checkpoints, or checkpoints/NAME for an instance
 * named NAME:PLUGIN), monitor and save_top_k not 0 (best.ckpt). */
LK_API int lk_host_keep_checkpoints(lk_host *host, const char *dir, bool best);
/* Since ABI 1.4. This instance's name: NAME when [plugins] names it
 * NAME:PLUGIN, else the plugin's name; it is the instance's config
 * section. Two instances of one plugin have two names. */
LK_API const char *lk_host_name(lk_host *host);

/* Since ABI 1.5. Whether this instance plays [plugins] ROLE ("step",
 * "backward", "scheduler", "callbacks", ...); a scheduler created by
 * another (lk_host_scheduler_new) plays "scheduler". Valid from create on:
 * for a plugin of several kinds whose instances are one or the other (the
 * sequential model and scheduler), to refuse a role it cannot play before
 * anything is trained. */
LK_API bool lk_host_plays(lk_host *host, const char *role);

/* Run directory (NULL outside a training run). */
LK_API const char *lk_host_run_dir(lk_host *host);
/* Since ABI 1.5: when the run was resumed in a new run directory from a
 * checkpoint of another one (DIR/checkpoints/FILE or a file in a directory
 * of checkpoints/), that run directory, where the files a plugin recorded
 * in its state are (the checkpoint callback's kept checkpoints), to carry
 * them into lk_host_run_dir. NULL otherwise: a new run, a resume in place,
 * a checkpoint in no run directory, ranks other than 0. Valid from
 * on_train_start. */
LK_API const char *lk_host_previous_run_dir(lk_host *host);

/* Manual optimization: what a step plugin calls to drive the optimizer.
 * Valid only inside training_step with [loop] manual_optimization. */
LK_API int lk_host_zero_grad(lk_host *host);
LK_API int lk_host_backward(lk_host *host, const lk_batch *batch, double loss,
                            double scale);
LK_API int lk_host_clip_gradients(lk_host *host, double value,
                                  const char *algorithm); /* norm | value */
LK_API int lk_host_optimizer_step(lk_host *host, lk_closure_fn closure);

#ifdef __cplusplus
}
#endif
#endif
