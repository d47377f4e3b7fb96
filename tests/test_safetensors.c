/* The safetensors reader and writer (src/store/safetensors.c): round trips of
 * every dtype with metadata, the JSON grammar (escapes, surrogates, UTF-8,
 * numbers), and each way a header can lie (offsets out of bounds, sizes
 * that are not dtype * shape, unknown dtypes, holes, overlaps, truncation,
 * duplicate names), every refusal naming the file and the tensor. The
 * format code is private, so this test links the library's objects. */
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

#include "../src/store/safetensors.h"

#define NAME "mem.safetensors"

/* A file: the 8-byte length of JSON, JSON, then LEN bytes of DATA. */
static unsigned char *mk(const char *json, const void *data, size_t len,
                         size_t *out_len) {
  size_t n = strlen(json);
  unsigned char *buf = malloc(8 + n + len + 1);
  assert_non_null(buf);
  for (int i = 0; i < 8; i++)
    buf[i] = (unsigned char)((uint64_t)n >> (8 * i));
  memcpy(buf + 8, json, n);
  if (len)
    memcpy(buf + 8 + n, data, len);
  *out_len = 8 + n + len;
  return buf;
}

/* Parses JSON + LEN zero bytes of data; returns the code, and the file in
 * *OUT when accepted (the buffer in *KEEP, to free after it). */
static int parse_json(const char *json, size_t len, lk__st_file **out,
                      unsigned char **keep) {
  unsigned char *zeros = calloc(1, len + 1);
  assert_non_null(zeros);
  size_t n;
  unsigned char *buf = mk(json, zeros, len, &n);
  free(zeros);
  lk__st_file *f = NULL;
  int rc = lk__st_parse(NAME, buf, n, &f);
  if (out && rc == 0) {
    *out = f;
    *keep = buf;
    return rc;
  }
  lk__st_free(f);
  free(buf);
  return rc;
}

/* JSON with LEN data bytes is refused with LK_EFORMAT, the message naming
 * the file and holding each of the NULL-terminated WANT. */
static void refused(const char *json, size_t len, ...) {
  int rc = parse_json(json, len, NULL, NULL);
  const char *msg = lk_last_error();
  if (rc != LK_EFORMAT)
    fail_msg("accepted or wrong code %d: %s\n  for %s", rc, msg, json);
  if (strncmp(msg, NAME ": ", strlen(NAME ": ")) != 0)
    fail_msg("message does not start with the file: %s", msg);
  va_list ap;
  va_start(ap, len);
  for (const char *w; (w = va_arg(ap, const char *));)
    if (!strstr(msg, w))
      fail_msg("message \"%s\" lacks \"%s\"", msg, w);
  va_end(ap);
}

static void accepted(const char *json, size_t len) {
  lk__st_file *f;
  unsigned char *buf;
  int rc = parse_json(json, len, &f, &buf);
  if (rc != 0)
    fail_msg("refused %s: %s", json, lk_last_error());
  lk__st_free(f);
  free(buf);
}

/* ---- round trips -------------------------------------------------------- */

static void round_trip_every_dtype(void **state) {
  (void)state;
  char path[] = "/tmp/lk-test-st-XXXXXX";
  assert_non_null(mkdtemp(path));
  char file[64];
  snprintf(file, sizeof file, "%s/w.safetensors", path);
  float w[6] = {1.5f, -2.25f, 3, 0, -0.0f, 1e-30f};
  double b[2] = {0.1, -1e300};
  uint16_t h[3] = {0x3c00, 0xc000, 0x7bff};
  int64_t i64[2] = {-1, INT64_MAX};
  unsigned char u8[5] = {0, 1, 2, 254, 255};
  uint64_t sw[2] = {2, 3}, sb[1] = {2}, sh[1] = {3}, si[2] = {1, 2},
           su[1] = {5}, sz[2] = {0, 7};
  lk__st_item items[] = {
      {"layer0.weight", LK__ST_F32, 2, sw, w, true},
      {"layer0.bias", LK__ST_F64, 1, sb, b, true},
      {"half", LK__ST_F16, 1, sh, h, true},
      {"ids", LK__ST_I64, 2, si, i64, true},
      {"bytes \"q\" \xc3\xa9\xf0\x9f\x98\x80\n", LK__ST_U8, 1, su, u8, true},
      {"empty", LK__ST_BF16, 2, sz, NULL, true},
      {"scalar", LK__ST_F32, 0, NULL, w, true},
  };
  lk__st_meta meta[] = {{"format", "pt"}, {"plugin", "mlp"}, {"step", "12"}};
  size_t n = sizeof items / sizeof items[0];
  assert_int_equal(lk__st_write(file, items, n, meta, 3), 0);

  lk__st_file *f;
  assert_int_equal(lk__st_read(file, &f), 0);
  assert_int_equal(f->n, n);
  assert_int_equal(f->n_meta, 3);
  assert_string_equal(lk__st_meta_get(f, "plugin"), "mlp");
  assert_string_equal(lk__st_meta_get(f, "step"), "12");
  assert_null(lk__st_meta_get(f, "nope"));
  /* The data buffer starts 8-byte aligned in the file. */
  assert_int_equal((f->tensors[0].data - (const unsigned char *)f->map) % 8, 0);
  for (size_t i = 0; i < n; i++) {
    const lk__st_tensor *t = lk__st_find(f, items[i].name);
    assert_non_null(t);
    assert_string_equal(t->name, items[i].name);
    assert_int_equal(t->dtype, items[i].dtype);
    assert_int_equal(t->ndim, items[i].ndim);
    uint64_t numel = 1;
    for (size_t d = 0; d < t->ndim; d++) {
      assert_int_equal(t->shape[d], items[i].shape[d]);
      numel *= t->shape[d];
    }
    assert_int_equal(t->numel, numel);
    size_t bytes = (size_t)numel * lk__st_dtype_size(t->dtype);
    assert_int_equal(t->end - t->begin, bytes);
    if (bytes) /* little-endian on disk = the host's bytes here (x86) */
      assert_memory_equal(t->data, items[i].data, bytes);
  }
  assert_null(lk__st_find(f, "layer0"));
  lk__st_free(f);
  unlink(file);
  rmdir(path);
}

static void write_refuses_what_reader_would(void **state) {
  (void)state;
  uint64_t s[1] = {1};
  float v = 1;
  lk__st_item dup[] = {{"a", LK__ST_F32, 1, s, &v, true},
                       {"a", LK__ST_F32, 1, s, &v, true}};
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(lk__st_write_stream(f, "x", dup, 2, NULL, 0), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "tensor \"a\" given twice"));
  lk__st_item meta_name[] = {{"__metadata__", LK__ST_F32, 1, s, &v, true}};
  assert_int_equal(lk__st_write_stream(f, "x", meta_name, 1, NULL, 0),
                   LK_EINVAL);
  lk__st_item bad_utf8[] = {{"\xff", LK__ST_F32, 1, s, &v, true}};
  assert_int_equal(lk__st_write_stream(f, "x", bad_utf8, 1, NULL, 0),
                   LK_EINVAL);
  uint64_t huge[2] = {UINT64_MAX / 2, 3};
  lk__st_item big[] = {{"big", LK__ST_F32, 2, huge, &v, true}};
  assert_int_equal(lk__st_write_stream(f, "x", big, 1, NULL, 0), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "\"big\" is too large"));
  lk__st_meta m[] = {{"k", "1"}, {"k", "2"}};
  assert_int_equal(lk__st_write_stream(f, "x", NULL, 0, m, 2), LK_EINVAL);
  fclose(f);
}

/* An atomic write leaves no temporary file, and a failed one no file. */
static void write_is_atomic(void **state) {
  (void)state;
  char dir[] = "/tmp/lk-test-st-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char file[64];
  snprintf(file, sizeof file, "%s/out.safetensors", dir);
  uint64_t s[1] = {1};
  float v = 1;
  lk__st_item dup[] = {{"a", LK__ST_F32, 1, s, &v, true},
                       {"a", LK__ST_F32, 1, s, &v, true}};
  assert_int_equal(lk__st_write(file, dup, 2, NULL, 0), LK_EINVAL);
  struct stat st;
  assert_int_not_equal(stat(file, &st), 0);
  assert_int_equal(lk__st_write(file, dup, 1, NULL, 0), 0);
  assert_int_equal(stat(file, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0644);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", dir);
  assert_int_equal(system(cmd), 0);
  unlink(file);
  rmdir(dir);
}

/* ---- what the reader accepts ------------------------------------------- */

static void accepts_the_grammar(void **state) {
  (void)state;
  accepted("{}", 0);
  accepted("{}    ", 0);    /* the reference writer's padding */
  accepted("{} \t\r\n", 0); /* any JSON blank after the object */
  accepted("{\"__metadata__\":{}}", 0);
  accepted("{ \"a\" : { \"dtype\" : \"F32\" , \"shape\" : [ 2 ] , "
           "\"data_offsets\" : [ 0 , 8 ] } }",
           8);
  /* Fields in any order, tensors in any order of offsets. */
  accepted("{\"b\":{\"data_offsets\":[4,8],\"shape\":[1],\"dtype\":\"I32\"},"
           "\"a\":{\"shape\":[],\"dtype\":\"F32\",\"data_offsets\":[0,4]}}",
           8);
  /* Empty tensors anywhere, even sharing an offset. */
  accepted("{\"e\":{\"dtype\":\"F64\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
           "\"f\":{\"dtype\":\"F64\",\"shape\":[3,0],\"data_offsets\":[0,0]},"
           "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
           1);
  /* A shape whose product overflows is fine when a dimension is 0. */
  accepted("{\"z\":{\"dtype\":\"F64\",\"shape\":[0,18446744073709551615,"
           "18446744073709551615],\"data_offsets\":[0,0]}}",
           0);
}

static void decodes_strings(void **state) {
  (void)state;
  lk__st_file *f;
  unsigned char *buf;
  assert_int_equal(
      parse_json(
          "{\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\xc3\xa9\":"
          "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
          "\"__metadata__\":{\"k\\u0041\":\"v\\u20ac\"}}",
          1, &f, &buf),
      0);
  assert_int_equal(f->n, 1);
  assert_string_equal(f->tensors[0].name,
                      "a\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\xc3\xa9");
  assert_string_equal(lk__st_meta_get(f, "kA"), "v\xe2\x82\xac");
  lk__st_free(f);
  free(buf);
}

/* ---- what it refuses ---------------------------------------------------- */

static void refuses_bad_lengths(void **state) {
  (void)state;
  unsigned char tiny[5] = {0};
  lk__st_file *f = NULL;
  assert_int_equal(lk__st_parse(NAME, tiny, sizeof tiny, &f), LK_EFORMAT);
  assert_non_null(strstr(lk_last_error(), NAME ": 5 bytes, too short"));
  assert_null(f);
  unsigned char big[16] = {0};
  big[3] = 0x10; /* 256 MiB of header */
  assert_int_equal(lk__st_parse(NAME, big, sizeof big, &f), LK_EFORMAT);
  assert_non_null(strstr(lk_last_error(), "more than the 104857600 bytes"));
  memset(big, 0, sizeof big);
  big[0] = 9; /* 9 bytes of header, 8 in the file */
  assert_int_equal(lk__st_parse(NAME, big, sizeof big, &f), LK_EFORMAT);
  assert_non_null(
      strstr(lk_last_error(), "header length 9 goes past the end of the file"));
  refused("", 0, "header byte 8: the header must start with '{'", NULL);
  refused(" {}", 0, "must start with '{'", NULL);
}

static void refuses_bad_json(void **state) {
  (void)state;
  refused("{", 0, "header byte 9: expected '\"'", NULL);
  refused("{\"a\"", 0, "expected ':', found the end of the header", NULL);
  refused("{}x", 0, "another character after the header's object", NULL);
  refused("{},", 0, "',' after the header's object", NULL);
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}",
          4, "expected '\"', found '}'", NULL);
  refused("{\"a\":[]}", 0, "tensor \"a\": expected '{', found '['", NULL);
  refused("{\"w\":{\"dtype\" \"F32\"}}", 0,
          "header byte 22: tensor \"w\": expected ':', found '\"'", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
          "\"x\" 1}",
          0, "header byte 66: tensor \"x\": expected ':', found a digit", NULL);
  /* Between tensors, none is named. */
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]} "
          "\"x\":{}}",
          0, "header byte 62: expected '}', found '\"'", NULL);
  refused("{'a':{}}", 0, "expected '\"'", NULL);
  refused("{\"a\x01\":{}}", 0, "control byte 0x01", NULL);
  refused("{\"\xff\":{}}", 0, "invalid UTF-8", NULL);
  refused("{\"\xc0\xaf\":{}}", 0, "invalid UTF-8", NULL);     /* overlong */
  refused("{\"\xed\xa0\x80\":{}}", 0, "invalid UTF-8", NULL); /* surrogate */
  refused("{\"\xf4\x90\x80\x80\":{}}", 0, "invalid UTF-8", NULL); /* > 10FFFF */
  refused("{\"\xe2\x82\":{}}", 0, "invalid UTF-8", NULL);         /* cut */
  refused("{\"\\x\":{}}", 0, "unknown escape \\x", NULL);
  refused("{\"\\u12\":{}}", 0, "four hex digits", NULL);
  refused("{\"\\u0000\":{}}", 0, "\\u0000", NULL);
  refused("{\"\\udc00\":{}}", 0, "low surrogate without a high one", NULL);
  refused("{\"\\ud800x\":{}}", 0, "high surrogate without a low one", NULL);
  refused("{\"\\ud800\\u0041\":{}}", 0, "high surrogate without a low", NULL);
  refused("{\"abc", 0, "runs past the end of the header", NULL);
  refused("{\"abc\\", 0, "runs past the end of the header", NULL);
  refused("{\"__metadata__\":{\"k\":1}}", 0,
          "__metadata__ \"k\": the value must be a string", NULL);
  refused("{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0,
          "__metadata__ key \"k\" appears twice", NULL);
  refused("{\"__metadata__\":{},\"__metadata__\":{}}", 0,
          "__metadata__ appears twice", NULL);
  refused("{\"__metadata__\":[]}", 0, "expected '{'", NULL);
}

static void refuses_lying_tensors(void **state) {
  (void)state;
  /* Fields. */
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0,
          "tensor \"w\": no data_offsets field", NULL);
  refused("{\"w\":{}}", 0, "tensor \"w\": no dtype field", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4,
          "tensor \"w\": no shape field", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", 0,
          "tensor \"w\": field dtype appears twice", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"strides\":[1]}}", 0,
          "tensor \"w\": unknown field \"strides\"", NULL);
  /* dtype */
  refused("{\"w\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
          "tensor \"w\": dtype \"F31\" is not a dtype this reader knows", NULL);
  refused("{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
          "tensor \"w\": dtype \"f32\"", NULL);
  refused("{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
          "expected '\"', found a digit", NULL);
  /* shape */
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
          4, "tensor \"w\": shape: a negative number", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}",
          4, "tensor \"w\": shape: expected an integer, found a fraction",
          NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}",
          4, "tensor \"w\": shape: expected an integer", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}",
          4, "tensor \"w\": shape: a number with a leading zero", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],"
          "\"data_offsets\":[0,4]}}",
          4, "tensor \"w\": shape: a number beyond 2^64", NULL);
  refused(
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
      "tensor \"w\": shape: expected a non-negative integer, found '\"'", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
          "\"data_offsets\":[0,4]}}",
          4, "tensor \"w\": shape has more than 8 dimensions", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
          "\"data_offsets\":[0,0]}}",
          0,
          "tensor \"w\": shape [4294967296, 4294967296] of F32: more bytes "
          "than 2^64",
          NULL);
  refused("{\"w\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],"
          "\"data_offsets\":[0,0]}}",
          0, "tensor \"w\": shape [2305843009213693952] of F64: more bytes",
          NULL);
  /* Sizes that are not dtype * shape. */
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}",
          20,
          "tensor \"w\": data_offsets [0, 20] hold 20 bytes, but shape "
          "[2, 3] of F32 needs 24",
          NULL);
  refused("{\"w\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,12]}}",
          12, "shape [3] of BF16 needs 6", NULL);
  /* Offsets. */
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
          "tensor \"w\": data_offsets: expected two numbers", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}",
          4, "tensor \"w\": data_offsets: expected two numbers", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8,
          "tensor \"w\": data_offsets [8, 4]: the end is before the beginning",
          NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
          "tensor \"w\": data_offsets [0, 8] go past the end of the data "
          "buffer (4 bytes",
          NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":"
          "[18446744073709551612,18446744073709551616]}}",
          4, "tensor \"w\": data_offsets: a number beyond 2^64", NULL);
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":"
          "[18446744073709551611,18446744073709551615]}}",
          4,
          "tensor \"w\": data_offsets [18446744073709551611, "
          "18446744073709551615] go past the end",
          NULL);
}

static void refuses_holes_and_overlaps(void **state) {
  (void)state;
  /* A hole at the start, between two tensors, and at the end. */
  refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
          "tensor \"w\": data_offsets [4, 8] leave a hole: bytes [0, 4)", NULL);
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
          12, "tensor \"b\": data_offsets [8, 12] leave a hole: bytes [4, 8)",
          NULL);
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6,
          "2 bytes after the last tensor \"a\": the data buffer has 6 bytes, "
          "the tensors cover 4",
          NULL);
  refused("{}", 3, "3 bytes after the last tensor: the data buffer has 3",
          NULL);
  /* Overlaps: the same bytes twice, and a partial one. */
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
          4, "data_offsets [0, 4] overlap tensor", "which ends at 4", NULL);
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
          12,
          "tensor \"b\": data_offsets [4, 12] overlap tensor \"a\", which "
          "ends at 8",
          NULL);
  /* Truncated: the header says more data than the file holds. */
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
          10,
          "tensor \"a\": data_offsets [0, 16] go past the end of the data "
          "buffer (10 bytes: the file is truncated",
          NULL);
}

static void refuses_duplicate_names(void **state) {
  (void)state;
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
          8, "tensor \"a\": the name appears twice in the header", NULL);
  /* The same name spelt with an escape is the same name. */
  refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"\\u0061\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":"
          "[4,8]}}",
          8, "tensor \"a\": the name appears twice", NULL);
}

/* A name in a message cannot drive the terminal and stays short. */
static void messages_quote_names(void **state) {
  (void)state;
  refused("{\"a\\u001b[31m\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":"
          "[0,0]}}",
          0, "tensor \"a\\x1b[31m\": dtype \"X\"", NULL);
  char json[600];
  char name[301];
  memset(name, 'n', 300);
  name[300] = '\0';
  snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"X\"}}", name);
  refused(json, 0, "...\": dtype", NULL);
  /* Escapes up to the cut (fuzz_safetensors found the quote written one
   * past the buffer). */
  for (size_t k = 0; k < 6; k++) {
    size_t o = 0;
    for (size_t i = 0; i < k; i++)
      name[o++] = 'n';
    for (size_t i = 0; i < 60; i++) {
      name[o++] = '\\';
      name[o++] = '\\';
    }
    name[o] = '\0';
    snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"X\"}}", name);
    refused(json, 0, "\\x5c...\": dtype", NULL);
  }
}

static void reads_files(void **state) {
  (void)state;
  lk__st_file *f = NULL;
  assert_int_equal(lk__st_read("/nonexistent/x.safetensors", &f), LK_ENOTFOUND);
  assert_non_null(strstr(lk_last_error(), "/nonexistent/x.safetensors"));
  assert_int_equal(lk__st_read("/dev/null", &f), LK_EIO);
  assert_non_null(strstr(lk_last_error(), "not a regular file"));
  char path[] = "/tmp/lk-test-st-empty-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(lk__st_read(path, &f), LK_EFORMAT);
  assert_non_null(strstr(lk_last_error(), "0 bytes, too short"));
  assert_non_null(strstr(lk_last_error(), path));
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip_every_dtype),
      cmocka_unit_test(write_refuses_what_reader_would),
      cmocka_unit_test(write_is_atomic),
      cmocka_unit_test(accepts_the_grammar),
      cmocka_unit_test(decodes_strings),
      cmocka_unit_test(refuses_bad_lengths),
      cmocka_unit_test(refuses_bad_json),
      cmocka_unit_test(refuses_lying_tensors),
      cmocka_unit_test(refuses_holes_and_overlaps),
      cmocka_unit_test(refuses_duplicate_names),
      cmocka_unit_test(messages_quote_names),
      cmocka_unit_test(reads_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
