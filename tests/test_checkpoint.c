/* The checkpoint format (src/store/checkpoint.c): exact round trips of f32 and
 * f64 tensors with progress and generator, refusal of non-finite values without
 * touching the previous file, detection of truncated, corrupt, foreign,
 * newer and malformed files, and the dump's output. The format is private,
 * so this test links the library's objects directly. */
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../src/base/crc32.h"
#include "../src/store/checkpoint.h"

/* Offsets of the version 2 layout (with no latest metrics), pinned here on
 * purpose: a change to the format must show up as a failing test. */
#define OFF_VERSION 8
#define OFF_LENGTH 12
#define OFF_LOOP 84 /* metrics_rows, flags, last_loss, epoch_losses, ... */
#define OFF_FLAGS 92
#define OFF_N_LATEST 124
#define OFF_COUNT 132
#define OFF_RECORD 140 /* first tensor: kind, dtype, ndim, name_len, shape */

typedef struct fixture {
  char dir[64];
  char path[128];
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  if (!fx)
    return -1;
  snprintf(fx->dir, sizeof fx->dir, "/tmp/lk-test-ckpt-XXXXXX");
  if (!mkdtemp(fx->dir)) {
    free(fx);
    return -1;
  }
  snprintf(fx->path, sizeof fx->path, "%s/last.ckpt", fx->dir);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  DIR *d = opendir(fx->dir);
  if (d) {
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
        continue;
      snprintf(p, sizeof p, "%s/%s", fx->dir, e->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(fx->dir);
  free(fx);
  return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static lk_tensor tensor(const char *name, lk_dtype dtype, size_t ndim,
                        const size_t *shape, void *data) {
  lk_tensor t = {name, dtype, ndim, {0}, 1, data, NULL};
  for (size_t i = 0; i < ndim; i++) {
    t.shape[i] = shape[i];
    t.numel *= shape[i];
  }
  return t;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long n = ftell(f);
  assert_true(n >= 0);
  rewind(f);
  unsigned char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static void spit(const char *path, const void *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

static void le32(unsigned char *b, uint32_t v) {
  for (int i = 0; i < 4; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}

static void le64(unsigned char *b, uint64_t v) {
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)(v >> (8 * i));
}

/* Recomputes the trailing CRC, so that a deliberate edit reaches the checks
 * behind the checksum. */
static void fix_crc(unsigned char *buf, size_t len) {
  le32(buf + len - 4, lk__crc32(0, buf, len - 4));
}

static size_t count_files(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      n++;
  closedir(d);
  return n;
}

static void assert_contains(const char *haystack, const char *needle) {
  if (!strstr(haystack, needle))
    fail_msg("\"%s\" does not contain \"%s\"", haystack, needle);
}

/* Reading PATH fails with CODE and a message holding PATH and NEEDLE. */
static void assert_read_fails(const char *path, int code, const char *needle) {
  static lk__ckpt sentinel;
  lk__ckpt *ck = &sentinel; /* a failed read must reset it to NULL */
  assert_int_equal(lk__ckpt_read(path, &ck, NULL), code);
  assert_null(ck);
  assert_contains(lk_last_error(), path);
  assert_contains(lk_last_error(), needle);
}

static const lk__loop_state progress = {.progress = {3, 7, 42, 1}};
static const lk_rng rng = {{1, UINT64_C(0x8000000000000000),
                            UINT64_C(0x0123456789abcdef), UINT64_MAX}};

/* One f64 parameter "x" of 3 values: the simple file most tests edit. */
static void write_simple(const char *path, double *x) {
  size_t shape[] = {3};
  lk_tensor t = tensor("x", LK_F64, 1, shape, x);
  lk_tensor *params[] = {&t};
  assert_int_equal(lk__ckpt_write(path, &progress, &rng, params, 1, NULL, 0),
                   0);
}

/* ---- tests -------------------------------------------------------------- */

static void crc32_matches_zlib(void **state) {
  (void)state;
  assert_int_equal(lk__crc32(0, "", 0), 0);
  assert_int_equal(lk__crc32(0, "123456789", 9), 0xcbf43926u);
  assert_int_equal(
      lk__crc32(0, "The quick brown fox jumps over the lazy dog", 43),
      0x414fa339u);
  /* Chained pieces give the CRC of the whole. */
  assert_int_equal(lk__crc32(lk__crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
}

static void round_trip_is_exact(void **state) {
  fixture *fx = *state;
  double w[6] = {0.1, -0.0, 4.9e-324, DBL_MAX, -1e-310, 1.0 / 3.0};
  float b[3] = {0.1f, 1e-45f, -FLT_MAX};
  double m[6] = {1, 2, 3, 4, 5, 6};
  int32_t count = -7;
  double grad[6] = {9, 9, 9, 9, 9, 9};
  size_t sw[] = {2, 3}, sb[] = {3};
  lk_tensor tw = tensor("layer1.weight", LK_F64, 2, sw, w);
  tw.grad = grad; /* never saved */
  lk_tensor tb = tensor("layer1.bias", LK_F32, 1, sb, b);
  lk_tensor tm = tensor("sgd.momentum", LK_F64, 2, sw, m);
  lk_tensor tc = tensor("sgd.count", LK_I32, 0, NULL, &count);
  lk_tensor *params[] = {&tw, &tb}, *states[] = {&tm, &tc};
  assert_int_equal(
      lk__ckpt_write(fx->path, &progress, &rng, params, 2, states, 2), 0);

  /* Little-endian whatever the host: the fixed fields, byte by byte. */
  size_t len;
  unsigned char *raw = slurp(fx->path, &len);
  assert_memory_equal(raw, "LOOPKIT\0", 8);
  assert_memory_equal(raw + OFF_VERSION, "\x02\0\0\0", 4);
  unsigned char want[8];
  le64(want, len);
  assert_memory_equal(raw + OFF_LENGTH, want, 8);
  le64(want, 4);
  assert_memory_equal(raw + OFF_COUNT, want, 8);
  free(raw);

  lk__ckpt *ck;
  assert_int_equal(lk__ckpt_read(fx->path, &ck, NULL), 0);
  assert_memory_equal(&ck->state.progress, &progress.progress,
                      sizeof progress.progress);
  assert_memory_equal(&ck->rng, &rng, sizeof rng);
  assert_int_equal(ck->n, 4);
  const lk_tensor *in[] = {&tw, &tb, &tm, &tc};
  lk__ckpt_kind kinds[] = {LK__CKPT_PARAM, LK__CKPT_PARAM, LK__CKPT_STATE,
                           LK__CKPT_STATE};
  size_t sizes[] = {8, 4, 8, 4};
  for (size_t i = 0; i < 4; i++) {
    const lk_tensor *t = &ck->tensors[i];
    assert_int_equal(ck->kinds[i], kinds[i]);
    assert_string_equal(t->name, in[i]->name);
    assert_int_equal(t->dtype, in[i]->dtype);
    assert_int_equal(t->ndim, in[i]->ndim);
    assert_memory_equal(t->shape, in[i]->shape, t->ndim * sizeof(size_t));
    assert_int_equal(t->numel, in[i]->numel);
    assert_null(t->grad);
    assert_int_equal((uintptr_t)t->data % 64, 0);
    /* Bitwise, so -0.0 and subnormals count. */
    assert_memory_equal(t->data, in[i]->data, t->numel * sizes[i]);
  }
  lk__ckpt_free(ck);
}

static void round_trip_without_tensors(void **state) {
  fixture *fx = *state;
  assert_int_equal(lk__ckpt_write(fx->path, &progress, &rng, NULL, 0, NULL, 0),
                   0);
  lk__ckpt *ck;
  assert_int_equal(lk__ckpt_read(fx->path, &ck, NULL), 0);
  assert_int_equal(ck->n, 0);
  assert_int_equal(ck->state.progress.global_step, 42);
  assert_int_equal(ck->rng.s[3], UINT64_MAX);
  lk__ckpt_free(ck);
}

/* A refused write leaves the previous checkpoint byte for byte, loadable,
 * and no temporary file behind. */
static void refuse_nonfinite(const char *path, const char *dir, lk_dtype dtype,
                             const char *expect) {
  double good[3] = {1, 2, 3};
  write_simple(path, good);
  size_t before_len;
  unsigned char *before = slurp(path, &before_len);

  double d[3] = {1, NAN, 3};
  float f[4] = {1, 2, -INFINITY, 4};
  size_t sd[] = {3}, sf[] = {2, 2};
  lk_tensor ok = tensor("ok", LK_F64, 1, sd, good);
  lk_tensor bad = dtype == LK_F64 ? tensor("x", LK_F64, 1, sd, d)
                                  : tensor("s", LK_F32, 2, sf, f);
  lk_tensor *params[] = {&ok, &bad}, *states[] = {&bad};
  int rc = dtype == LK_F64
               ? lk__ckpt_write(path, &progress, &rng, params, 2, NULL, 0)
               : lk__ckpt_write(path, &progress, &rng, params, 1, states, 1);
  assert_int_equal(rc, LK_ENONFINITE);
  assert_string_equal(lk_last_error(), expect);

  size_t after_len;
  unsigned char *after = slurp(path, &after_len);
  assert_int_equal(after_len, before_len);
  assert_memory_equal(after, before, before_len);
  free(before);
  free(after);
  assert_int_equal(count_files(dir), 1);
  lk__ckpt *ck;
  assert_int_equal(lk__ckpt_read(path, &ck, NULL), 0);
  assert_memory_equal(ck->tensors[0].data, good, sizeof good);
  lk__ckpt_free(ck);
}

static void refuses_nan(void **state) {
  fixture *fx = *state;
  refuse_nonfinite(fx->path, fx->dir, LK_F64,
                   "refusing to checkpoint non-finite value nan in x[1]");
}

static void refuses_inf_in_state(void **state) {
  fixture *fx = *state;
  refuse_nonfinite(fx->path, fx->dir, LK_F32,
                   "refusing to checkpoint non-finite value -inf in s[2]");
}

static void refuses_bad_tensors(void **state) {
  fixture *fx = *state;
  double x[4] = {0};
  size_t shape[] = {2, 2};
  lk_tensor a = tensor("a", LK_F64, 2, shape, x);
  lk_tensor dup = tensor("a", LK_F64, 2, shape, x);
  lk_tensor *two[] = {&a, &dup};
  assert_int_equal(lk__ckpt_write(fx->path, &progress, &rng, two, 2, NULL, 0),
                   LK_EINVAL);
  assert_string_equal(lk_last_error(), "two parameters are named a");
  /* The same name as a parameter and as a state is fine. */
  lk_tensor *one[] = {&a}, *st[] = {&dup};
  assert_int_equal(lk__ckpt_write(fx->path, &progress, &rng, one, 1, st, 1), 0);

  lk_tensor wrong = a;
  wrong.numel = 5;
  lk_tensor *w[] = {&wrong};
  assert_int_equal(lk__ckpt_write(fx->path, &progress, &rng, NULL, 0, w, 1),
                   LK_EINVAL);
  assert_contains(lk_last_error(), "state a: numel 5");
  wrong = a;
  wrong.dtype = (lk_dtype)9;
  assert_int_equal(lk__ckpt_write(fx->path, &progress, &rng, w, 1, NULL, 0),
                   LK_EINVAL);
  assert_contains(lk_last_error(), "unknown dtype 9");
  assert_int_equal(count_files(fx->dir), 1);
}

static void unwritable_directory(void **state) {
  (void)state;
  double x[3] = {1, 2, 3};
  size_t shape[] = {3};
  lk_tensor t = tensor("x", LK_F64, 1, shape, x);
  lk_tensor *params[] = {&t};
  const char *path = "/nonexistent-lk-dir/last.ckpt";
  assert_int_equal(lk__ckpt_write(path, &progress, &rng, params, 1, NULL, 0),
                   LK_EIO);
  assert_contains(lk_last_error(),
                  "cannot create checkpoint /nonexistent-lk-dir/last");
  assert_contains(lk_last_error(), "No such file or directory");
}

static void overwrite_keeps_mode(void **state) {
  fixture *fx = *state;
  double x[3] = {1, 2, 3};
  struct stat st;
  mode_t umask_was = umask(022);
  write_simple(fx->path, x);
  assert_int_equal(stat(fx->path, &st), 0);
  /* A new file is 0666 less the umask, as any output (not mkstemp's 0600) */
  assert_int_equal(st.st_mode & 0777, 0644);
  assert_int_equal(chmod(fx->path, 0640), 0);
  x[0] = 5;
  write_simple(fx->path, x);
  assert_int_equal(stat(fx->path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0640);
  lk__ckpt *ck;
  assert_int_equal(lk__ckpt_read(fx->path, &ck, NULL), 0);
  assert_true(((double *)ck->tensors[0].data)[0] == 5);
  lk__ckpt_free(ck);
  assert_int_equal(count_files(fx->dir), 1);
  umask(umask_was);
}

static void truncated_files(void **state) {
  fixture *fx = *state;
  double x[3] = {1, 2, 3};
  write_simple(fx->path, x);
  size_t len;
  unsigned char *raw = slurp(fx->path, &len);
  char cut[160], msg[128];
  snprintf(cut, sizeof cut, "%s/cut.ckpt", fx->dir);

  spit(cut, raw, 0);
  assert_read_fails(cut, LK_EFORMAT, "empty file");
  size_t short_cuts[] = {4, 8, 19, 23};
  for (size_t i = 0; i < 4; i++) {
    spit(cut, raw, short_cuts[i]);
    snprintf(msg, sizeof msg, "truncated checkpoint: %zu bytes", short_cuts[i]);
    assert_read_fails(cut, LK_EFORMAT, msg);
  }
  size_t cuts[] = {24, OFF_COUNT, OFF_RECORD + 3, len / 2, len - 4, len - 1};
  for (size_t i = 0; i < 6; i++) {
    spit(cut, raw, cuts[i]);
    snprintf(msg, sizeof msg,
             "truncated checkpoint: %zu bytes expected, %zu present", len,
             cuts[i]);
    assert_read_fails(cut, LK_EFORMAT, msg);
  }
  /* One byte too many is not trusted either. */
  raw[len] = 0;
  spit(cut, raw, len + 1);
  assert_read_fails(cut, LK_EFORMAT, "corrupt checkpoint");
  free(raw);
}

static void flipped_bytes(void **state) {
  fixture *fx = *state;
  double x[3] = {1, 2, 3};
  write_simple(fx->path, x);
  size_t len;
  unsigned char *raw = slurp(fx->path, &len);
  char bad[160];
  snprintf(bad, sizeof bad, "%s/bad.ckpt", fx->dir);
  /* The progress, the data, the CRC itself, and the version field: a bit
   * flipped there is corruption, not a newer format. */
  size_t at[] = {30, len - 10, len - 1, OFF_VERSION + 3};
  for (size_t i = 0; i < 4; i++) {
    raw[at[i]] ^= 0x10;
    spit(bad, raw, len);
    assert_read_fails(bad, LK_EFORMAT, "checksum mismatch");
    raw[at[i]] ^= 0x10;
  }
  free(raw);
}

static void foreign_files(void **state) {
  fixture *fx = *state;
  char path[160];
  snprintf(path, sizeof path, "%s/notes.txt", fx->dir);
  const char *text = "[loop]\nmax_epochs = 3\nthis is a config, not a "
                     "checkpoint, and long enough to have a length field\n";
  spit(path, text, strlen(text));
  assert_read_fails(path, LK_EFORMAT, "not a loopkit checkpoint");
  spit(path, "abc", 3);
  assert_read_fails(path, LK_EFORMAT, "not a loopkit checkpoint");
  char msg[200];
  snprintf(msg, sizeof msg, "%s: not a loopkit checkpoint", path);
  assert_string_equal(lk_last_error(), msg);
}

static void newer_version(void **state) {
  fixture *fx = *state;
  double x[3] = {1, 2, 3};
  write_simple(fx->path, x);
  size_t len;
  unsigned char *raw = slurp(fx->path, &len);
  le32(raw + OFF_VERSION, 3);
  fix_crc(raw, len);
  spit(fx->path, raw, len);
  char msg[200];
  snprintf(msg, sizeof msg,
           "%s: checkpoint format version 3, this loopkit reads 1 and 2",
           fx->path);
  assert_read_fails(fx->path, LK_EFORMAT, msg);
  assert_string_equal(lk_last_error(), msg);
  free(raw);
}

static void missing_file(void **state) {
  fixture *fx = *state;
  char path[160];
  snprintf(path, sizeof path, "%s/nothing-here.ckpt", fx->dir);
  assert_read_fails(path, LK_ENOTFOUND, "no such checkpoint");
  /* A directory is no checkpoint either. */
  lk__ckpt *ck;
  assert_int_equal(lk__ckpt_read(fx->dir, &ck, NULL), LK_EIO);
  assert_contains(lk_last_error(), fx->dir);
}

/* Files whose checksum is right but whose fields are not: each length is
 * checked before it is used. */
typedef struct edit {
  size_t offset;
  int width; /* 4 or 8 */
  uint64_t value;
  const char *expect;
} edit;

static void malformed_fields(void **state) {
  fixture *fx = *state;
  double x[3] = {1, 2, 3};
  const edit edits[] = {
      {OFF_COUNT, 8, UINT64_C(1) << 60, "tensors cannot fit in"},
      {OFF_COUNT, 8, 2, "tensor 1 runs past the end"},
      {OFF_COUNT, 8, 0, "bytes after the last tensor"},
      {OFF_RECORD, 4, 3, "tensor 0 has unknown kind 3"},
      {OFF_RECORD + 4, 4, 9, "tensor 0 has unknown dtype 9"},
      {OFF_RECORD + 8, 4, 5, "tensor 0 has 5 dimensions, at most 4"},
      /* ndim 4: the name and data bytes read as huge dimensions. */
      {OFF_RECORD + 8, 4, 4, "tensor 0: shape overflows"},
      {OFF_RECORD + 12, 4, 0, "tensor 0 has a name of 0 bytes"},
      {OFF_RECORD + 12, 4, UINT32_MAX, "a name of 4294967295 bytes"},
      {OFF_RECORD + 12, 4, 40, "tensor 0 runs past the end"},
      {OFF_RECORD + 16, 8, UINT64_C(1) << 62, "tensor 0: shape overflows"},
      {OFF_RECORD + 16, 8, 1000, "x: data runs past the end"},
      {OFF_RECORD + 16, 8, 2, "bytes after the last tensor"},
      {OFF_RECORD + 24, 4, 0, "tensor 0 has a NUL in its name"},
      {OFF_RECORD + 25, 8, UINT64_C(0x7ff8000000000000), "x[0] is nan"},
  };
  char path[160];
  snprintf(path, sizeof path, "%s/edited.ckpt", fx->dir);
  write_simple(fx->path, x);
  size_t len;
  unsigned char *raw = slurp(fx->path, &len);
  unsigned char *copy = malloc(len);
  assert_non_null(copy);
  for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
    memcpy(copy, raw, len);
    if (edits[i].width == 4)
      le32(copy + edits[i].offset, (uint32_t)edits[i].value);
    else
      le64(copy + edits[i].offset, edits[i].value);
    fix_crc(copy, len);
    spit(path, copy, len);
    assert_read_fails(path, LK_EFORMAT, "malformed checkpoint");
    assert_contains(lk_last_error(), edits[i].expect);
  }
  free(copy);
  free(raw);
}

static void duplicate_names_in_file(void **state) {
  fixture *fx = *state;
  double a[1] = {1}, b[1] = {2};
  size_t shape[] = {1};
  lk_tensor ta = tensor("p", LK_F64, 1, shape, a);
  lk_tensor tb = tensor("q", LK_F64, 1, shape, b);
  lk_tensor *params[] = {&ta, &tb};
  assert_int_equal(
      lk__ckpt_write(fx->path, &progress, &rng, params, 2, NULL, 0), 0);
  size_t len;
  unsigned char *raw = slurp(fx->path, &len);
  unsigned char *q = memchr(raw + OFF_RECORD + 30, 'q', len - OFF_RECORD - 30);
  assert_non_null(q);
  *q = 'p';
  fix_crc(raw, len);
  spit(fx->path, raw, len);
  assert_read_fails(fx->path, LK_EFORMAT, "two parameters are named p");
  free(raw);
}

/* lk__ckpt_parse reads memory as lk__ckpt_read reads the file (the fuzz
 * target's entry), and names what it was given in its messages. */
static void parse_from_memory(void **state) {
  fixture *fx = *state;
  double x[3] = {1, -2, 0.5};
  write_simple(fx->path, x);
  size_t len;
  unsigned char *raw = slurp(fx->path, &len);
  lk__ckpt *ck = NULL;
  assert_int_equal(lk__ckpt_parse("mem", raw, len, &ck), 0);
  assert_memory_equal(&ck->state.progress, &progress.progress,
                      sizeof progress.progress);
  assert_memory_equal(&ck->rng, &rng, sizeof rng);
  assert_int_equal(ck->n, 1);
  assert_string_equal(ck->tensors[0].name, "x");
  assert_memory_equal(ck->tensors[0].data, x, sizeof x);
  lk__ckpt_free(ck);

  lk__ckpt sentinel;
  ck = &sentinel;
  assert_int_equal(lk__ckpt_parse("mem", raw, len - 1, &ck), LK_EFORMAT);
  assert_null(ck);
  assert_contains(lk_last_error(), "mem: truncated checkpoint");
  assert_int_equal(lk__ckpt_parse("mem", NULL, 0, &ck), LK_EFORMAT);
  assert_string_equal(lk_last_error(),
                      "mem: empty file, not a loopkit checkpoint");
  assert_int_equal(lk__ckpt_parse("mem", NULL, 1, &ck), LK_EINVAL);
  assert_int_equal(lk__ckpt_parse(NULL, raw, len, &ck), LK_EINVAL);
  assert_int_equal(lk__ckpt_parse("mem", raw, len, NULL), LK_EINVAL);
  free(raw);
}

/* Everything the loop knows travels with the tensors: a run resumed from
 * the file takes the same decisions (an early stop, a monitor's value, an
 * epoch's mean loss). Non-finite metric values are data, kept bit for bit. */
static void loop_state_round_trip(void **state) {
  fixture *fx = *state;
  lk__loop_state st = {.progress = {4, 0, 1688, 0},
                       .metrics_rows = 1692,
                       .stopped = true,
                       .finished = true,
                       .has_last_loss = true,
                       .last_loss = 0.25,
                       .epoch_losses = 3,
                       .epoch_loss_sum = 1.5,
                       .n_latest = 3};
  snprintf(st.latest[0].name, LK__NAME_MAX, "loss");
  st.latest[0].value = 0.25;
  snprintf(st.latest[1].name, LK__NAME_MAX, "val_acc");
  st.latest[1].value = 0.875;
  snprintf(st.latest[2].name, LK__NAME_MAX, "val_loss");
  st.latest[2].value = NAN;
  double x[1] = {1};
  size_t shape[] = {1};
  lk_tensor t = tensor("x", LK_F64, 1, shape, x);
  lk_tensor *params[] = {&t};
  assert_int_equal(lk__ckpt_write(fx->path, &st, &rng, params, 1, NULL, 0), 0);
  lk__ckpt *ck;
  assert_int_equal(lk__ckpt_read(fx->path, &ck, NULL), 0);
  assert_int_equal(ck->version, 2);
  const lk__loop_state *got = &ck->state;
  assert_memory_equal(&got->progress, &st.progress, sizeof st.progress);
  assert_int_equal(got->metrics_rows, 1692);
  assert_true(got->stopped && got->finished && got->has_last_loss);
  assert_true(got->last_loss == 0.25 && got->epoch_loss_sum == 1.5);
  assert_int_equal(got->epoch_losses, 3);
  assert_int_equal(got->n_latest, 3);
  for (size_t i = 0; i < 3; i++)
    assert_string_equal(got->latest[i].name, st.latest[i].name);
  assert_true(got->latest[1].value == 0.875);
  assert_true(isnan(got->latest[2].value));
  lk__ckpt_free(ck);

  /* A state whose metric name could not be a column is not written. */
  snprintf(st.latest[1].name, LK__NAME_MAX, "val,acc");
  assert_int_equal(lk__ckpt_write(fx->path, &st, &rng, params, 1, NULL, 0),
                   LK_EINVAL);
}

/* The loop section's format is checked like the tensors' (what its values
 * mean for a run is the resuming run's to check). */
static void loop_state_malformed(void **state) {
  fixture *fx = *state;
  double x[3] = {1, 2, 3};
  write_simple(fx->path, x);
  size_t len;
  unsigned char *raw = slurp(fx->path, &len);
  char bad[160];
  snprintf(bad, sizeof bad, "%s/bad.ckpt", fx->dir);

  le64(raw + OFF_FLAGS, 8);
  fix_crc(raw, len);
  spit(bad, raw, len);
  assert_read_fails(bad, LK_EFORMAT, "flags 0x8 has unknown bits");
  le64(raw + OFF_FLAGS, 0);

  le64(raw + OFF_N_LATEST, 129);
  fix_crc(raw, len);
  spit(bad, raw, len);
  assert_read_fails(bad, LK_EFORMAT, "holds 129 metrics, at most 128");

  le64(raw + OFF_N_LATEST, UINT64_MAX);
  fix_crc(raw, len);
  spit(bad, raw, len);
  assert_read_fails(bad, LK_EFORMAT, "metrics, at most 128");

  /* One metric whose record claims more bytes than there are. */
  le64(raw + OFF_N_LATEST, 1);
  le32(raw + OFF_COUNT, 0x7fffffff);
  fix_crc(raw, len);
  spit(bad, raw, len);
  assert_read_fails(bad, LK_EFORMAT, "loop state metric 0 runs past the end");
  free(raw);

  /* A name with a comma, and a name twice, written by hand. */
  lk__loop_state st = {.n_latest = 2};
  snprintf(st.latest[0].name, LK__NAME_MAX, "a");
  snprintf(st.latest[1].name, LK__NAME_MAX, "b");
  double one[1] = {1};
  size_t shape[] = {1};
  lk_tensor t = tensor("x", LK_F64, 1, shape, one);
  lk_tensor *params[] = {&t};
  assert_int_equal(lk__ckpt_write(fx->path, &st, &rng, params, 1, NULL, 0), 0);
  raw = slurp(fx->path, &len);
  /* records: len u32 "a" f64, len u32 "b" f64 */
  raw[OFF_COUNT + 4] = ',';
  fix_crc(raw, len);
  spit(bad, raw, len);
  assert_read_fails(bad, LK_EFORMAT, "not a metrics.csv column");
  raw[OFF_COUNT + 4] = 'b';
  fix_crc(raw, len);
  spit(bad, raw, len);
  assert_read_fails(bad, LK_EFORMAT, "loop state metric b appears twice");
  free(raw);
}

/* Version 1 files (no loop section) still read, for loopkit dump. */
static void version_1_reads(void **state) {
  fixture *fx = *state;
  double x[3] = {1, 2, 3};
  write_simple(fx->path, x);
  size_t len;
  unsigned char *raw = slurp(fx->path, &len);
  size_t loop = OFF_COUNT - OFF_LOOP;
  memmove(raw + OFF_LOOP, raw + OFF_COUNT, len - OFF_COUNT);
  len -= loop;
  le32(raw + OFF_VERSION, 1);
  le64(raw + OFF_LENGTH, len);
  fix_crc(raw, len);
  spit(fx->path, raw, len);
  lk__ckpt *ck;
  assert_int_equal(lk__ckpt_read(fx->path, &ck, NULL), 0);
  assert_int_equal(ck->version, 1);
  assert_int_equal(ck->state.progress.global_step, 42);
  assert_int_equal(ck->n, 1);
  assert_memory_equal(ck->tensors[0].data, x, sizeof x);
  lk__ckpt_free(ck);
  free(raw);
}

/* A FIFO would block the reader forever and a device never end: only
 * regular files are read. */
static void refuses_what_is_not_a_file(void **state) {
  fixture *fx = *state;
  char fifo[160];
  snprintf(fifo, sizeof fifo, "%s/fifo.ckpt", fx->dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_read_fails(fifo, LK_EIO, "is not a regular file (a FIFO)");
  assert_read_fails("/dev/zero", LK_EIO, "a character device");
}

static char *dump(const char *path, int *rc) {
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  assert_non_null(out);
  *rc = lk_checkpoint_dump(path, out);
  assert_int_equal(fclose(out), 0);
  return text;
}

static void dump_prints_parameters(void **state) {
  fixture *fx = *state;
  double w[4] = {0.1, -2, 1.0 / 3.0, 1e-300};
  float b[2] = {0.1f, 1};
  double m[2] = {7, 8};
  size_t sw[] = {2, 2}, sb[] = {2};
  lk_tensor tw = tensor("w", LK_F64, 2, sw, w);
  lk_tensor tb = tensor("b", LK_F32, 1, sb, b);
  lk_tensor tm = tensor("sgd.momentum", LK_F64, 1, sb, m);
  lk_tensor *params[] = {&tw, &tb}, *states[] = {&tm};
  assert_int_equal(
      lk__ckpt_write(fx->path, &progress, &rng, params, 2, states, 1), 0);
  int rc;
  char *text = dump(fx->path, &rc);
  assert_int_equal(rc, 0);
  assert_string_equal(text, "w[0] 0.10000000000000001\n"
                            "w[1] -2\n"
                            "w[2] 0.33333333333333331\n"
                            "w[3] 1e-300\n"
                            "b[0] 0.100000001\n"
                            "b[1] 1\n");
  free(text);
}

static void dump_reports_read_errors(void **state) {
  fixture *fx = *state;
  int rc;
  char *text = dump(fx->path, &rc);
  assert_int_equal(rc, LK_ENOTFOUND);
  assert_string_equal(text, "");
  assert_contains(lk_last_error(), fx->path);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(crc32_matches_zlib),
      cmocka_unit_test_setup_teardown(round_trip_is_exact, setup, teardown),
      cmocka_unit_test_setup_teardown(round_trip_without_tensors, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(loop_state_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(loop_state_malformed, setup, teardown),
      cmocka_unit_test_setup_teardown(version_1_reads, setup, teardown),
      cmocka_unit_test_setup_teardown(refuses_what_is_not_a_file, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(refuses_nan, setup, teardown),
      cmocka_unit_test_setup_teardown(refuses_inf_in_state, setup, teardown),
      cmocka_unit_test_setup_teardown(refuses_bad_tensors, setup, teardown),
      cmocka_unit_test(unwritable_directory),
      cmocka_unit_test_setup_teardown(overwrite_keeps_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(truncated_files, setup, teardown),
      cmocka_unit_test_setup_teardown(flipped_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(foreign_files, setup, teardown),
      cmocka_unit_test_setup_teardown(newer_version, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_file, setup, teardown),
      cmocka_unit_test_setup_teardown(malformed_fields, setup, teardown),
      cmocka_unit_test_setup_teardown(duplicate_names_in_file, setup, teardown),
      cmocka_unit_test_setup_teardown(parse_from_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(dump_prints_parameters, setup, teardown),
      cmocka_unit_test_setup_teardown(dump_reports_read_errors, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
