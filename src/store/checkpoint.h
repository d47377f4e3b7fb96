/* The checkpoint format (store/): what a checkpoint carries, written and
 * parsed by checkpoint.c without a run around it. */
#ifndef LK_CHECKPOINT_H
#define LK_CHECKPOINT_H

#include "internal.h"

/* checkpoint.c: versioned binary, little-endian, CRC-32 checked. It
 * carries the loop's state (lk__loop_state, internal.h) whole. */
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
