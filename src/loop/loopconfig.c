/* [loop]: its keys, declared as plugins declare their options (so that
 * lk_run_loop_keys gives hosts and loopkit.ini(5) the table the checks
 * use), each mapped to its field of lk__loop_config by name. */
#include <math.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "loopkit/nn.h"
#include "loop.h"

#define MAX_THREADS LK__STRING(LK_NN_MAX_THREADS) /* "256", for the help */
/* X(KEY, FIELD, TYPE, DEFAULT, MIN, HELP, CHOICES): MIN is the smallest
 * value an integer key takes. */
#define LOOP_KEYS(X)                                                           \
  X(max_epochs, max_epochs, LK_OPT_INT, "1", -1,                               \
    "epochs to train (with a data plugin); -1: no limit. Not given: 1, or "    \
    "-1 when max_steps is set (the run is then bounded by max_steps alone, "   \
    "as Lightning's)",                                                         \
    NULL)                                                                      \
  X(max_steps, max_steps, LK_OPT_INT, "-1", -1,                                \
    "optimizer steps to take; -1: no limit (required without a data "          \
    "plugin)",                                                                 \
    NULL)                                                                      \
  X(accumulate_grad_batches, accumulate, LK_OPT_INT, "1", 1,                   \
    "batches whose gradients are summed (the loss divided by their number) "   \
    "before one optimizer step",                                               \
    NULL)                                                                      \
  X(gradient_clip_val, clip_val, LK_OPT_DOUBLE, "0", 0,                        \
    "clip the gradients to this after backward, before the update; 0: off",    \
    NULL)                                                                      \
  X(gradient_clip_algorithm, clip_algorithm, LK_OPT_ENUM, "norm", 0,           \
    "norm: scale the whole gradient to this norm; value: clamp each element",  \
    "norm|value")                                                              \
  X(terminate_on_nan, terminate_on_nan, LK_OPT_BOOL, "false", 0,               \
    "stop with an error (exit 1) at a non-finite loss, parameter or "          \
    "gradient",                                                                \
    NULL)                                                                      \
  X(manual_optimization, manual, LK_OPT_BOOL, "false", 0,                      \
    "the step plugin drives the optimizer itself through the host", NULL)      \
  X(seed, seed, LK_OPT_INT, "0", 0, "seed of the run's random generator",      \
    NULL)                                                                      \
  X(val_every_n_epochs, val_every, LK_OPT_INT, "1", 1,                         \
    "validate after every N-th epoch (and after the last)", NULL)              \
  X(val_check_interval, val_check, LK_OPT_INT, "0", 0,                         \
    "also validate after every N-th optimizer step of an epoch (Lightning's "  \
    "int form: training batches, without accumulation), in the epochs "        \
    "val_every_n_epochs validates; 0: at the epoch's end only",                \
    NULL)                                                                      \
  X(checkpoint_every_n_steps, ckpt_every, LK_OPT_INT, "0", 0,                  \
    "also write last.ckpt every N optimizer steps; 0: at each epoch's end "    \
    "and at the end of training",                                              \
    NULL)                                                                      \
  X(keep_last, keep_last, LK_OPT_INT, "0", 0,                                  \
    "also keep the N newest step-N.ckpt files; 0: last.ckpt only", NULL)       \
  X(log_every_n_steps, log_every, LK_OPT_INT, "50", 1,                         \
    "a progress line every N steps when stderr is not a terminal", NULL)       \
  X(threads, threads, LK_OPT_INT, "0", 0,                                      \
    "threads a plugin's kernels use (lk_host_threads), at most " MAX_THREADS   \
    "; 0: one per CPU the process may run on (at most " MAX_THREADS            \
    "), divided among the processes a launcher (mpirun, srun) started on "     \
    "its node",                                                                \
    NULL)                                                                      \
  X(test_ckpt, test_ckpt, LK_OPT_ENUM, "last", 0,                              \
    "the parameters the test at the end of training runs on: last, the "       \
    "trained ones; best, best.ckpt's (the best by its monitor of the first "   \
    "checkpoint callback listed, in its directory, as Lightning's "            \
    "ckpt_path=\"best\")",                                                     \
    "last|best")

static const lk_option loop_keys[] = {
#define AS_OPTION(KEY, FIELD, TYPE, DEF, MIN, HELP, CHOICES)                   \
  {#KEY, TYPE, DEF, HELP, CHOICES},
    LOOP_KEYS(AS_OPTION)
#undef AS_OPTION
        {NULL, 0, NULL, NULL, NULL}};

/* Row for row with loop_keys: both are made from LOOP_KEYS. */
static const struct {
  size_t offset;
  int64_t min;
} loop_fields[] = {
#define AS_FIELD(KEY, FIELD, TYPE, DEF, MIN, HELP, CHOICES)                    \
  {offsetof(lk__loop_config, FIELD), MIN},
    LOOP_KEYS(AS_FIELD)
#undef AS_FIELD
};
#define N_LOOP_KEYS (sizeof loop_fields / sizeof loop_fields[0])

const lk_option *lk_run_loop_keys(void) {
  return loop_keys;
}

const lk_option *lk_run_plugin_keys(void) {
  return lk__plugin_keys;
}

static const char *where_of(const lk_config *cfg, const char *key) {
  const lk_config_entry *e = lk_config_find(cfg, "loop", key);
  return e ? e->where : lk__config_path(cfg);
}

/* Whether max_steps sets a limit: given, and not -1. */
static bool steps_limited(const lk_config *cfg) {
  const lk_config_entry *e = lk_config_find(cfg, "loop", "max_steps");
  int64_t steps;
  return e && lk__parse_int(e->value, &steps) == 0 && steps != -1;
}

/* The default of key O in CFG: its declared one, but for max_epochs when
 * max_steps is set, -1, so that the step budget alone bounds the run
 * (Lightning's max_epochs = None with max_steps). */
static const char *default_of(const lk_config *cfg, const lk_option *o) {
  if (!strcmp(o->name, "max_epochs") && steps_limited(cfg))
    return "-1";
  return o->def;
}

/* Key K's value (given or default) into its field of L. */
static int loop_value(const lk_config *cfg, size_t k, lk__loop_config *l) {
  const lk_option *o = &loop_keys[k];
  int64_t min = loop_fields[k].min;
  char *field = (char *)l + loop_fields[k].offset;
  const lk_config_entry *e = lk_config_find(cfg, "loop", o->name);
  const char *v = e ? e->value : default_of(cfg, o);
  const char *where = e ? e->where : "default";
  int64_t i;
  switch (o->type) {
  case LK_OPT_INT:
    if (lk__parse_int(v, &i) != 0 || i < min || (min == -1 && i == 0))
      return lk__err(LK_ECONFIG, "%s: loop.%s = \"%s\": expected an integer %s",
                     where, o->name, v,
                     min == -1  ? "-1 (no limit) or >= 1"
                     : min == 0 ? ">= 0"
                                : ">= 1");
    memcpy(field, &i, sizeof i);
    return 0;
  case LK_OPT_DOUBLE: {
    double d;
    if (lk__parse_double(v, &d) != 0 || !isfinite(d) || d < 0)
      return lk__err(LK_ECONFIG, "%s: loop.%s = \"%s\": expected a number >= 0",
                     where, o->name, v);
    memcpy(field, &d, sizeof d);
    return 0;
  }
  case LK_OPT_BOOL: {
    bool b;
    if (lk__parse_bool(v, &b) != 0)
      return lk__err(LK_ECONFIG, "%s: loop.%s = \"%s\": expected true or false",
                     where, o->name, v);
    memcpy(field, &b, sizeof b);
    return 0;
  }
  case LK_OPT_ENUM:
    /* The value's position among the choices: the field's enum. */
    i = 0;
    for (const char *c = o->choices;; i++) {
      size_t len = strcspn(c, "|");
      if (strlen(v) == len && strncmp(c, v, len) == 0) {
        memcpy(field, &i, sizeof i);
        return 0;
      }
      if (!c[len])
        break;
      c += len + 1;
    }
    return lk__err(LK_ECONFIG, "%s: loop.%s = \"%s\": expected one of %s",
                   where, o->name, v, o->choices);
  default: break;
  }
  return LK_EINVAL;
}

int lk__loop_config_parse(const lk_config *cfg, lk__loop_config *l) {
  for (size_t i = 0; i < lk__config_count(cfg); i++) {
    const lk_config_entry *e = lk__config_at(cfg, i);
    if (strcmp(e->section, "loop") != 0)
      continue;
    const lk_option *o = loop_keys;
    while (o->name && strcmp(o->name, e->key) != 0)
      o++;
    if (!o->name) {
      char accepted[512];
      lk__option_names(loop_keys, accepted, sizeof accepted);
      return lk__err(LK_ECONFIG,
                     "%s: unknown key \"%s\" in [loop]; accepted: %s", e->where,
                     e->key, accepted);
    }
  }
  int rc = 0;
  for (size_t k = 0; k < N_LOOP_KEYS && rc == 0; k++)
    rc = loop_value(cfg, k, l);
  if (rc != 0)
    return rc;
  if (l->threads > LK_NN_MAX_THREADS)
    return lk__err(LK_ECONFIG,
                   "%s: loop.threads = %lld: expected 0 (one per CPU the "
                   "process may run on) to %d, the most the layer kit's "
                   "threads take",
                   where_of(cfg, "threads"), (long long)l->threads,
                   LK_NN_MAX_THREADS);
  if (l->manual && l->accumulate != 1)
    return lk__err(LK_ECONFIG,
                   "%s: accumulate_grad_batches = %lld with "
                   "manual_optimization = true: accumulate in the step "
                   "plugin instead",
                   where_of(cfg, "accumulate_grad_batches"),
                   (long long)l->accumulate);
  if (l->manual && l->clip_val != 0)
    return lk__err(LK_ECONFIG,
                   "%s: gradient_clip_val with manual_optimization = true: "
                   "call lk_host_clip_gradients from the step plugin instead",
                   where_of(cfg, "gradient_clip_val"));
  return 0;
}

int lk__loop_config_export(const lk_config *cfg, lk_config *out) {
  int rc = 0;
  for (size_t k = 0; k < N_LOOP_KEYS && rc == 0; k++) {
    const lk_config_entry *e = lk_config_find(cfg, "loop", loop_keys[k].name);
    rc = lk_config_put(out, "loop", loop_keys[k].name,
                       e ? e->value : default_of(cfg, &loop_keys[k]),
                       e ? e->where : "default");
  }
  return rc;
}

/* [loop] threads, checked already to be at most LK_NN_MAX_THREADS: the
 * layer kit's contexts take no more, and a plugin passes
 * lk_host_threads to lk_nn_create. One per CPU stops there too. */
int lk__threads_resolve(int64_t threads) {
  if (threads > 0)
    return threads > LK_NN_MAX_THREADS ? LK_NN_MAX_THREADS : (int)threads;
  /* The CPUs this process may run on, not those the machine has: taskset
   * and containers give fewer. */
  long n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    n = CPU_COUNT(&set);
  else
    n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > LK_NN_MAX_THREADS ? LK_NN_MAX_THREADS : (int)n;
}
