/* The kinds of plugin, as data (see kinds.h). */
#include <stdio.h>
#include <string.h>

#include "kinds.h"

static const lk__entry step_entries[] = {
    {"training_step", 0, true},   {"validation_step", 0, false},
    {"test_step", 0, false},      {"predict_step", 4, false},
    {"evaluation_end", 6, false}, {"onnx", 7, false}};
static const lk__entry backward_entries[] = {{"backward", 0, true}};
static const lk__entry zero_grad_entries[] = {{"zero_grad", 0, true}};
static const lk__entry optimizer_entries[] = {{"step", 0, true},
                                              {"get_lr", 1, false},
                                              {"set_lr", 1, false},
                                              {"get_momentum", 5, false},
                                              {"set_momentum", 5, false}};
static const lk__entry profiler_entries[] = {{"action", 0, true},
                                             {"start", 0, true},
                                             {"stop", 0, true},
                                             {"report", 0, false}};
static const lk__entry data_entries[] = {
    {"epoch", 0, true}, {"batch", 0, true}, {"shape", 4, false}};
static const lk__entry strategy_entries[] = {
    {"setup", 0, false},          {"reduce_gradients", 0, false},
    {"reduce_metrics", 0, false}, {"rank", 0, false},
    {"world_size", 0, false},     {"abort", 2, false}};
static const lk__entry callback_entries[] = {
    {"on_train_start", 0, false},
    {"on_train_epoch_start", 0, false},
    {"on_train_batch_start", 0, false},
    {"on_before_zero_grad", 0, false},
    {"on_before_backward", 0, false},
    {"on_after_backward", 0, false},
    {"on_before_optimizer_step", 0, false},
    {"on_after_optimizer_step", 0, false},
    {"on_train_batch_end", 0, false},
    {"on_validation_end", 0, false},
    {"on_train_epoch_end", 0, false},
    {"on_train_end", 0, false},
    {"on_validation_start", 2, false}};
static const lk__entry scheduler_entries[] = {{"step", 0, true},
                                              {"restart", 5, false}};
static const lk__entry precision_entries[] = {{"loss_scale", 0, true},
                                              {"unscale_gradients", 0, true}};

static const lk__entry logger_entries[] = {{"start", 5, false},
                                           {"log_metrics", 5, true},
                                           {"save", 5, false},
                                           {"finalize", 5, false}};
/* Data, not a function: the loader checks it as such (loader.c). */
static const lk__entry layers_entries[] = {{"types", 6, true}};

#define N_OF(a) (sizeof a / sizeof a[0])

/* Every ops struct is a table of function pointers, entry for entry. */
typedef void (*any_fn)(void);
#define SAME_SIZE(name, type)                                                  \
  _Static_assert(N_OF(name##_entries) * sizeof(any_fn) == sizeof(type),        \
                 #type " has entries that kinds.c does not list")
SAME_SIZE(step, lk_step_ops);
SAME_SIZE(backward, lk_backward_ops);
SAME_SIZE(zero_grad, lk_zero_grad_ops);
SAME_SIZE(optimizer, lk_optimizer_ops);
SAME_SIZE(profiler, lk_profiler_ops);
SAME_SIZE(data, lk_data_ops);
SAME_SIZE(strategy, lk_strategy_ops);
SAME_SIZE(callback, lk_callback_ops);
SAME_SIZE(scheduler, lk_scheduler_ops);
SAME_SIZE(precision, lk_precision_ops);
SAME_SIZE(logger, lk_logger_ops);
_Static_assert(sizeof(lk_layers_ops) == sizeof(any_fn),
               "lk_layers_ops is one pointer, copied as an entry is");

const lk__kind lk__kinds[LK__N_KINDS] = {
#define LK__KIND_ROW(ID, NAME, ROLE, MANY, SINCE, DEF, CREATED, HELP)          \
  [LK__KIND_##ID] = {#NAME,                                                    \
                     ROLE,                                                     \
                     MANY,                                                     \
                     SINCE,                                                    \
                     DEF,                                                      \
                     CREATED,                                                  \
                     HELP,                                                     \
                     offsetof(lk_descriptor, NAME),                            \
                     offsetof(lk__ops_copy, NAME),                             \
                     NAME##_entries,                                           \
                     N_OF(NAME##_entries)},
    LK__KINDS(LK__KIND_ROW)
#undef LK__KIND_ROW
};

const lk_option lk__plugin_keys[] = {
#define LK__KIND_KEY(ID, NAME, ROLE, MANY, SINCE, DEF, CREATED, HELP)          \
  {ROLE, LK_OPT_STRING, DEF, HELP, NULL},
    LK__KINDS(LK__KIND_KEY)
#undef LK__KIND_KEY
        {NULL, 0, NULL, NULL, NULL}};

const lk__kind *lk__kind_of_role(const char *role) {
  for (size_t i = 0; role && i < LK__N_KINDS; i++)
    if (strcmp(lk__kinds[i].role, role) == 0)
      return &lk__kinds[i];
  return NULL;
}

/* ---- the ABI guard ------------------------------------------------------ */

static const unsigned feature_since[LK__N_ABI_FEATURES] = {
#define LK__ABI_SINCE(ID, SINCE, WHAT) [LK__ABI_##ID] = SINCE,
    LK__ABI_FEATURES(LK__ABI_SINCE)
#undef LK__ABI_SINCE
};

bool lk__abi_has(unsigned minor, lk__abi_feature f) {
  return (unsigned)f < LK__N_ABI_FEATURES && feature_since[f] <= minor;
}

unsigned lk__abi_minor(const lk_descriptor *d) {
  return d->abi_version & 0xffff;
}

static size_t later(size_t a, size_t b) {
  return a > b ? a : b;
}

size_t lk__abi_desc_size(unsigned minor) {
  size_t end = offsetof(lk_descriptor, destroy) + sizeof(any_fn);
  for (size_t k = 0; k < LK__N_KINDS; k++)
    if (lk__kinds[k].since <= minor)
      end = later(end, lk__kinds[k].field + sizeof(void *));
  if (lk__abi_has(minor, LK__ABI_CHECK_STATE))
    end = later(end, offsetof(lk_descriptor, check_state) + sizeof(any_fn));
  return end;
}

size_t lk__abi_entries(lk__kind_id k, unsigned minor) {
  const lk__kind *kind = &lk__kinds[k];
  size_t n = 0;
  while (n < kind->n_entries && kind->entries[n].since <= minor)
    n++;
  return n;
}

void lk__abi_copy_ops(lk_descriptor *d, unsigned minor, lk__ops_copy *copy) {
  memset(copy, 0, sizeof *copy);
  for (size_t k = 0; k < LK__N_KINDS; k++) {
    const lk__kind *kind = &lk__kinds[k];
    const void *ops = lk__kind_ops(d, kind);
    if (!ops)
      continue;
    void *mine = (char *)copy + kind->copy;
    memcpy(mine, ops, lk__abi_entries((lk__kind_id)k, minor) * sizeof(any_fn));
    memcpy((char *)d + kind->field, &mine, sizeof mine);
  }
}

/* ---- what a descriptor implements ---------------------------------------- */

const void *lk__kind_ops(const lk_descriptor *d, const lk__kind *k) {
  const void *ops;
  memcpy(&ops, (const char *)d + k->field, sizeof ops);
  return ops;
}

void (*lk__kind_entry(const lk_descriptor *d, const lk__kind *k,
                      size_t i))(void) {
  const char *ops = lk__kind_ops(d, k);
  any_fn fn = NULL;
  if (ops && i < k->n_entries)
    memcpy(&fn, ops + i * sizeof fn, sizeof fn);
  return fn;
}

bool lk__kind_has(const lk_descriptor *d, const lk__kind *k) {
  if (!lk__kind_ops(d, k))
    return false;
  for (size_t i = 0; i < k->n_entries; i++)
    if (k->entries[i].required && !lk__kind_entry(d, k, i))
      return false;
  return true;
}

const char *lk__kind_list(const lk_descriptor *d, char *buf, size_t len) {
  /* In descriptor order: the order of the fields, not of the keys. */
  const lk__kind *sorted[LK__N_KINDS];
  for (size_t i = 0; i < LK__N_KINDS; i++) {
    size_t j = i;
    for (; j > 0 && sorted[j - 1]->field > lk__kinds[i].field; j--)
      sorted[j] = sorted[j - 1];
    sorted[j] = &lk__kinds[i];
  }
  size_t used = 0;
  if (len)
    buf[0] = '\0';
  for (size_t i = 0; i < LK__N_KINDS; i++) {
    if (!lk__kind_ops(d, sorted[i]))
      continue;
    int w = snprintf(buf + used, len - used, "%s%s", used ? "," : "",
                     sorted[i]->name);
    if (w < 0 || (size_t)w >= len - used)
      break;
    used += (size_t)w;
  }
  return buf;
}
