/* What the optimizer plugins share: the start of create (the parameters,
 * the struct, the per-parameter buffer lists, the learning rate and step
 * counter as host state), the learning rate entries, the momentum a
 * scheduler may cycle (host state too, held to its option's range) and its
 * entries, the momentum buffers a scheduler may bring, the checks every step
 * makes before it touches a parameter, the f32/f64 dispatch of a step (and
 * optim_step, that step whole, one for all the first-order optimizers), and
 * the check of the state a checkpoint restores. Their options' ranges are
 * declared in their option tables and enforced by the host (ABI 1.4), so
 * nothing here checks them. Defined in optim_common.c, built once into
 * plugins/lib/libplugincommon.la; its symbols are hidden, so that each
 * plugin still exports nothing but its descriptor.
 *
 * plugins/optimizer/sgd.c is also built against the frozen headers of ABI 1.2
 * and 1.3 (tests/abi), with optim_common.c: what those lack is behind
 * LK_ABI_MINOR. */
#ifndef LOOPKIT_PLUGINS_OPTIM_COMMON_H
#define LOOPKIT_PLUGINS_OPTIM_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include <loopkit/loopkit.h>

/* torch's maximize option, which its first-order optimizers share. */
#define OPTIM_MAXIMIZE_OPTION                                                  \
  {                                                                            \
    "maximize", LK_OPT_BOOL, "false",                                          \
        "maximize the objective instead of minimizing it", NULL                \
  }

/* The most per-parameter buffer lists an optimizer keeps. */
#define OPTIM_MAX_LISTS 4

/* One parameter's update: P, its gradient GRAD and its NUMEL buffers'
 * data BUFS[j] (list j of c->bufs; NULL where the list is not made), in
 * the parameter's dtype, with the step's SCALARS. */
typedef void optim_update_fn(const void *self, const void *scalars, void *p,
                             const void *grad, void *const *bufs, size_t numel);

/* What an optimizer's step does before optim_step updates each parameter
 * with it: count the step and compute the step's scalars (in double, as
 * torch's Python code does), which it keeps in its struct and points
 * *SCALARS at (NULL: none); or refuse the step with an error, nothing
 * changed. */
typedef int optim_prepare_fn(void *self, const void **scalars);

/* The parts of the step optim_step takes: PREPARE, then F64 for each f64
 * parameter and F32 for the others. */
typedef struct optim_kernel {
  optim_prepare_fn *prepare;
  optim_update_fn *f64, *f32;
} optim_kernel;

/* The first member of each optimizer's struct. */
typedef struct optim_common {
  lk_host *host;
  lk_tensor *lr;   /* [1] f64, host state: a scheduler changes it */
  lk_tensor *step; /* [1] f64, host state: steps taken; NULL: not kept */
  /* [1] f64, host state: what a scheduler cycles (torch's momentum, or
   * beta1 of the adam family), read at every step; NULL: none. */
  lk_tensor *momentum;
  /* What it may be: >= 0 and below momentum_below, the range its option
   * momentum_option declares (torch's check in create). A scheduler's value
   * and a checkpoint's are held to it too. */
  double momentum_below;
  const char *momentum_option;
  lk_tensor *f32[2];   /* [1] f32 host states of optim_spec.f32, or NULL */
  size_t n;            /* parameters at create time */
  size_t lists;        /* lists of n buffers in bufs */
  lk_tensor **bufs;    /* lists x n per-parameter buffers, in one block */
  optim_kernel kernel; /* optim_spec's: optim_step's parts */
} optim_common;

/* An option optim_create reads into the optimizer's struct: a double
 * (LK_OPT_DOUBLE) or a bool (LK_OPT_BOOL) at OFFSET. */
typedef struct optim_field {
  const char *name;
  size_t offset;
  lk_option_type type;
} optim_field;

/* The field of option MEMBER (named as the member) of struct T, of TYPE
 * (DOUBLE or BOOL). */
#define OPTIM_FIELD(T, MEMBER, TYPE)                                           \
  { #MEMBER, offsetof(T, MEMBER), LK_OPT_##TYPE }

/* The most fields an optim_spec reads. */
#define OPTIM_MAX_FIELDS 5

/* What optim_create makes, in this order of host state: "lr", "step",
 * the momentum, the f32 scalars, then one state per parameter and name of
 * STATES. */
typedef struct optim_spec {
  size_t size; /* the optimizer's struct, which begins with an optim_common */
  bool step;   /* keep "step", torch's step count */
  /* The host state a scheduler cycles ("momentum", "beta1"), from option
   * MOMENTUM_OPTION, in [0, MOMENTUM_BELOW); NULL: none. */
  const char *momentum, *momentum_option;
  double momentum_below;
  const char *f32[2]; /* [1] f32 scalar states (c->f32), zero; NULL-ended */
  /* Room for LISTS lists of buffers (at least as many as STATES names: a
   * list made later, or never, stays NULL); STATES: the prefixes of those
   * made now ("exp_avg": "exp_avg.PARAM"), NULL-ended. */
  size_t lists;
  const char *states[OPTIM_MAX_LISTS + 1];
  optim_field fields[OPTIM_MAX_FIELDS]; /* read last; name NULL: no more */
  /* What optim_step does; all NULL: the plugin has a step of its own. */
  optim_kernel kernel;
} optim_spec;

/* An optim_spec's momentum for the adam family: beta1, the first of option
 * betas, in [0, 1). */
#define OPTIM_BETA1                                                            \
  .momentum = "beta1", .momentum_option = "betas", .momentum_below = 1

/* An optim_spec's momentum for sgd and rmsprop: option momentum, >= 0. */
#define OPTIM_MOMENTUM                                                         \
  .momentum = "momentum", .momentum_option = "momentum",                       \
  .momentum_below = INFINITY

/* An optimizer's entries besides step: the rate, and with
 * OPTIM_MOMENTUM_ENTRIES the momentum a scheduler may cycle (set_momentum
 * of an optimizer whose every value is usable as it is). */
#define OPTIM_LR_ENTRIES .get_lr = optim_get_lr, .set_lr = optim_set_lr
#define OPTIM_MOMENTUM_ENTRIES                                                 \
  OPTIM_LR_ENTRIES, .get_momentum = optim_get_momentum,                        \
                    .set_momentum = optim_set_momentum

/* torch's options of Adamax, NAdam and RAdam that Adam's family shares, in
 * its order and words, LR the default rate. */
/* clang-format off */
#define OPTIM_ADAMLIKE_OPTIONS(lr)                                             \
  {"lr", LK_OPT_DOUBLE, lr, "learning rate", "[0, inf)"},                      \
  {"eps", LK_OPT_DOUBLE, "1e-8",                                               \
   "term added to the denominator to improve numerical stability",             \
   "[0, inf)"},                                                                \
  {"betas", LK_OPT_DOUBLES, "0.9,0.999",                                       \
   "coefficients used for computing running averages of gradient and its "     \
   "square", "[0, 1)"},                                                        \
  {"weight_decay", LK_OPT_DOUBLE, "0", "weight decay (L2 penalty)",            \
   "[0, inf)"}
/* clang-format on */

/* The first member of Adamax's, NAdam's and RAdam's structs: beta1 is c's
 * momentum, the rest of their shared options are here. */
typedef struct optim_adamlike {
  optim_common c; /* lr, step (torch's float32 one), momentum: beta1 */
  double beta2, eps, weight_decay;
} optim_adamlike;

/* torch 1.13's step count of Adamax, ASGD, NAdam and RAdam is a float32
 * 0-d tensor (torch.tensor(0.)) that each step adds 1 to: it counts
 * exactly up to 2^24 and stays there. */
#define OPTIM_F32_MAX_COUNT 16777216.0

/* The run's parameters; a config error when the model registered none. */
int optim_params(lk_host *host, lk_tensor *const **params, size_t *n);

void optim_destroy(void *self);

/* The start of create: *OUT gets a zeroed struct of SIZE bytes that begins
 * with an optim_common, with room for LISTS lists of one buffer per
 * parameter (c->bufs, c->bufs + n, ...), and the host state "lr" = LR,
 * then, with STEP, "step" = 0. */
int optim_new(lk_host *host, size_t size, size_t lists, double lr, bool step,
              void **out);

/* create as SPEC says, with the rate of option "lr", the momentum
 * MOMENTUM (when SPEC has one) and SPEC's fields: *OUT, or an error with
 * nothing left. */
int optim_create(lk_host *host, const lk_options *o, const optim_spec *spec,
                 double momentum, void **out);

/* A list option of two values (betas, etas): OUT gets them; a config
 * error naming NAME and what it means otherwise (a range cannot say how
 * many values there are). */
int optim_two(lk_host *host, const lk_options *o, const char *name,
              const char *meaning, double out[2]);

/* The adam family's option betas (beta1, beta2). */
int optim_betas(lk_host *host, const lk_options *o, double out[2]);

/* create of an optimizer whose struct begins with an optim_adamlike: the
 * options of OPTIM_ADAMLIKE_OPTIONS, then as SPEC says (with
 * OPTIM_BETA1). */
int optim_create_adamlike(lk_host *host, const lk_options *o,
                          const optim_spec *spec, void **out);

/* The new step count, torch's float32 one (OPTIM_F32_MAX_COUNT), kept in
 * c->step. */
double optim_step_f32(optim_common *c);

/* OUT[i]: the state "PREFIX.PARAM" shaped like parameter i, zero-filled. */
int optim_param_states(const optim_common *c, const char *prefix,
                       lk_tensor **out);

double optim_get_lr(void *self);
void optim_set_lr(void *self, double lr);

/* The host state NAME ("momentum", "beta1") = VALUE, which get_momentum
 * and set_momentum (ABI 1.5) reach, from option OPTION (VALUE in its range
 * [0, BELOW): BELOW 1 for betas, INFINITY for a momentum). It exists
 * whatever the headers, so that a build against older ones writes the same
 * checkpoints. On failure the caller destroys C. */
int optim_add_momentum(optim_common *c, const char *name, double value,
                       const char *option, double below);

double optim_get_momentum(void *self);

/* Before a step touches anything: the parameters are those of create, and
 * each is like its buffer BUF[i] (BUF NULL: no buffers). */
int optim_check_params(const optim_common *c, lk_tensor *const *params,
                       size_t n, lk_tensor *const *buf);

/* The start of a step: the closure's loss, when there is one, must be
 * finite (else the step leaves the parameters be: false, *RC 0), and the
 * parameters must pass optim_check_params with the first list of buffers
 * (else false, *RC the error). True: go on. */
bool optim_begin(const optim_common *c, lk_tensor *const *params, size_t n,
                 lk_closure_fn closure, int *rc);

/* The update of each parameter: F64 for f64 ones, F32 for the others. */
void optim_each(const optim_common *c, lk_tensor *const *params,
                const void *scalars, optim_update_fn *f64,
                optim_update_fn *f32);

/* The step entry of an optimizer whose optim_spec names its parts, one
 * for all of them, which all step alike: optim_begin, the spec's prepare,
 * then optim_each with the spec's updates (its kernel). */
int optim_step(void *self, lk_tensor *const *params, size_t n,
               lk_closure_fn closure);

/* ---- optimizers of a flat vector of doubles (C libraries) --------------- */

/* The run's parameters, each f64 or f32, and their elements in all. */
int optim_flat_params(lk_host *host, lk_tensor *const **params, size_t *np,
                      size_t *n);

/* Before such a step: a closure (WHO evaluates the model several times),
 * and the NP parameters of N elements it was created with. */
int optim_flat_check(lk_host *host, const char *who, lk_tensor *const *params,
                     size_t n_params, lk_closure_fn closure, size_t np,
                     size_t n);

/* The parameters, or their gradients, concatenated into V. */
void optim_gather(lk_tensor *const *p, size_t np, bool grad, double *v);

/* V back into the parameters, rounded to each one's dtype. */
void optim_scatter(lk_tensor *const *p, size_t np, const double *v);

#if LK_ABI_MINOR >= 4
/* M is refused where create refuses its option's value (torch's check):
 * a scheduler that sets beta1 = 1 fails as a config with betas = 1,0.999
 * would, and a checkpoint that holds it is one no run can write. CODE:
 * LK_EINVAL for a value set, LK_EFORMAT for a checkpoint's. */
int optim_check_momentum(const optim_common *c, double m, int code);

/* set_momentum of an optimizer whose every value is usable as it is (the
 * adam family: beta1). */
int optim_set_momentum(void *self, double momentum);

/* set_momentum of an optimizer that keeps momentum buffers only when it
 * may need them (sgd, rmsprop: torch makes them at a step that has a
 * momentum): created with momentum = 0 it has none, unless a scheduler
 * drives the momentum. Such a scheduler sets it in its create, as torch's
 * OneCycleLR and CyclicLR do in their constructors, while the host still
 * takes state: MAKE then adds the buffers, and *KEPT records it, whatever
 * the value (a cycle may start at 0). Once the tables are sealed nothing
 * can be added: a momentum other than 0 is refused without buffers. */
int optim_set_momentum_kept(optim_common *c, double momentum, bool *kept,
                            int (*make)(optim_common *c));

/* For check_state, without buffers (created with momentum = 0, and no
 * scheduler drives the momentum): a momentum other than 0 is one no run of
 * this config can write. */
int optim_check_no_buffers(const optim_common *c);

/* For check_state: momentum buffers that must still be as the host made
 * them (zero: BUF[i] of the C->n parameters), because FLAG (its name for
 * the messages) says no step has filled them yet. */
int optim_check_unfilled(const optim_common *c, lk_tensor *const *buf,
                         const lk_tensor *flag);

/* For check_state: a rate >= 0, when kept, a whole step count, and a
 * momentum in its option's range (what set_momentum takes from a
 * scheduler, too). */
int optim_check_state(const optim_common *c);

/* optim_check_state, then torch's float32 step count (OPTIM_F32_MAX_COUNT). */
int optim_check_f32_step(const optim_common *c);

/* check_state of an optim_adamlike whose second list of buffers is never
 * negative (second moments, infinity norms): optim_check_f32_step, then
 * optim_check_squares. */
int optim_check_adamlike(void *self);

/* For check_state: buffers that are never negative (sums and averages of
 * squares, whose square root the update takes). */
int optim_check_squares(const optim_common *c, lk_tensor *const *buf);
#endif

#endif
