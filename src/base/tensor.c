/* Tensor helpers shared by the loop, the closure and the host. */
#include <math.h>
#include <string.h>

#include "internal.h"

size_t lk_dtype_size(lk_dtype dtype) {
  switch (dtype) {
  case LK_F32: return sizeof(float);
  case LK_F64: return sizeof(double);
  case LK_I32: return sizeof(int32_t);
  }
  return 0;
}

const char *lk_dtype_name(lk_dtype dtype) {
  switch (dtype) {
  case LK_F32: return "f32";
  case LK_F64: return "f64";
  case LK_I32: return "i32";
  }
  return NULL;
}

/* Index of the first non-finite element of BUF (numel of dtype), or -1. */
long lk__first_nonfinite(lk_dtype dtype, const void *buf, size_t numel) {
  if (dtype == LK_F64) {
    const double *v = buf;
    for (size_t i = 0; i < numel; i++)
      if (!isfinite(v[i]))
        return (long)i;
  } else if (dtype == LK_F32) {
    const float *v = buf;
    for (size_t i = 0; i < numel; i++)
      if (!isfinite(v[i]))
        return (long)i;
  }
  return -1;
}

double lk__element(lk_dtype dtype, const void *buf, size_t i) {
  return dtype == LK_F64 ? ((const double *)buf)[i]
                         : (double)((const float *)buf)[i];
}
