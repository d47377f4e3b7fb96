/* The checkpoint reader (lk__ckpt_parse in src/store/checkpoint.c).
 *
 * Input: a mode byte, then the bytes. Mode bit 0 clear: the bytes are the
 * whole file, as read from disk. Set: the bytes are the body after the
 * envelope (progress, generator, the loop section from version 2 on, count,
 * records), and the target wraps them in a valid envelope (magic, version
 * 2, or 1 with mode bit 1, length) and appends the right CRC-32, so that
 * mutations reach the record parser instead of stopping at the checksum.
 *
 * Checks, beyond "no crash, leak or hang":
 * - a refused file is LK_EFORMAT (or LK_ENOMEM) with a message naming it;
 * - an accepted one holds only known kinds and dtypes, finite values,
 *   numel = product of the shape, names unique within a kind;
 * - writing it back (lk__ckpt_write) and reading that gives the same loop
 *   state, generator and tensors, and when its parameters came before its
 *   states the written file is a version 2 input byte for byte (the format
 *   has one encoding);
 * - lk_checkpoint_dump prints it. */
#include <math.h>
#include <sys/stat.h>

#include "../src/base/crc32.h"
#include "../src/store/checkpoint.h"
#include "fuzz_util.h"

#define NAME "fuzz.ckpt"

static char dir[256];  /* a temporary directory for the round trip */
static char path[300]; /* the checkpoint in it */

static void cleanup(void) {
  unlink(path);
  rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(dir, sizeof dir, "%s/lk-fuzz-ckpt-XXXXXX", tmp);
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    abort();
  }
  snprintf(path, sizeof path, "%s/last.ckpt", dir);
  atexit(cleanup);
  return 0;
}

static void put32(unsigned char *b, uint32_t v) {
  for (int i = 0; i < 4; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *b, uint64_t v) {
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}

static size_t dtype_size(lk_dtype t) {
  return t == LK_F64 ? 8 : t == LK_F32 || t == LK_I32 ? 4 : 0;
}

static void check_tensor(const lk_tensor *t, size_t i) {
  FUZZ_CHECK(t->name && t->name[0], "tensor %zu has no name", i);
  FUZZ_CHECK(dtype_size(t->dtype) != 0, "tensor %zu: dtype %d", i,
             (int)t->dtype);
  FUZZ_CHECK(t->ndim <= LK_MAX_DIMS, "tensor %zu: ndim %zu", i, t->ndim);
  size_t numel = 1;
  for (size_t d = 0; d < t->ndim; d++)
    numel *= t->shape[d];
  FUZZ_CHECK(numel == t->numel, "tensor %zu: numel %zu, shape says %zu", i,
             t->numel, numel);
  FUZZ_CHECK(t->data != NULL, "tensor %zu: no data", i);
  for (size_t j = 0; j < t->numel; j++) {
    double v = t->dtype == LK_F64   ? ((const double *)t->data)[j]
               : t->dtype == LK_F32 ? ((const float *)t->data)[j]
                                    : 0;
    FUZZ_CHECK(isfinite(v), "tensor %s[%zu] = %g", t->name, j, v);
  }
}

static bool same_tensor(const lk_tensor *a, const lk_tensor *b) {
  if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype ||
      a->ndim != b->ndim || a->numel != b->numel)
    return false;
  for (size_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d])
      return false;
  return memcmp(a->data, b->data, a->numel * dtype_size(a->dtype)) == 0;
}

/* Writes CK, reads it back, compares; BUF is what CK was parsed from. */
static void round_trip(const lk__ckpt *ck, const unsigned char *buf,
                       size_t len) {
  size_t n = ck->n, np = 0, ns = 0;
  lk_tensor **params = malloc((n ? n : 1) * sizeof *params);
  lk_tensor **states = malloc((n ? n : 1) * sizeof *states);
  FUZZ_CHECK(params && states, "malloc");
  bool sorted = true;
  for (size_t i = 0; i < n; i++) {
    if (ck->kinds[i] == LK__CKPT_PARAM) {
      sorted = sorted && ns == 0;
      params[np++] = &ck->tensors[i];
    } else {
      states[ns++] = &ck->tensors[i];
    }
  }
  int rc = lk__ckpt_write(path, &ck->state, &ck->rng, params, np, states, ns);
  FUZZ_CHECK(rc == 0, "an accepted checkpoint cannot be written: %d", rc);

  if (sorted && ck->version == 2) {
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(f != NULL, "fopen");
    unsigned char *back = malloc(len + 1);
    FUZZ_CHECK(back != NULL, "malloc");
    size_t got = fread(back, 1, len + 1, f);
    fclose(f);
    FUZZ_CHECK(got == len && memcmp(back, buf, len) == 0,
               "written file (%zu bytes) differs from the input (%zu)", got,
               len);
    free(back);
  }

  lk__ckpt *again = NULL;
  rc = lk__ckpt_read(path, &again, NULL);
  FUZZ_CHECK(rc == 0, "a written checkpoint does not read back: %d", rc);
  FUZZ_CHECK(again->n == n, "%zu tensors read back, %zu written", again->n, n);
  const lk__loop_state *a = &again->state, *b = &ck->state;
  FUZZ_CHECK(memcmp(&a->progress, &b->progress, sizeof b->progress) == 0 &&
                 memcmp(&again->rng, &ck->rng, sizeof ck->rng) == 0,
             "progress or generator changed");
  FUZZ_CHECK(
      a->metrics_rows == b->metrics_rows && a->stopped == b->stopped &&
          a->finished == b->finished && a->has_last_loss == b->has_last_loss &&
          a->epoch_losses == b->epoch_losses &&
          memcmp(&a->last_loss, &b->last_loss, sizeof a->last_loss) == 0 &&
          memcmp(&a->epoch_loss_sum, &b->epoch_loss_sum,
                 sizeof a->epoch_loss_sum) == 0 &&
          a->n_latest == b->n_latest,
      "loop state changed");
  for (size_t i = 0; i < a->n_latest; i++)
    FUZZ_CHECK(strcmp(a->latest[i].name, b->latest[i].name) == 0 &&
                   memcmp(&a->latest[i].value, &b->latest[i].value,
                          sizeof(double)) == 0,
               "loop state metric %zu changed", i);
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *want = i < np ? params[i] : states[i - np];
    FUZZ_CHECK(again->kinds[i] == (i < np ? LK__CKPT_PARAM : LK__CKPT_STATE),
               "tensor %zu: kind changed", i);
    FUZZ_CHECK(same_tensor(&again->tensors[i], want), "tensor %zu (%s) changed",
               i, want->name);
  }
  lk__ckpt_free(again);

  FILE *null = fopen("/dev/null", "w");
  FUZZ_CHECK(null != NULL, "fopen /dev/null");
  rc = lk_checkpoint_dump(path, null);
  FUZZ_CHECK(rc == 0, "lk_checkpoint_dump failed: %d", rc);
  fclose(null);
  free(params);
  free(states);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  bool wrap = data[0] & 1, v1 = data[0] & 2;
  data++, size--;

  unsigned char *buf;
  size_t len;
  if (wrap) { /* magic, version, length, body, CRC */
    len = 20 + size + 4;
    buf = malloc(len);
    FUZZ_CHECK(buf != NULL, "malloc");
    memcpy(buf, "LOOPKIT\0", 8);
    put32(buf + 8, v1 ? 1 : 2);
    put64(buf + 12, len);
    if (size)
      memcpy(buf + 20, data, size);
    put32(buf + len - 4, lk__crc32(0, buf, len - 4));
  } else { /* a copy of exactly SIZE bytes, so ASan sees any overread */
    len = size;
    buf = malloc(len ? len : 1);
    FUZZ_CHECK(buf != NULL, "malloc");
    if (len)
      memcpy(buf, data, len);
  }

  lk__ckpt *ck = NULL;
  int rc = lk__ckpt_parse(NAME, buf, len, &ck);
  fuzz_report(rc);
  if (rc != 0) {
    FUZZ_CHECK(ck == NULL, "out set on failure");
    FUZZ_CHECK(rc == LK_EFORMAT || rc == LK_ENOMEM, "returned %d", rc);
    FUZZ_CHECK(strncmp(lk_last_error(), NAME ": ", strlen(NAME ": ")) == 0,
               "message does not name the file: \"%s\"", lk_last_error());
  } else {
    for (size_t i = 0; i < ck->n; i++) {
      FUZZ_CHECK(ck->kinds[i] == LK__CKPT_PARAM ||
                     ck->kinds[i] == LK__CKPT_STATE,
                 "tensor %zu: kind %d", i, (int)ck->kinds[i]);
      check_tensor(&ck->tensors[i], i);
      for (size_t j = 0; j < i; j++)
        FUZZ_CHECK(ck->kinds[i] != ck->kinds[j] ||
                       strcmp(ck->tensors[i].name, ck->tensors[j].name) != 0,
                   "two tensors of one kind named %s", ck->tensors[i].name);
    }
    round_trip(ck, buf, len);
    lk__ckpt_free(ck);
  }
  free(buf);
  return 0;
}
