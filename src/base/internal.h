/* Private declarations shared by libloopkit's files. Nothing here is
 * exported: the library is built with -fvisibility=hidden.
 *
 * This is the base part's header (src/base/): what every part uses. The
 * parts above have headers of their own (src/PARTS). */
#ifndef LK_INTERNAL_H
#define LK_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loopkit/loopkit.h"

#define LK_UNUSED(x) ((void)(x))
/* A macro's value as a string literal: LK__STRING(LK_MAX_DIMS) is "4". */
#define LK__STRING_(x) #x
#define LK__STRING(x) LK__STRING_(x)

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
/* "[2, 3, 4]" into BUF (cut to LEN); returns BUF. */
const char *lk__shape_text(const size_t *shape, size_t ndim, char *buf,
                           size_t len);
int lk__parse_int(const char *s, int64_t *out);
int lk__parse_double(const char *s, double *out);
int lk__parse_bool(const char *s, bool *out);
#define LK__CONFIG_MAX_BYTES (16u << 20)
int lk__read_file(const char *path, const char *what, uint64_t max, char **out,
                  size_t *out_len, struct stat *st);
/* Syncs the directory holding PATH: a rename is durable only then. */
int lk__sync_dir(const char *path);
/* "a directory", "a FIFO", ...: what a file of st_mode MODE is. */
const char *lk__file_type(unsigned mode);

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
/* The same text (config.ini's, and what a logger records) in a malloc'd
 * *OUT of *LEN bytes (LEN may be NULL). */
int lk__config_text(const lk_config *cfg, char **out, size_t *len);

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

/* The loop's progress and state, which every checkpoint carries
 * (store/checkpoint.h) and the loop keeps (loop/loop.h). */
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

#endif
