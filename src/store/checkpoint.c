/* Checkpoints: the loop's progress, the generator and every parameter and
 * state tensor in one file, so that a resumed run continues bit for bit.
 *
 * Format, version 2. Every integer is little-endian whatever the host, and
 * floats are stored as their IEEE 754 bit patterns in the same byte order:
 *
 *   magic     8 bytes   "LOOPKIT\0"
 *   version   u32       LK__CKPT_VERSION
 *   length    u64       bytes in the whole file, checksum included
 *   progress  4 x u64   epoch, batch, global_step, accum
 *   rng       4 x u64   the generator's state words
 *   loop      the rest of the loop's state (lk__loop_state), version 2 on:
 *     metrics_rows u64, flags u64 (1 stopped, 2 finished, 4 has_last_loss;
 *     no other bit), last_loss f64, epoch_losses u64, epoch_loss_sum f64,
 *     n_latest u64, then n_latest records of name_len u32, name (a
 *     metrics.csv column name, no NUL), value f64
 *   count     u64       number of tensors, then count records of:
 *     kind u32 (1 parameter, 2 state), dtype u32 (lk_dtype), ndim u32,
 *     name_len u32, shape (ndim x u64), name (name_len bytes, no NUL),
 *     data (numel elements of dtype; a tensor's grad is never saved)
 *   crc       u32       CRC-32 of every byte before it
 *
 * The magic, version and length fields and the trailing CRC are an envelope
 * every later version must keep: it lets a reader tell a truncated or corrupt
 * file from one written by a newer loopkit (a flipped bit in the version
 * field says "checksum mismatch", not "version 16777217"). Version 1 files
 * (no loop section) are still read, for dump; a run does not resume from
 * one, as it lacks the loop's state.
 *
 * Nothing read from a file is trusted: every count and size is checked
 * against the bytes actually there before it is used. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "crc32.h"

#define LK__CKPT_VERSION 2u
#define HEADER_LEN (8 * 4 + 8 * 4) /* progress and rng */
#define LOOP_FIXED_LEN (8 * 6)     /* the loop section before its records */
#define FLAG_STOPPED 1u
#define FLAG_FINISHED 2u
#define FLAG_HAS_LAST_LOSS 4u
#define FLAGS_KNOWN (FLAG_STOPPED | FLAG_FINISHED | FLAG_HAS_LAST_LOSS)
#define MAGIC "LOOPKIT\0"
#define MAGIC_LEN 8
#define ENVELOPE_LEN 20 /* magic, version, length */
#define CRC_LEN 4
#define RECORD_MIN 16 /* a tensor record without shape, name or data */
#define NAME_MAX_LEN 4096

/* ---- little-endian bytes ------------------------------------------------ */

static void put32(unsigned char *b, uint32_t v) {
  for (int i = 0; i < 4; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *b, uint64_t v) {
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *b) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = (v << 8) | b[i];
  return v;
}

static uint64_t get64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | b[i];
  return v;
}

/* Bytes per element; 0 for a dtype this format does not know. Kept here
 * rather than calling lk_dtype_size so that the format's sizes are fixed by
 * this file alone. */
static size_t elem_size(uint32_t dtype) {
  switch (dtype) {
  case LK_F32: return 4;
  case LK_F64: return 8;
  case LK_I32: return 4;
  }
  return 0;
}

/* Element I of BUF as a double, for finiteness checks and messages. */
static double element(lk_dtype dtype, const void *buf, size_t i) {
  if (dtype == LK_F64)
    return ((const double *)buf)[i];
  if (dtype == LK_F32)
    return (double)((const float *)buf)[i];
  return (double)((const int32_t *)buf)[i];
}

/* Index of the first non-finite element, or -1 (integers are always
 * finite). */
static long first_nonfinite(lk_dtype dtype, const void *buf, size_t numel) {
  if (dtype != LK_F32 && dtype != LK_F64)
    return -1;
  for (size_t i = 0; i < numel; i++)
    if (!isfinite(element(dtype, buf, i)))
      return (long)i;
  return -1;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Resume matches tensors by name, so a name twice in one kind would load
 * one tensor and silently skip the other. Sorting keeps this O(n log n)
 * even for a file that claims millions of tensors. */
static int find_duplicate(const char **names, size_t n, const char **dup) {
  *dup = NULL;
  if (n < 2)
    return 0;
  const char **sorted = malloc(n * sizeof *sorted);
  if (!sorted)
    return lk__err(LK_ENOMEM, "out of memory");
  memcpy(sorted, names, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, cmp_name);
  for (size_t i = 1; i < n && !*dup; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0)
      *dup = sorted[i];
  free(sorted);
  return 0;
}

/* ---- writing ------------------------------------------------------------ */

/* Everything the writer will emit is checked first, so that a refused
 * checkpoint creates no file at all. */
static int check_tensor(const lk_tensor *t, const char *what, size_t i) {
  if (!t)
    return lk__err(LK_EINVAL, "%s %zu is NULL", what, i);
  if (!t->name || !t->name[0])
    return lk__err(LK_EINVAL, "%s %zu has no name", what, i);
  if (strlen(t->name) > NAME_MAX_LEN)
    return lk__err(LK_EINVAL, "%s %zu: name longer than %d bytes", what, i,
                   NAME_MAX_LEN);
  size_t size = elem_size((uint32_t)t->dtype);
  if (size == 0)
    return lk__err(LK_EINVAL, "%s %s: unknown dtype %d", what, t->name,
                   (int)t->dtype);
  if (t->ndim > LK_MAX_DIMS)
    return lk__err(LK_EINVAL, "%s %s: %zu dimensions, at most %d", what,
                   t->name, t->ndim, LK_MAX_DIMS);
  size_t numel, bytes;
  if (!lk_shape_numel(t->shape, t->ndim, &numel) || numel != t->numel)
    return lk__err(LK_EINVAL, "%s %s: numel %zu does not match its shape", what,
                   t->name, t->numel);
  if (!lk_size_mul(numel, size, &bytes))
    return lk__err(LK_EINVAL, "%s %s: too large", what, t->name);
  if (numel > 0 && !t->data)
    return lk__err(LK_EINVAL, "%s %s has no data", what, t->name);
  long at = first_nonfinite(t->dtype, t->data, numel);
  if (at >= 0)
    return lk__err(LK_ENONFINITE,
                   "refusing to checkpoint non-finite value %g in %s[%ld]",
                   element(t->dtype, t->data, (size_t)at), t->name, at);
  return 0;
}

static uint64_t record_len(const lk_tensor *t) {
  return RECORD_MIN + 8 * (uint64_t)t->ndim + strlen(t->name) +
         (uint64_t)t->numel * elem_size((uint32_t)t->dtype);
}

/* Checks LIST and adds its records' bytes to *LEN. */
static int check_list(lk_tensor *const *list, size_t n, const char *what,
                      uint64_t *len) {
  if (n > 0 && !list)
    return lk__err(LK_EINVAL, "%s list is NULL", what);
  for (size_t i = 0; i < n; i++) {
    int rc = check_tensor(list[i], what, i);
    if (rc != 0)
      return rc;
    uint64_t r = record_len(list[i]);
    if (r > UINT64_MAX - *len)
      return lk__err(LK_EINVAL, "checkpoint larger than 2^64 bytes");
    *len += r;
  }
  const char **names = malloc((n ? n : 1) * sizeof *names);
  if (!names)
    return lk__err(LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++)
    names[i] = list[i]->name;
  const char *dup;
  int rc = find_duplicate(names, n, &dup);
  free(names);
  if (rc == 0 && dup)
    rc = lk__err(LK_EINVAL, "two %ss are named %s", what, dup);
  return rc;
}

typedef struct writer {
  FILE *f;
  uint32_t crc;
  uint64_t written;
  int err; /* errno of the first failed write */
} writer;

static void emit(writer *w, const void *buf, size_t n) {
  w->crc = lk__crc32(w->crc, buf, n);
  w->written += n;
  if (!w->err && fwrite(buf, 1, n, w->f) != n)
    w->err = errno ? errno : EIO;
}

/* Element bytes in file order, a buffer at a time. Assumes, as every
 * platform loopkit targets does, that floats share the integers' byte
 * order, so reversing the integer bytes reverses the float's. */
static void emit_data(writer *w, const lk_tensor *t) {
  unsigned char buf[4096];
  size_t size = elem_size((uint32_t)t->dtype), per = sizeof buf / size;
  const unsigned char *src = t->data;
  for (size_t i = 0; i < t->numel; i += per) {
    size_t k = t->numel - i < per ? t->numel - i : per;
    for (size_t j = 0; j < k; j++) {
      const unsigned char *e = src + (i + j) * size;
      if (size == 4) {
        uint32_t v;
        memcpy(&v, e, 4);
        put32(buf + j * 4, v);
      } else {
        uint64_t v;
        memcpy(&v, e, 8);
        put64(buf + j * 8, v);
      }
    }
    emit(w, buf, k * size);
  }
}

static void emit_list(writer *w, lk_tensor *const *list, size_t n,
                      lk__ckpt_kind kind) {
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *t = list[i];
    unsigned char h[RECORD_MIN + 8 * LK_MAX_DIMS];
    size_t name_len = strlen(t->name);
    put32(h, (uint32_t)kind);
    put32(h + 4, (uint32_t)t->dtype);
    put32(h + 8, (uint32_t)t->ndim);
    put32(h + 12, (uint32_t)name_len);
    for (size_t d = 0; d < t->ndim; d++)
      put64(h + RECORD_MIN + 8 * d, (uint64_t)t->shape[d]);
    emit(w, h, RECORD_MIN + 8 * t->ndim);
    emit(w, t->name, name_len);
    emit_data(w, t);
  }
}

static uint64_t f64_bits(double v) {
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}

static double bits_f64(uint64_t b) {
  double v;
  memcpy(&v, &b, sizeof v);
  return v;
}

static uint64_t loop_len(const lk__loop_state *st) {
  uint64_t len = LOOP_FIXED_LEN;
  for (size_t i = 0; i < st->n_latest; i++)
    len += 4 + strlen(st->latest[i].name) + 8;
  return len;
}

static void emit_loop(writer *w, const lk__loop_state *st) {
  unsigned char h[LOOP_FIXED_LEN];
  uint64_t flags = (st->stopped ? FLAG_STOPPED : 0) |
                   (st->finished ? FLAG_FINISHED : 0) |
                   (st->has_last_loss ? FLAG_HAS_LAST_LOSS : 0);
  put64(h, st->metrics_rows);
  put64(h + 8, flags);
  put64(h + 16, f64_bits(st->last_loss));
  put64(h + 24, st->epoch_losses);
  put64(h + 32, f64_bits(st->epoch_loss_sum));
  put64(h + 40, (uint64_t)st->n_latest);
  emit(w, h, sizeof h);
  for (size_t i = 0; i < st->n_latest; i++) {
    unsigned char r[4 + 8];
    size_t len = strlen(st->latest[i].name);
    put32(r, (uint32_t)len);
    emit(w, r, 4);
    emit(w, st->latest[i].name, len);
    put64(r, f64_bits(st->latest[i].value));
    emit(w, r, 8);
  }
}

/* Writes the whole checkpoint to F (PATH's, from lk_output_open). */
static int write_file(FILE *f, const char *path, uint64_t len,
                      const lk__loop_state *state, const lk_rng *rng,
                      lk_tensor *const *params, size_t n_params,
                      lk_tensor *const *states, size_t n_states) {
  writer w = {f, 0, 0, 0};
  const lk__progress *progress = &state->progress;
  unsigned char h[ENVELOPE_LEN + HEADER_LEN];
  memcpy(h, MAGIC, MAGIC_LEN);
  put32(h + 8, LK__CKPT_VERSION);
  put64(h + 12, len);
  put64(h + 20, progress->epoch);
  put64(h + 28, progress->batch);
  put64(h + 36, progress->global_step);
  put64(h + 44, progress->accum);
  for (int i = 0; i < 4; i++)
    put64(h + 52 + 8 * i, rng->s[i]);
  emit(&w, h, sizeof h);
  emit_loop(&w, state);
  unsigned char count[8];
  put64(count, (uint64_t)n_params + n_states);
  emit(&w, count, sizeof count);
  emit_list(&w, params, n_params, LK__CKPT_PARAM);
  emit_list(&w, states, n_states, LK__CKPT_STATE);
  unsigned char crc[CRC_LEN];
  put32(crc, w.crc);
  emit(&w, crc, sizeof crc);

  if (w.err)
    return lk__err(LK_EIO, "cannot write checkpoint %s: %s", path,
                   strerror(w.err));
  if (w.written != len) /* record_len and the emitters disagree: a bug */
    return lk__err(LK_EIO, "%s: wrote %" PRIu64 " bytes, expected %" PRIu64,
                   path, w.written, len);
  return 0;
}

/* The loop state the writer is given is the host's own, but it is checked
 * as the reader checks it, so that every written file reads back. */
static int check_loop(const lk__loop_state *st) {
  if (st->n_latest > LK__MAX_COLUMNS)
    return lk__err(LK_EINVAL, "loop state: %zu metrics, at most %d",
                   st->n_latest, LK__MAX_COLUMNS);
  for (size_t i = 0; i < st->n_latest; i++)
    if (!lk__column_name_ok(st->latest[i].name,
                            strnlen(st->latest[i].name, LK__NAME_MAX)))
      return lk__err(LK_EINVAL, "loop state: metric %zu has a bad name", i);
  return 0;
}

int lk__ckpt_write(const char *path, const lk__loop_state *state,
                   const lk_rng *rng, lk_tensor *const *params, size_t n_params,
                   lk_tensor *const *states, size_t n_states) {
  if (!path || !state || !rng)
    return lk__err(LK_EINVAL, "lk__ckpt_write: NULL path, state or rng");
  uint64_t len = ENVELOPE_LEN + HEADER_LEN + 8 + CRC_LEN;
  int rc = check_loop(state);
  if (rc == 0) {
    len += loop_len(state);
    rc = check_list(params, n_params, "parameter", &len);
  }
  if (rc == 0)
    rc = check_list(states, n_states, "state", &len);
  if (rc != 0)
    return rc;

  lk_output *out;
  if ((rc = lk_output_open(path, "checkpoint", &out)) != 0)
    return rc;
  rc = write_file(lk_output_stream(out), path, len, state, rng, params,
                  n_params, states, n_states);
  int closed = lk_output_close(out, rc == 0);
  return rc ? rc : closed;
}

/* ---- reading ------------------------------------------------------------ */

typedef struct cursor {
  const unsigned char *p;
  size_t pos, end;
} cursor;

/* N bytes at the cursor, or NULL if fewer remain. */
static const unsigned char *take(cursor *c, uint64_t n) {
  if (n > c->end - c->pos)
    return NULL;
  const unsigned char *at = c->p + c->pos;
  c->pos += (size_t)n;
  return at;
}

static int malformed(const char *path, const char *fmt, ...) LK_PRINTF(2, 3);
static int malformed(const char *path, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return lk__err(LK_EFORMAT, "%s: malformed checkpoint: %s", path, why);
}

static int parse_tensor(const char *path, cursor *c, size_t i,
                        lk__ckpt_kind *kind, lk_tensor *t) {
  const unsigned char *h = take(c, RECORD_MIN);
  if (!h)
    return malformed(path, "tensor %zu runs past the end", i);
  uint32_t k = get32(h), dtype = get32(h + 4), ndim = get32(h + 8),
           name_len = get32(h + 12);
  if (k != LK__CKPT_PARAM && k != LK__CKPT_STATE)
    return malformed(path, "tensor %zu has unknown kind %" PRIu32, i, k);
  size_t size = elem_size(dtype);
  if (size == 0)
    return malformed(path, "tensor %zu has unknown dtype %" PRIu32, i, dtype);
  if (ndim > LK_MAX_DIMS)
    return malformed(path, "tensor %zu has %" PRIu32 " dimensions, at most %d",
                     i, ndim, LK_MAX_DIMS);
  if (name_len == 0 || name_len > NAME_MAX_LEN)
    return malformed(path, "tensor %zu has a name of %" PRIu32 " bytes", i,
                     name_len);
  const unsigned char *s = take(c, 8 * (uint64_t)ndim);
  if (!s)
    return malformed(path, "tensor %zu runs past the end", i);
  for (uint32_t d = 0; d < ndim; d++) {
    uint64_t v = get64(s + 8 * d);
    if (v > SIZE_MAX)
      return malformed(path, "tensor %zu: dimension %" PRIu64 " too large", i,
                       v);
    t->shape[d] = (size_t)v;
  }
  t->ndim = ndim;
  size_t numel, bytes;
  if (!lk_shape_numel(t->shape, t->ndim, &numel) ||
      !lk_size_mul(numel, size, &bytes))
    return malformed(path, "tensor %zu: shape overflows", i);
  const unsigned char *name = take(c, name_len);
  if (!name)
    return malformed(path, "tensor %zu runs past the end", i);
  if (memchr(name, '\0', name_len))
    return malformed(path, "tensor %zu has a NUL in its name", i);
  char *owned = malloc((size_t)name_len + 1);
  if (!owned)
    return lk__err(LK_ENOMEM, "out of memory");
  memcpy(owned, name, name_len);
  owned[name_len] = '\0';
  t->name = owned;
  t->dtype = (lk_dtype)dtype;
  *kind = (lk__ckpt_kind)k;

  const unsigned char *src = take(c, bytes);
  if (!src)
    return malformed(path, "%s: data runs past the end", t->name);
  t->numel = numel;
  t->data = lk__aligned_calloc(numel, size);
  if (!t->data)
    return lk__err(LK_ENOMEM, "%s: out of memory for %s", path, t->name);
  unsigned char *dst = t->data;
  for (size_t j = 0; j < numel; j++) {
    if (size == 4) {
      uint32_t v = get32(src + 4 * j);
      memcpy(dst + 4 * j, &v, 4);
    } else {
      uint64_t v = get64(src + 8 * j);
      memcpy(dst + 8 * j, &v, 8);
    }
  }
  /* The writer never saves one; a file that holds one was not written by
   * loopkit, and loading it would poison the run. */
  long at = first_nonfinite(t->dtype, t->data, numel);
  if (at >= 0)
    return malformed(path, "%s[%ld] is %g", t->name, at,
                     element(t->dtype, t->data, (size_t)at));
  return 0;
}

/* The loop section: its format only. What its values mean for a run (an
 * accumulation position of 2^63, say) is the resuming run's to check. */
static int parse_loop(const char *path, cursor *c, lk__loop_state *st) {
  const unsigned char *h = take(c, LOOP_FIXED_LEN);
  if (!h)
    return malformed(path, "loop state runs past the end");
  uint64_t flags = get64(h + 8), n = get64(h + 40);
  if (flags & ~(uint64_t)FLAGS_KNOWN)
    return malformed(path, "loop state flags %#" PRIx64 " has unknown bits",
                     flags);
  st->metrics_rows = get64(h);
  st->stopped = flags & FLAG_STOPPED;
  st->finished = flags & FLAG_FINISHED;
  st->has_last_loss = flags & FLAG_HAS_LAST_LOSS;
  st->last_loss = bits_f64(get64(h + 16));
  st->epoch_losses = get64(h + 24);
  st->epoch_loss_sum = bits_f64(get64(h + 32));
  if (n > LK__MAX_COLUMNS)
    return malformed(path, "loop state holds %" PRIu64 " metrics, at most %d",
                     n, LK__MAX_COLUMNS);
  for (size_t i = 0; i < (size_t)n; i++) {
    const unsigned char *r = take(c, 4);
    uint32_t len = r ? get32(r) : 0;
    const unsigned char *name = r ? take(c, len) : NULL;
    const unsigned char *value = name ? take(c, 8) : NULL;
    if (!value)
      return malformed(path, "loop state metric %zu runs past the end", i);
    if (!lk__column_name_ok((const char *)name, len))
      return malformed(path,
                       "loop state metric %zu: a name of %" PRIu32
                       " bytes that is not a metrics.csv column",
                       i, len);
    memcpy(st->latest[i].name, name, len);
    st->latest[i].name[len] = '\0';
    for (size_t k = 0; k < i; k++)
      if (strcmp(st->latest[k].name, st->latest[i].name) == 0)
        return malformed(path, "loop state metric %s appears twice",
                         st->latest[i].name);
    st->latest[i].value = bits_f64(get64(value));
  }
  st->n_latest = (size_t)n;
  return 0;
}

static int check_names(const char *path, const lk__ckpt *ck) {
  const char **names = malloc((ck->n ? ck->n : 1) * sizeof *names);
  if (!names)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = 0;
  for (int kind = LK__CKPT_PARAM; kind <= LK__CKPT_STATE && rc == 0; kind++) {
    size_t n = 0;
    for (size_t i = 0; i < ck->n; i++)
      if (ck->kinds[i] == (lk__ckpt_kind)kind)
        names[n++] = ck->tensors[i].name;
    const char *dup;
    rc = find_duplicate(names, n, &dup);
    if (rc == 0 && dup)
      rc = malformed(path, "two %ss are named %s",
                     kind == LK__CKPT_PARAM ? "parameter" : "state", dup);
  }
  free(names);
  return rc;
}

/* The envelope first (magic, length, checksum, version), then the body. */
static int parse(const char *path, const unsigned char *buf, size_t len,
                 lk__ckpt *ck) {
  if (len == 0)
    return lk__err(LK_EFORMAT, "%s: empty file, not a loopkit checkpoint",
                   path);
  if (memcmp(buf, MAGIC, len < MAGIC_LEN ? len : MAGIC_LEN) != 0)
    return lk__err(LK_EFORMAT, "%s: not a loopkit checkpoint", path);
  if (len < ENVELOPE_LEN + CRC_LEN)
    return lk__err(LK_EFORMAT,
                   "%s: truncated checkpoint: %zu bytes, fewer than the %d "
                   "of its header and checksum",
                   path, len, ENVELOPE_LEN + CRC_LEN);
  uint64_t expect = get64(buf + 12);
  if (expect > len)
    return lk__err(LK_EFORMAT,
                   "%s: truncated checkpoint: %" PRIu64
                   " bytes expected, %zu present",
                   path, expect, len);
  if (expect < len)
    return lk__err(LK_EFORMAT,
                   "%s: corrupt checkpoint: %" PRIu64
                   " bytes expected, %zu present",
                   path, expect, len);
  uint32_t stored = get32(buf + len - CRC_LEN);
  uint32_t computed = lk__crc32(0, buf, len - CRC_LEN);
  if (stored != computed)
    return lk__err(LK_EFORMAT,
                   "%s: corrupt checkpoint: checksum mismatch (stored "
                   "%08" PRIx32 ", computed %08" PRIx32 ")",
                   path, stored, computed);
  uint32_t version = get32(buf + 8);
  if (version != 1 && version != LK__CKPT_VERSION)
    return lk__err(LK_EFORMAT,
                   "%s: checkpoint format version %" PRIu32
                   ", this loopkit reads 1 and %u",
                   path, version, LK__CKPT_VERSION);
  ck->version = version;

  cursor c = {buf, ENVELOPE_LEN, len - CRC_LEN};
  const unsigned char *h = take(&c, HEADER_LEN);
  if (!h)
    return malformed(path, "header runs past the end");
  lk__loop_state *st = &ck->state;
  st->progress.epoch = get64(h);
  st->progress.batch = get64(h + 8);
  st->progress.global_step = get64(h + 16);
  st->progress.accum = get64(h + 24);
  for (int i = 0; i < 4; i++)
    ck->rng.s[i] = get64(h + 32 + 8 * i);
  int rc = version >= 2 ? parse_loop(path, &c, st) : 0;
  if (rc != 0)
    return rc;
  if (!(h = take(&c, 8)))
    return malformed(path, "tensor count runs past the end");
  uint64_t count = get64(h);
  /* Bounded by the bytes left before anything is allocated for it. */
  if (count > (c.end - c.pos) / RECORD_MIN)
    return malformed(path, "%" PRIu64 " tensors cannot fit in %zu bytes", count,
                     c.end - c.pos);
  ck->kinds = calloc(count ? (size_t)count : 1, sizeof *ck->kinds);
  ck->tensors = calloc(count ? (size_t)count : 1, sizeof *ck->tensors);
  if (!ck->kinds || !ck->tensors)
    return lk__err(LK_ENOMEM, "%s: out of memory", path);
  ck->n = (size_t)count;
  for (size_t i = 0; i < ck->n; i++)
    if ((rc = parse_tensor(path, &c, i, &ck->kinds[i], &ck->tensors[i])) != 0)
      return rc;
  if (c.pos != c.end)
    return malformed(path, "%zu bytes after the last tensor", c.end - c.pos);
  return check_names(path, ck);
}

int lk__ckpt_read(const char *path, lk__ckpt **out, struct stat *st) {
  if (!path || !out)
    return lk__err(LK_EINVAL, "lk__ckpt_read: NULL path or out");
  *out = NULL;
  char *text = NULL;
  size_t len = 0;
  int rc = lk__read_file(path, "checkpoint", UINT64_MAX, &text, &len, st);
  if (rc == LK_ENOTFOUND)
    return lk__err(rc, "%s: no such checkpoint", path);
  if (rc != 0)
    return rc;
  rc = lk__ckpt_parse(path, (const unsigned char *)text, len, out);
  free(text);
  return rc;
}

int lk__ckpt_parse(const char *name, const unsigned char *buf, size_t len,
                   lk__ckpt **out) {
  if (!name || (!buf && len) || !out)
    return lk__err(LK_EINVAL, "lk__ckpt_parse: NULL name, buffer or out");
  *out = NULL;
  lk__ckpt *ck = calloc(1, sizeof *ck);
  if (!ck)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = parse(name, buf, len, ck);
  if (rc != 0) {
    lk__ckpt_free(ck);
    return rc;
  }
  *out = ck;
  return 0;
}

void lk__ckpt_free(lk__ckpt *ck) {
  if (!ck)
    return;
  for (size_t i = 0; ck->tensors && i < ck->n; i++) {
    free((char *)ck->tensors[i].name);
    free(ck->tensors[i].data);
  }
  free(ck->tensors);
  free(ck->kinds);
  free(ck);
}

/* ---- dump --------------------------------------------------------------- */

int lk_checkpoint_dump(const char *path, FILE *out) {
  if (!path || !out)
    return lk__err(LK_EINVAL, "lk_checkpoint_dump: NULL path or stream");
  lk__ckpt *ck;
  int rc = lk__ckpt_read(path, &ck, NULL);
  if (rc != 0)
    return rc;
  for (size_t i = 0; i < ck->n && rc == 0; i++) {
    const lk_tensor *t = &ck->tensors[i];
    if (ck->kinds[i] != LK__CKPT_PARAM)
      continue;
    for (size_t j = 0; j < t->numel && rc == 0; j++) {
      int w;
      if (t->dtype == LK_F64)
        w = fprintf(out, "%s[%zu] %.17g\n", t->name, j,
                    ((const double *)t->data)[j]);
      else if (t->dtype == LK_F32)
        w = fprintf(out, "%s[%zu] %.9g\n", t->name, j,
                    (double)((const float *)t->data)[j]);
      else
        w = fprintf(out, "%s[%zu] %" PRId32 "\n", t->name, j,
                    ((const int32_t *)t->data)[j]);
      if (w < 0)
        rc = lk__err(LK_EIO, "cannot write the dump of %s: %s", path,
                     strerror(errno));
    }
  }
  lk__ckpt_free(ck);
  return rc;
}
