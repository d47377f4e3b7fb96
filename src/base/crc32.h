/* CRC-32 (IEEE 802.3, the polynomial of zlib, gzip and PNG). Private. */
#ifndef LK_CRC32_H
#define LK_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Continues CRC over LEN bytes of BUF; start with 0. Chained calls over
 * consecutive pieces give the CRC of the whole, as zlib's crc32() does. */
uint32_t lk__crc32(uint32_t crc, const void *buf, size_t len);

#endif
