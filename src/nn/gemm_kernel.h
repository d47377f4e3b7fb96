/* The kit's own product, for builds without OpenBLAS and LK_NN_PORTABLE or
 * LK_NN_NO_BLAS, compiled once per vector width with kernels.h (which
 * includes this): the usual blocking (panels of B and A packed
 * contiguously so that the kernel streams them; KC x NC of B and MC x KC
 * of A stay in L1/L2) around a 4 x NR kernel, NR two vectors wide, that
 * keeps its sums in registers.
 *
 * Every element of C is beta C plus alpha times the sums of its KC-blocks
 * in order, each block summed sequentially over k, a multiply then an add
 * (no FMA). Neither where an element lies in C (how a caller tiles C) nor
 * the vector width changes its value: the 16-, 32- and 64-byte builds give
 * the same bits. Measured on one core of this project's EPYC at 768 x 384
 * x 128: 7 GFLOP/s with 16 bytes, 35 with 64 (OpenBLAS: 65 to 100 then,
 * the machine being shared). The buffers are on the stack (96 KiB). */
#define MR 4
#define NR (2 * NN_W)
#define KC 128 /* the same at every width: it sets the order of the sums */
#define MC 64
#define NC 128 /* a multiple of every NR */

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
  nn_vf acc[MR][2];
  for (int i = 0; i < MR; i++)
    acc[i][0] = acc[i][1] = nn_splat(0);
  for (int p = 0; p < kc; p++, ap += MR, bp += NR) {
    nn_vf b0 = nn_load(bp), b1 = nn_load(bp + NN_W);
    for (int i = 0; i < MR; i++) {
      nn_vf ai = nn_splat(ap[i]);
      acc[i][0] += ai * b0;
      acc[i][1] += ai * b1;
    }
  }
  nn_vf s = nn_splat(alpha);
  for (int i = 0; i < MR; i++) {
    nn_store(out[i], acc[i][0] * s);
    nn_store(out[i] + NN_W, acc[i][1] * s);
  }
  for (int i = 0; i < h; i++) {
    float *ci = c + (size_t)i * (size_t)ldc;
    for (int j = 0; j < w; j++)
      ci[j] += out[i][j];
  }
}

static void sgemm(bool ta, bool tb, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta,
                  float *c, int ldc) {
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

#undef MR
#undef NR
#undef KC
#undef MC
#undef NC
