/* The kernels of kernels.h with 64-byte vectors, for x86-64 CPUs with
 * AVX512F (lk_nn_create checks with __builtin_cpu_supports). Only the
 * functions of this file are compiled for it: the system headers come
 * before the target pragma. */
#include <stdint.h>
#include <string.h>

#include "nn_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx512f"))),               \
                             apply_to = function)
#else
#pragma GCC target("avx512f")
#endif
#define NN_VBYTES 64
#define NN_KERNELS nn__kernels_avx512
#define NN_ISA "avx512"
#include "kernels.h"
#ifdef __clang__
#pragma clang attribute pop
#endif
#else
const nn_kernels nn__kernels_avx512 = {0}; /* never chosen */
#endif
