/* safetensors files (https://github.com/huggingface/safetensors), as torch
 * and the Hugging Face tools write them:
 *
 *   8 bytes   N, little-endian unsigned
 *   N bytes   a UTF-8 JSON object: NAME -> {"dtype": "F32", "shape": [..],
 *             "data_offsets": [BEGIN, END]}, and an optional "__metadata__"
 *             object of string -> string; trailing spaces allowed
 *   the rest  the data buffer: each tensor's bytes, little-endian, row-major,
 *             at [BEGIN, END) of it
 *
 * The reader trusts nothing: the header length is bounded and within the
 * file, the JSON is parsed by a strict parser of just this grammar, names
 * are unique, dtypes known, shapes and offsets agree (without overflow) and
 * the tensors cover the data buffer exactly: no hole, no overlap, nothing
 * after the last one. Every refusal is LK_EFORMAT with a message that names
 * the file, the tensor and the field that lies. */
#ifndef LK_SAFETENSORS_H
#define LK_SAFETENSORS_H

#include "internal.h"

#define LK__ST_MAX_HEADER (100u << 20) /* bytes of JSON, as the reference */
#define LK__ST_MAX_DIMS 8

/* The dtypes of the format whose elements are whole bytes. */
typedef enum lk__st_dtype {
  LK__ST_BOOL = 1,
  LK__ST_U8,
  LK__ST_I8,
  LK__ST_F8_E5M2,
  LK__ST_F8_E4M3,
  LK__ST_F8_E8M0,
  LK__ST_I16,
  LK__ST_U16,
  LK__ST_F16,
  LK__ST_BF16,
  LK__ST_I32,
  LK__ST_U32,
  LK__ST_F32,
  LK__ST_F64,
  LK__ST_C64,
  LK__ST_I64,
  LK__ST_U64
} lk__st_dtype;

/* "F32", ... (NULL if unknown) and the bytes of one element (0 if
 * unknown). */
const char *lk__st_dtype_name(lk__st_dtype dtype);
size_t lk__st_dtype_size(lk__st_dtype dtype);

typedef struct lk__st_tensor {
  char *name; /* UTF-8, no NUL inside */
  lk__st_dtype dtype;
  size_t ndim;
  uint64_t shape[LK__ST_MAX_DIMS];
  uint64_t numel;
  uint64_t begin, end;       /* in the data buffer */
  const unsigned char *data; /* its end - begin bytes: little-endian, and
                                not aligned (memcpy them) */
} lk__st_tensor;

typedef struct lk__st_meta {
  char *key, *value;
} lk__st_meta;

typedef struct lk__st_file lk__st_file;
struct lk__st_file {
  char *path;             /* as given: what messages name */
  lk__st_tensor *tensors; /* n, in the header's order */
  size_t n;
  lk__st_meta *meta; /* n_meta, in the header's order */
  size_t n_meta;
  size_t *by_name; /* n indices into tensors, sorted by name */
  void *map;       /* the mapped file (or NULL: memory the caller owns) */
  size_t map_len;
};

/* Opens PATH (a regular file; lk_open_input's checks) and maps it: the
 * tensors' data stay in the file and are read once, by whoever copies
 * them out. */
int lk__st_read(const char *path, lk__st_file **out);

/* The same from LEN bytes at BUF, which must outlive *OUT (the tensors
 * point into it); NAME stands for the path in messages. */
int lk__st_parse(const char *name, const unsigned char *buf, size_t len,
                 lk__st_file **out);

/* The tensor named NAME, or NULL. */
const lk__st_tensor *lk__st_find(const lk__st_file *f, const char *name);

/* The value of metadata KEY, or NULL. */
const char *lk__st_meta_get(const lk__st_file *f, const char *key);

void lk__st_free(lk__st_file *f);

/* What the writer is given: one tensor. */
typedef struct lk__st_item {
  const char *name;
  lk__st_dtype dtype;
  size_t ndim;
  const uint64_t *shape;
  const void *data; /* numel elements */
  bool native;      /* DATA is in the host's byte order (a host tensor), not
                       little-endian already (bytes read from a file) */
} lk__st_item;

/* Writes the tensors, in this order, and the metadata to F (NAME in
 * messages). The header is padded with spaces to a multiple of 8 bytes,
 * as the reference writer does, so that the data buffer is aligned in the
 * file. Refuses what the reader would refuse (duplicate names, a NUL in a
 * name, a size that overflows). */
int lk__st_write_stream(FILE *f, const char *name, const lk__st_item *items,
                        size_t n, const lk__st_meta *meta, size_t n_meta);

/* The same into PATH, through lk_output_open (outfile.c): "-" is the
 * standard output, a device or a FIFO is written through, a regular file
 * is replaced atomically and is untouched on failure. */
int lk__st_write(const char *path, const lk__st_item *items, size_t n,
                 const lk__st_meta *meta, size_t n_meta);

/* ckpt_export.c: checkpoint CKPT's parameters, in its order, then the
 * N_EXTRA tensors EXTRA (a model's buffers, lk_run_export), into PATH as
 * lk_checkpoint_export (run.h) writes them. */
int lk__ckpt_export(const char *ckpt, const char *path, const char *plugin,
                    const lk__st_item *extra, size_t n_extra);

#endif
