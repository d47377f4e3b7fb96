/* The kernels of kernels.h with 32-byte vectors, for x86-64 CPUs with
 * AVX2 (lk_nn_create checks with __builtin_cpu_supports). Only the
 * functions of this file are compiled for it: the system headers come
 * before the target pragma. */
#include <stdint.h>
#include <string.h>

#include "nn_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2"))),                  \
                             apply_to = function)
#else
#pragma GCC target("avx2")
#endif
#define NN_VBYTES 32
#define NN_KERNELS nn__kernels_avx2
#define NN_ISA "avx2"
#include "kernels.h"
#ifdef __clang__
#pragma clang attribute pop
#endif
#else
const nn_kernels nn__kernels_avx2 = {0}; /* never chosen */
#endif
