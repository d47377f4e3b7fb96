/* safetensors: a strict reader and a writer (see safetensors.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

/* ---- dtypes ------------------------------------------------------------- */

static const struct {
  const char *name;
  size_t size;
} dtypes[] = {
    [LK__ST_BOOL] = {"BOOL", 1},       [LK__ST_U8] = {"U8", 1},
    [LK__ST_I8] = {"I8", 1},           [LK__ST_F8_E5M2] = {"F8_E5M2", 1},
    [LK__ST_F8_E4M3] = {"F8_E4M3", 1}, [LK__ST_F8_E8M0] = {"F8_E8M0", 1},
    [LK__ST_I16] = {"I16", 2},         [LK__ST_U16] = {"U16", 2},
    [LK__ST_F16] = {"F16", 2},         [LK__ST_BF16] = {"BF16", 2},
    [LK__ST_I32] = {"I32", 4},         [LK__ST_U32] = {"U32", 4},
    [LK__ST_F32] = {"F32", 4},         [LK__ST_F64] = {"F64", 8},
    [LK__ST_C64] = {"C64", 8},         [LK__ST_I64] = {"I64", 8},
    [LK__ST_U64] = {"U64", 8},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

const char *lk__st_dtype_name(lk__st_dtype dtype) {
  return dtype > 0 && (size_t)dtype < N_DTYPES ? dtypes[dtype].name : NULL;
}

size_t lk__st_dtype_size(lk__st_dtype dtype) {
  return dtype > 0 && (size_t)dtype < N_DTYPES ? dtypes[dtype].size : 0;
}

static lk__st_dtype dtype_named(const char *s) {
  for (size_t i = 1; i < N_DTYPES; i++)
    if (strcmp(dtypes[i].name, s) == 0)
      return (lk__st_dtype)i;
  return 0;
}

/* ---- names in messages -------------------------------------------------- */

/* NAME quoted for a message: control bytes escaped (a file's name must not
 * drive the terminal), long names cut. */
typedef struct quoted {
  char s[112];
} quoted;

static quoted quote(const char *name) {
  quoted q;
  size_t o = 0;
  q.s[o++] = '"';
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    /* Room for this byte's escape (4), "..." and the quote and NUL after
     * it: a longer name is cut here. */
    if (o + 4 + 3 + 2 > sizeof q.s) {
      memcpy(q.s + o, "...", 3);
      o += 3;
      break;
    }
    if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
      o += (size_t)snprintf(q.s + o, sizeof q.s - o, "\\x%02x", *p);
    else
      q.s[o++] = (char)*p;
  }
  q.s[o++] = '"';
  q.s[o] = '\0';
  return q;
}

/* ---- the JSON header ---------------------------------------------------- */

typedef struct parser {
  const char *file;
  const unsigned char *p; /* the header's N bytes */
  size_t pos, end;
  uint64_t data_len; /* bytes of the data buffer after the header */
  lk__st_file *f;
  size_t cap, cap_meta;
  const char *tensor; /* whose object is being parsed, for messages */
} parser;

static int bad(const parser *ps, const char *fmt, ...) LK_PRINTF(2, 3);
static int bad(const parser *ps, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* The position in the file, as a hex dump would show it, and the tensor
   * whose description it is in. */
  if (ps->tensor)
    return lk__err(LK_EFORMAT, "%s: header byte %zu: tensor %s: %s", ps->file,
                   8 + ps->pos, quote(ps->tensor).s, msg);
  return lk__err(LK_EFORMAT, "%s: header byte %zu: %s", ps->file, 8 + ps->pos,
                 msg);
}

static int bad_tensor(const parser *ps, const char *name, const char *fmt, ...)
    LK_PRINTF(3, 4);
static int bad_tensor(const parser *ps, const char *name, const char *fmt,
                      ...) {
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return lk__err(LK_EFORMAT, "%s: tensor %s: %s", ps->file, quote(name).s, msg);
}

static void skip_ws(parser *ps) {
  while (ps->pos < ps->end &&
         (ps->p[ps->pos] == ' ' || ps->p[ps->pos] == '\t' ||
          ps->p[ps->pos] == '\n' || ps->p[ps->pos] == '\r'))
    ps->pos++;
}

/* What is at the cursor, for "expected X, found Y". */
static const char *found(const parser *ps) {
  static const char *const names[] = {"the end of the header",
                                      "'{'",
                                      "'}'",
                                      "'['",
                                      "']'",
                                      "':'",
                                      "','",
                                      "'\"'",
                                      "a digit",
                                      "another character"};
  if (ps->pos >= ps->end)
    return names[0];
  switch (ps->p[ps->pos]) {
  case '{': return names[1];
  case '}': return names[2];
  case '[': return names[3];
  case ']': return names[4];
  case ':': return names[5];
  case ',': return names[6];
  case '"': return names[7];
  default:
    return ps->p[ps->pos] >= '0' && ps->p[ps->pos] <= '9' ? names[8] : names[9];
  }
}

static int expect(parser *ps, char c) {
  skip_ws(ps);
  if (ps->pos >= ps->end || ps->p[ps->pos] != (unsigned char)c)
    return bad(ps, "expected '%c', found %s", c, found(ps));
  ps->pos++;
  return 0;
}

/* Whether the next non-blank byte is C (and takes it if so). */
static bool take(parser *ps, char c) {
  skip_ws(ps);
  if (ps->pos < ps->end && ps->p[ps->pos] == (unsigned char)c) {
    ps->pos++;
    return true;
  }
  return false;
}

static int hex4(parser *ps, size_t at, unsigned *out) {
  unsigned v = 0;
  for (size_t i = 0; i < 4; i++) {
    if (at + i >= ps->end)
      return bad(ps, "a \\u escape ends with the header");
    unsigned char c = ps->p[at + i];
    unsigned d = c >= '0' && c <= '9'   ? c - '0' + 0u
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10u
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10u
                                        : 16u;
    if (d == 16)
      return bad(ps, "a \\u escape needs four hex digits");
    v = v << 4 | d;
  }
  *out = v;
  return 0;
}

/* The length of the valid UTF-8 sequence at P (at most N bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  unsigned char c = p[0];
  size_t len;
  unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0)
      lo = 0xa0; /* overlong */
    if (c == 0xed)
      hi = 0x9f; /* surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0)
      lo = 0x90; /* overlong */
    if (c == 0xf4)
      hi = 0x8f; /* beyond U+10FFFF */
  } else
    return 0;
  if (len > n || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < len; i++)
    if (p[i] < 0x80 || p[i] > 0xbf)
      return 0;
  return len;
}

static size_t put_utf8(unsigned char *out, unsigned cp) {
  if (cp < 0x80) {
    out[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (unsigned char)(0xc0 | cp >> 6);
    out[1] = (unsigned char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (unsigned char)(0xe0 | cp >> 12);
    out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    out[2] = (unsigned char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (unsigned char)(0xf0 | cp >> 18);
  out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
  out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
  out[3] = (unsigned char)(0x80 | (cp & 0x3f));
  return 4;
}

/* Decodes the string at the cursor (just after its opening quote) into OUT
 * (NULL: only measures), leaving the cursor after the closing quote. *LEN
 * gets the decoded length. */
static int decode(parser *ps, unsigned char *out, size_t *len) {
  size_t n = 0;
  for (;;) {
    if (ps->pos >= ps->end)
      return bad(ps, "a string runs past the end of the header");
    unsigned char c = ps->p[ps->pos];
    if (c == '"') {
      ps->pos++;
      *len = n;
      return 0;
    }
    if (c < 0x20)
      return bad(ps, "control byte 0x%02x in a string (JSON needs it escaped)",
                 c);
    if (c != '\\') {
      size_t k = utf8_len(ps->p + ps->pos, ps->end - ps->pos);
      if (k == 0)
        return bad(ps, "invalid UTF-8 in a string");
      if (out)
        memcpy(out + n, ps->p + ps->pos, k);
      n += k;
      ps->pos += k;
      continue;
    }
    if (ps->pos + 1 >= ps->end)
      return bad(ps, "a string runs past the end of the header");
    unsigned char e = ps->p[ps->pos + 1];
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      if (out)
        out[n] = (unsigned char)"\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
      n++;
      ps->pos += 2;
      continue;
    }
    if (e != 'u')
      return bad(ps, "unknown escape \\%c in a string",
                 e >= 0x20 && e < 0x7f ? e : '?');
    unsigned cp, lo;
    int rc = hex4(ps, ps->pos + 2, &cp);
    if (rc != 0)
      return rc;
    size_t used = 6;
    if (cp >= 0xdc00 && cp <= 0xdfff)
      return bad(ps, "\\u%04x: a low surrogate without a high one", cp);
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (ps->pos + 7 >= ps->end || ps->p[ps->pos + 6] != '\\' ||
          ps->p[ps->pos + 7] != 'u')
        return bad(ps, "\\u%04x: a high surrogate without a low one", cp);
      if ((rc = hex4(ps, ps->pos + 8, &lo)) != 0)
        return rc;
      if (lo < 0xdc00 || lo > 0xdfff)
        return bad(ps, "\\u%04x: a high surrogate without a low one", cp);
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      used = 12;
    }
    if (cp == 0)
      return bad(ps, "\\u0000 in a string: names and values cannot hold NUL");
    unsigned char tmp[4];
    size_t k = put_utf8(out ? out + n : tmp, cp);
    n += k;
    ps->pos += used;
  }
}

/* A string at the cursor, malloc'd and NUL-terminated. */
static int parse_string(parser *ps, char **out) {
  *out = NULL;
  int rc = expect(ps, '"');
  if (rc != 0)
    return rc;
  size_t start = ps->pos, len;
  if ((rc = decode(ps, NULL, &len)) != 0)
    return rc;
  char *s = malloc(len + 1);
  if (!s)
    return lk__err(LK_ENOMEM, "out of memory reading %s", ps->file);
  ps->pos = start;
  if ((rc = decode(ps, (unsigned char *)s, &len)) != 0) { /* cannot fail */
    free(s);
    return rc;
  }
  s[len] = '\0';
  *out = s;
  return 0;
}

/* A non-negative integer that fits 64 bits: what shapes and offsets are.
 * WHAT names the field in messages. */
static int parse_uint(parser *ps, const char *name, const char *what,
                      uint64_t *out) {
  skip_ws(ps);
  if (ps->pos < ps->end && ps->p[ps->pos] == '-')
    return bad_tensor(ps, name, "%s: a negative number", what);
  if (ps->pos >= ps->end || ps->p[ps->pos] < '0' || ps->p[ps->pos] > '9')
    return bad_tensor(ps, name, "%s: expected a non-negative integer, found %s",
                      what, found(ps));
  uint64_t v = 0;
  size_t start = ps->pos;
  while (ps->pos < ps->end && ps->p[ps->pos] >= '0' && ps->p[ps->pos] <= '9') {
    unsigned d = ps->p[ps->pos] - '0';
    if (v > (UINT64_MAX - d) / 10)
      return bad_tensor(ps, name, "%s: a number beyond 2^64", what);
    v = v * 10 + d;
    ps->pos++;
  }
  if (ps->p[start] == '0' && ps->pos - start > 1)
    return bad_tensor(ps, name, "%s: a number with a leading zero", what);
  if (ps->pos < ps->end &&
      (ps->p[ps->pos] == '.' || ps->p[ps->pos] == 'e' || ps->p[ps->pos] == 'E'))
    return bad_tensor(ps, name, "%s: expected an integer, found a fraction",
                      what);
  *out = v;
  return 0;
}

static int parse_shape(parser *ps, lk__st_tensor *t) {
  int rc = expect(ps, '[');
  if (rc != 0)
    return rc;
  t->ndim = 0;
  if (take(ps, ']'))
    return 0;
  do {
    if (t->ndim == LK__ST_MAX_DIMS)
      return bad_tensor(ps, t->name, "shape has more than %d dimensions",
                        LK__ST_MAX_DIMS);
    if ((rc = parse_uint(ps, t->name, "shape", &t->shape[t->ndim])) != 0)
      return rc;
    t->ndim++;
  } while (take(ps, ','));
  return expect(ps, ']');
}

static int parse_offsets(parser *ps, lk__st_tensor *t) {
  int rc = expect(ps, '[');
  if (rc == 0)
    rc = parse_uint(ps, t->name, "data_offsets", &t->begin);
  if (rc == 0 && !take(ps, ','))
    return bad_tensor(ps, t->name,
                      "data_offsets: expected two numbers [BEGIN, END]");
  if (rc == 0)
    rc = parse_uint(ps, t->name, "data_offsets", &t->end);
  if (rc == 0 && !take(ps, ']'))
    return bad_tensor(ps, t->name,
                      "data_offsets: expected two numbers [BEGIN, END]");
  return rc;
}

/* What a tensor's fields say must agree with each other and the file. */
static int check_tensor(parser *ps, lk__st_tensor *t) {
  size_t size = lk__st_dtype_size(t->dtype), numel = 1, bytes = 0;
  bool overflow = false;
  for (size_t i = 0; i < t->ndim && !overflow; i++)
    overflow = t->shape[i] > SIZE_MAX ||
               !lk_size_mul(numel, (size_t)t->shape[i], &numel);
  overflow = overflow || !lk_size_mul(numel, size, &bytes);
  char shape[8 + LK__ST_MAX_DIMS * 22] = "[";
  for (size_t i = 0; i < t->ndim; i++)
    snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%" PRIu64,
             i ? ", " : "", t->shape[i]);
  strcat(shape, "]");
  if (overflow)
    return bad_tensor(ps, t->name,
                      "shape %s of %s: more bytes than 2^64 (a lying shape)",
                      shape, lk__st_dtype_name(t->dtype));
  if (t->begin > t->end)
    return bad_tensor(ps, t->name,
                      "data_offsets [%" PRIu64 ", %" PRIu64
                      "]: the end is before the beginning",
                      t->begin, t->end);
  if (t->end - t->begin != bytes)
    return bad_tensor(ps, t->name,
                      "data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                      " bytes, but shape %s of %s needs %" PRIu64,
                      t->begin, t->end, t->end - t->begin, shape,
                      lk__st_dtype_name(t->dtype), (uint64_t)bytes);
  if (t->end > ps->data_len)
    return bad_tensor(ps, t->name,
                      "data_offsets [%" PRIu64 ", %" PRIu64
                      "] go past the end of the data buffer (%" PRIu64
                      " bytes: the file is truncated or the offsets lie)",
                      t->begin, t->end, ps->data_len);
  t->numel = numel;
  return 0;
}

enum { F_DTYPE = 1, F_SHAPE = 2, F_OFFSETS = 4 };

/* The object describing tensor T (its name already set). */
static int parse_tensor(parser *ps, lk__st_tensor *t) {
  int rc = expect(ps, '{');
  if (rc != 0)
    return rc;
  unsigned seen = 0;
  if (!take(ps, '}')) {
    do {
      char *key;
      if ((rc = parse_string(ps, &key)) != 0)
        return rc;
      unsigned field = !strcmp(key, "dtype")          ? F_DTYPE
                       : !strcmp(key, "shape")        ? F_SHAPE
                       : !strcmp(key, "data_offsets") ? F_OFFSETS
                                                      : 0;
      if (!field) {
        rc = bad_tensor(ps, t->name,
                        "unknown field %s (expected dtype, shape, "
                        "data_offsets)",
                        quote(key).s);
        free(key);
        return rc;
      }
      if (seen & field) {
        rc = bad_tensor(ps, t->name, "field %s appears twice", key);
        free(key);
        return rc;
      }
      free(key);
      seen |= field;
      if ((rc = expect(ps, ':')) != 0)
        return rc;
      if (field == F_DTYPE) {
        char *name;
        if ((rc = parse_string(ps, &name)) != 0)
          return rc;
        t->dtype = dtype_named(name);
        if (!t->dtype)
          rc = bad_tensor(ps, t->name,
                          "dtype %s is not a dtype this reader knows (BOOL, "
                          "U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, "
                          "BF16, I32, U32, F32, F64, C64, I64, U64)",
                          quote(name).s);
        free(name);
      } else if (field == F_SHAPE)
        rc = parse_shape(ps, t);
      else
        rc = parse_offsets(ps, t);
      if (rc != 0)
        return rc;
    } while (take(ps, ','));
    if ((rc = expect(ps, '}')) != 0)
      return rc;
  }
  if (seen != (F_DTYPE | F_SHAPE | F_OFFSETS))
    return bad_tensor(ps, t->name, "no %s field",
                      !(seen & F_DTYPE)   ? "dtype"
                      : !(seen & F_SHAPE) ? "shape"
                                          : "data_offsets");
  return check_tensor(ps, t);
}

static int parse_metadata(parser *ps) {
  lk__st_file *f = ps->f;
  int rc = expect(ps, '{');
  if (rc != 0 || take(ps, '}'))
    return rc;
  do {
    if (f->n_meta == ps->cap_meta) {
      size_t cap = ps->cap_meta ? 2 * ps->cap_meta : 8;
      lk__st_meta *grown = realloc(f->meta, cap * sizeof *grown);
      if (!grown)
        return lk__err(LK_ENOMEM, "out of memory reading %s", ps->file);
      f->meta = grown;
      ps->cap_meta = cap;
    }
    lk__st_meta *m = &f->meta[f->n_meta];
    m->key = m->value = NULL;
    f->n_meta++;
    if ((rc = parse_string(ps, &m->key)) != 0 || (rc = expect(ps, ':')) != 0)
      return rc;
    skip_ws(ps);
    if (ps->pos < ps->end && ps->p[ps->pos] != '"')
      return bad(ps, "__metadata__ %s: the value must be a string",
                 quote(m->key).s);
    if ((rc = parse_string(ps, &m->value)) != 0)
      return rc;
  } while (take(ps, ','));
  return expect(ps, '}');
}

static int cmp_tensor_name(const void *a, const void *b) {
  const lk__st_tensor *x = *(const lk__st_tensor *const *)a;
  const lk__st_tensor *y = *(const lk__st_tensor *const *)b;
  return strcmp(x->name, y->name);
}

static int cmp_meta_key(const void *a, const void *b) {
  return strcmp(((const lk__st_meta *)a)->key, ((const lk__st_meta *)b)->key);
}

static int cmp_offsets(const void *a, const void *b) {
  const lk__st_tensor *x = *(const lk__st_tensor *const *)a;
  const lk__st_tensor *y = *(const lk__st_tensor *const *)b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end)
    return x->end < y->end ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* Names unique (tensors and metadata keys), and the index by name. */
static int check_names(parser *ps) {
  lk__st_file *f = ps->f;
  lk__st_tensor **sorted = malloc((f->n ? f->n : 1) * sizeof *sorted);
  f->by_name = malloc((f->n ? f->n : 1) * sizeof *f->by_name);
  if (!sorted || !f->by_name) {
    free(sorted);
    return lk__err(LK_ENOMEM, "out of memory reading %s", ps->file);
  }
  for (size_t i = 0; i < f->n; i++)
    sorted[i] = &f->tensors[i];
  qsort(sorted, f->n, sizeof *sorted, cmp_tensor_name);
  int rc = 0;
  for (size_t i = 0; i < f->n; i++) {
    f->by_name[i] = (size_t)(sorted[i] - f->tensors);
    if (i && strcmp(sorted[i]->name, sorted[i - 1]->name) == 0 && rc == 0)
      rc = bad_tensor(ps, sorted[i]->name,
                      "the name appears twice in the header");
  }
  free(sorted);
  if (rc != 0)
    return rc;
  /* The metadata keep the header's order: sort a copy. */
  if (f->n_meta > 1) {
    lk__st_meta *copy = malloc(f->n_meta * sizeof *copy);
    if (!copy)
      return lk__err(LK_ENOMEM, "out of memory reading %s", ps->file);
    memcpy(copy, f->meta, f->n_meta * sizeof *copy);
    qsort(copy, f->n_meta, sizeof *copy, cmp_meta_key);
    for (size_t i = 1; i < f->n_meta && rc == 0; i++)
      if (strcmp(copy[i].key, copy[i - 1].key) == 0)
        rc = lk__err(LK_EFORMAT, "%s: __metadata__ key %s appears twice",
                     ps->file, quote(copy[i].key).s);
    free(copy);
  }
  return rc;
}

/* The tensors cover the data buffer exactly, in some order: sorted by
 * offsets, each begins where the one before ends, the first at 0 and the
 * last ends with the file. */
static int check_cover(parser *ps) {
  lk__st_file *f = ps->f;
  lk__st_tensor **sorted = malloc((f->n ? f->n : 1) * sizeof *sorted);
  if (!sorted)
    return lk__err(LK_ENOMEM, "out of memory reading %s", ps->file);
  for (size_t i = 0; i < f->n; i++)
    sorted[i] = &f->tensors[i];
  qsort(sorted, f->n, sizeof *sorted, cmp_offsets);
  int rc = 0;
  uint64_t at = 0;
  const lk__st_tensor *prev = NULL;
  for (size_t i = 0; i < f->n && rc == 0; i++) {
    const lk__st_tensor *t = sorted[i];
    if (t->begin > at)
      rc = bad_tensor(ps, t->name,
                      "data_offsets [%" PRIu64 ", %" PRIu64
                      "] leave a hole: bytes [%" PRIu64 ", %" PRIu64
                      ") of the data buffer belong to no tensor",
                      t->begin, t->end, at, t->begin);
    else if (t->begin < at)
      rc = bad_tensor(ps, t->name,
                      "data_offsets [%" PRIu64 ", %" PRIu64
                      "] overlap tensor %s, which ends at %" PRIu64,
                      t->begin, t->end, quote(prev->name).s, at);
    at = t->end;
    prev = t;
  }
  free(sorted);
  if (rc == 0 && at != ps->data_len)
    rc = lk__err(LK_EFORMAT,
                 "%s: %" PRIu64 " bytes after the last tensor%s%s: the data "
                 "buffer has %" PRIu64 " bytes, the tensors cover %" PRIu64,
                 ps->file, ps->data_len - at, prev ? " " : "",
                 prev ? quote(prev->name).s : "", ps->data_len, at);
  return rc;
}

static int parse_header(parser *ps) {
  lk__st_file *f = ps->f;
  /* As the reference reader: the object starts at the first byte. */
  if (ps->end == 0 || ps->p[0] != '{')
    return bad(ps, "the header must start with '{', found %s", found(ps));
  ps->pos = 1;
  bool had_meta = false;
  int rc;
  if (!take(ps, '}')) {
    do {
      char *name;
      size_t key_at = ps->pos;
      if ((rc = parse_string(ps, &name)) != 0)
        return rc;
      if (strcmp(name, "__metadata__") == 0) {
        free(name);
        if (had_meta) {
          ps->pos = key_at;
          return bad(ps, "__metadata__ appears twice");
        }
        had_meta = true;
        if ((rc = expect(ps, ':')) != 0 || (rc = parse_metadata(ps)) != 0)
          return rc;
        continue;
      }
      if (f->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 16;
        lk__st_tensor *grown = realloc(f->tensors, cap * sizeof *grown);
        if (!grown) {
          free(name);
          return lk__err(LK_ENOMEM, "out of memory reading %s", ps->file);
        }
        f->tensors = grown;
        ps->cap = cap;
      }
      lk__st_tensor *t = &f->tensors[f->n++];
      memset(t, 0, sizeof *t);
      t->name = name;
      ps->tensor = t->name;
      if ((rc = expect(ps, ':')) != 0 || (rc = parse_tensor(ps, t)) != 0)
        return rc;
      ps->tensor = NULL;
    } while (take(ps, ','));
    if ((rc = expect(ps, '}')) != 0)
      return rc;
  }
  skip_ws(ps); /* the reference writer pads with spaces */
  if (ps->pos != ps->end)
    return bad(ps, "%s after the header's object", found(ps));
  if ((rc = check_names(ps)) != 0)
    return rc;
  return check_cover(ps);
}

static uint64_t get64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | b[i];
  return v;
}

int lk__st_parse(const char *name, const unsigned char *buf, size_t len,
                 lk__st_file **out) {
  if (!name || (!buf && len) || !out)
    return lk__err(LK_EINVAL, "lk__st_parse: NULL name, buffer or out");
  *out = NULL;
  if (len < 8)
    return lk__err(LK_EFORMAT,
                   "%s: %zu bytes, too short for a safetensors file (8 bytes "
                   "of header length first)",
                   name, len);
  uint64_t n = get64(buf);
  if (n > LK__ST_MAX_HEADER)
    return lk__err(LK_EFORMAT,
                   "%s: header length %" PRIu64
                   " is more than the %u bytes a header may have (not a "
                   "safetensors file?)",
                   name, n, LK__ST_MAX_HEADER);
  if (n > len - 8)
    return lk__err(LK_EFORMAT,
                   "%s: header length %" PRIu64
                   " goes past the end of the file (%zu bytes): truncated or "
                   "not a safetensors file",
                   name, n, len);
  lk__st_file *f = calloc(1, sizeof *f);
  if (!f || !(f->path = lk__strdup(name))) {
    free(f);
    return lk__err(LK_ENOMEM, "out of memory reading %s", name);
  }
  parser ps = {.file = f->path,
               .p = buf + 8,
               .end = (size_t)n,
               .data_len = len - 8 - n,
               .f = f};
  int rc = parse_header(&ps);
  if (rc != 0) {
    lk__st_free(f);
    return rc;
  }
  const unsigned char *data = buf + 8 + n;
  for (size_t i = 0; i < f->n; i++)
    f->tensors[i].data = data + f->tensors[i].begin;
  *out = f;
  return 0;
}

int lk__st_read(const char *path, lk__st_file **out) {
  if (!path || !out)
    return lk__err(LK_EINVAL, "lk__st_read: NULL path or out");
  *out = NULL;
  int fd;
  int rc = lk_open_input(path, "safetensors file", &fd);
  if (rc != 0)
    return rc;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    rc = lk__err(LK_EIO, "cannot stat %s: %s", path, strerror(errno));
    close(fd);
    return rc;
  }
  if ((uint64_t)st.st_size >= SIZE_MAX) {
    close(fd);
    return lk__err(LK_EINVAL, "%s: too large to map", path);
  }
  size_t len = (size_t)st.st_size;
  void *map = NULL;
  if (len > 0) {
    /* Mapped, not read: a file of gigabytes is read once, by whoever
     * copies a tensor out of it. */
    map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      rc = lk__err(LK_EIO, "cannot map %s: %s", path, strerror(errno));
      close(fd);
      return rc;
    }
  }
  close(fd);
  lk__st_file *f;
  rc = lk__st_parse(path, map ? map : "", len, &f);
  if (rc != 0) {
    if (map)
      munmap(map, len);
    return rc;
  }
  f->map = map;
  f->map_len = len;
  *out = f;
  return 0;
}

const lk__st_tensor *lk__st_find(const lk__st_file *f, const char *name) {
  size_t lo = 0, hi = f->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const lk__st_tensor *t = &f->tensors[f->by_name[mid]];
    int c = strcmp(name, t->name);
    if (c == 0)
      return t;
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

const char *lk__st_meta_get(const lk__st_file *f, const char *key) {
  for (size_t i = 0; i < f->n_meta; i++)
    if (strcmp(f->meta[i].key, key) == 0)
      return f->meta[i].value;
  return NULL;
}

void lk__st_free(lk__st_file *f) {
  if (!f)
    return;
  for (size_t i = 0; i < f->n; i++)
    free(f->tensors[i].name);
  for (size_t i = 0; i < f->n_meta; i++) {
    free(f->meta[i].key);
    free(f->meta[i].value);
  }
  free(f->tensors);
  free(f->meta);
  free(f->by_name);
  if (f->map)
    munmap(f->map, f->map_len);
  free(f->path);
  free(f);
}

/* ---- writing ------------------------------------------------------------ */

typedef struct text {
  char *s;
  size_t len, cap;
  bool oom;
} text;

static void put(text *t, const char *s, size_t n) {
  if (t->oom)
    return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *grown = realloc(t->s, cap);
    if (!grown) {
      t->oom = true;
      return;
    }
    t->s = grown;
    t->cap = cap;
  }
  memcpy(t->s + t->len, s, n);
  t->len += n;
  t->s[t->len] = '\0';
}

static void puts_(text *t, const char *s) {
  put(t, s, strlen(s));
}

static void put_u64(text *t, uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%" PRIu64, v);
  puts_(t, b);
}

/* S as a JSON string; false if it is not valid UTF-8. */
static bool put_json_string(text *t, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s);
  put(t, "\"", 1);
  for (size_t i = 0; i < n;) {
    if (p[i] == '"' || p[i] == '\\') {
      char e[2] = {'\\', (char)p[i]};
      put(t, e, 2);
      i++;
    } else if (p[i] < 0x20) {
      /* The short escapes where JSON has them: a header stays small. */
      const char *simple = strchr("\b\f\n\r\t", p[i]);
      char e[8];
      if (simple)
        snprintf(e, sizeof e, "\\%c", "bfnrt"[simple - "\b\f\n\r\t"]);
      else
        snprintf(e, sizeof e, "\\u%04x", p[i]);
      puts_(t, e);
      i++;
    } else {
      size_t k = utf8_len(p + i, n - i);
      if (k == 0)
        return false;
      put(t, s + i, k);
      i += k;
    }
  }
  put(t, "\"", 1);
  return true;
}

static bool big_endian(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 0;
}

static int cmp_item_name(const void *a, const void *b) {
  return strcmp((*(const lk__st_item *const *)a)->name,
                (*(const lk__st_item *const *)b)->name);
}

/* The header for ITEMS, padded; *SIZES gets each item's bytes. */
static int make_header(const char *name, const lk__st_item *items, size_t n,
                       const lk__st_meta *meta, size_t n_meta, text *h,
                       uint64_t *sizes) {
  put(h, "{", 1);
  bool ok = true;
  if (n_meta) {
    puts_(h, "\"__metadata__\":{");
    for (size_t i = 0; i < n_meta && ok; i++) {
      for (size_t j = 0; j < i; j++)
        if (strcmp(meta[i].key, meta[j].key) == 0)
          return lk__err(LK_EINVAL, "%s: __metadata__ key %s given twice", name,
                         quote(meta[i].key).s);
      if (i)
        put(h, ",", 1);
      ok = put_json_string(h, meta[i].key);
      put(h, ":", 1);
      ok = ok && put_json_string(h, meta[i].value);
    }
    if (!ok)
      return lk__err(LK_EINVAL, "%s: a __metadata__ entry is not UTF-8", name);
    put(h, "}", 1);
  }
  uint64_t at = 0;
  for (size_t i = 0; i < n; i++) {
    const lk__st_item *it = &items[i];
    size_t size = lk__st_dtype_size(it->dtype);
    if (!size || it->ndim > LK__ST_MAX_DIMS || !it->name ||
        strcmp(it->name, "__metadata__") == 0)
      return lk__err(LK_EINVAL,
                     "%s: tensor %s: no name, an unknown dtype or more than "
                     "%d dimensions",
                     name, it->name ? quote(it->name).s : "(null)",
                     LK__ST_MAX_DIMS);
    size_t bytes = size;
    for (size_t d = 0; d < it->ndim; d++)
      if (it->shape[d] > SIZE_MAX ||
          !lk_size_mul(bytes, (size_t)it->shape[d], &bytes))
        return lk__err(LK_EINVAL, "%s: tensor %s is too large", name,
                       quote(it->name).s);
    if (bytes > UINT64_MAX - at)
      return lk__err(LK_EINVAL, "%s: tensor %s is too large", name,
                     quote(it->name).s);
    sizes[i] = bytes;
    if (n_meta || i)
      put(h, ",", 1);
    if (!put_json_string(h, it->name))
      return lk__err(LK_EINVAL, "%s: tensor name %s is not UTF-8", name,
                     quote(it->name).s);
    puts_(h, ":{\"dtype\":\"");
    puts_(h, lk__st_dtype_name(it->dtype));
    puts_(h, "\",\"shape\":[");
    for (size_t d = 0; d < it->ndim; d++) {
      if (d)
        put(h, ",", 1);
      put_u64(h, it->shape[d]);
    }
    puts_(h, "],\"data_offsets\":[");
    put_u64(h, at);
    put(h, ",", 1);
    put_u64(h, at + bytes);
    puts_(h, "]}");
    at += bytes;
  }
  put(h, "}", 1);
  while ((h->len + 8) % 8) /* the data buffer aligned in the file */
    put(h, " ", 1);
  if (h->oom)
    return lk__err(LK_ENOMEM, "out of memory writing %s", name);
  if (h->len > LK__ST_MAX_HEADER)
    return lk__err(LK_EINVAL,
                   "%s: the header would be %zu bytes, more than a reader "
                   "takes (%u)",
                   name, h->len, LK__ST_MAX_HEADER);
  return 0;
}

static int check_unique(const char *name, const lk__st_item *items, size_t n) {
  if (n < 2)
    return 0;
  const lk__st_item **sorted = malloc(n * sizeof *sorted);
  if (!sorted)
    return lk__err(LK_ENOMEM, "out of memory writing %s", name);
  for (size_t i = 0; i < n; i++)
    sorted[i] = &items[i];
  qsort(sorted, n, sizeof *sorted, cmp_item_name);
  int rc = 0;
  for (size_t i = 1; i < n && rc == 0; i++)
    if (sorted[i]->name && sorted[i - 1]->name &&
        strcmp(sorted[i]->name, sorted[i - 1]->name) == 0)
      rc = lk__err(LK_EINVAL, "%s: tensor %s given twice", name,
                   quote(sorted[i]->name).s);
  free(sorted);
  return rc;
}

/* DATA's bytes little-endian: swapped in chunks on a big-endian host. */
static bool write_data(FILE *f, const lk__st_item *it, uint64_t bytes) {
  size_t size = lk__st_dtype_size(it->dtype);
  if (it->dtype == LK__ST_C64)
    size = 4; /* two f32 */
  if (!it->native || size == 1 || !big_endian())
    return bytes == 0 || fwrite(it->data, 1, (size_t)bytes, f) == bytes;
  const unsigned char *p = it->data;
  unsigned char chunk[4096];
  while (bytes > 0) {
    size_t n = bytes < sizeof chunk ? (size_t)bytes : sizeof chunk;
    for (size_t i = 0; i < n; i += size)
      for (size_t k = 0; k < size; k++)
        chunk[i + k] = p[i + size - 1 - k];
    if (fwrite(chunk, 1, n, f) != n)
      return false;
    p += n;
    bytes -= n;
  }
  return true;
}

int lk__st_write_stream(FILE *f, const char *name, const lk__st_item *items,
                        size_t n, const lk__st_meta *meta, size_t n_meta) {
  if (!f || !name || (!items && n) || (!meta && n_meta))
    return lk__err(LK_EINVAL, "lk__st_write_stream: NULL argument");
  int rc = check_unique(name, items, n);
  if (rc != 0)
    return rc;
  uint64_t *sizes = malloc((n ? n : 1) * sizeof *sizes);
  text h = {0};
  if (!sizes)
    return lk__err(LK_ENOMEM, "out of memory writing %s", name);
  rc = make_header(name, items, n, meta, n_meta, &h, sizes);
  if (rc == 0) {
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
      len[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    bool ok = fwrite(len, 1, 8, f) == 8 && fwrite(h.s, 1, h.len, f) == h.len;
    for (size_t i = 0; i < n && ok; i++)
      ok = write_data(f, &items[i], sizes[i]);
    if (!ok || ferror(f))
      rc = lk__err(LK_EIO, "cannot write %s: %s", name, strerror(errno));
  }
  free(h.s);
  free(sizes);
  return rc;
}

int lk__st_write(const char *path, const lk__st_item *items, size_t n,
                 const lk__st_meta *meta, size_t n_meta) {
  if (!path)
    return lk__err(LK_EINVAL, "lk__st_write: NULL path");
  lk_output *out;
  int rc = lk_output_open(path, NULL, &out);
  if (rc == 0)
    rc = lk__st_write_stream(lk_output_stream(out),
                             strcmp(path, "-") ? path : "the standard output",
                             items, n, meta, n_meta);
  int closed = lk_output_close(out, rc == 0);
  return rc ? rc : closed;
}
