/* Private declarations shared by libloopkit's files. Nothing here is
 * exported: the library is built with -fvisibility=hidden. */
#ifndef LK_INTERNAL_H
#define LK_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loopkit/loopkit.h"

#define LK_UNUSED(x) ((void)(x))

/* error.c: sets this thread's message and returns CODE. */
int lk__err(int code, const char *fmt, ...) LK_PRINTF(2, 3);
int lk__verr(int code, const char *fmt, va_list ap);
/* Prepends "PREFIX: " to the current message (keeps the code). */
int lk__err_prefix(int code, const char *fmt, ...) LK_PRINTF(2, 3);

/* util.c */
char *lk__strdup(const char *s);
char *lk__asprintf(const char *fmt, ...) LK_PRINTF(1, 2);
void *lk__aligned_calloc(size_t n, size_t size); /* 64-byte aligned */
int lk__parse_int(const char *s, int64_t *out);
int lk__parse_double(const char *s, double *out);
int lk__parse_bool(const char *s, bool *out);
int lk__read_file(const char *path, const char *what, char **out,
                  size_t *out_len);

/* loader.c: the ABI minor version a plugin was built for; entries an ops
 * table gained after it must not be read. */
unsigned lk__plugin_minor(const lk_plugin *p);

/* closure.c: the error of C's last evaluation (0: it did not fail). */
int lk__closure_error(const lk_closure *c);

/* wrap.c: a closure that returns MAP(ctx, the loss INNER returns). */
int lk__closure_map(lk_closure_fn inner, double (*map)(void *ctx, double loss),
                    void *ctx, lk_wrap **out);

/* tensor.c */
long lk__first_nonfinite(lk_dtype dtype, const void *buf, size_t numel);
double lk__element(lk_dtype dtype, const void *buf, size_t i);

/* checkpoint.c: versioned binary, little-endian, CRC-32 checked. */
typedef struct lk__progress {
  uint64_t epoch;       /* epochs completed */
  uint64_t batch;       /* batches done in the current epoch */
  uint64_t global_step; /* optimizer steps taken */
  uint64_t accum;       /* position in the accumulation window */
} lk__progress;

typedef enum lk__ckpt_kind {
  LK__CKPT_PARAM = 1,
  LK__CKPT_STATE = 2
} lk__ckpt_kind;

typedef struct lk__ckpt {
  lk__progress progress;
  lk_rng rng;
  size_t n;
  lk__ckpt_kind *kinds; /* n */
  lk_tensor *tensors;   /* n; name and data owned by the checkpoint */
} lk__ckpt;

/* Writes PARAMS (their data) and STATES atomically to PATH: a temporary
 * file, fsync, rename, directory fsync. Refuses a non-finite value
 * (LK_ENONFINITE, naming the tensor and index) and leaves PATH untouched. */
int lk__ckpt_write(const char *path, const lk__progress *progress,
                   const lk_rng *rng, lk_tensor *const *params, size_t n_params,
                   lk_tensor *const *states, size_t n_states);
/* Reads PATH whole; LK_EFORMAT for truncated, corrupt or foreign files. */
int lk__ckpt_read(const char *path, lk__ckpt **out);
/* The same from LEN bytes in memory; NAME stands for the path in messages. */
int lk__ckpt_parse(const char *name, const unsigned char *buf, size_t len,
                   lk__ckpt **out);
void lk__ckpt_free(lk__ckpt *ck);

#endif
