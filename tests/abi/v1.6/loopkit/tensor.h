/* loopkit — tensors: named, typed, dense arrays with an optional gradient. */
#ifndef LOOPKIT_TENSOR_H
#define LOOPKIT_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loopkit/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lk_dtype {
  LK_F32 = 1,
  LK_F64 = 2,
  LK_I32 = 3 /* labels in batches; never a parameter */
} lk_dtype;

#define LK_MAX_DIMS 4

/* Parameters are allocated by the host (lk_host_add_param): data and grad
 * hold numel elements of dtype, 64-byte aligned, zero-filled. Batch tensors
 * belong to the data plugin and have grad == NULL. */
typedef struct lk_tensor {
  const char *name;
  lk_dtype dtype;
  size_t ndim;
  size_t shape[LK_MAX_DIMS];
  size_t numel;
  void *data;
  void *grad;
} lk_tensor;

/* Sizes multiplied without wrapping: *OUT = A * B, or false (*OUT left as
 * it was) when the product does not fit a size_t. Every product of sizes
 * in loopkit (a shape's elements, a batch's values, bytes) goes through
 * it or lk_shape_numel, so that a huge shape, declared by a plugin or
 * read from a file, is refused by name instead of wrapping into a small
 * one; plugins may use it the same way. */
static inline bool lk_size_mul(size_t a, size_t b, size_t *out) {
  if (b != 0 && a > SIZE_MAX / b)
    return false;
  *out = a * b;
  return true;
}

/* The elements of a shape, SHAPE[0] * ... * SHAPE[NDIM - 1] (1 for NDIM
 * 0), into *NUMEL; false when the product does not fit a size_t. */
static inline bool lk_shape_numel(const size_t *shape, size_t ndim,
                                  size_t *numel) {
  size_t n = 1;
  for (size_t i = 0; i < ndim; i++)
    if (!lk_size_mul(n, shape[i], &n))
      return false;
  *numel = n;
  return true;
}

/* Bytes per element of DTYPE (0 if unknown). */
LK_API size_t lk_dtype_size(lk_dtype dtype);

/* "f32", "f64", "i32" (NULL if unknown). */
LK_API const char *lk_dtype_name(lk_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
