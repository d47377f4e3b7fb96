/* The npy data plugin: its parsers (plugins/data/npy/npy_format.c, linked in)
 * on headers and archives made here byte by byte, and on the files numpy 1.24
 * wrote (tests/data/npy, by tests/data/npy/make.py); then the plugin inside a
 * run (the probe model ignores batches), its batches' values against the files,
 * splits, shuffling and the shape it declares. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>
#include <zlib.h>

#include "../plugins/data/npy/npy_format.h"

static const char *data_dir(void) {
  const char *d = getenv("LK_TEST_DATA");
  return d && *d ? d : "tests/data";
}

/* tests/data/npy/NAME, read whole into a new buffer. */
static unsigned char *slurp(const char *name, size_t *len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/npy/%s", data_dir(), name);
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* ---- the .npy header ----------------------------------------------------- */

/* A .npy file of version MAJOR with dict DICT and DATA bytes of zeros,
 * padded as numpy pads, into BUF; returns its length. */
static size_t make_npy(unsigned char *buf, int major, const char *dict,
                       size_t data) {
  size_t fixed = major == 1 ? 10 : 12, text = strlen(dict);
  size_t pad = (64 - (fixed + text + 1) % 64) % 64;
  size_t hlen = text + pad + 1;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  for (size_t i = 0; i < fixed - 8; i++)
    buf[8 + i] = (unsigned char)(hlen >> (8 * i));
  memcpy(buf + fixed, dict, text);
  memset(buf + fixed + text, ' ', pad);
  buf[fixed + hlen - 1] = '\n';
  memset(buf + fixed + hlen, 0, data);
  return fixed + hlen + data;
}

static void header_ok(int major, const char *dict, size_t data, npy_header *h) {
  static unsigned char buf[1 << 16];
  size_t len = make_npy(buf, major, dict, data);
  char why[512] = "";
  if (npy_parse_header(buf, len, h, why, sizeof why) != 0)
    fail_msg("%s refused: %s", dict, why);
  assert_int_equal(h->offset + h->bytes, len);
}

/* The header DICT with DATA bytes after it is refused, WHY holding NEEDLE. */
static void header_refused(const char *dict, size_t data, const char *needle) {
  static unsigned char buf[1 << 16];
  size_t len = make_npy(buf, 1, dict, data);
  npy_header h;
  char why[512] = "";
  if (npy_parse_header(buf, len, &h, why, sizeof why) == 0)
    fail_msg("%s was accepted", dict);
  if (!strstr(why, needle))
    fail_msg("%s: \"%s\" lacks \"%s\"", dict, why, needle);
}

static void test_versions(void **state) {
  (void)state;
  npy_header h;
  for (int major = 1; major <= 3; major++) {
    header_ok(major,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 48,
              &h);
    assert_int_equal(h.major, major);
    assert_int_equal(h.type, NPY_F4);
    assert_false(h.big_endian);
    assert_int_equal(h.itemsize, 4);
    assert_int_equal(h.ndim, 2);
    assert_int_equal(h.shape[0], 3);
    assert_int_equal(h.shape[1], 4);
    assert_int_equal(h.numel, 12);
    assert_int_equal(h.offset % 64, 0);
  }
}

static void test_literals(void **state) {
  (void)state;
  npy_header h;
  header_ok(1, "{'descr': '>f8', 'fortran_order': False, 'shape': (), }", 8,
            &h);
  assert_int_equal(h.ndim, 0);
  assert_int_equal(h.numel, 1);
  assert_true(h.big_endian);
  header_ok(1,
            "{\"shape\": (5,), \"descr\": \"|u1\", \"fortran_order\": False}",
            5, &h);
  assert_int_equal(h.type, NPY_U1);
  assert_int_equal(h.ndim, 1);
  header_ok(1, "{'descr':'<i8','fortran_order':False,'shape':(3L, 2L)}", 48,
            &h);
  assert_int_equal(h.type, NPY_I8);
  assert_int_equal(h.shape[1], 2);
  header_ok(1,
            "  {'descr': '>i4', 'fortran_order': False, 'shape': ( 2 , 0 , ) }",
            0, &h);
  assert_int_equal(h.numel, 0);
  assert_true(h.big_endian);
  header_ok(1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, "
            "1, 1, 1, 2), }",
            8, &h);
  assert_int_equal(h.ndim, 8);
}

static void test_refusals(void **state) {
  (void)state;
  const char *ok_tail = "'fortran_order': False, 'shape': (2,), }";
  char dict[256];
  const char *bad_descr[] = {"<c8", "<f2", "|b1", "=f4", "|O", "<u8", "f4", ""};
  for (size_t i = 0; i < sizeof bad_descr / sizeof bad_descr[0]; i++) {
    snprintf(dict, sizeof dict, "{'descr': '%s', %s", bad_descr[i], ok_tail);
    char needle[64];
    snprintf(needle, sizeof needle,
             "header field 'descr': '%s' is not supported", bad_descr[i]);
    header_refused(dict, 8, needle);
  }
  header_refused(
      "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8,
      "header field 'descr': a structured dtype");
  header_refused("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                 24,
                 "header field 'fortran_order': True (a column-major (2, 3) "
                 "array) is not supported: save np.ascontiguousarray(a)");
  header_refused("{'descr': '<f4', 'fortran_order': 1, 'shape': (2,), }", 8,
                 "header field 'fortran_order': expected True or False");
  header_refused("{'descr': '<f4', 'fortran_order': False, }", 0,
                 "header field 'shape' is missing");
  header_refused("{'fortran_order': False, 'shape': (2,), }", 0,
                 "header field 'descr' is missing");
  header_refused("{'descr': '<f4', 'shape': (2,), }", 8,
                 "header field 'fortran_order' is missing");
  header_refused("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                 "'shape': (2,), }",
                 8, "header field 'descr' appears twice");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "
                 "'x': 1}",
                 8,
                 "header field 'x' is not one of descr, fortran_order, shape");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", 8,
                 "header field 'shape': (2) is not a tuple");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
                 8, "header field 'shape': expected a dimension");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 8,
                 "header field 'shape': expected a tuple");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
                 8, "header field 'shape': expected ',' or ')'");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': "
                 "(99999999999999999999,), }",
                 8, "header field 'shape': dimension 0 is too large");
  header_refused("{'descr': '<f8', 'fortran_order': False, 'shape': "
                 "(4611686018427387904, 2), }",
                 8, "holds more than 2^62 bytes");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, "
                 "1, 1, 1, 1, 1, 1), }",
                 4, "more than 8 dimensions");
  header_refused("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", 8,
                 "header field 'descr'");
  header_refused("{'descr': '<f\\4', 'fortran_order': False, 'shape': (2,)}", 8,
                 "an escape");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", 8,
                 "header: \"x");
  header_refused("['descr', '<f4']", 8, "header: expected a dict");
  header_refused("{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", 8,
                 "header field 'descr': expected ':'");
  header_refused("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", 8,
                 "expected ',' or '}' after field 'descr'");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }",
                 31,
                 "is truncated: header field 'shape' (2, 4) of '<f4' needs "
                 "32 bytes of data after the 128-byte header, there are 31");
  header_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }",
                 33,
                 "has 1 bytes after the data that header field 'shape' "
                 "(2, 4) of '<f4' describes (32 bytes)");
}

static void test_framing(void **state) {
  (void)state;
  unsigned char buf[256];
  npy_header h;
  char why[512];
  size_t len = make_npy(buf, 1,
                        "{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (2,), }",
                        8);
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), 0);
  buf[0] = 'X';
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), -1);
  assert_non_null(strstr(why, "header field 'magic'"));
  buf[0] = 0x93;
  buf[6] = 4;
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), -1);
  assert_non_null(strstr(why, "header field 'version': 4.0 is not supported"));
  buf[6] = 1;
  buf[7] = 1;
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), -1);
  assert_non_null(strstr(why, "header field 'version': 1.1"));
  buf[7] = 0;
  buf[8] = 0xff; /* header_len 0x38ff: past the file */
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), -1);
  assert_non_null(strstr(why, "header field 'header_len'"));
  for (size_t cut = 0; cut < 12; cut++) /* every short prefix: refused */
    assert_int_equal(npy_parse_header(buf, cut, &h, why, sizeof why), -1);
  /* version 2.0: a 32-bit length, bounded */
  len = make_npy(buf, 2,
                 "{'descr': '<f4', 'fortran_order': False, "
                 "'shape': (2,), }",
                 8);
  buf[10] = 0x10; /* 0x10000000 + ... bytes */
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), -1);
  assert_non_null(strstr(why, "more than the 100000 this reader takes"));
}

/* The files numpy wrote: what their headers say. */
static void test_numpy_files(void **state) {
  (void)state;
  static const struct {
    const char *name, *descr;
    int major, type;
    bool big;
    size_t ndim;
    uint64_t shape[4];
  } files[] = {
      {"x.npy", "<f4", 1, NPY_F4, false, 2, {90, 4}},
      {"x_f8.npy", "<f8", 1, NPY_F8, false, 2, {90, 4}},
      {"x_be.npy", ">f4", 1, NPY_F4, true, 2, {90, 4}},
      {"x_be8.npy", ">f8", 1, NPY_F8, true, 2, {90, 4}},
      {"x_v2.npy", "<f4", 2, NPY_F4, false, 2, {90, 4}},
      {"x_v3.npy", "<f4", 3, NPY_F4, false, 2, {90, 4}},
      {"y.npy", "<i8", 1, NPY_I8, false, 1, {90}},
      {"y_i4.npy", "<i4", 1, NPY_I4, false, 1, {90}},
      {"y_u1.npy", "|u1", 1, NPY_U1, false, 1, {90}},
      {"y_be4.npy", ">i4", 1, NPY_I4, true, 1, {90}},
      {"y_col.npy", "<i8", 1, NPY_I8, false, 2, {90, 1}},
      {"img_u1.npy", "|u1", 1, NPY_U1, false, 3, {48, 6, 6}},
      {"img_f4.npy", "<f4", 1, NPY_F4, false, 4, {48, 1, 6, 6}},
      {"bad_scalar.npy", "<f4", 1, NPY_F4, false, 0, {0}},
  };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    size_t len;
    unsigned char *buf = slurp(files[i].name, &len);
    npy_header h;
    char why[512];
    if (npy_parse_header(buf, len, &h, why, sizeof why) != 0)
      fail_msg("%s: %s", files[i].name, why);
    assert_string_equal(h.descr, files[i].descr);
    assert_int_equal(h.major, files[i].major);
    assert_int_equal(h.type, files[i].type);
    assert_int_equal(h.big_endian, files[i].big);
    assert_int_equal(h.ndim, files[i].ndim);
    for (size_t k = 0; k < h.ndim; k++)
      assert_int_equal(h.shape[k], files[i].shape[k]);
    free(buf);
  }
  /* the big-endian copy holds the same numbers, each byte-swapped */
  size_t la, lb;
  unsigned char *a = slurp("x.npy", &la), *b = slurp("x_be.npy", &lb);
  npy_header ha, hb;
  char why[512];
  assert_int_equal(npy_parse_header(a, la, &ha, why, sizeof why), 0);
  assert_int_equal(npy_parse_header(b, lb, &hb, why, sizeof why), 0);
  for (uint64_t i = 0; i < ha.numel; i++)
    for (int k = 0; k < 4; k++)
      assert_int_equal(a[ha.offset + 4 * i + (uint64_t)k],
                       b[hb.offset + 4 * i + 3 - (uint64_t)k]);
  free(a);
  free(b);
  const char *refused[][2] = {
      {"bad_c8.npy", "'descr': '<c8' is not supported"},
      {"bad_struct.npy", "structured dtype"},
      {"x_fortran.npy", "'fortran_order': True"},
      {"bad_truncated.npy", "is truncated"},
      {"bad_trailing.npy", "has 4 bytes after the data"},
      {"bad_version.npy", "'version': 9.0"},
      {"bad_hlen.npy", "'header_len': 60000 bytes"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    size_t len;
    unsigned char *buf = slurp(refused[i][0], &len);
    npy_header h;
    assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), -1);
    if (!strstr(why, refused[i][1]))
      fail_msg("%s: \"%s\" lacks \"%s\"", refused[i][0], why, refused[i][1]);
    free(buf);
  }
}

/* ---- .npz ---------------------------------------------------------------- */

static const npz_member *member(const npz_member *m, size_t n,
                                const char *name) {
  for (size_t i = 0; i < n; i++)
    if (m[i].name_len == strlen(name) && !memcmp(m[i].name, name, strlen(name)))
      return &m[i];
  return NULL;
}

static void test_npz_numpy(void **state) {
  (void)state;
  size_t ls, lc;
  unsigned char *s = slurp("data.npz", &ls), *c = slurp("data_c.npz", &lc);
  npz_member *ms, *mc;
  size_t ns, nc;
  char why[512];
  assert_int_equal(npz_parse(s, ls, &ms, &ns, why, sizeof why), 0);
  assert_int_equal(npz_parse(c, lc, &mc, &nc, why, sizeof why), 0);
  assert_int_equal(ns, 6);
  assert_int_equal(nc, 6);
  const char *names[] = {"x_train.npy", "y_train.npy", "x_val.npy",
                         "y_val.npy",   "x_test.npy",  "y_test.npy"};
  for (size_t i = 0; i < 6; i++) {
    const npz_member *a = member(ms, ns, names[i]),
                     *b = member(mc, nc, names[i]);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->method, 0);
    assert_int_equal(b->method, 8);
    assert_int_equal(a->usize, b->usize);
    assert_int_equal(a->crc, b->crc);
    /* the stored member is a .npy file; the deflated one inflates to it */
    npy_header h;
    assert_int_equal(
        npy_parse_header(s + a->offset, a->usize, &h, why, sizeof why), 0);
    unsigned char *out = malloc(b->usize);
    assert_non_null(out);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(inflateInit2(&zs, -MAX_WBITS), Z_OK);
    zs.next_in = c + b->offset;
    zs.avail_in = (uInt)b->csize;
    zs.next_out = out;
    zs.avail_out = (uInt)b->usize;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    inflateEnd(&zs);
    assert_memory_equal(out, s + a->offset, a->usize);
    assert_int_equal(crc32(0, out, (uInt)b->usize), a->crc);
    free(out);
  }
  free(ms);
  free(mc);
  /* damaged copies of the stored archive */
  npz_member *m;
  size_t n;
  assert_int_equal(npz_parse(s, ls - 1, &m, &n, why, sizeof why), -1);
  assert_non_null(strstr(why, "no end of central directory record"));
  assert_null(m);
  size_t cd = 0;
  for (size_t i = 0; i + 4 <= ls; i++)
    if (!memcmp(s + i, "PK\x01\x02", 4)) {
      cd = i;
      break;
    }
  assert_true(cd > 0);
  unsigned char *t = malloc(ls);
  assert_non_null(t);
  memcpy(t, s, ls);
  t[cd + 10] = 12; /* method: bzip2 */
  assert_int_equal(npz_parse(t, ls, &m, &n, why, sizeof why), -1);
  assert_non_null(strstr(why, "compression method 12 is not supported"));
  memcpy(t, s, ls);
  t[cd + 8] |= 1; /* encrypted */
  assert_int_equal(npz_parse(t, ls, &m, &n, why, sizeof why), -1);
  assert_non_null(strstr(why, "is encrypted"));
  memcpy(t, s, ls);
  t[cd] = 'X';
  assert_int_equal(npz_parse(t, ls, &m, &n, why, sizeof why), -1);
  assert_non_null(strstr(why, "damaged"));
  memcpy(t, s, ls);
  t[cd + 42] = 7; /* the local header's offset */
  assert_int_equal(npz_parse(t, ls, &m, &n, why, sizeof why), -1);
  assert_non_null(strstr(why, "no local header at offset 7"));
  free(t);
  free(s);
  free(c);
}

static void put(unsigned char *buf, size_t *at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++)
    buf[(*at)++] = (unsigned char)(v >> (8 * i));
}

/* A zip of one stored member NAME holding DATA, written as a zip64 writer
 * writes it when ZIP64: sizes and offset in the central entry's zip64
 * extra field, and the zip64 end of central directory record. */
static size_t make_zip(unsigned char *buf, const char *name,
                       const unsigned char *data, size_t len, bool zip64) {
  size_t at = 0, nlen = strlen(name);
  uint32_t crc = (uint32_t)crc32(0, data, (uInt)len);
#define PUT(v, k) put(buf, &at, (v), (k))
  PUT(0x04034b50u, 4);
  PUT(20, 2), PUT(0, 2), PUT(0, 2), PUT(0, 2), PUT(0, 2);
  PUT(crc, 4), PUT(len, 4), PUT(len, 4), PUT(nlen, 2), PUT(0, 2);
  memcpy(buf + at, name, nlen), at += nlen;
  memcpy(buf + at, data, len), at += len;
  size_t cd = at;
  PUT(0x02014b50u, 4);
  PUT(45, 2), PUT(45, 2), PUT(0, 2), PUT(0, 2), PUT(0, 2), PUT(0, 2);
  PUT(crc, 4);
  PUT(zip64 ? 0xffffffffu : len, 4), PUT(zip64 ? 0xffffffffu : len, 4);
  PUT(nlen, 2), PUT(zip64 ? 28 : 0, 2), PUT(0, 2), PUT(0, 2), PUT(0, 2);
  PUT(0, 4), PUT(zip64 ? 0xffffffffu : 0, 4);
  memcpy(buf + at, name, nlen), at += nlen;
  if (zip64) {
    PUT(0x0001, 2), PUT(24, 2), PUT(len, 8), PUT(len, 8), PUT(0, 8);
  }
  size_t cd_size = at - cd, end64 = at;
  if (zip64) {
    PUT(0x06064b50u, 4), PUT(44, 8), PUT(45, 2), PUT(45, 2), PUT(0, 4);
    PUT(0, 4), PUT(1, 8), PUT(1, 8), PUT(cd_size, 8), PUT(cd, 8);
    PUT(0x07064b50u, 4), PUT(0, 4), PUT(end64, 8), PUT(1, 4);
  }
  PUT(0x06054b50u, 4), PUT(0, 2), PUT(0, 2);
  PUT(zip64 ? 0xffff : 1, 2), PUT(zip64 ? 0xffff : 1, 2);
  PUT(zip64 ? 0xffffffffu : cd_size, 4), PUT(zip64 ? 0xffffffffu : cd, 4);
  PUT(0, 2);
#undef PUT
  return at;
}

static void test_npz_zip64(void **state) {
  (void)state;
  static unsigned char npy[256], zip[1024];
  size_t len = make_npy(npy, 1,
                        "{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (2,), }",
                        8);
  for (int z = 0; z < 2; z++) {
    size_t zl = make_zip(zip, "x.npy", npy, len, z);
    npz_member *m;
    size_t n;
    char why[512];
    if (npz_parse(zip, zl, &m, &n, why, sizeof why) != 0)
      fail_msg("zip64 %d: %s", z, why);
    assert_int_equal(n, 1);
    assert_int_equal(m[0].usize, len);
    assert_int_equal(m[0].offset, 30 + 5);
    assert_memory_equal(zip + m[0].offset, npy, len);
    free(m);
    /* a zip64 archive whose locator is damaged */
    if (z) {
      zip[zl - 22 - 20] = 'X';
      assert_int_equal(npz_parse(zip, zl, &m, &n, why, sizeof why), -1);
      assert_non_null(strstr(why, "locator"));
    }
  }
}

/* ---- the plugin in a run ------------------------------------------------- */

typedef struct data {
  lk_run *run;
  void *self;
  const lk_data_ops *ops;
} data;

static int try_open(data *d, const char *options, uint64_t seed) {
  char text[8192];
  snprintf(text, sizeof text,
           "[loop]\nseed = %llu\n[plugins]\nstep = probe\noptimizer = probe\n"
           "data = npy\n[npy]\n%s\n",
           (unsigned long long)seed, options);
  lk_config *cfg = NULL;
  if (lk_config_parse("test_npy.ini", text, &cfg) != 0)
    fail_msg("config:\n%s\n%s", text, lk_last_error());
  lk_run_options opts = {.no_run_dir = true};
  memset(d, 0, sizeof *d);
  int rc = lk_run_new(cfg, &opts, &d->run);
  lk_config_free(cfg);
  if (rc == 0) {
    const lk_descriptor *desc = NULL;
    d->self = lk_run_instance(d->run, "data", &desc);
    assert_non_null(desc);
    d->ops = desc->data;
  }
  return rc;
}

/* "key=NAME key=NAME" as config lines naming tests/data/npy/NAME, into
 * TEXT; returns their length. */
static size_t file_lines(const char *files, char *text, size_t cap) {
  size_t used = 0;
  text[0] = '\0';
  for (const char *p = files; *p && used < cap;) {
    const char *eq = strchr(p, '='), *end = strchr(p, ' ');
    end = end ? end : p + strlen(p);
    used += (size_t)snprintf(text + used, cap - used, "%.*s = %s/npy/%.*s\n",
                             (int)(eq - p), p, data_dir(), (int)(end - eq - 1),
                             eq + 1);
    p = *end ? end + 1 : end;
  }
  return used;
}

/* Opens npy on FILES (file_lines) with OPTIONS. */
static void open_ok(data *d, const char *files, const char *options,
                    uint64_t seed) {
  char text[6000];
  size_t used = file_lines(files, text, sizeof text);
  snprintf(text + used, sizeof text - used, "%s", options);
  if (try_open(d, text, seed) != 0)
    fail_msg("npy with\n%s\nfailed: %s", text, lk_last_error());
}

static void close_data(data *d) {
  lk_run_free(d->run);
  memset(d, 0, sizeof *d);
}

/* The float32 rows of tests/data/npy/NAME (a '<f4' file). */
static float *rows_of(const char *name, size_t *n, size_t *f) {
  size_t len;
  unsigned char *buf = slurp(name, &len);
  npy_header h;
  char why[512];
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), 0);
  assert_int_equal(h.type, NPY_F4);
  *n = (size_t)h.shape[0];
  *f = (size_t)(h.numel / h.shape[0]);
  float *x = malloc(h.bytes);
  assert_non_null(x);
  memcpy(x, buf + h.offset, h.bytes);
  free(buf);
  return x;
}

/* The int64 labels of NAME. */
static int64_t *labels_of(const char *name, size_t *n) {
  size_t len;
  unsigned char *buf = slurp(name, &len);
  npy_header h;
  char why[512];
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), 0);
  assert_int_equal(h.type, NPY_I8);
  *n = (size_t)h.numel;
  int64_t *y = malloc(h.bytes);
  assert_non_null(y);
  memcpy(y, buf + h.offset, h.bytes);
  free(buf);
  return y;
}

/* The rows of one epoch of SPLIT, identified by their x in the file's
 * rows X (N of them, F features, every row different), checked against
 * the labels Y. Returns how many samples came. */
static size_t epoch_rows(data *d, lk_split split, uint64_t epoch,
                         const float *x, const int64_t *y, size_t n, size_t f,
                         size_t *ids) {
  size_t nb = 0, got = 0;
  assert_int_equal(d->ops->epoch(d->self, split, epoch, &nb), 0);
  for (size_t b = 0; b < nb; b++) {
    lk_batch batch;
    memset(&batch, 0xff, sizeof batch);
    assert_int_equal(d->ops->batch(d->self, split, b, &batch), 0);
    assert_int_equal(batch.index, b);
    assert_int_equal(batch.epoch, epoch);
    assert_int_equal(batch.x.ndim, 2);
    assert_int_equal(batch.x.shape[1], f);
    assert_int_equal(batch.y.dtype, LK_I32);
    assert_int_equal(batch.y.ndim, 1);
    const float *bx = batch.x.data;
    const int32_t *by = batch.y.data;
    for (size_t i = 0; i < batch.size; i++) {
      size_t r = 0;
      while (r < n && memcmp(x + r * f, bx + i * f, f * sizeof(float)) != 0)
        r++;
      assert_true(r < n);
      assert_int_equal(by[i], y[r]);
      ids[got++] = r;
    }
  }
  lk_batch past;
  assert_int_equal(d->ops->batch(d->self, split, nb, &past), LK_EINVAL);
  return got;
}

static void test_file_order_and_splits(void **state) {
  (void)state;
  size_t n, f, vn, vf, tn, tf, ny;
  float *x = rows_of("x.npy", &n, &f), *vx = rows_of("val_x.npy", &vn, &vf),
        *tx = rows_of("test_x.npy", &tn, &tf);
  int64_t *y = labels_of("y.npy", &ny), *vy = labels_of("val_y.npy", &ny),
          *ty = labels_of("test_y.npy", &ny);
  size_t ids[128];
  data d;
  open_ok(&d,
          "x=x.npy y=y.npy val_x=val_x.npy val_y=val_y.npy test_x=test_x.npy "
          "test_y=test_y.npy",
          "batch_size = 16\nshuffle = false\n", 0);
  assert_int_equal(epoch_rows(&d, LK_SPLIT_TRAIN, 0, x, y, n, f, ids), 90);
  for (size_t i = 0; i < 90; i++)
    assert_int_equal(ids[i], i);
  assert_int_equal(epoch_rows(&d, LK_SPLIT_VAL, 0, vx, vy, vn, vf, ids), 30);
  for (size_t i = 0; i < 30; i++)
    assert_int_equal(ids[i], i);
  assert_int_equal(epoch_rows(&d, LK_SPLIT_TEST, 0, tx, ty, tn, tf, ids), 30);
  for (size_t i = 0; i < 30; i++)
    assert_int_equal(ids[i], i);
  lk_sample_shape s;
  assert_int_equal(d.ops->shape(d.self, &s), 0);
  assert_int_equal(s.x_dtype, LK_F32);
  assert_int_equal(s.x_ndim, 1);
  assert_int_equal(s.x_shape[0], 4);
  assert_int_equal(s.y_dtype, LK_I32);
  assert_int_equal(s.y_ndim, 0);
  assert_int_equal(s.n_classes, 3);
  close_data(&d);

  /* held out: val_split and test_split of the training file, disjoint,
   * together the whole file, the same rows every epoch */
  open_ok(
      &d, "x=x.npy y=y.npy",
      "batch_size = 7\nval_split = 0.2\ntest_split = 0.1\nnum_classes = 5\n",
      3);
  bool seen[90] = {false};
  size_t total = 0;
  for (lk_split sp = LK_SPLIT_TRAIN; sp <= LK_SPLIT_TEST; sp++) {
    size_t got = epoch_rows(&d, sp, 0, x, y, n, f, ids);
    size_t again[128];
    assert_int_equal(epoch_rows(&d, sp, 1, x, y, n, f, again), got);
    if (sp != LK_SPLIT_TRAIN) /* held-out parts: in file order, fixed */
      assert_memory_equal(ids, again, got * sizeof ids[0]);
    for (size_t i = 0; i < got; i++) {
      assert_false(seen[ids[i]]);
      seen[ids[i]] = true;
    }
    total += got;
    assert_int_equal(got, sp == LK_SPLIT_TRAIN ? 63
                          : sp == LK_SPLIT_VAL ? 18
                                               : 9);
  }
  assert_int_equal(total, 90);
  assert_int_equal(d.ops->shape(d.self, &s), 0);
  assert_int_equal(s.n_classes, 5); /* num_classes, not the largest + 1 */
  close_data(&d);
  free(x), free(vx), free(tx), free(y), free(vy), free(ty);
}

static void test_shuffle(void **state) {
  (void)state;
  size_t n, f, ny;
  float *x = rows_of("x.npy", &n, &f);
  int64_t *y = labels_of("y.npy", &ny);
  size_t e0[128], e1[128], again[128];
  data d;
  open_ok(&d, "x=x.npy y=y.npy", "batch_size = 16\n", 7);
  assert_int_equal(epoch_rows(&d, LK_SPLIT_TRAIN, 0, x, y, n, f, e0), 90);
  assert_int_equal(epoch_rows(&d, LK_SPLIT_TRAIN, 1, x, y, n, f, e1), 90);
  bool seen0[90] = {false}, seen1[90] = {false};
  for (size_t i = 0; i < 90; i++) {
    assert_false(seen0[e0[i]]);
    assert_false(seen1[e1[i]]);
    seen0[e0[i]] = seen1[e1[i]] = true;
  }
  assert_true(memcmp(e0, e1, sizeof e0[0] * 90) != 0); /* a new order */
  size_t in_order = 0;
  for (size_t i = 0; i < 90; i++)
    in_order += e0[i] == i;
  assert_true(in_order < 20);
  close_data(&d);
  /* the same seed, in another run: the same orders, in any epoch order */
  open_ok(&d, "x=x.npy y=y.npy", "batch_size = 16\n", 7);
  assert_int_equal(epoch_rows(&d, LK_SPLIT_TRAIN, 1, x, y, n, f, again), 90);
  assert_memory_equal(again, e1, sizeof e1[0] * 90);
  assert_int_equal(epoch_rows(&d, LK_SPLIT_TRAIN, 0, x, y, n, f, again), 90);
  assert_memory_equal(again, e0, sizeof e0[0] * 90);
  close_data(&d);
  /* the big-endian float64 copy and uint8 labels: the same batches */
  open_ok(&d, "x=x_be8.npy y=y_u1.npy", "batch_size = 16\n", 7);
  assert_int_equal(epoch_rows(&d, LK_SPLIT_TRAIN, 0, x, y, n, f, again), 90);
  assert_memory_equal(again, e0, sizeof e0[0] * 90);
  close_data(&d);
  free(x), free(y);
}

static void test_images(void **state) {
  (void)state;
  size_t len;
  unsigned char *buf = slurp("img_u1.npy", &len);
  npy_header h;
  char why[512];
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), 0);
  const unsigned char *px = buf + h.offset;
  const char *norms[] = {"auto", "scale", "none"};
  for (int k = 0; k < 3; k++) {
    char opt[128];
    snprintf(opt, sizeof opt,
             "batch_size = 48\nshuffle = false\nnormalize = %s\n%s", norms[k],
             k == 0 ? "x_shape = 1, 6, 6\n" : "");
    data d;
    open_ok(&d, "x=img_u1.npy y=img_y.npy", opt, 0);
    size_t nb;
    assert_int_equal(d.ops->epoch(d.self, LK_SPLIT_TRAIN, 0, &nb), 0);
    assert_int_equal(nb, 1);
    lk_batch b;
    assert_int_equal(d.ops->batch(d.self, LK_SPLIT_TRAIN, 0, &b), 0);
    assert_int_equal(b.x.shape[0], 48);
    assert_int_equal(b.x.shape[1], 36);
    const float *x = b.x.data;
    for (size_t i = 0; i < 48 * 36; i++) {
      float want = k < 2 ? (float)px[i] / 255.0f : (float)px[i];
      assert_true(x[i] == want);
    }
    for (size_t i = 0; i < 48; i++)
      assert_int_equal(((const int32_t *)b.y.data)[i], (int)(i % 2));
    lk_sample_shape s;
    assert_int_equal(d.ops->shape(d.self, &s), 0);
    if (k == 0) {
      assert_int_equal(s.x_ndim, 3);
      assert_int_equal(s.x_shape[0], 1);
      assert_int_equal(s.x_shape[1], 6);
      assert_int_equal(s.x_shape[2], 6);
    } else {
      assert_int_equal(s.x_ndim, 2);
      assert_int_equal(s.x_shape[0], 6);
      assert_int_equal(s.x_shape[1], 6);
    }
    assert_int_equal(s.n_classes, 2);
    close_data(&d);
  }
  free(buf);
}

static void test_targets(void **state) {
  (void)state;
  size_t len;
  unsigned char *buf = slurp("reg_y2.npy", &len);
  npy_header h;
  char why[512];
  assert_int_equal(npy_parse_header(buf, len, &h, why, sizeof why), 0);
  assert_int_equal(h.type, NPY_F8);
  data d;
  open_ok(&d, "x=reg_x.npy y=reg_y2.npy", "batch_size = 16\nshuffle = false\n",
          0);
  lk_sample_shape s;
  assert_int_equal(d.ops->shape(d.self, &s), 0);
  assert_int_equal(s.y_dtype, LK_F32);
  assert_int_equal(s.y_ndim, 1);
  assert_int_equal(s.y_shape[0], 2);
  assert_int_equal(s.n_classes, 0);
  size_t nb, row = 0;
  assert_int_equal(d.ops->epoch(d.self, LK_SPLIT_TRAIN, 0, &nb), 0);
  assert_int_equal(nb, 3);
  for (size_t bi = 0; bi < nb; bi++) {
    lk_batch b;
    assert_int_equal(d.ops->batch(d.self, LK_SPLIT_TRAIN, bi, &b), 0);
    assert_int_equal(b.y.dtype, LK_F32);
    assert_int_equal(b.y.ndim, 2);
    assert_int_equal(b.y.shape[0], b.size);
    assert_int_equal(b.y.shape[1], 2);
    assert_int_equal(b.y.numel, 2 * b.size);
    for (size_t i = 0; i < 2 * b.size; i++, row++) {
      double v;
      memcpy(&v, buf + h.offset + 8 * row, 8);
      assert_true(((const float *)b.y.data)[i] == (float)v);
    }
  }
  assert_int_equal(row, 80);
  close_data(&d);
  free(buf);
}

/* Refused at create: the code and every needle in the message. */
static void refused(const char *files, const char *options, int code,
                    const char *needle) {
  char text[6000];
  size_t used = file_lines(files, text, sizeof text);
  snprintf(text + used, sizeof text - used, "%s", options);
  data d;
  int rc = try_open(&d, text, 0);
  if (rc == 0) {
    close_data(&d);
    fail_msg("accepted:\n%s", text);
  }
  const char *msg = lk_last_error();
  if (rc != code || !strstr(msg, needle))
    fail_msg("code %d (expected %d), \"%s\" (expected \"%s\")", rc, code, msg,
             needle);
}

static void test_refused(void **state) {
  (void)state;
  refused("x=x.npy y=reg_y.npy", "", LK_EFORMAT,
          "x.npy has 90 samples (header field 'shape' (90, 4)) but");
  refused("x=x.npy y=y_neg.npy", "", LK_EFORMAT, "y[7] = -1");
  refused("x=x.npy y=y.npy", "num_classes = 2", LK_EFORMAT,
          "y[2] = 2, but num_classes = 2");
  refused("x=x.npy y=y_col.npy", "num_classes = 2", LK_EFORMAT, "y[2, 0] = 2");
  refused("x=x.npy y=y.npy", "x_shape = 2,2,2", LK_ECONFIG,
          "x_shape = 2,2,2 holds 8 values");
  refused("x=x.npy y=y.npy", "x_shape = 1,,4", LK_ECONFIG,
          "x_shape = \"1,,4\": expected 1 to 4 whole numbers");
  refused("x=x.npy y=y.npy", "x_shape = 1,1,1,1,4", LK_ECONFIG,
          "expected 1 to 4 whole numbers");
  refused("x=x.npy y=y.npy", "x_shape = 0,4", LK_ECONFIG,
          "expected 1 to 4 whole numbers");
  refused("x=x.npy y=y.npy", "val_split = 0.5\ntest_split = 0.5", LK_ECONFIG,
          "leave none for training");
  refused("x=x.npy y=y.npy", "drop_last = true\nbatch_size = 91", LK_ECONFIG,
          "drop_last with batch_size = 91 leaves no batch");
  refused("x=data.npz", "val_split = 0.1", LK_ECONFIG,
          "val_split = 0.1 and a validation pair (x_val and y_val in ");
  refused("x=data_c.npz", "test_split = 0.1", LK_ECONFIG,
          "test_split = 0.1 and a test pair (x_test and y_test in ");
}

static void test_nan_in_a_batch(void **state) {
  (void)state;
  data d;
  open_ok(&d, "x=x_nan.npy y=y.npy", "batch_size = 8\nshuffle = false\n", 0);
  size_t nb;
  assert_int_equal(d.ops->epoch(d.self, LK_SPLIT_TRAIN, 0, &nb), 0);
  lk_batch b;
  assert_int_equal(d.ops->batch(d.self, LK_SPLIT_TRAIN, 1, &b), 0);
  assert_int_equal(d.ops->batch(d.self, LK_SPLIT_TRAIN, 0, &b), LK_EFORMAT);
  assert_non_null(
      strstr(lk_last_error(), "x_nan.npy: x[7, 2] = nan is not finite"));
  close_data(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_versions),
      cmocka_unit_test(test_literals),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_framing),
      cmocka_unit_test(test_numpy_files),
      cmocka_unit_test(test_npz_numpy),
      cmocka_unit_test(test_npz_zip64),
      cmocka_unit_test(test_file_order_and_splits),
      cmocka_unit_test(test_shuffle),
      cmocka_unit_test(test_images),
      cmocka_unit_test(test_targets),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_nan_in_a_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
