/* What the tensorboard logger writes, byte for byte: protocol buffers'
 * wire format (the few encodings an Event needs) and TFRecord framing with
 * its CRC-32C. Header-only and static, so that the plugin exports nothing
 * but its descriptor, and tests/test_tfrecord.c checks these functions on
 * their own.
 *
 * A TFRecord is: the data's length (uint64, little-endian), the masked
 * CRC-32C of those 8 bytes (uint32, little-endian), the data, the masked
 * CRC-32C of the data. CRC-32C is Castagnoli's (polynomial 0x1EDC6F41,
 * reflected 0x82F63B78, as iSCSI and ext4 use); masking rotates it right
 * by 15 bits and adds 0xa282ead8, so that a CRC of data that holds CRCs
 * stays meaningful. */
#ifndef LK_PLUGIN_TFRECORD_H
#define LK_PLUGIN_TFRECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- CRC-32C ------------------------------------------------------------ */

/* Four bits at a time: a table of 16 entries (entry i is i run through the
 * reflected polynomial four times), small enough to read and check. Event
 * records are a few hundred bytes; speed does not matter here. */
static const uint32_t crc32c_nibble[16] = {
    0x00000000, 0x105ec76f, 0x20bd8ede, 0x30e349b1, 0x417b1dbc, 0x5125dad3,
    0x61c69362, 0x7198540d, 0x82f63b78, 0x92a8fc17, 0xa24bb5a6, 0xb21572c9,
    0xc38d26c4, 0xd3d3e1ab, 0xe330a81a, 0xf36e6f75};

/* The CRC-32C of N bytes at DATA (crc32c("123456789") = 0xe3069283). */
static inline uint32_t crc32c(const void *data, size_t n) {
  const uint8_t *p = data;
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    c = (c >> 4) ^ crc32c_nibble[c & 15];
    c = (c >> 4) ^ crc32c_nibble[c & 15];
  }
  return c ^ 0xffffffffu;
}

static inline uint32_t crc32c_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static inline uint32_t masked_crc32c(const void *data, size_t n) {
  return crc32c_mask(crc32c(data, n));
}

/* ---- a growing byte buffer ---------------------------------------------- */

typedef struct pb_buf {
  uint8_t *p;
  size_t n, cap;
  bool oom; /* an append failed: the buffer is incomplete */
} pb_buf;

static inline void pb_append(pb_buf *b, const void *data, size_t n) {
  if (b->oom)
    return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n)
      cap *= 2;
    uint8_t *grown = realloc(b->p, cap);
    if (!grown) {
      b->oom = true;
      return;
    }
    b->p = grown;
    b->cap = cap;
  }
  if (n)
    memcpy(b->p + b->n, data, n);
  b->n += n;
}

static inline void pb_free(pb_buf *b) {
  free(b->p);
  *b = (pb_buf){0};
}

static inline void le32(uint8_t *out, uint32_t v) {
  for (int i = 0; i < 4; i++)
    out[i] = (uint8_t)(v >> (8 * i));
}

static inline void le64(uint8_t *out, uint64_t v) {
  for (int i = 0; i < 8; i++)
    out[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t rd_le32(const uint8_t *in) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = v << 8 | in[i];
  return v;
}

static inline uint64_t rd_le64(const uint8_t *in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | in[i];
  return v;
}

/* ---- protocol buffers' wire format ------------------------------------------
 * A field is a key, (number << 3 | wire type), then its value: a varint
 * (type 0: int64, enums), 8 bytes (type 1: double), a length and that many
 * bytes (type 2: strings, bytes, embedded messages) or 4 bytes (type 5:
 * float). Little-endian throughout. */

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_BYTES = 2, PB_FIXED32 = 5 };

static inline void pb_varint(pb_buf *b, uint64_t v) {
  uint8_t out[10];
  size_t n = 0;
  do {
    out[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  pb_append(b, out, n);
}

static inline void pb_key(pb_buf *b, unsigned field, unsigned type) {
  pb_varint(b, (uint64_t)field << 3 | type);
}

/* int64 and enums: negative values take ten bytes, as protobuf's do. */
static inline void pb_int64(pb_buf *b, unsigned field, int64_t v) {
  pb_key(b, field, PB_VARINT);
  pb_varint(b, (uint64_t)v);
}

static inline void pb_double(pb_buf *b, unsigned field, double v) {
  uint64_t bits;
  uint8_t out[8];
  memcpy(&bits, &v, sizeof bits);
  le64(out, bits);
  pb_key(b, field, PB_FIXED64);
  pb_append(b, out, sizeof out);
}

static inline void pb_float(pb_buf *b, unsigned field, float v) {
  uint32_t bits;
  uint8_t out[4];
  memcpy(&bits, &v, sizeof bits);
  le32(out, bits);
  pb_key(b, field, PB_FIXED32);
  pb_append(b, out, sizeof out);
}

static inline void pb_bytes(pb_buf *b, unsigned field, const void *data,
                            size_t n) {
  pb_key(b, field, PB_BYTES);
  pb_varint(b, n);
  pb_append(b, data, n);
}

static inline void pb_string(pb_buf *b, unsigned field, const char *s) {
  pb_bytes(b, field, s, strlen(s));
}

/* An embedded message, encoded in INNER. */
static inline void pb_message(pb_buf *b, unsigned field, const pb_buf *inner) {
  if (inner->oom)
    b->oom = true;
  pb_bytes(b, field, inner->p, inner->n);
}

/* ---- TFRecord ------------------------------------------------------------ */

#define TFRECORD_OVERHEAD 16 /* length, its CRC, the data's CRC */

/* Appends DATA (N bytes) to OUT as one record. */
static inline void tfrecord_append(pb_buf *out, const void *data, size_t n) {
  uint8_t head[12], tail[4];
  le64(head, (uint64_t)n);
  le32(head + 8, masked_crc32c(head, 8));
  le32(tail, masked_crc32c(data, n));
  pb_append(out, head, sizeof head);
  pb_append(out, data, n);
  pb_append(out, tail, sizeof tail);
}

/* Whether the N bytes at P are whole records, every length and CRC right:
 * what a file written so far must be. */
static inline bool tfrecord_valid(const uint8_t *p, size_t n) {
  size_t at = 0;
  while (at < n) {
    if (n - at < 12 || rd_le32(p + at + 8) != masked_crc32c(p + at, 8))
      return false;
    uint64_t len = rd_le64(p + at);
    if (len > n - at - 12 || n - at - 12 - len < 4)
      return false;
    const uint8_t *data = p + at + 12;
    if (rd_le32(data + len) != masked_crc32c(data, (size_t)len))
      return false;
    at += 12 + (size_t)len + 4;
  }
  return true;
}

#endif
