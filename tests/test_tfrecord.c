/* What the tensorboard logger writes, byte for byte
 * (plugins/logger/tensorboard/tfrecord.h): CRC-32C against the published check
 * values (RFC 3720's iSCSI vectors and the catalogue's "123456789"), the mask
 * TFRecord applies, protocol buffers' varints and fixed-width fields, and the
 * framing of a record, with every way tfrecord_valid must refuse a cut or
 * altered file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../plugins/logger/tensorboard/tfrecord.h"

/* The same CRC computed bit by bit, the definition itself. */
static uint32_t crc32c_bitwise(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++)
      c = (c >> 1) ^ (c & 1 ? 0x82f63b78u : 0);
  }
  return c ^ 0xffffffffu;
}

static void crc32c_check_values(void **state) {
  (void)state;
  uint8_t buf[32];
  assert_int_equal(crc32c("123456789", 9), 0xe3069283u);
  assert_int_equal(crc32c("", 0), 0);
  assert_int_equal(crc32c("a", 1), 0xc1d04330u);
  memset(buf, 0, sizeof buf); /* RFC 3720, B.4 */
  assert_int_equal(crc32c(buf, 32), 0x8a9136aau);
  memset(buf, 0xff, sizeof buf);
  assert_int_equal(crc32c(buf, 32), 0x62a8ab43u);
  for (int i = 0; i < 32; i++)
    buf[i] = (uint8_t)i;
  assert_int_equal(crc32c(buf, 32), 0x46dd794eu);
  for (int i = 0; i < 32; i++)
    buf[i] = (uint8_t)(31 - i);
  assert_int_equal(crc32c(buf, 32), 0x113fdb5cu);
}

static void crc32c_table_is_the_polynomial(void **state) {
  (void)state;
  uint8_t buf[257];
  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (uint8_t)(i * 37 + 11);
  for (size_t n = 0; n <= sizeof buf; n++)
    assert_int_equal(crc32c(buf, n), crc32c_bitwise(buf, n));
}

static void mask_rotates_and_adds(void **state) {
  (void)state;
  assert_int_equal(crc32c_mask(0), 0xa282ead8u);
  /* 0x00008000 >> 15 = 1; << 17 = 0 (mod 2^32) */
  assert_int_equal(crc32c_mask(0x00008000u), 1u + 0xa282ead8u);
  assert_int_equal(crc32c_mask(1), (1u << 17) + 0xa282ead8u);
  assert_int_equal(masked_crc32c("123456789", 9),
                   ((0xe3069283u >> 15) | (0xe3069283u << 17)) + 0xa282ead8u);
}

static void varints_and_fixed_fields(void **state) {
  (void)state;
  pb_buf b = {0};
  pb_varint(&b, 0);
  pb_varint(&b, 1);
  pb_varint(&b, 127);
  pb_varint(&b, 128);
  pb_varint(&b, 300);
  const uint8_t want[] = {0x00, 0x01, 0x7f, 0x80, 0x01, 0xac, 0x02};
  assert_int_equal(b.n, sizeof want);
  assert_memory_equal(b.p, want, sizeof want);
  b.n = 0;
  pb_int64(&b, 2, -1); /* ten bytes, as protobuf encodes negative int64 */
  assert_int_equal(b.n, 11);
  assert_int_equal(b.p[0], 0x10);
  assert_int_equal(b.p[10], 0x01);
  b.n = 0;
  pb_double(&b, 1, 1.0);
  const uint8_t d[] = {0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f};
  assert_memory_equal(b.p, d, sizeof d);
  b.n = 0;
  pb_float(&b, 2, 0.5f);
  const uint8_t f[] = {0x15, 0, 0, 0, 0x3f};
  assert_memory_equal(b.p, f, sizeof f);
  b.n = 0;
  pb_string(&b, 3, "brain.Event:2");
  assert_int_equal(b.p[0], 0x1a);
  assert_int_equal(b.p[1], 13);
  assert_memory_equal(b.p + 2, "brain.Event:2", 13);
  assert_false(b.oom);
  pb_free(&b);
}

static void records_frame_and_validate(void **state) {
  (void)state;
  pb_buf out = {0};
  tfrecord_append(&out, "hello", 5);
  tfrecord_append(&out, "", 0);
  assert_int_equal(out.n, 5 + 2 * TFRECORD_OVERHEAD);
  assert_int_equal(rd_le64(out.p), 5);
  assert_int_equal(rd_le32(out.p + 8), masked_crc32c(out.p, 8));
  assert_memory_equal(out.p + 12, "hello", 5);
  assert_int_equal(rd_le32(out.p + 17), masked_crc32c("hello", 5));
  assert_true(tfrecord_valid(out.p, out.n));
  assert_true(tfrecord_valid(out.p, 21)); /* the first record alone */
  assert_true(tfrecord_valid(out.p, 0));
  for (size_t cut = 1; cut < out.n; cut++)
    if (cut != 21)
      assert_false(tfrecord_valid(out.p, cut));
  for (size_t i = 0; i < out.n; i++) { /* any bit flipped is found */
    out.p[i] ^= 0x10;
    assert_false(tfrecord_valid(out.p, out.n));
    out.p[i] ^= 0x10;
  }
  pb_free(&out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(crc32c_check_values),
      cmocka_unit_test(crc32c_table_is_the_polynomial),
      cmocka_unit_test(mask_rotates_and_adds),
      cmocka_unit_test(varints_and_fixed_fields),
      cmocka_unit_test(records_frame_and_validate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
