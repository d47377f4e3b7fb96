/* The idx and csv data plugins through their entries: each is created by a
 * real run (lk_run_new with the probe model, which ignores batches) and its
 * epoch and batch entries are called directly. The fixtures — small IDX
 * files, plain and gzip-compressed, and CSV files — are written at run time
 * into a temporary directory. The real Fashion-MNIST files are read when
 * they are installed; otherwise that test reports a TAP "# SKIP". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, nftw */
#endif
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>
#include <zlib.h>

#ifndef FASHION_DIR
#define FASHION_DIR "/usr/share/datasets/fashion-mnist"
#endif
#define MAX_N 256 /* fixture samples: pixel 0 of sample i is i */

static char root[4096]; /* the temporary directory of this program */

/* ---- fixtures ------------------------------------------------------------ */

static const char *in_root(const char *name) {
  static char paths[8][4200];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", root, name);
  return p;
}

static void write_bytes(const char *path, const void *data, size_t len,
                        bool gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    if (len)
      assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
    assert_int_equal(gzclose(f), Z_OK);
  } else {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
  }
}

static void write_text(const char *path, const char *text) {
  write_bytes(path, text, strlen(text), false);
}

/* The pixel P of sample I of a fixture (TEST: of the t10k file): pixel 0
 * names the sample, so that a batch row says which sample it is. */
static unsigned char pixel(size_t i, size_t p, int test) {
  return p == 0 ? (unsigned char)i
                : (unsigned char)((i * 31 + p * 17 + (size_t)test * 5) % 256);
}

static unsigned char label_of(size_t i) {
  return (unsigned char)(i % 10);
}

/* An IDX file: MAGIC, DIMS, then LEN bytes of DATA (which need not match
 * the header: truncated and trailing files are made this way). */
static void write_idx(const char *path, uint32_t magic, const uint32_t *dims,
                      size_t ndim, const unsigned char *data, size_t len,
                      bool gz) {
  size_t head = 4 + 4 * ndim;
  unsigned char *buf = malloc(head + len + 1);
  assert_non_null(buf);
  for (size_t i = 0; i < 1 + ndim; i++) {
    uint32_t v = i == 0 ? magic : dims[i - 1];
    for (int b = 0; b < 4; b++)
      buf[4 * i + (size_t)b] = (unsigned char)(v >> (24 - 8 * b));
  }
  if (len)
    memcpy(buf + head, data, len);
  write_bytes(path, buf, head + len, gz);
  free(buf);
}

/* The four files of a data set in directory NAME (created): N_TRAIN and
 * N_TEST samples of ROWS x COLS pixels. */
static const char *make_idx_dir(const char *name, size_t n_train, size_t n_test,
                                uint32_t rows, uint32_t cols, bool gz) {
  const char *dir = in_root(name);
  mkdir(dir, 0755);
  const char *ext = gz ? ".gz" : "";
  for (int test = 0; test < 2; test++) {
    size_t n = test ? n_test : n_train, f = (size_t)rows * cols;
    unsigned char *px = malloc(n * f + 1), *lb = malloc(n + 1);
    assert_non_null(px);
    assert_non_null(lb);
    for (size_t i = 0; i < n; i++) {
      for (size_t p = 0; p < f; p++)
        px[i * f + p] = pixel(i, p, test);
      lb[i] = label_of(i);
    }
    char path[4400];
    uint32_t dims[3] = {(uint32_t)n, rows, cols};
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir,
             test ? "t10k" : "train", ext);
    write_idx(path, 0x803, dims, 3, px, n * f, gz);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir,
             test ? "t10k" : "train", ext);
    write_idx(path, 0x801, dims, 1, lb, n, gz);
    free(px);
    free(lb);
  }
  return dir;
}

static int remove_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static int setup_root(void **state) {
  (void)state;
  const char *tmp = getenv("TMPDIR");
  snprintf(root, sizeof root, "%s/lk-data.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  return mkdtemp(root) ? 0 : -1;
}

static int teardown_root(void **state) {
  (void)state;
  return nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- a data plugin inside a run ------------------------------------------ */

typedef struct data {
  lk_run *run;
  void *self;
  const lk_data_ops *ops;
} data;

/* Creates plugin NAME with OPTIONS ("key = value" lines) in a run seeded
 * with SEED, whose model is probe. Returns lk_run_new's code. */
static int try_open(data *d, const char *name, const char *options,
                    uint64_t seed) {
  char text[4096];
  snprintf(text, sizeof text,
           "[loop]\nseed = %llu\n[plugins]\nstep = probe\noptimizer = probe\n"
           "data = %s\n[%s]\n%s\n",
           (unsigned long long)seed, name, name, options);
  lk_config *cfg = NULL;
  if (lk_config_parse("test_data.ini", text, &cfg) != 0)
    fail_msg("config:\n%s\n%s", text, lk_last_error());
  lk_run_options opts = {.no_run_dir = true};
  memset(d, 0, sizeof *d);
  int rc = lk_run_new(cfg, &opts, &d->run);
  lk_config_free(cfg);
  if (rc == 0) {
    const lk_descriptor *desc = NULL;
    d->self = lk_run_instance(d->run, "data", &desc);
    assert_non_null(desc);
    assert_string_equal(desc->name, name);
    assert_non_null(desc->data);
    d->ops = desc->data;
  }
  return rc;
}

static void open_ok(data *d, const char *name, const char *options,
                    uint64_t seed) {
  if (try_open(d, name, options, seed) != 0)
    fail_msg("%s with\n%s\nfailed: %s", name, options, lk_last_error());
}

static void close_data(data *d) {
  lk_run_free(d->run);
  memset(d, 0, sizeof *d);
}

/* Expects creating NAME with OPTIONS to fail with CODE and a message that
 * holds every needle (NULL-terminated). */
static void expect_fail(const char *name, const char *options, int code, ...) {
  data d;
  int rc = try_open(&d, name, options, 0);
  if (rc == 0) {
    close_data(&d);
    fail_msg("%s with\n%s\nwas accepted", name, options);
  }
  const char *msg = lk_last_error();
  if (rc != code)
    fail_msg("%s: code %d (%s), expected %d", name, rc, msg, code);
  va_list ap;
  va_start(ap, code);
  for (const char *n; (n = va_arg(ap, const char *));)
    if (!strstr(msg, n)) {
      va_end(ap);
      fail_msg("message \"%s\" lacks \"%s\"", msg, n);
    }
  va_end(ap);
  if (!strstr(msg, name))
    fail_msg("message \"%s\" does not name plugin %s", msg, name);
}

/* The samples of one epoch of SPLIT, in order: IDS from pixel 0 (fixtures
 * read with normalize = none), checked against their labels. Returns the
 * number of batches; SIZES gets each batch's size. */
static size_t epoch_ids(data *d, lk_split split, uint64_t epoch, size_t *ids,
                        size_t *n, size_t *sizes) {
  size_t nb = 0;
  assert_int_equal(d->ops->epoch(d->self, split, epoch, &nb), 0);
  *n = 0;
  for (size_t b = 0; b < nb; b++) {
    lk_batch batch;
    memset(&batch, 0xff, sizeof batch); /* every field must be set */
    assert_int_equal(d->ops->batch(d->self, split, b, &batch), 0);
    assert_int_equal(batch.split, split);
    assert_int_equal(batch.epoch, epoch);
    assert_int_equal(batch.index, b);
    assert_int_equal(batch.x.dtype, LK_F32);
    assert_int_equal(batch.x.ndim, 2);
    assert_int_equal(batch.x.shape[0], batch.size);
    assert_int_equal(batch.x.numel, batch.size * batch.x.shape[1]);
    assert_null(batch.x.grad);
    assert_int_equal(batch.y.dtype, LK_I32);
    assert_int_equal(batch.y.ndim, 1);
    assert_int_equal(batch.y.shape[0], batch.size);
    if (sizes)
      sizes[b] = batch.size;
    const float *x = batch.x.data;
    const int32_t *y = batch.y.data;
    for (size_t i = 0; i < batch.size; i++) {
      float id = x[i * batch.x.shape[1]];
      assert_true(id >= 0 && id < MAX_N && id == floorf(id));
      assert_int_equal(y[i], label_of((size_t)id));
      ids[(*n)++] = (size_t)id;
    }
  }
  return nb;
}

static bool is_permutation(const size_t *ids, size_t n) {
  bool seen[MAX_N] = {false};
  for (size_t i = 0; i < n; i++) {
    if (ids[i] >= n || seen[ids[i]])
      return false;
    seen[ids[i]] = true;
  }
  return true;
}

/* |a - b| within TOL relative to the larger of 1 and |b|. */
static void assert_near(double a, double b, double tol) {
  double scale = fabs(b) > 1 ? fabs(b) : 1;
  if (!(fabs(a - b) <= tol * scale))
    fail_msg("%.9g is not %.9g (tolerance %g)", a, b, tol);
}

static bool same(const size_t *a, const size_t *b, size_t n) {
  return memcmp(a, b, n * sizeof *a) == 0;
}

/* "dir = ROOT/NAME\n" + EXTRA. */
static const char *idx_options(const char *name, const char *extra) {
  static char text[2][8192];
  static int next;
  char *t = text[next++ % 2];
  snprintf(t, sizeof text[0], "dir = %s\n%s", in_root(name), extra);
  return t;
}

/* ---- idx: reading ---------------------------------------------------------
 */

/* Every value of every split, as the fixture wrote it (normalize = none), or
 * divided by 255 (scale); the gzip and plain copies read the same. */
static void check_idx_values(const char *dir_name, bool scale) {
  data d;
  char extra[256];
  snprintf(extra, sizeof extra, "shuffle = false\nbatch_size = 8\n%s",
           scale ? "" : "normalize = none\n");
  open_ok(&d, "idx", idx_options(dir_name, extra), 0);
  for (int split = 0; split < 3; split++) {
    size_t nb = 0, n = 0,
           expect_n = split == LK_SPLIT_TRAIN  ? 20
                      : split == LK_SPLIT_TEST ? 5
                                               : 0;
    assert_int_equal(d.ops->epoch(d.self, (lk_split)split, 0, &nb), 0);
    assert_int_equal(nb, (expect_n + 7) / 8);
    for (size_t b = 0; b < nb; b++) {
      lk_batch batch = {0};
      assert_int_equal(d.ops->batch(d.self, (lk_split)split, b, &batch), 0);
      assert_int_equal(batch.x.shape[1], 12);
      const float *x = batch.x.data;
      for (size_t i = 0; i < batch.size; i++, n++) {
        for (size_t p = 0; p < 12; p++) {
          float v = pixel(n, p, split == LK_SPLIT_TEST);
          assert_true(x[i * 12 + p] == (scale ? v / 255.0f : v));
        }
        assert_int_equal(((int32_t *)batch.y.data)[i], label_of(n));
      }
    }
    assert_int_equal(n, expect_n);
  }
  close_data(&d);
}

static void test_idx_plain_and_gzip(void **state) {
  (void)state;
  make_idx_dir("plain", 20, 5, 3, 4, false);
  make_idx_dir("gz", 20, 5, 3, 4, true);
  check_idx_values("plain", false);
  check_idx_values("gz", false);
  check_idx_values("plain", true);
  check_idx_values("gz", true);
}

/* With both FILE and FILE.gz, the plain one is read; each file on its own
 * may be either. */
static void test_idx_mixed_and_preferred(void **state) {
  (void)state;
  const char *dir = make_idx_dir("mixed", 20, 5, 3, 4, true);
  make_idx_dir("mixed", 20, 5, 3, 4, false);
  char path[4400];
  /* The training images only compressed, the rest both ways. */
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
  assert_int_equal(unlink(path), 0);
  /* A .gz beside the plain training labels that would fail if read. */
  snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz", dir);
  write_text(path, "not gzip, not idx");
  check_idx_values("mixed", false);
  snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
  assert_int_equal(unlink(path), 0); /* now only the bad .gz is left */
  expect_fail("idx", idx_options("mixed", ""), LK_EFORMAT,
              "train-labels-idx1-ubyte.gz: magic number 0x6e6f7420", NULL);
}

static void test_idx_missing(void **state) {
  (void)state;
  expect_fail("idx", "dir = /nonexistent/lk-data", LK_ENOTFOUND,
              "/nonexistent/lk-data/train-images-idx3-ubyte and "
              "/nonexistent/lk-data/train-images-idx3-ubyte.gz",
              "dir = /nonexistent/lk-data is not a directory", NULL);
  const char *dir = make_idx_dir("missing", 10, 3, 2, 2, true);
  char path[4400];
  snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
  assert_int_equal(unlink(path), 0);
  char tried[9000];
  snprintf(tried, sizeof tried,
           "cannot find t10k-labels-idx1-ubyte: tried "
           "%s/t10k-labels-idx1-ubyte and %s/t10k-labels-idx1-ubyte.gz",
           dir, dir);
  expect_fail("idx", idx_options("missing", ""), LK_ENOTFOUND, tried, NULL);
}

static void test_idx_wrong_magic(void **state) {
  (void)state;
  const char *dir = make_idx_dir("magic", 10, 3, 2, 2, false);
  char path[4400];
  unsigned char lb[10] = {0};
  uint32_t dims[3] = {10, 2, 2};
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
  write_idx(path, 0x801, dims, 1, lb, 10, false); /* labels as images */
  expect_fail("idx", idx_options("magic", ""), LK_EFORMAT, path,
              "magic number 0x00000801, expected 0x00000803", NULL);
  make_idx_dir("magic", 10, 3, 2, 2, false);
  snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte", dir);
  unsigned char px[12] = {0};
  dims[0] = 3;
  write_idx(path, 0x803, dims, 3, px, 12, false);
  expect_fail("idx", idx_options("magic", ""), LK_EFORMAT, path,
              "magic number 0x00000803, expected 0x00000801", NULL);
}

static void test_idx_truncated(void **state) {
  (void)state;
  unsigned char px[40 * 4];
  for (size_t i = 0; i < sizeof px; i++)
    px[i] = (unsigned char)i;
  uint32_t dims[3] = {40, 2, 2};
  char path[4400], expect[256];
  for (int gz = 0; gz < 2; gz++) {
    const char *dir = make_idx_dir(gz ? "trunc-gz" : "trunc", 40, 3, 2, 2, gz);
    const char *name = gz ? "trunc-gz" : "trunc";
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte%s", dir,
             gz ? ".gz" : "");
    /* 16 + 160 bytes promised, 16 + 150 there. */
    write_idx(path, 0x803, dims, 3, px, 150, gz);
    snprintf(expect, sizeof expect,
             "is truncated: its header promises 176 bytes, the file has "
             "166%s",
             gz ? " (uncompressed)" : "");
    expect_fail("idx", idx_options(name, ""), LK_EFORMAT, path, expect, NULL);
    /* Too short even for the header. */
    write_bytes(path, "\0\0\x08\x03\0\0", 6, gz);
    expect_fail("idx", idx_options(name, ""), LK_EFORMAT, path,
                "is truncated: 6 bytes, an IDX header of images needs 16",
                NULL);
    /* Data after what the header says. */
    write_idx(path, 0x803, dims, 3, px, 40 * 4, gz);
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    if (gz) { /* a second gzip member: zlib reads on into it */
      fclose(f);
      gzFile g = gzopen(path, "ab");
      assert_non_null(g);
      assert_int_equal(gzwrite(g, "xyz", 3), 3);
      gzclose(g);
    } else {
      fputs("xyz", f);
      fclose(f);
    }
    snprintf(expect, sizeof expect,
             "has 179 bytes%s, its header says 176: trailing data",
             gz ? " (uncompressed)" : "");
    expect_fail("idx", idx_options(name, ""), LK_EFORMAT, path, expect, NULL);
  }
  /* A gzip stream cut short: as truncated, with what could be read. */
  const char *dir = make_idx_dir("trunc-stream", 200, 3, 16, 16, true);
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(truncate(path, st.st_size / 2), 0);
  expect_fail("idx", idx_options("trunc-stream", ""), LK_EFORMAT, path,
              "is truncated: its header promises 51216 bytes, the file has ",
              "(uncompressed)", NULL);
}

/* A header that promises far more than the file holds is a truncated file,
 * found without first allocating what it promises (found by
 * fuzz/fuzz_idx.c: 1 TiB for a 100-byte file, "out of memory" at best). */
static void test_idx_huge_header(void **state) {
  (void)state;
  const char *dir = make_idx_dir("huge", 4, 2, 2, 2, false);
  char path[4400];
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
  unsigned char px[100] = {0};
  uint32_t dims[3] = {65535, 4096, 4096}; /* just under 2^40 bytes */
  write_idx(path, 0x803, dims, 3, px, sizeof px, false);
  expect_fail("idx", idx_options("huge", ""), LK_EFORMAT, path,
              "is truncated: its header promises 1099494850576 bytes, the "
              "file has 116",
              NULL);
}

/* Damaged compressed data is a format error that names the file once
 * (found by fuzz/fuzz_idx.c: it was LK_EIO, "cannot read P: P: incorrect
 * data check"). */
static void test_idx_corrupt_gzip(void **state) {
  (void)state;
  const char *dir = make_idx_dir("corrupt-gz", 4, 2, 2, 2, true);
  char path[4400];
  snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz", dir);
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  assert_int_equal(fseek(f, -8, SEEK_END), 0); /* the CRC-32 of the data */
  int c = fgetc(f);
  assert_int_equal(fseek(f, -8, SEEK_END), 0);
  fputc(c ^ 0xff, f);
  assert_int_equal(fclose(f), 0);
  char expect[4500];
  snprintf(expect, sizeof expect, "%s: corrupt gzip data: incorrect data check",
           path);
  expect_fail("idx", idx_options("corrupt-gz", ""), LK_EFORMAT, expect, NULL);
  const char *once = strstr(lk_last_error(), path);
  assert_non_null(once);
  assert_null(strstr(once + 1, path));
}

static void test_idx_count_mismatch(void **state) {
  (void)state;
  const char *dir = make_idx_dir("count", 20, 3, 2, 2, true);
  char path[4400], images[4400], expect[9000];
  unsigned char lb[19] = {0};
  uint32_t dims[1] = {19};
  snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz", dir);
  snprintf(images, sizeof images, "%s/train-images-idx3-ubyte.gz", dir);
  write_idx(path, 0x801, dims, 1, lb, 19, true);
  snprintf(expect, sizeof expect, "%s has 20 images but %s has 19 labels",
           images, path);
  expect_fail("idx", idx_options("count", ""), LK_EFORMAT, expect, NULL);
  /* Test images of another size than the training images. */
  make_idx_dir("count", 20, 3, 2, 2, true);
  unsigned char px[3 * 9] = {0};
  uint32_t d3[3] = {3, 3, 3};
  snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
  write_idx(path, 0x803, d3, 3, px, sizeof px, true);
  expect_fail("idx", idx_options("count", ""), LK_EFORMAT, path,
              "images of 3 x 3 pixels, the training images have 4 pixels",
              NULL);
}

/* ---- shuffling, drop_last, val_split, limit (shared by both plugins) ----- */

static void test_shuffle(void **state) {
  (void)state;
  make_idx_dir("shuffle", 50, 5, 2, 2, true);
  const char *opts = idx_options("shuffle", "normalize = none\nbatch_size = 8");
  size_t a[4][MAX_N], b[MAX_N], n = 0;
  data d;
  open_ok(&d, "idx", opts, 7);
  for (int e = 0; e < 4; e++) {
    assert_int_equal(epoch_ids(&d, LK_SPLIT_TRAIN, (uint64_t)e, a[e], &n, NULL),
                     7);
    assert_int_equal(n, 50);
    assert_true(is_permutation(a[e], n));
  }
  close_data(&d);
  assert_false(same(a[0], a[1], 50));
  assert_false(same(a[1], a[2], 50));
  size_t identity[MAX_N];
  for (size_t i = 0; i < 50; i++)
    identity[i] = i;
  assert_false(same(a[0], identity, 50));

  /* Same seed, another run: the same orders, and epoch 3 straight away
   * (a resumed run) gets the order epoch 3 had. */
  open_ok(&d, "idx", opts, 7);
  epoch_ids(&d, LK_SPLIT_TRAIN, 3, b, &n, NULL);
  assert_true(same(a[3], b, 50));
  epoch_ids(&d, LK_SPLIT_TRAIN, 0, b, &n, NULL);
  assert_true(same(a[0], b, 50));
  /* Validation and test splits are never shuffled. */
  epoch_ids(&d, LK_SPLIT_TEST, 2, b, &n, NULL);
  assert_int_equal(n, 5);
  assert_true(same(b, identity, 5));
  close_data(&d);

  /* Another seed: another order. */
  open_ok(&d, "idx", opts, 8);
  epoch_ids(&d, LK_SPLIT_TRAIN, 0, b, &n, NULL);
  assert_true(is_permutation(b, n));
  assert_false(same(a[0], b, 50));
  close_data(&d);

  /* shuffle = false: file order, every epoch. */
  open_ok(&d, "idx",
          idx_options("shuffle", "normalize = none\nshuffle = false"), 7);
  for (int e = 0; e < 2; e++) {
    epoch_ids(&d, LK_SPLIT_TRAIN, (uint64_t)e, b, &n, NULL);
    assert_true(same(b, identity, 50));
  }
  close_data(&d);
}

static void test_drop_last(void **state) {
  (void)state;
  make_idx_dir("drop", 50, 5, 2, 2, false);
  size_t ids[MAX_N], sizes[16], n;
  data d;
  open_ok(&d, "idx", idx_options("drop", "normalize = none\nbatch_size = 16"),
          1);
  assert_int_equal(epoch_ids(&d, LK_SPLIT_TRAIN, 0, ids, &n, sizes), 4);
  assert_int_equal(n, 50);
  assert_int_equal(sizes[3], 2);
  close_data(&d);

  open_ok(&d, "idx",
          idx_options("drop", "normalize = none\nbatch_size = 16\n"
                              "drop_last = true"),
          1);
  for (int e = 0; e < 2; e++) {
    assert_int_equal(epoch_ids(&d, LK_SPLIT_TRAIN, (uint64_t)e, ids, &n, sizes),
                     3);
    assert_int_equal(n, 48);
    for (int b = 0; b < 3; b++)
      assert_int_equal(sizes[b], 16);
    bool seen[MAX_N] = {false}; /* 48 distinct samples of the 50 */
    for (size_t i = 0; i < n; i++) {
      assert_true(ids[i] < 50 && !seen[ids[i]]);
      seen[ids[i]] = true;
    }
  }
  lk_batch batch;
  assert_int_equal(d.ops->batch(d.self, LK_SPLIT_TRAIN, 3, &batch), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "batch 3 of the training split"));
  /* The test split keeps its short batch. */
  assert_int_equal(epoch_ids(&d, LK_SPLIT_TEST, 0, ids, &n, sizes), 1);
  assert_int_equal(sizes[0], 5);
  close_data(&d);

  expect_fail("idx", idx_options("drop", "batch_size = 64\ndrop_last = true"),
              LK_ECONFIG, "drop_last", "batch_size = 64", "50 training samples",
              NULL);
  expect_fail("idx", idx_options("drop", "batch_size = 0"), LK_ECONFIG,
              "idx.batch_size = 0: must be >= 1", NULL);
}

static void test_val_split(void **state) {
  (void)state;
  make_idx_dir("val", 50, 5, 2, 2, true);
  const char *opts =
      idx_options("val", "normalize = none\nval_split = 0.2\nbatch_size = 6");
  size_t tr[MAX_N], va[MAX_N], va2[MAX_N], sizes[16], nt, nv, n2;
  data d;
  open_ok(&d, "idx", opts, 3);
  assert_int_equal(epoch_ids(&d, LK_SPLIT_VAL, 0, va, &nv, sizes), 2);
  assert_int_equal(nv, 10);
  assert_int_equal(sizes[1], 4);
  for (int e = 0; e < 3; e++) {
    assert_int_equal(epoch_ids(&d, LK_SPLIT_TRAIN, (uint64_t)e, tr, &nt, NULL),
                     7);
    assert_int_equal(nt, 40);
    bool seen[MAX_N] = {false};
    for (size_t i = 0; i < nt; i++)
      seen[tr[i]] = true;
    for (size_t i = 0; i < nv; i++) {
      assert_false(seen[va[i]]); /* no overlap */
      seen[va[i]] = true;
    }
    for (size_t i = 0; i < 50; i++)
      assert_true(seen[i]); /* together: every sample, once */
    epoch_ids(&d, LK_SPLIT_VAL, (uint64_t)e + 1, va2, &n2, NULL);
    assert_true(n2 == nv && same(va, va2, nv)); /* same every epoch */
  }
  /* Not simply the last samples of the file: a permutation chose them. */
  bool tail = true;
  for (size_t i = 0; i < nv; i++)
    tail = tail && va[i] >= 40;
  assert_false(tail);
  close_data(&d);

  open_ok(&d, "idx", opts, 3); /* same seed: same held-out samples */
  epoch_ids(&d, LK_SPLIT_VAL, 0, va2, &n2, NULL);
  assert_true(n2 == nv && same(va, va2, nv));
  close_data(&d);
  open_ok(&d, "idx", opts, 4); /* another seed: others */
  epoch_ids(&d, LK_SPLIT_VAL, 0, va2, &n2, NULL);
  assert_true(n2 == nv && !same(va, va2, nv));
  close_data(&d);

  /* Without val_split the split does not exist. */
  open_ok(&d, "idx", idx_options("val", ""), 3);
  size_t nb = 1;
  assert_int_equal(d.ops->epoch(d.self, LK_SPLIT_VAL, 0, &nb), 0);
  assert_int_equal(nb, 0);
  close_data(&d);

  expect_fail("idx", idx_options("val", "val_split = 0.999"), LK_ECONFIG,
              "val_split = 0.999 of 50 training samples leaves none", NULL);
  expect_fail("idx", idx_options("val", "val_split = 1"), LK_ECONFIG,
              "idx.val_split = 1: must be >= 0 and < 1", NULL);
  expect_fail("idx", idx_options("val", "val_split = -0.1"), LK_ECONFIG,
              "idx.val_split = -0.1: must be >= 0 and < 1", NULL);
}

static void test_limit(void **state) {
  (void)state;
  make_idx_dir("limit", 50, 5, 2, 2, false);
  size_t tr[MAX_N], va[MAX_N], nt, nv;
  data d;
  open_ok(&d, "idx", idx_options("limit", "normalize = none\nlimit = 7"), 1);
  epoch_ids(&d, LK_SPLIT_TRAIN, 0, tr, &nt, NULL);
  assert_int_equal(nt, 7);
  assert_true(is_permutation(tr, 7)); /* the first 7, shuffled */
  epoch_ids(&d, LK_SPLIT_TEST, 0, tr, &nt, NULL);
  assert_int_equal(nt, 5); /* the test split is whole */
  close_data(&d);

  open_ok(&d, "idx",
          idx_options("limit", "normalize = none\nlimit = 7\nval_split = 0.3"),
          1);
  epoch_ids(&d, LK_SPLIT_TRAIN, 0, tr, &nt, NULL);
  epoch_ids(&d, LK_SPLIT_VAL, 0, va, &nv, NULL);
  assert_int_equal(nt, 5);
  assert_int_equal(nv, 2);
  memcpy(tr + nt, va, nv * sizeof *va);
  assert_true(is_permutation(tr, 7));
  close_data(&d);

  open_ok(&d, "idx", idx_options("limit", "normalize = none\nlimit = 500"), 1);
  epoch_ids(&d, LK_SPLIT_TRAIN, 0, tr, &nt, NULL);
  assert_int_equal(nt, 50);
  close_data(&d);
  expect_fail("idx", idx_options("limit", "limit = -1"), LK_ECONFIG,
              "idx.limit = -1: must be >= 0", NULL);
}

/* ---- csv ------------------------------------------------------------------
 */

static const char *csv_options(const char *file, const char *extra) {
  static char text[2][8192];
  static int next;
  char *t = text[next++ % 2];
  snprintf(t, sizeof text[0], "path = %s\n%s", in_root(file), extra);
  return t;
}

/* Reads one batch of everything (batch_size large enough). */
static void one_batch(data *d, lk_split split, lk_batch *batch) {
  size_t nb = 0;
  assert_int_equal(d->ops->epoch(d->self, split, 0, &nb), 0);
  assert_int_equal(nb, 1);
  assert_int_equal(d->ops->batch(d->self, split, 0, batch), 0);
}

static void test_csv_read(void **state) {
  (void)state;
  write_text(in_root("a.csv"), "f1,f2,label\n"
                               "1.5, -2 ,3\r\n"
                               "\n"
                               "4e2,0.25,0\n"
                               "  \n"
                               "-7,8,12");
  write_text(in_root("a-test.csv"), "f1,f2,label\n9,10,1\n");
  data d;
  char extra[4400];
  snprintf(extra, sizeof extra, "test = %s\nshuffle = false",
           in_root("a-test.csv"));
  open_ok(&d, "csv", csv_options("a.csv", extra), 0);
  lk_batch b;
  one_batch(&d, LK_SPLIT_TRAIN, &b);
  assert_int_equal(b.size, 3);
  assert_int_equal(b.x.shape[1], 2);
  assert_int_equal(b.y.dtype, LK_I32);
  const float want_x[] = {1.5f, -2, 400, 0.25f, -7, 8};
  const int32_t want_y[] = {3, 0, 12};
  assert_memory_equal(b.x.data, want_x, sizeof want_x);
  assert_memory_equal(b.y.data, want_y, sizeof want_y);
  one_batch(&d, LK_SPLIT_TEST, &b);
  assert_int_equal(b.size, 1);
  assert_true(((float *)b.x.data)[1] == 10);
  assert_int_equal(((int32_t *)b.y.data)[0], 1);
  close_data(&d);

  /* No header, ';', the label first and a float target. */
  write_text(in_root("b.csv"), "0.5;1;2\n-1.25;3;4\n");
  open_ok(&d, "csv",
          csv_options("b.csv", "header = false\ndelimiter = semicolon\n"
                               "label_column = 0\nlabels = float\n"
                               "shuffle = false"),
          0);
  one_batch(&d, LK_SPLIT_TRAIN, &b);
  assert_int_equal(b.y.dtype, LK_F32);
  const float bx[] = {1, 2, 3, 4}, by[] = {0.5f, -1.25f};
  assert_memory_equal(b.x.data, bx, sizeof bx);
  assert_memory_equal(b.y.data, by, sizeof by);
  size_t nb = 1;
  assert_int_equal(d.ops->epoch(d.self, LK_SPLIT_TEST, 0, &nb), 0);
  assert_int_equal(nb, 0); /* no test file: no test split */
  close_data(&d);

  /* Tabs, and a label column counted from the end. */
  write_text(in_root("c.tsv"), "1\t2\t3\n4\t5\t6\n");
  open_ok(&d, "csv",
          csv_options("c.tsv", "header = false\ndelimiter = tab\n"
                               "label_column = -2\nshuffle = false"),
          0);
  one_batch(&d, LK_SPLIT_TRAIN, &b);
  const float cx[] = {1, 3, 4, 6};
  const int32_t cy[] = {2, 5};
  assert_memory_equal(b.x.data, cx, sizeof cx);
  assert_memory_equal(b.y.data, cy, sizeof cy);
  close_data(&d);
}

/* A batch_size far beyond the data set: every batch buffer used to be
 * sized batch_size x features, a product that wrapped around for 2^62 + 1
 * into a 16-byte buffer (a heap overflow, found by fuzz/fuzz_csv.c) and
 * failed as "out of memory" for 10^12. Now one batch holds everything. */
static void test_huge_batch_size(void **state) {
  (void)state;
  write_text(in_root("huge.csv"), "a,b,y\n1,2,0\n3,4,1\n5,6,2\n");
  const char *sizes[] = {"4611686018427387905", "1000000000000",
                         "9223372036854775807"};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char extra[256];
    snprintf(extra, sizeof extra, "shuffle = false\nbatch_size = %s", sizes[i]);
    data d;
    open_ok(&d, "csv", csv_options("huge.csv", extra), 0);
    lk_batch b;
    one_batch(&d, LK_SPLIT_TRAIN, &b);
    assert_int_equal(b.size, 3);
    const float want_x[] = {1, 2, 3, 4, 5, 6};
    const int32_t want_y[] = {0, 1, 2};
    assert_memory_equal(b.x.data, want_x, sizeof want_x);
    assert_memory_equal(b.y.data, want_y, sizeof want_y);
    close_data(&d);
  }
}

/* A bad cell names FILE:LINE:COLUMN and the text found. */
static void expect_bad_cell(const char *text, const char *extra,
                            const char *where, const char *what) {
  write_text(in_root("bad.csv"), text);
  char at[4400];
  snprintf(at, sizeof at, "%s:%s: ", in_root("bad.csv"), where);
  expect_fail("csv", csv_options("bad.csv", extra), LK_EFORMAT, at, what, NULL);
}

/* test_split: a fraction of the one file held out as the test split,
 * disjoint from the validation samples, which it leaves as they were; the
 * lines skip_rows skips are not read at all. */
static void test_csv_test_split(void **state) {
  (void)state;
  char text[4096] = "150,1,not,a,row\nid,label\n";
  for (int i = 0; i < 50; i++)
    snprintf(text + strlen(text), sizeof text - strlen(text), "%d,%u\n", i,
             label_of((size_t)i));
  write_text(in_root("split.csv"), text);
  size_t tr[MAX_N], va[MAX_N], te[MAX_N], va0[MAX_N], nt, nv, ne, nv0;
  data d;
  open_ok(&d, "csv",
          csv_options("split.csv", "skip_rows = 1\nval_split = 0.2\n"
                                   "batch_size = 8"),
          3);
  epoch_ids(&d, LK_SPLIT_VAL, 0, va0, &nv0, NULL);
  close_data(&d);
  open_ok(&d, "csv",
          csv_options("split.csv", "skip_rows = 1\nval_split = 0.2\n"
                                   "test_split = 0.3\nbatch_size = 8"),
          3);
  epoch_ids(&d, LK_SPLIT_TRAIN, 0, tr, &nt, NULL);
  epoch_ids(&d, LK_SPLIT_VAL, 0, va, &nv, NULL);
  epoch_ids(&d, LK_SPLIT_TEST, 0, te, &ne, NULL);
  assert_int_equal(nt, 25);
  assert_int_equal(nv, 10);
  assert_int_equal(ne, 15);
  assert_true(nv == nv0 && same(va, va0, nv)); /* validation unchanged */
  bool seen[MAX_N] = {false};
  const size_t *parts[3] = {tr, va, te}, counts[3] = {nt, nv, ne};
  for (int p = 0; p < 3; p++)
    for (size_t i = 0; i < counts[p]; i++) {
      assert_false(seen[parts[p][i]]); /* no sample in two splits */
      seen[parts[p][i]] = true;
    }
  for (size_t i = 0; i < 50; i++)
    assert_true(seen[i]); /* together: every sample, once */
  bool tail = true;       /* not simply the file's last samples */
  for (size_t i = 0; i < ne; i++)
    tail = tail && te[i] >= 35;
  assert_false(tail);
  close_data(&d);
  expect_fail("csv",
              csv_options("split.csv", "skip_rows = 1\ntest_split = 0.6\n"
                                       "val_split = 0.4"),
              LK_ECONFIG, "leave none for training", NULL);
}

static void test_csv_bad_cells(void **state) {
  (void)state;
  expect_bad_cell("a,b,y\n1,2,0\n3,abc,1\n", "", "3:2",
                  "\"abc\" is not a number");
  expect_bad_cell("a,b,y\n1,2,0\n\n3,,1\n", "", "4:2",
                  "empty cell, expected a number");
  expect_bad_cell("a,b,y\n1,2,0\n3,4,  \n", "", "3:3", "empty cell");
  expect_bad_cell("a,b,y\n1,2.5x,0\n", "", "2:2", "\"2.5x\" is not a number");
  expect_bad_cell("1,2,0\n3,nan,1\n", "header = false", "2:2",
                  "\"nan\" is not a finite f32 number");
  expect_bad_cell("a,b,y\n1e39,2,0\n", "", "2:1",
                  "\"1e39\" is not a finite f32 number");
  expect_bad_cell("a,b,y\n1,2,1.5\n", "", "2:3",
                  "label \"1.5\" is not an integer >= 0 (labels = int)");
  expect_bad_cell("a,b,y\n1,2,-1\n", "", "2:3", "label \"-1\"");
  /* With labels = float, the same cells are fine. */
  write_text(in_root("ok.csv"), "a,b,y\n1,2,-1.5\n");
  data d;
  open_ok(&d, "csv", csv_options("ok.csv", "labels = float"), 0);
  close_data(&d);
}

static void test_csv_columns(void **state) {
  (void)state;
  expect_bad_cell("a,b,y\n1,2,0\n3,4\n", "", "3:3",
                  "missing cell: 2 columns, expected 3");
  expect_bad_cell("a,b,y\n1,2,0\n3,4,5,9\n", "", "3:4",
                  "extra cell \"9\": 4 columns, expected 3");
  expect_bad_cell("a,b,y\n1,2,0,7\n", "", "2:4", "extra cell \"7\"");
  /* The test file must have the training file's columns, or one fewer
   * (no label column: samples to predict). */
  write_text(in_root("cols.csv"), "a,b,y\n1,2,0\n");
  write_text(in_root("cols-test.csv"), "y\n0\n");
  char extra[4400], expect[4400];
  snprintf(extra, sizeof extra, "test = %s", in_root("cols-test.csv"));
  snprintf(expect, sizeof expect,
           "%s:1: 1 columns, the training file has 3 (or 2 without the label "
           "column)",
           in_root("cols-test.csv"));
  expect_fail("csv", csv_options("cols.csv", extra), LK_EFORMAT, expect, NULL);
  write_text(in_root("cols-test.csv"), "a,b,y\n1,2\n");
  snprintf(expect, sizeof expect, "%s:2:3: missing cell",
           in_root("cols-test.csv"));
  expect_fail("csv", csv_options("cols.csv", extra), LK_EFORMAT, expect, NULL);
  /* One column is not a sample. */
  write_text(in_root("one.csv"), "y\n1\n");
  expect_fail("csv", csv_options("one.csv", ""), LK_EFORMAT,
              "one.csv:1: 1 column", NULL);
}

static void test_csv_errors(void **state) {
  (void)state;
  expect_fail("csv", "path = /nonexistent/lk.csv", LK_ENOTFOUND,
              "cannot open data file /nonexistent/lk.csv", NULL);
  write_text(in_root("empty.csv"), "a,b,y\n\n");
  expect_fail("csv", csv_options("empty.csv", ""), LK_EFORMAT,
              "empty.csv has no data rows", NULL);
  write_text(in_root("lc.csv"), "a,b,y\n1,2,0\n");
  expect_fail("csv", csv_options("lc.csv", "label_column = 3"), LK_ECONFIG,
              "label_column = 3 is out of range", "has 3 columns", NULL);
  expect_fail("csv", csv_options("lc.csv", "label_column = -4"), LK_ECONFIG,
              "label_column = -4", NULL);
  expect_fail("csv", csv_options("lc.csv", "delimiter = ab"), LK_ECONFIG,
              "delimiter = \"ab\"", NULL);
  expect_fail("csv", csv_options("lc.csv", "delimiter = ."), LK_ECONFIG,
              "delimiter = \".\"", NULL);
  expect_fail("csv", "header = true", LK_ECONFIG, "path", NULL);
  char extra[256];
  snprintf(extra, sizeof extra, "test = /nonexistent/t.csv");
  expect_fail("csv", csv_options("lc.csv", extra), LK_ENOTFOUND,
              "cannot open data file /nonexistent/t.csv", NULL);
}

/* ---- normalization ------------------------------------------------------- */

/* Feature 0 is a copy of the target (labels = float: y is never
 * normalized), so each row says what its raw value was; feature 1 is
 * constant; feature 2 is 3 * y + 1. The test rows lie far away: had they
 * (or the validation rows) counted, the statistics would differ. */
/* A test (or validation) value that normalization with the training
 * part's statistics takes beyond f32 is refused, naming it, rather than
 * handed to training as inf (found with the csv fuzz target's finiteness
 * check). */
static void test_normalize_overflow(void **state) {
  (void)state;
  write_text(in_root("tiny.csv"), "a,y\n0,0\n1e-45,1\n");
  write_text(in_root("tiny-test.csv"), "a,y\n0,0\n3e38,1\n");
  const char *modes[] = {"standard", "scale"};
  for (int m = 0; m < 2; m++) {
    char extra[4400];
    snprintf(extra, sizeof extra, "test = %s\nnormalize = %s",
             in_root("tiny-test.csv"), modes[m]);
    char expect[4500];
    snprintf(expect, sizeof expect,
             "%s: feature 1 of sample 2, 3e+38, is not finite once normalized "
             "(normalize = %s) with the training part's ",
             in_root("tiny-test.csv"), modes[m]);
    expect_fail("csv", csv_options("tiny.csv", extra), LK_EFORMAT, expect,
                NULL);
  }
  /* Within f32 it is fine: 1e-10 / 1.4e-45 = 7e34 (1 / 1.4e-45 is not). */
  write_text(in_root("tiny-test.csv"), "a,y\n1e-10,0\n");
  char extra[4400];
  snprintf(extra, sizeof extra, "test = %s\nnormalize = scale",
           in_root("tiny-test.csv"));
  data d;
  open_ok(&d, "csv", csv_options("tiny.csv", extra), 0);
  lk_batch b;
  one_batch(&d, LK_SPLIT_TEST, &b);
  assert_true(isfinite(((const float *)b.x.data)[0]));
  assert_true(((const float *)b.x.data)[0] > 1e34f);
  close_data(&d);
}

static void test_normalize_standard(void **state) {
  (void)state;
  char text[8192], test_text[512];
  size_t len = (size_t)snprintf(text, sizeof text, "a,b,c,y\n");
  for (int i = 0; i < 40; i++) {
    double v = (i * 37 % 41) * 0.5 - 3;
    len += (size_t)snprintf(text + len, sizeof text - len, "%g,5,%g,%g\n", v,
                            3 * v + 1, v);
  }
  write_text(in_root("norm.csv"), text);
  snprintf(test_text, sizeof test_text,
           "a,b,c,y\n1000,6,3001,1000\n-50,5,-149,-50\n");
  write_text(in_root("norm-test.csv"), test_text);
  char extra[4400];
  snprintf(extra, sizeof extra,
           "test = %s\nlabels = float\nlabel_column = 3\nnormalize = standard\n"
           "val_split = 0.25\nbatch_size = 100",
           in_root("norm-test.csv"));
  data d;
  open_ok(&d, "csv", csv_options("norm.csv", extra), 5);
  lk_batch b;
  one_batch(&d, LK_SPLIT_TRAIN, &b);
  assert_int_equal(b.size, 30);
  double mean = 0, var = 0;
  const float *y = b.y.data;
  for (size_t i = 0; i < b.size; i++)
    mean += y[i];
  mean /= (double)b.size;
  for (size_t i = 0; i < b.size; i++)
    var += (y[i] - mean) * (y[i] - mean);
  double sd = sqrt(var / (double)b.size);
  double cmean = 3 * mean + 1, csd = 3 * sd;
  for (int split = 0; split < 3; split++) {
    one_batch(&d, (lk_split)split, &b);
    assert_int_equal(b.size, split == LK_SPLIT_TRAIN ? 30
                             : split == LK_SPLIT_VAL ? 10
                                                     : 2);
    const float *x = b.x.data;
    y = b.y.data;
    double m0 = 0;
    for (size_t i = 0; i < b.size; i++) {
      m0 += x[i * 3];
      assert_near(x[i * 3], (y[i] - mean) / sd, 1e-6);
      double raw_b = split == LK_SPLIT_TEST && i == 0 ? 6 : 5;
      assert_float_equal(x[i * 3 + 1], raw_b - 5, 0); /* centred only */
      assert_near(x[i * 3 + 2], (3 * y[i] + 1 - cmean) / csd, 1e-6);
    }
    if (split == LK_SPLIT_TRAIN)
      assert_float_equal(m0 / (double)b.size, 0, 1e-6);
    if (split == LK_SPLIT_TEST)
      assert_true(x[0] > 50); /* 1000 with the training statistics */
  }
  close_data(&d);

  /* csv's scale: min-max per feature, also from the training part. */
  snprintf(extra, sizeof extra,
           "test = %s\nlabels = float\nnormalize = scale\nbatch_size = 100",
           in_root("norm-test.csv"));
  open_ok(&d, "csv", csv_options("norm.csv", extra), 5);
  one_batch(&d, LK_SPLIT_TRAIN, &b);
  float lo = 1, hi = 0;
  for (size_t i = 0; i < b.size; i++) {
    float v = ((float *)b.x.data)[i * 3];
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    assert_float_equal(((float *)b.x.data)[i * 3 + 1], 0, 0);
  }
  assert_float_equal(lo, 0, 0);
  assert_float_equal(hi, 1, 1e-7);
  one_batch(&d, LK_SPLIT_TEST, &b);
  assert_true(((float *)b.x.data)[0] > 10);
  close_data(&d);
}

/* idx with normalize = standard: the training part is centred per pixel. */
static void test_idx_standard(void **state) {
  (void)state;
  make_idx_dir("std", 60, 5, 3, 3, true);
  data d;
  open_ok(&d, "idx",
          idx_options("std", "normalize = standard\nbatch_size = 100\n"
                             "val_split = 0.5"),
          2);
  lk_batch b;
  one_batch(&d, LK_SPLIT_TRAIN, &b);
  assert_int_equal(b.size, 30);
  for (size_t p = 0; p < 9; p++) {
    double m = 0, v = 0;
    for (size_t i = 0; i < b.size; i++)
      m += ((float *)b.x.data)[i * 9 + p];
    m /= (double)b.size;
    for (size_t i = 0; i < b.size; i++) {
      double e = ((float *)b.x.data)[i * 9 + p] - m;
      v += e * e;
    }
    assert_float_equal(m, 0, 1e-5);
    assert_float_equal(sqrt(v / (double)b.size), 1, 1e-5);
  }
  close_data(&d);
}

/* ---- the real data set ----------------------------------------------------
 */

/* CPU time, so that other jobs on a shared machine do not count. */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_fashion_mnist(void **state) {
  (void)state;
  struct stat st;
  if (stat(FASHION_DIR, &st) != 0) {
    /* Reported as "# SKIP" through the test's name (see main). */
    assert_int_not_equal(stat(FASHION_DIR, &st), 0);
    return;
  }
  data d;
  double t0 = now();
  open_ok(&d, "idx",
          "batch_size = 1000\nshuffle = false\nnormalize = none\n"
          "dir = " FASHION_DIR,
          0);
  double took = now() - t0;
  print_message("# reading Fashion-MNIST took %.3f s of CPU\n", took);
  assert_true(took < 3.0);
  for (int split = 0; split < 3; split += 2) {
    size_t nb = 0, counts[10] = {0}, n = 0;
    assert_int_equal(d.ops->epoch(d.self, (lk_split)split, 0, &nb), 0);
    assert_int_equal(nb, split == LK_SPLIT_TRAIN ? 60 : 10);
    for (size_t k = 0; k < nb; k++) {
      lk_batch b;
      assert_int_equal(d.ops->batch(d.self, (lk_split)split, k, &b), 0);
      assert_int_equal(b.size, 1000);
      assert_int_equal(b.x.shape[1], 784);
      const float *x = b.x.data;
      const int32_t *y = b.y.data;
      for (size_t i = 0; i < b.size; i++, n++) {
        assert_in_range(y[i], 0, 9);
        counts[y[i]]++;
      }
      for (size_t i = 0; i < b.x.numel; i++)
        assert_true(x[i] >= 0 && x[i] <= 255 && x[i] == floorf(x[i]));
      if (k == 0 && split == LK_SPLIT_TRAIN) {
        /* The first training image: an ankle boot (9) whose pixels add
         * up to 76247; the next labels as in the file. */
        double sum = 0;
        for (size_t p = 0; p < 784; p++)
          sum += x[p];
        assert_float_equal(sum, 76247, 0);
        const int32_t first[] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
        assert_memory_equal(y, first, sizeof first);
      }
    }
    assert_int_equal(n, split == LK_SPLIT_TRAIN ? 60000 : 10000);
    for (int c = 0; c < 10; c++) /* balanced classes */
      assert_int_equal(counts[c], split == LK_SPLIT_TRAIN ? 6000 : 1000);
  }
  close_data(&d);

  /* The default normalization (scale) gives [0, 1]; limit reads less. */
  open_ok(&d, "idx", "limit = 500\nbatch_size = 500\ndir = " FASHION_DIR, 0);
  lk_batch b;
  one_batch(&d, LK_SPLIT_TRAIN, &b);
  float hi = 0;
  for (size_t i = 0; i < b.x.numel; i++) {
    float v = ((float *)b.x.data)[i];
    assert_true(v >= 0 && v <= 1);
    hi = v > hi ? v : hi;
  }
  assert_float_equal(hi, 1, 0);
  close_data(&d);
}

int main(void) {
  struct stat st;
  bool have = stat(FASHION_DIR, &st) == 0;
  struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idx_plain_and_gzip),
      cmocka_unit_test(test_idx_mixed_and_preferred),
      cmocka_unit_test(test_idx_missing),
      cmocka_unit_test(test_idx_wrong_magic),
      cmocka_unit_test(test_idx_truncated),
      cmocka_unit_test(test_idx_huge_header),
      cmocka_unit_test(test_idx_corrupt_gzip),
      cmocka_unit_test(test_idx_count_mismatch),
      cmocka_unit_test(test_shuffle),
      cmocka_unit_test(test_drop_last),
      cmocka_unit_test(test_val_split),
      cmocka_unit_test(test_limit),
      cmocka_unit_test(test_csv_read),
      cmocka_unit_test(test_huge_batch_size),
      cmocka_unit_test(test_csv_test_split),
      cmocka_unit_test(test_csv_bad_cells),
      cmocka_unit_test(test_csv_columns),
      cmocka_unit_test(test_csv_errors),
      cmocka_unit_test(test_normalize_overflow),
      cmocka_unit_test(test_normalize_standard),
      cmocka_unit_test(test_idx_standard),
      cmocka_unit_test(test_fashion_mnist),
  };
  /* cmocka's own skip() is "not ok ... # SKIP", a failure to automake's
   * TAP driver; a name with the directive gives "ok N - ... # SKIP why". */
  if (!have)
    tests[sizeof tests / sizeof tests[0] - 1].name =
        "test_fashion_mnist # SKIP " FASHION_DIR " is not installed "
        "(Debian: dataset-fashion-mnist)";
  return cmocka_run_group_tests(tests, setup_root, teardown_root);
}
