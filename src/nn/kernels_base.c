/* The kernels of kernels.h for any CPU: 16-byte vectors (SSE2 on x86-64,
 * NEON on arm64) or scalar code. */
#include "nn_internal.h"

#define NN_KERNELS nn__kernels_base
#define NN_ISA "base"
#include "kernels.h"
