/* loopkit — tensors: named, typed, dense arrays with an optional gradient. */
#ifndef LOOPKIT_TENSOR_H
#define LOOPKIT_TENSOR_H

#include <stddef.h>

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

/* Bytes per element of DTYPE (0 if unknown). */
LK_API size_t lk_dtype_size(lk_dtype dtype);

/* "f32", "f64", "i32" (NULL if unknown). */
LK_API const char *lk_dtype_name(lk_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
