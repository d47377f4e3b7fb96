/* Private declarations shared by libloopkit's files. Nothing here is
 * exported: the library is built with -fvisibility=hidden. */
#ifndef LK_INTERNAL_H
#define LK_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loopkit/loopkit.h"

#define LK_UNUSED(x) ((void)(x))

struct stat;

/* error.c: sets this thread's message and returns CODE. */
int lk__err(int code, const char *fmt, ...) LK_PRINTF(2, 3);
int lk__verr(int code, const char *fmt, va_list ap);
/* Prepends "PREFIX: " to the current message (keeps the code). */
int lk__err_prefix(int code, const char *fmt, ...) LK_PRINTF(2, 3);
/* Counts the failures recorded on this thread: taken before a plugin entry
 * is called, it tells whether the entry said why it failed. It is read
 * around every entry the loop calls, so it is inline and initial-exec: a
 * load, not a call and a __tls_get_addr (eight bytes fit glibc's static
 * TLS reserve even when libloopkit is dlopen'ed). */
extern _Thread_local uint64_t lk__err_recorded
    __attribute__((tls_model("initial-exec")));
static inline uint64_t lk__err_mark(void) {
  return lk__err_recorded;
}
/* A plugin entry returned RC (non-zero) after MARK: its code (LK_EPLUGIN
 * for a positive one) and its message prefixed with what failed; an entry
 * that failed without lk_fail is named as such instead of leaving an empty
 * or stale reason. */
int lk__entry_failed(int rc, uint64_t mark, const char *fmt, ...)
    LK_PRINTF(3, 4);

/* util.c */
char *lk__strdup(const char *s);
char *lk__asprintf(const char *fmt, ...) LK_PRINTF(1, 2);
void *lk__aligned_calloc(size_t n, size_t size); /* 64-byte aligned */
int lk__parse_int(const char *s, int64_t *out);
int lk__parse_double(const char *s, double *out);
int lk__parse_bool(const char *s, bool *out);
#define LK__CONFIG_MAX_BYTES (16u << 20)
int lk__read_file(const char *path, const char *what, uint64_t max, char **out,
                  size_t *out_len, struct stat *st);
/* Syncs the directory holding PATH: a rename is durable only then. */
int lk__sync_dir(const char *path);

/* searchpath.c: the plugin search path. EACH is called with every
 * directory, in search order, and where it comes from (for messages); a
 * non-zero return stops the walk and is returned. LOOPKIT_PLUGIN_PATH's
 * entries are checked first (absolute, none empty) unless unsafe plugins
 * are allowed (LK__UNSAFE_ENV=1, exactly). */
#define LK__UNSAFE_ENV "LOOPKIT_ALLOW_UNSAFE_PLUGINS"
typedef int (*lk__dir_fn)(void *user, const char *dir, const char *source);
int lk__search_dirs(lk__dir_fn each, void *user);
bool lk__unsafe_plugins(void);

/* loader.c: the ABI minor version a plugin was built for; entries an ops
 * table gained after it must not be read. */
unsigned lk__plugin_minor(const lk_plugin *p);

/* closure.c: the error of C's last evaluation (0: it did not fail). */
int lk__closure_error(const lk_closure *c);
/* Records CODE and the current message as the failure of C's last
 * evaluation, unless one is recorded already: what wraps the closure
 * (hooks, clipping, the processes' mean) fails into the same record that
 * lk_closure_consume reports. Returns CODE. */
int lk__closure_fail(lk_closure *c, int code);

/* wrap.c: a closure that returns MAP(ctx, the loss INNER returns). */
int lk__closure_map(lk_closure_fn inner, double (*map)(void *ctx, double loss),
                    void *ctx, lk_wrap **out);

/* config.c: what only the library (and its tests) read of a config. */
/* Entries in file order (sections in order of first appearance). */
size_t lk__config_count(const lk_config *cfg);
const lk_config_entry *lk__config_at(const lk_config *cfg, size_t i);

/* Whether a section header or key of SECTION appeared. */
bool lk__config_has_section(const lk_config *cfg, const char *section);

/* Where section SECTION was first seen ("FILE:LINE"), or NULL. */
const char *lk__config_section_where(const lk_config *cfg, const char *section);

/* The path it was loaded from (or the name given to lk_config_parse). */
const char *lk__config_path(const lk_config *cfg);

/* VALUE, the value of path entry E (NULL: a default), made absolute in
 * *OUT (allocated): a relative path of a line of the file is joined to the
 * file's directory, any other (--set, lk_config_put, a default) to the
 * current directory. An empty value stays empty. */
int lk__config_abspath(const lk_config *cfg, const lk_config_entry *e,
                       const char *value, char **out);

/* The --set arguments applied to a config, in order (lk_config_set). */
typedef struct lk__config_override {
  const char *section, *key;
  const char *was;   /* the value it replaced; NULL: the key was absent */
  const char *value; /* NULL: an empty value, which removed the key */
  const char *arg;   /* as given: "SECTION.KEY=VALUE" */
} lk__config_override;
size_t lk__config_n_overrides(const lk_config *cfg);
const lk__config_override *lk__config_override_at(const lk_config *cfg,
                                                  size_t i);
/* A copy of CFG as it was before the --set arguments of SECTION.KEY: the
 * value the first of them replaced, from where it came (a file's relative
 * path stays the file's), or no entry when there was none; every other
 * --set stays applied and recorded. */
int lk__config_without_set(const lk_config *cfg, const char *section,
                           const char *key, lk_config **out);

/* Writes it back as INI, sections in order. */
int lk__config_write(const lk_config *cfg, FILE *f);

/* closure.c, wrap.c: what only the library (and its tests) use. */
/* Evaluations since lk_closure_new. */
uint64_t lk__closure_calls(const lk_closure *c);

/* Sets the name used in "optimizer NAME returned without calling the
 * closure" messages. */
void lk__closure_set_caller(lk_closure *c, const char *optimizer_name);

/* Composition: a new closure pointer that calls BEFORE(ctx), INNER, then
 * AFTER(ctx) — profiling around the evaluation. */
int lk__closure_around(lk_closure_fn inner, void (*before)(void *ctx),
                       void (*after)(void *ctx), void *ctx, lk_wrap **out);

/* tensor.c */
long lk__first_nonfinite(lk_dtype dtype, const void *buf, size_t numel);
double lk__element(lk_dtype dtype, const void *buf, size_t i);

/* A metrics.csv column name: 1 to LK__NAME_MAX - 1 bytes, none of them a
 * comma, a quote, a line break or a NUL (util.c). */
#define LK__NAME_MAX 64
#define LK__MAX_COLUMNS 128 /* metrics.csv columns a run remembers */
bool lk__column_name_ok(const char *name, size_t len);

typedef struct lk__named_value {
  char name[LK__NAME_MAX];
  double value;
} lk__named_value;

/* checkpoint.c: versioned binary, little-endian, CRC-32 checked. */
typedef struct lk__progress {
  uint64_t epoch;       /* epochs completed */
  uint64_t batch;       /* batches done in the current epoch */
  uint64_t global_step; /* optimizer steps taken */
  uint64_t accum;       /* position in the accumulation window */
} lk__progress;

/* Everything the loop knows besides the tensors and the generator: every
 * checkpoint carries it whole, so that a run resumed from any checkpoint
 * goes on as if it had never stopped (the same decisions, the same rows). */
typedef struct lk__loop_state {
  lk__progress progress;
  uint64_t metrics_rows; /* data rows of metrics.csv logged so far */
  bool stopped;          /* a callback stopped training */
  bool finished;         /* training ended and the test ran: run complete */
  bool has_last_loss;
  double last_loss;      /* the last optimizer step's loss */
  uint64_t epoch_losses; /* step losses of the current epoch so far */
  double epoch_loss_sum; /* and their sum, for the epoch's mean loss */
  size_t n_latest;       /* the latest value of every column logged, */
  lk__named_value latest[LK__MAX_COLUMNS]; /* in order of first logging */
} lk__loop_state;

typedef enum lk__ckpt_kind {
  LK__CKPT_PARAM = 1,
  LK__CKPT_STATE = 2
} lk__ckpt_kind;

typedef struct lk__ckpt {
  uint32_t version; /* 1: tensors and progress only (no loop state) */
  lk__loop_state state;
  lk_rng rng;
  size_t n;
  lk__ckpt_kind *kinds; /* n */
  lk_tensor *tensors;   /* n; name and data owned by the checkpoint */
} lk__ckpt;

/* Writes STATE, RNG, PARAMS (their data) and STATES atomically to PATH: a
 * temporary file, fsync, rename, directory fsync. Refuses a non-finite
 * tensor value (LK_ENONFINITE, naming the tensor and index) and leaves
 * PATH untouched. */
int lk__ckpt_write(const char *path, const lk__loop_state *state,
                   const lk_rng *rng, lk_tensor *const *params, size_t n_params,
                   lk_tensor *const *states, size_t n_states);
/* Reads PATH whole; LK_EFORMAT for truncated, corrupt or foreign files. ST,
 * if not NULL, gets the status of the file that was read. */
int lk__ckpt_read(const char *path, lk__ckpt **out, struct stat *st);
/* The same from LEN bytes in memory; NAME stands for the path in messages. */
int lk__ckpt_parse(const char *name, const unsigned char *buf, size_t len,
                   lk__ckpt **out);
void lk__ckpt_free(lk__ckpt *ck);

#endif
