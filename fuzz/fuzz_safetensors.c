/* The safetensors reader and writer (src/store/safetensors.c).
 *
 * Input: a mode byte, then the bytes. Mode bit 0 clear: the bytes are the
 * whole file. Set: the bytes are the JSON header up to the first NUL, then
 * the data buffer; the target writes the 8-byte header length in front, so
 * that mutations of the JSON reach the parser instead of stopping at a
 * length that no longer fits. Mode bit 1: the file is read through
 * lk__st_read from an in-memory file (open, fstat, mmap), not parsed from
 * memory.
 *
 * Checks, beyond "no crash, leak or hang":
 * - a refusal is a negative LK_E code (LK_EFORMAT, or LK_ENOMEM) with a
 *   message that starts with the file's name, and leaves *out NULL;
 * - an accepted file's tensors have known dtypes, at most LK__ST_MAX_DIMS
 *   dimensions, numel = the product of the shape, end - begin = numel *
 *   the element size, and lie inside the input, covering its data buffer
 *   exactly; every name is found by lk__st_find, every metadata key by
 *   lk__st_meta_get;
 * - writing it (lk__st_write_stream) and reading that gives the same
 *   tensors (name, dtype, shape, bytes) and metadata, and writing that
 *   again gives the same bytes (the writer has one encoding). */
#include "../src/store/safetensors.h"
#include "fuzz_util.h"

#define NAME "fuzz.safetensors"

static fuzz_file file;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_file_open(&file, NAME);
  return 0;
}

/* F, accepted from LEN bytes at BUF (BUF NULL: mapped, not checked for
 * position), holds together. */
static void check_file(const lk__st_file *f, const unsigned char *buf,
                       size_t len) {
  uint64_t covered = 0;
  for (size_t i = 0; i < f->n; i++) {
    const lk__st_tensor *t = &f->tensors[i];
    size_t size = lk__st_dtype_size(t->dtype);
    FUZZ_CHECK(size != 0, "tensor %zu: dtype %d", i, (int)t->dtype);
    FUZZ_CHECK(t->ndim <= LK__ST_MAX_DIMS, "tensor %zu: ndim %zu", i, t->ndim);
    uint64_t numel = 1;
    for (size_t d = 0; d < t->ndim; d++)
      numel *= t->shape[d]; /* the reader refused any overflow */
    FUZZ_CHECK(numel == t->numel, "tensor %zu: numel %llu, shape says %llu", i,
               (unsigned long long)t->numel, (unsigned long long)numel);
    FUZZ_CHECK(t->begin <= t->end && t->end - t->begin == numel * size,
               "tensor %zu: offsets [%llu, %llu] for %llu elements", i,
               (unsigned long long)t->begin, (unsigned long long)t->end,
               (unsigned long long)numel);
    const unsigned char *base = buf ? buf : f->map;
    size_t total = buf ? len : f->map_len;
    FUZZ_CHECK(t->data >= base && (size_t)(t->data - base) <= total &&
                   t->end - t->begin <= total - (size_t)(t->data - base),
               "tensor %zu lies outside the file", i);
    /* Touch every byte, so that ASan sees any that is out of bounds. */
    volatile unsigned char sum = 0;
    for (uint64_t k = 0; k < t->end - t->begin; k++)
      sum ^= t->data[k];
    (void)sum;
    covered += t->end - t->begin;
    FUZZ_CHECK(lk__st_find(f, t->name) == t, "tensor %zu (%s) not found", i,
               t->name);
  }
  if (buf && f->n) { /* the data buffer is what follows the header */
    size_t data_at = len - (size_t)covered;
    for (size_t i = 0; i < f->n; i++)
      FUZZ_CHECK(f->tensors[i].data == buf + data_at + f->tensors[i].begin,
                 "tensor %zu is not at its offset", i);
  }
  for (size_t i = 0; i < f->n_meta; i++)
    FUZZ_CHECK(lk__st_meta_get(f, f->meta[i].key) != NULL, "meta %zu lost", i);
}

static int by_offset(const void *a, const void *b) {
  const lk__st_tensor *x = *(const lk__st_tensor *const *)a;
  const lk__st_tensor *y = *(const lk__st_tensor *const *)b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end)
    return x->end < y->end ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* F written to memory, its tensors in the order of their offsets (so that
 * the written offsets are the file's); *LEN bytes, malloc'd. */
static unsigned char *write_mem(const lk__st_file *f, size_t *len) {
  lk__st_item *items = malloc((f->n ? f->n : 1) * sizeof *items);
  const lk__st_tensor **order = malloc((f->n ? f->n : 1) * sizeof *order);
  FUZZ_CHECK(items && order, "malloc");
  for (size_t i = 0; i < f->n; i++)
    order[i] = &f->tensors[i];
  qsort(order, f->n, sizeof *order, by_offset);
  for (size_t i = 0; i < f->n; i++) {
    const lk__st_tensor *t = order[i];
    items[i] =
        (lk__st_item){t->name, t->dtype, t->ndim, t->shape, t->data, false};
  }
  free(order);
  char *out = NULL;
  size_t n = 0;
  FILE *s = open_memstream(&out, &n);
  FUZZ_CHECK(s != NULL, "open_memstream");
  int rc = lk__st_write_stream(s, NAME, items, f->n, f->meta, f->n_meta);
  FUZZ_CHECK(fclose(s) == 0, "fclose");
  FUZZ_CHECK(rc == 0, "an accepted file cannot be written: %d", rc);
  free(items);
  *len = n;
  return (unsigned char *)out;
}

static void round_trip(const lk__st_file *f) {
  size_t len;
  unsigned char *once = write_mem(f, &len);
  lk__st_file *back = NULL;
  int rc = lk__st_parse(NAME, once, len, &back);
  FUZZ_CHECK(rc == 0, "a written file does not read back: %d", rc);
  check_file(back, once, len);
  FUZZ_CHECK(back->n == f->n && back->n_meta == f->n_meta,
             "%zu tensors and %zu metadata read back, %zu and %zu written",
             back->n, back->n_meta, f->n, f->n_meta);
  for (size_t i = 0; i < f->n; i++) {
    const lk__st_tensor *a = &f->tensors[i], *b = lk__st_find(back, a->name);
    FUZZ_CHECK(b != NULL, "tensor %s lost", a->name);
    FUZZ_CHECK(a->dtype == b->dtype && a->ndim == b->ndim &&
                   memcmp(a->shape, b->shape, a->ndim * sizeof *a->shape) ==
                       0 &&
                   a->end - a->begin == b->end - b->begin &&
                   memcmp(a->data, b->data, (size_t)(a->end - a->begin)) == 0,
               "tensor %s changed", a->name);
  }
  for (size_t i = 0; i < f->n_meta; i++) {
    const char *v = lk__st_meta_get(back, f->meta[i].key);
    FUZZ_CHECK(v && strcmp(v, f->meta[i].value) == 0, "metadata %s changed",
               f->meta[i].key);
  }
  size_t len2;
  unsigned char *twice = write_mem(back, &len2);
  FUZZ_CHECK(len2 == len && memcmp(once, twice, len) == 0,
             "written twice, %zu then %zu different bytes", len, len2);
  free(twice);
  lk__st_free(back);
  free(once);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  bool wrap = data[0] & 1, mapped = data[0] & 2;
  data++, size--;

  unsigned char *buf;
  size_t len;
  if (wrap) { /* length, JSON, data buffer */
    const uint8_t *nul = memchr(data, 0, size);
    size_t json = nul ? (size_t)(nul - data) : size;
    size_t rest = nul ? size - json - 1 : 0;
    len = 8 + json + rest;
    buf = malloc(len);
    FUZZ_CHECK(buf != NULL, "malloc");
    for (int i = 0; i < 8; i++)
      buf[i] = (unsigned char)((uint64_t)json >> (8 * i));
    memcpy(buf + 8, data, json);
    if (rest)
      memcpy(buf + 8 + json, nul + 1, rest);
  } else { /* a copy of exactly SIZE bytes, so ASan sees any overread */
    len = size;
    buf = malloc(len ? len : 1);
    FUZZ_CHECK(buf != NULL, "malloc");
    if (len)
      memcpy(buf, data, len);
  }

  lk__st_file *f = NULL;
  const char *name = NAME;
  int rc;
  if (mapped) {
    fuzz_file_set(&file, buf, len);
    name = file.path;
    rc = lk__st_read(file.path, &f);
  } else {
    rc = lk__st_parse(NAME, buf, len, &f);
  }
  fuzz_report(rc);
  if (rc != 0) {
    FUZZ_CHECK(f == NULL, "out set on failure");
    FUZZ_CHECK(rc == LK_EFORMAT || rc == LK_ENOMEM, "returned %d", rc);
    FUZZ_CHECK(strncmp(lk_last_error(), name, strlen(name)) == 0 &&
                   lk_last_error()[strlen(name)] == ':',
               "message does not name the file: \"%s\"", lk_last_error());
  } else {
    check_file(f, mapped ? NULL : buf, len);
    round_trip(f);
    lk__st_free(f);
  }
  free(buf);
  return 0;
}
