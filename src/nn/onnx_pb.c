/* Protocol buffers' wire format for the ONNX writer (onnx_pb.h): a key is
 * (field << 3 | wire type) as a varint; a varint is 7 bits a byte, least
 * significant first, the high bit set on all but the last; a negative
 * int64 is its two's complement, ten bytes. Floats are little-endian. */
#include <stdlib.h>
#include <string.h>

#include "onnx_pb.h"

enum { WIRE_VARINT = 0, WIRE_LEN = 2, WIRE_I32 = 5 };

void lk__pb_free(lk__pb *b) {
  free(b->p);
  *b = (lk__pb){0};
}

void lk__pb_raw(lk__pb *b, const void *data, size_t n) {
  if (b->oom || n == 0)
    return;
  if (b->n + n < b->n) {
    b->oom = true;
    return;
  }
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n)
      cap = cap > SIZE_MAX / 2 ? b->n + n : 2 * cap;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->n, data, n);
  b->n += n;
}

void lk__pb_varint(lk__pb *b, uint64_t v) {
  uint8_t buf[10];
  size_t n = 0;
  do {
    buf[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    buf[n++] |= v ? 0x80 : 0;
  } while (v);
  lk__pb_raw(b, buf, n);
}

static void key(lk__pb *b, unsigned field, unsigned wire) {
  lk__pb_varint(b, (uint64_t)field << 3 | wire);
}

void lk__pb_int(lk__pb *b, unsigned field, int64_t v) {
  key(b, field, WIRE_VARINT);
  lk__pb_varint(b, (uint64_t)v);
}

void lk__pb_f32(lk__pb *b, unsigned field, float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
                   (uint8_t)(u >> 24)};
  key(b, field, WIRE_I32);
  lk__pb_raw(b, le, sizeof le);
}

void lk__pb_len(lk__pb *b, unsigned field, const void *data, size_t n) {
  key(b, field, WIRE_LEN);
  lk__pb_varint(b, n);
  lk__pb_raw(b, data, n);
}

void lk__pb_str(lk__pb *b, unsigned field, const char *s) {
  lk__pb_len(b, field, s, strlen(s));
}

void lk__pb_msg(lk__pb *b, unsigned field, const lk__pb *m) {
  b->oom |= m->oom;
  lk__pb_len(b, field, m->p, m->n);
}

void lk__pb_packed(lk__pb *b, unsigned field, const int64_t *v, size_t n) {
  lk__pb body = {0};
  for (size_t i = 0; i < n; i++)
    lk__pb_varint(&body, (uint64_t)v[i]);
  lk__pb_msg(b, field, &body);
  lk__pb_free(&body);
}
