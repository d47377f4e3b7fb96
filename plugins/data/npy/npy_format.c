/* The .npy header and the .npz directory, from memory (npy_format.h). */
#include "npy_format.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/tensor.h>

static int why_set(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int why_set(char *why, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (why && len)
    vsnprintf(why, len, fmt, ap);
  va_end(ap);
  return -1;
}

/* ---- .npy ---------------------------------------------------------------- */

/* The header's dict, with the position of the parse. */
typedef struct dict_in {
  const char *p, *end;
  char *why;
  size_t why_len;
} dict_in;

static void skip_space(dict_in *in) {
  while (in->p < in->end &&
         (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r'))
    in->p++;
}

/* What is at P, quoted for a message: up to 16 printable characters. */
static const char *near(const dict_in *in, char *buf, size_t len) {
  size_t i = 0;
  const char *p = in->p;
  if (p >= in->end)
    return "the end of the header";
  buf[i++] = '"';
  while (p < in->end && i + 5 < len && i < 17) {
    unsigned char c = (unsigned char)*p++;
    buf[i++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
  }
  if (p < in->end && i + 4 < len) {
    memcpy(buf + i, "...", 3);
    i += 3;
  }
  buf[i++] = '"';
  buf[i] = '\0';
  return buf;
}

/* A Python string literal, '...' or "...", without escapes, of at most
 * CAP - 1 characters into OUT. */
static int string_lit(dict_in *in, const char *what, char *out, size_t cap) {
  char b[32];
  if (in->p >= in->end || (*in->p != '\'' && *in->p != '"'))
    return why_set(in->why, in->why_len, "%s: expected a quoted string at %s",
                   what, near(in, b, sizeof b));
  char q = *in->p++;
  const char *start = in->p;
  while (in->p < in->end && *in->p != q) {
    unsigned char c = (unsigned char)*in->p;
    if (c == '\\' || c < 0x20 || c >= 0x7f)
      return why_set(in->why, in->why_len,
                     "%s: a string with an escape or a character outside "
                     "printable ASCII",
                     what);
    in->p++;
  }
  if (in->p >= in->end)
    return why_set(in->why, in->why_len, "%s: a string without its closing %c",
                   what, q);
  size_t n = (size_t)(in->p - start);
  in->p++;
  if (n >= cap)
    return why_set(in->why, in->why_len, "%s: '%.24s%s' is too long", what,
                   start, n > 24 ? "..." : "");
  memcpy(out, start, n);
  out[n] = '\0';
  return 0;
}

/* The dtypes read, by descr. */
static const struct {
  const char *descr;
  int type;
  bool big;
  size_t size;
} descrs[] = {{"<f4", NPY_F4, false, 4}, {">f4", NPY_F4, true, 4},
              {"<f8", NPY_F8, false, 8}, {">f8", NPY_F8, true, 8},
              {"|u1", NPY_U1, false, 1}, {"<u1", NPY_U1, false, 1},
              {">u1", NPY_U1, false, 1}, {"<i4", NPY_I4, false, 4},
              {">i4", NPY_I4, true, 4},  {"<i8", NPY_I8, false, 8},
              {">i8", NPY_I8, true, 8}};

static int descr_value(dict_in *in, npy_header *h) {
  const char *what = "header field 'descr'";
  if (in->p < in->end && *in->p == '[')
    return why_set(in->why, in->why_len,
                   "%s: a structured dtype (a list of fields) is not "
                   "supported: save each field as an array of its own",
                   what);
  char s[32];
  if (string_lit(in, what, s, sizeof s) != 0)
    return -1;
  for (size_t i = 0; i < sizeof descrs / sizeof descrs[0]; i++)
    if (strcmp(s, descrs[i].descr) == 0) {
      h->type = descrs[i].type;
      h->big_endian = descrs[i].big;
      h->itemsize = descrs[i].size;
      memcpy(h->descr, descrs[i].descr, 4); /* three characters and NUL */
      return 0;
    }
  return why_set(in->why, in->why_len,
                 "%s: '%s' is not supported (float32, float64, uint8, int32, "
                 "int64: '<f4', '<f8', '|u1', '<i4', '<i8', or '>' for "
                 "big-endian)",
                 what, s);
}

static int bool_value(dict_in *in, bool *out) {
  const char *what = "header field 'fortran_order'";
  size_t left = (size_t)(in->end - in->p);
  if (left >= 4 && memcmp(in->p, "True", 4) == 0)
    *out = true, in->p += 4;
  else if (left >= 5 && memcmp(in->p, "False", 5) == 0)
    *out = false, in->p += 5;
  else {
    char b[32];
    return why_set(in->why, in->why_len, "%s: expected True or False at %s",
                   what, near(in, b, sizeof b));
  }
  return 0;
}

/* A tuple of non-negative integers: (), (3,), (3, 4) (a Python 2 file's
 * 3L as well). */
static int shape_value(dict_in *in, npy_header *h) {
  const char *what = "header field 'shape'";
  char b[32];
  if (in->p >= in->end || *in->p != '(')
    return why_set(in->why, in->why_len, "%s: expected a tuple at %s", what,
                   near(in, b, sizeof b));
  in->p++;
  h->ndim = 0;
  for (;;) {
    skip_space(in);
    if (in->p < in->end && *in->p == ')')
      break;
    if (in->p >= in->end || *in->p < '0' || *in->p > '9')
      return why_set(in->why, in->why_len,
                     "%s: expected a dimension (a whole number >= 0) at %s",
                     what, near(in, b, sizeof b));
    uint64_t v = 0;
    while (in->p < in->end && *in->p >= '0' && *in->p <= '9') {
      unsigned d = (unsigned)(*in->p++ - '0');
      if (v > (UINT64_MAX - d) / 10 || v * 10 + d > ((uint64_t)1 << 62))
        return why_set(in->why, in->why_len,
                       "%s: dimension %zu is too large (more than 2^62)", what,
                       h->ndim);
      v = v * 10 + d;
    }
    if (in->p < in->end && (*in->p == 'L' || *in->p == 'l'))
      in->p++;
    if (h->ndim == NPY_MAX_DIMS)
      return why_set(in->why, in->why_len,
                     "%s: more than %d dimensions are not supported", what,
                     NPY_MAX_DIMS);
    h->shape[h->ndim++] = v;
    skip_space(in);
    if (in->p < in->end && *in->p == ',') {
      in->p++;
      continue;
    }
    if (in->p < in->end && *in->p == ')') {
      if (h->ndim == 1) /* (3) is an int in Python, not a tuple */
        return why_set(in->why, in->why_len,
                       "%s: (%llu) is not a tuple (a tuple of one is (%llu,))",
                       what, (unsigned long long)v, (unsigned long long)v);
      break;
    }
    return why_set(in->why, in->why_len, "%s: expected ',' or ')' at %s", what,
                   near(in, b, sizeof b));
  }
  in->p++; /* ')' */
  return 0;
}

/* The dict: exactly the three keys, each once, in any order. */
static int parse_dict(dict_in *in, npy_header *h, bool *fortran) {
  enum { DESCR = 1, FORTRAN = 2, SHAPE = 4 };
  unsigned seen = 0;
  char b[32];
  skip_space(in);
  if (in->p >= in->end || *in->p != '{')
    return why_set(in->why, in->why_len, "header: expected a dict ('{') at %s",
                   near(in, b, sizeof b));
  in->p++;
  for (;;) {
    skip_space(in);
    if (in->p < in->end && *in->p == '}')
      break;
    char key[32];
    if (string_lit(in, "header: a key", key, sizeof key) != 0)
      return -1;
    unsigned k = strcmp(key, "descr") == 0           ? DESCR
                 : strcmp(key, "fortran_order") == 0 ? FORTRAN
                 : strcmp(key, "shape") == 0         ? SHAPE
                                                     : 0;
    if (!k)
      return why_set(in->why, in->why_len,
                     "header field '%s' is not one of descr, fortran_order, "
                     "shape",
                     key);
    if (seen & k)
      return why_set(in->why, in->why_len, "header field '%s' appears twice",
                     key);
    seen |= k;
    skip_space(in);
    if (in->p >= in->end || *in->p != ':')
      return why_set(in->why, in->why_len,
                     "header field '%s': expected ':' at %s", key,
                     near(in, b, sizeof b));
    in->p++;
    skip_space(in);
    int rc = k == DESCR     ? descr_value(in, h)
             : k == FORTRAN ? bool_value(in, fortran)
                            : shape_value(in, h);
    if (rc != 0)
      return rc;
    skip_space(in);
    if (in->p < in->end && *in->p == ',') {
      in->p++;
      continue;
    }
    if (in->p < in->end && *in->p == '}')
      break;
    return why_set(in->why, in->why_len,
                   "header: expected ',' or '}' after field '%s' at %s", key,
                   near(in, b, sizeof b));
  }
  in->p++; /* '}' */
  skip_space(in);
  if (in->p < in->end)
    return why_set(in->why, in->why_len, "header: %s after the dict",
                   near(in, b, sizeof b));
  const char *missing = !(seen & DESCR)     ? "descr"
                        : !(seen & FORTRAN) ? "fortran_order"
                        : !(seen & SHAPE)   ? "shape"
                                            : NULL;
  if (missing)
    return why_set(in->why, in->why_len, "header field '%s' is missing",
                   missing);
  return 0;
}

const char *npy_shape_text(const npy_header *h, char *buf, size_t len) {
  int used = snprintf(buf, len, "(");
  for (size_t i = 0; i < h->ndim && used > 0 && (size_t)used < len; i++)
    used += snprintf(buf + used, len - (size_t)used, "%s%llu", i ? ", " : "",
                     (unsigned long long)h->shape[i]);
  if (used > 0 && (size_t)used < len)
    snprintf(buf + used, len - (size_t)used, "%s)", h->ndim == 1 ? "," : "");
  return buf;
}

static uint32_t le16(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}
static uint32_t le32(const unsigned char *p) {
  return le16(p) | (uint32_t)le16(p + 2) << 16;
}
static uint64_t le64(const unsigned char *p) {
  return le32(p) | (uint64_t)le32(p + 4) << 32;
}

int npy_parse_header(const unsigned char *buf, size_t len, npy_header *h,
                     char *why, size_t why_len) {
  memset(h, 0, sizeof *h);
  if (len < 6 || memcmp(buf, "\x93NUMPY", 6) != 0)
    return why_set(why, why_len,
                   "header field 'magic': not a .npy file (it does not start "
                   "with \\x93NUMPY)");
  if (len < 10)
    return why_set(why, why_len,
                   "is truncated: %zu bytes, shorter than a .npy header", len);
  h->major = buf[6];
  h->minor = buf[7];
  if ((h->major != 1 && h->major != 2 && h->major != 3) || h->minor != 0)
    return why_set(why, why_len,
                   "header field 'version': %d.%d is not supported (1.0, 2.0, "
                   "3.0)",
                   h->major, h->minor);
  size_t at = h->major == 1 ? 10 : 12;
  if (len < at)
    return why_set(why, why_len,
                   "is truncated: %zu bytes, shorter than a version %d.0 "
                   "header",
                   len, h->major);
  uint64_t hlen = h->major == 1 ? le16(buf + 8) : le32(buf + 8);
  if (hlen > NPY_MAX_HEADER)
    return why_set(why, why_len,
                   "header field 'header_len': %llu bytes, more than the %d "
                   "this reader takes",
                   (unsigned long long)hlen, NPY_MAX_HEADER);
  if (hlen > len - at)
    return why_set(why, why_len,
                   "header field 'header_len': %llu bytes, but the file has "
                   "%zu after the %zu before it",
                   (unsigned long long)hlen, len - at, at);
  h->offset = at + hlen;
  dict_in in = {(const char *)buf + at, (const char *)buf + at + hlen, why,
                why_len};
  bool fortran = false;
  if (parse_dict(&in, h, &fortran) != 0)
    return -1;
  char shape[200];
  npy_shape_text(h, shape, sizeof shape);
  if (fortran) /* numpy writes True only for arrays that are not C order */
    return why_set(why, why_len,
                   "header field 'fortran_order': True (a column-major %s "
                   "array) is not supported: save np.ascontiguousarray(a) "
                   "instead",
                   shape);
  size_t numel = 1, bytes = 0;
  for (size_t i = 0; i < h->ndim && numel; i++)
    if (h->shape[i] > SIZE_MAX ||
        !lk_size_mul(numel, (size_t)h->shape[i], &numel))
      numel = SIZE_MAX; /* refused below */
  if (numel == SIZE_MAX || !lk_size_mul(numel, h->itemsize, &bytes) ||
      (uint64_t)bytes > (uint64_t)1 << 62)
    return why_set(why, why_len,
                   "header field 'shape': %s holds more than 2^62 bytes",
                   shape);
  h->numel = numel;
  h->bytes = bytes;
  uint64_t have = len - h->offset;
  if (have < h->bytes)
    return why_set(why, why_len,
                   "is truncated: header field 'shape' %s of '%s' needs %llu "
                   "bytes of data after the %llu-byte header, there are %llu",
                   shape, h->descr, (unsigned long long)h->bytes,
                   (unsigned long long)h->offset, (unsigned long long)have);
  if (have > h->bytes)
    return why_set(why, why_len,
                   "has %llu bytes after the data that header field 'shape' "
                   "%s of '%s' describes (%llu bytes): trailing data, or a "
                   "wrong shape",
                   (unsigned long long)(have - h->bytes), shape, h->descr,
                   (unsigned long long)h->bytes);
  return 0;
}

/* ---- .npz ---------------------------------------------------------------- */

#define ZIP_LOCAL 0x04034b50u
#define ZIP_CENTRAL 0x02014b50u
#define ZIP_END 0x06054b50u
#define ZIP64_END 0x06064b50u
#define ZIP64_LOCATOR 0x07064b50u

/* The end of central directory record: the last one in the final 64 KiB
 * + 22 bytes whose comment runs exactly to the end of the file. */
static bool find_end(const unsigned char *buf, size_t len, size_t *at) {
  if (len < 22)
    return false;
  size_t lo = len - 22 > 65535 ? len - 22 - 65535 : 0;
  for (size_t i = len - 22 + 1; i-- > lo;)
    if (le32(buf + i) == ZIP_END && i + 22 + le16(buf + i + 20) == len) {
      *at = i;
      return true;
    }
  return false;
}

/* The zip64 extra field's values for the central entry fields that are
 * 0xffffffff, in the order the format lists them. */
static int zip64_extra(const unsigned char *x, size_t xlen, uint64_t *usize,
                       uint64_t *csize, uint64_t *offset, const char *name,
                       char *why, size_t why_len) {
  for (size_t i = 0; i + 4 <= xlen;) {
    uint32_t id = le16(x + i), n = le16(x + i + 2);
    if (n > xlen - i - 4)
      break;
    if (id == 0x0001) {
      const unsigned char *p = x + i + 4, *end = p + n;
      uint64_t *want[3] = {usize, csize, offset};
      for (int k = 0; k < 3; k++) {
        if (*want[k] != 0xffffffffu)
          continue;
        if (end - p < 8)
          return why_set(why, why_len,
                         "member %s: its zip64 extra field is too short", name);
        *want[k] = le64(p);
        p += 8;
      }
      return 0;
    }
    i += 4 + n;
  }
  if (*usize == 0xffffffffu || *csize == 0xffffffffu || *offset == 0xffffffffu)
    return why_set(why, why_len,
                   "member %s: sizes of 0xffffffff without a zip64 extra "
                   "field",
                   name);
  return 0;
}

/* Where the central directory of the zip archive BUF [LEN] lies, and how
 * many members it lists: from the end of central directory record, or the
 * zip64 record it points to. */
static int find_directory(const unsigned char *buf, size_t len,
                          uint64_t *count_out, uint64_t *size_out,
                          uint64_t *off_out, char *why, size_t why_len) {
  size_t end;
  if (!find_end(buf, len, &end))
    return why_set(why, why_len,
                   "not a zip archive (.npz): no end of central directory "
                   "record");
  if (le16(buf + end + 4) != 0 || le16(buf + end + 6) != 0)
    return why_set(why, why_len,
                   "a zip archive split over several disks is not supported");
  uint64_t count = le16(buf + end + 10), cd_size = le32(buf + end + 12),
           cd_off = le32(buf + end + 16);
  if (count == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) {
    /* zip64: a locator just before, pointing at the zip64 record */
    if (end < 20 || le32(buf + end - 20) != ZIP64_LOCATOR)
      return why_set(why, why_len,
                     "zip64 sizes without a zip64 end of central directory "
                     "locator");
    uint64_t at = le64(buf + end - 20 + 8);
    if (at > end - 20 || end - 20 - at < 56 || le32(buf + at) != ZIP64_END)
      return why_set(why, why_len,
                     "the zip64 end of central directory record is missing "
                     "or out of place");
    count = le64(buf + at + 32);
    cd_size = le64(buf + at + 40);
    cd_off = le64(buf + at + 48);
  }
  if (cd_off > len || cd_size > len - cd_off)
    return why_set(why, why_len,
                   "the central directory (%llu bytes at %llu) lies outside "
                   "the %zu-byte file",
                   (unsigned long long)cd_size, (unsigned long long)cd_off,
                   len);
  if (count > cd_size / 46)
    return why_set(why, why_len,
                   "the central directory claims %llu members in %llu bytes",
                   (unsigned long long)count, (unsigned long long)cd_size);
  *count_out = count;
  *size_out = cd_size;
  *off_out = cd_off;
  return 0;
}

/* Central directory entry I at *AT (the directory ends at CD_END, and
 * starts at CD_OFF of BUF, after the members) into M[I], checked against
 * the entries before it; *AT moves past it. */
static int parse_entry(const unsigned char *buf, uint64_t cd_off,
                       const unsigned char **at, const unsigned char *cd_end,
                       npz_member *m, size_t i, char *why, size_t why_len) {
  npz_member *e = &m[i];
  const unsigned char *p = *at;
  if (cd_end - p < 46 || le32(p) != ZIP_CENTRAL)
    return why_set(why, why_len,
                   "central directory entry %zu is damaged (no signature)", i);
  uint32_t flags = le16(p + 8), nlen = le16(p + 28), xlen = le16(p + 30),
           clen = le16(p + 32);
  e->method = (int)le16(p + 10);
  e->crc = le32(p + 16);
  e->csize = le32(p + 20);
  e->usize = le32(p + 24);
  uint64_t local = le32(p + 42);
  if ((size_t)(cd_end - p) - 46 < (size_t)nlen + xlen + clen)
    return why_set(why, why_len,
                   "central directory entry %zu runs past the directory", i);
  e->name = (const char *)p + 46;
  e->name_len = nlen;
  char name[80];
  snprintf(name, sizeof name, "'%.*s'", nlen > 64 ? 64 : (int)nlen, e->name);
  for (size_t k = 0; k < nlen; k++)
    if (e->name[k] == '\0')
      return why_set(why, why_len, "member %zu: its name holds a NUL byte", i);
  int rc = zip64_extra(p + 46 + nlen, xlen, &e->usize, &e->csize, &local, name,
                       why, why_len);
  if (rc != 0)
    return rc;
  *at = p + 46 + (size_t)nlen + xlen + clen;
  if (flags & 1)
    return why_set(why, why_len, "member %s is encrypted", name);
  if (e->method != 0 && e->method != 8)
    return why_set(why, why_len,
                   "member %s: compression method %d is not supported (0: "
                   "stored, np.savez; 8: deflated, np.savez_compressed)",
                   name, e->method);
  if (e->method == 0 && e->csize != e->usize)
    return why_set(why, why_len,
                   "member %s is stored, but its sizes differ (%llu and %llu)",
                   name, (unsigned long long)e->csize,
                   (unsigned long long)e->usize);
  if (local > cd_off || cd_off - local < 30 || le32(buf + local) != ZIP_LOCAL)
    return why_set(why, why_len, "member %s: no local header at offset %llu",
                   name, (unsigned long long)local);
  uint64_t data = local + 30 + le16(buf + local + 26) + le16(buf + local + 28);
  if (data > cd_off || e->csize > cd_off - data)
    return why_set(why, why_len,
                   "member %s: its %llu bytes at offset %llu run past the "
                   "members into the central directory",
                   name, (unsigned long long)e->csize,
                   (unsigned long long)data);
  e->offset = data;
  for (size_t k = 0; k < i; k++)
    if (m[k].name_len == nlen && memcmp(m[k].name, e->name, nlen) == 0)
      return why_set(why, why_len, "member %s appears twice", name);
  return 0;
}

int npz_parse(const unsigned char *buf, size_t len, npz_member **out,
              size_t *n_out, char *why, size_t why_len) {
  *out = NULL;
  *n_out = 0;
  uint64_t count = 0, cd_size = 0, cd_off = 0;
  int rc = find_directory(buf, len, &count, &cd_size, &cd_off, why, why_len);
  if (rc != 0)
    return rc;
  npz_member *m = calloc(count ? (size_t)count : 1, sizeof *m);
  if (!m)
    return -2;
  const unsigned char *p = buf + cd_off, *cd_end = p + cd_size;
  for (size_t i = 0; rc == 0 && i < count; i++)
    rc = parse_entry(buf, cd_off, &p, cd_end, m, i, why, why_len);
  if (rc != 0) {
    free(m);
    return rc;
  }
  *out = m;
  *n_out = (size_t)count;
  return 0;
}

/* ---- the data ------------------------------------------------------------ */

bool npy_swapped(const npy_header *h) {
  const uint16_t one = 1;
  bool big_host = *(const unsigned char *)&one == 0;
  return h->itemsize > 1 && h->big_endian != big_host;
}

uint64_t npy_load_bits(const unsigned char *p, size_t size, bool swap) {
  if (size == 4) {
    uint32_t v;
    memcpy(&v, p, 4);
    return swap ? __builtin_bswap32(v) : v;
  }
  uint64_t v;
  memcpy(&v, p, 8);
  return swap ? __builtin_bswap64(v) : v;
}

double npy_value_at(const npy_header *h, const unsigned char *data, bool swap,
                    uint64_t i) {
  const unsigned char *p = data + i * h->itemsize;
  uint64_t bits = h->itemsize > 1 ? npy_load_bits(p, h->itemsize, swap) : 0;
  switch (h->type) {
  case NPY_F4: {
    uint32_t b = (uint32_t)bits;
    float f;
    memcpy(&f, &b, 4);
    return f;
  }
  case NPY_F8: {
    double v;
    memcpy(&v, &bits, 8);
    return v;
  }
  case NPY_U1: return *p;
  case NPY_I4: return (int32_t)(uint32_t)bits;
  default: return (double)(int64_t)bits;
  }
}
