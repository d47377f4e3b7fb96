/* Protocol buffers' wire format, the few encodings an ONNX model needs
 * (onnx_pb.c): varints, length-delimited fields (strings, bytes, nested
 * messages, packed arrays) and 32-bit floats, appended to a growing
 * buffer. Library-internal. */
#ifndef LK_NN_ONNX_PB_H
#define LK_NN_ONNX_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A message being encoded: its bytes so far. OOM is set when an append
 * failed (the bytes are then incomplete), so that callers check once. */
typedef struct lk__pb {
  uint8_t *p;
  size_t n, cap;
  bool oom;
} lk__pb;

void lk__pb_free(lk__pb *b);
void lk__pb_raw(lk__pb *b, const void *data, size_t n);
void lk__pb_varint(lk__pb *b, uint64_t v);
/* FIELD as a varint (wire type 0): ints, enums; V as two's complement */
void lk__pb_int(lk__pb *b, unsigned field, int64_t v);
/* FIELD as a 32-bit float (wire type 5) */
void lk__pb_f32(lk__pb *b, unsigned field, float v);
/* FIELD length-delimited (wire type 2): N bytes at DATA */
void lk__pb_len(lk__pb *b, unsigned field, const void *data, size_t n);
/* FIELD as the string S, without its terminator */
void lk__pb_str(lk__pb *b, unsigned field, const char *s);
/* FIELD as the message M */
void lk__pb_msg(lk__pb *b, unsigned field, const lk__pb *m);
/* FIELD as packed int64s: N values at V */
void lk__pb_packed(lk__pb *b, unsigned field, const int64_t *v, size_t n);

#endif
