/* The portable product, for builds without OpenBLAS (and LK_NN_PORTABLE):
 * the usual blocking (panels of B and A packed contiguously so that the
 * kernel streams them; KC x NC of B and MC x KC of A stay in L1/L2) around
 * a 4 x 8 kernel that keeps its 32 sums in registers (eight 4-float vectors
 * with GCC or clang vector extensions: SSE2 or NEON without -m flags).
 *
 * Every element of C is beta C plus alpha times the sums of its KC-blocks
 * in order, each block summed sequentially over k: where an element lies
 * in C, and so how a caller tiles C, does not change its value. The
 * buffers are on the stack (96 KiB). */
#include <string.h>

#include "nn_internal.h"

#define MR 4
#define NR 8
#define KC 128
#define MC 64
#define NC 128

#if defined(__GNUC__) || defined(__clang__)
typedef float v4f __attribute__((vector_size(16)));
#define VEC 1
#endif

/* Bp [NC/NR][KC][NR]: B[p][j] (op applied), zero beyond n. */
static void pack_b(bool tb, const float *b, int ldb, int kc, int nc,
                   float *bp) {
  for (int j0 = 0; j0 < nc; j0 += NR) {
    int w = nc - j0 < NR ? nc - j0 : NR;
    for (int p = 0; p < kc; p++, bp += NR) {
      for (int j = 0; j < w; j++)
        bp[j] = tb ? b[(size_t)(j0 + j) * (size_t)ldb + (size_t)p]
                   : b[(size_t)p * (size_t)ldb + (size_t)(j0 + j)];
      for (int j = w; j < NR; j++)
        bp[j] = 0;
    }
  }
}

/* Ap [MC/MR][KC][MR]: A[i][p] (op applied), zero beyond m. */
static void pack_a(bool ta, const float *a, int lda, int mc, int kc,
                   float *ap) {
  for (int i0 = 0; i0 < mc; i0 += MR) {
    int h = mc - i0 < MR ? mc - i0 : MR;
    for (int p = 0; p < kc; p++, ap += MR) {
      for (int i = 0; i < h; i++)
        ap[i] = ta ? a[(size_t)p * (size_t)lda + (size_t)(i0 + i)]
                   : a[(size_t)(i0 + i) * (size_t)lda + (size_t)p];
      for (int i = h; i < MR; i++)
        ap[i] = 0;
    }
  }
}

/* C [h, w] += alpha * Ap^T Bp over kc. */
static void kernel(int kc, const float *ap, const float *bp, float alpha,
                   float *c, int ldc, int h, int w) {
  float out[MR][NR];
#ifdef VEC
  v4f acc[MR][2];
  memset(acc, 0, sizeof acc);
  for (int p = 0; p < kc; p++, ap += MR, bp += NR) {
    v4f b0, b1;
    memcpy(&b0, bp, sizeof b0);
    memcpy(&b1, bp + 4, sizeof b1);
    for (int i = 0; i < MR; i++) {
      v4f ai = {ap[i], ap[i], ap[i], ap[i]};
      acc[i][0] += ai * b0;
      acc[i][1] += ai * b1;
    }
  }
  for (int i = 0; i < MR; i++) {
    v4f s = {alpha, alpha, alpha, alpha};
    v4f lo = acc[i][0] * s, hi = acc[i][1] * s;
    memcpy(out[i], &lo, sizeof lo);
    memcpy(out[i] + 4, &hi, sizeof hi);
  }
#else
  float acc[MR][NR] = {{0}};
  for (int p = 0; p < kc; p++, ap += MR, bp += NR)
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++)
        acc[i][j] += ap[i] * bp[j];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++)
      out[i][j] = acc[i][j] * alpha;
#endif
  for (int i = 0; i < h; i++) {
    float *ci = c + (size_t)i * (size_t)ldc;
    for (int j = 0; j < w; j++)
      ci[j] += out[i][j];
  }
}

void nn__sgemm_portable(bool ta, bool tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb,
                        float beta, float *c, int ldc) {
  for (int i = 0; i < m; i++) {
    float *ci = c + (size_t)i * (size_t)ldc;
    if (beta == 0) /* BLAS: C is not read, NaN included */
      memset(ci, 0, (size_t)n * sizeof *ci);
    else if (beta != 1)
      for (int j = 0; j < n; j++)
        ci[j] *= beta;
  }
  if (alpha == 0 || k == 0)
    return;
  float bp[KC * NC], ap[MC * KC];
  for (int jc = 0; jc < n; jc += NC) {
    int nc = n - jc < NC ? n - jc : NC;
    for (int pc = 0; pc < k; pc += KC) {
      int kc = k - pc < KC ? k - pc : KC;
      pack_b(tb,
             tb ? b + (size_t)jc * (size_t)ldb + (size_t)pc
                : b + (size_t)pc * (size_t)ldb + (size_t)jc,
             ldb, kc, nc, bp);
      for (int ic = 0; ic < m; ic += MC) {
        int mc = m - ic < MC ? m - ic : MC;
        pack_a(ta,
               ta ? a + (size_t)pc * (size_t)lda + (size_t)ic
                  : a + (size_t)ic * (size_t)lda + (size_t)pc,
               lda, mc, kc, ap);
        for (int jr = 0; jr < nc; jr += NR)
          for (int ir = 0; ir < mc; ir += MR)
            kernel(kc, ap + (size_t)ir * (size_t)kc,
                   bp + (size_t)jr * (size_t)kc, alpha,
                   c + (size_t)(ic + ir) * (size_t)ldc + (size_t)(jc + jr), ldc,
                   mc - ir < MR ? mc - ir : MR, nc - jr < NR ? nc - jr : NR);
      }
    }
  }
}
