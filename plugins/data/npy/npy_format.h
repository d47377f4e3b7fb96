/* The two file formats of the npy data plugin, parsed from memory and
 * nothing else (no files, no host), so that fuzz/fuzz_npy.c and
 * tests/test_npy.c reach them directly:
 * - a .npy file's header (numpy.lib.format, versions 1.0, 2.0 and 3.0):
 *   the magic, the header's length, and its Python-literal dict of
 *   'descr', 'fortran_order' and 'shape';
 * - an .npz archive's directory: a zip file (np.savez stores its members,
 *   np.savez_compressed deflates them), zip64 records included (numpy
 *   writes every member with zip64 extra fields).
 * Every refusal is a sentence in WHY that names the field ("header field
 * 'descr': '<c8' is not supported ..."); the caller puts the file's name
 * in front of it. Nothing read is trusted: lengths are checked against
 * the buffer, products against overflow. */
#ifndef LOOPKIT_PLUGINS_NPY_FORMAT_H
#define LOOPKIT_PLUGINS_NPY_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The element types the plugin reads. */
enum { NPY_F4 = 1, NPY_F8, NPY_U1, NPY_I4, NPY_I8 };

#define NPY_MAX_DIMS 8        /* dimensions parsed; the plugin takes fewer */
#define NPY_MAX_HEADER 100000 /* bytes of dict: ten times numpy's own limit */

typedef struct npy_header {
  int major, minor; /* the format's version */
  int type;         /* NPY_* */
  bool big_endian;  /* the data's byte order ('>'); false for one byte */
  char descr[8];    /* as written, for messages: "<f4" */
  size_t itemsize;  /* bytes per element */
  size_t ndim;      /* 1 .. NPY_MAX_DIMS */
  uint64_t shape[NPY_MAX_DIMS];
  uint64_t offset; /* where the data starts: magic, length and dict */
  uint64_t numel;  /* the product of the shape */
  uint64_t bytes;  /* numel * itemsize: the data, exactly */
} npy_header;

/* Parses the .npy file (or npz member) of LEN bytes at BUF: its header,
 * and that the data after it is exactly numel * itemsize bytes long (a
 * truncated file, or bytes after the data, are refused). Returns 0, or -1
 * with the reason in WHY (WHY_LEN bytes, NUL-terminated). */
int npy_parse_header(const unsigned char *buf, size_t len, npy_header *h,
                     char *why, size_t why_len);

/* Whether the data of H is in the other byte order than this host's. */
bool npy_swapped(const npy_header *h);

/* The SIZE (4 or 8) bytes at P as an integer, byte-swapped when SWAP. */
uint64_t npy_load_bits(const unsigned char *p, size_t size, bool swap);

/* Element I of the data at DATA, as H describes it (SWAP: npy_swapped),
 * as a double: exact for every type but int64 past 2^53. The data is
 * read by the npy data plugin and by loopkit predict --input. */
double npy_value_at(const npy_header *h, const unsigned char *data, bool swap,
                    uint64_t i);

/* "(60000, 28, 28)", as numpy writes a shape, into BUF. */
const char *npy_shape_text(const npy_header *h, char *buf, size_t len);

/* One member of an .npz archive. */
typedef struct npz_member {
  const char *name; /* into the archive's bytes, not NUL-terminated */
  size_t name_len;
  int method;      /* 0: stored, 8: deflated */
  uint32_t crc;    /* CRC-32 of the uncompressed bytes */
  uint64_t offset; /* of the member's data, from the archive's start */
  uint64_t csize;  /* bytes stored at offset */
  uint64_t usize;  /* bytes once inflated (csize when stored) */
} npz_member;

/* Parses the directory of the zip archive of LEN bytes at BUF into a new
 * array *OUT of *N members (free it). Every member's data lies inside the
 * archive; names are unique. Returns 0, or -1 (with WHY; *OUT NULL) for
 * a damaged or unsupported archive, -2 when out of memory. */
int npz_parse(const unsigned char *buf, size_t len, npz_member **out, size_t *n,
              char *why, size_t why_len);

#endif
