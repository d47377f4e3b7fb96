/* The kit's exp-based elementwise kernels and its own product
 * (gemm_kernel.h), compiled once per instruction set: kernels_base.c (NN_VBYTES
 * 16, no target: SSE2, NEON, or scalar), and on x86-64 kernels_avx2.c (32) and
 * kernels_avx512.c (64). Each defines NN_KERNELS, the table's name, and NN_ISA
 * before including this. lk_nn_create picks the widest the CPU runs; vmath.h
 * explains why all three give the same bits. Measured on this project's machine
 * (AMD EPYC, AVX-512, one thread), GELU's forward and backward over 768 x
 * 512: 6.2 ns a value with 16-byte vectors, 2.6 ns with 32-byte ones, 1.6 ns
 * with 64-byte ones, when GELU went through nn_tanh; through vmath.h's
 * sigmoid form, 1.3 ns with 64-byte vectors where the tanh form took 2.1
 * (thread CPU time, the best of 9 blocks of 200). */
#include "vmath.h"

#include "gemm_kernel.h"

static void gelu(float *y, const float *x, size_t n) {
  NN_MAP(n, y, x, nn_gelu(v));
}

static void gelu_grad(float *dx, const float *dy, const float *x, size_t n) {
  NN_ACC(n, dx, dy, x, d * nn_gelu_grad(v));
}

static void tanh_(float *y, const float *x, size_t n) {
  NN_MAP(n, y, x, nn_tanh(v));
}

static void sigmoid(float *y, const float *x, size_t n) {
  NN_MAP(n, y, x, nn_sigmoid(v));
}

/* The activations of issue 27 that take an exp (vmath.h): y = f(x), and
 * dx += dy f'(x), through the input. */
static void silu(float *y, const float *x, size_t n) {
  NN_MAP(n, y, x, nn_silu(v));
}

static void silu_grad(float *dx, const float *dy, const float *x, size_t n) {
  NN_ACC(n, dx, dy, x, d * nn_silu_grad(v));
}

static void mish(float *y, const float *x, size_t n) {
  NN_MAP(n, y, x, nn_mish(v));
}

static void mish_grad(float *dx, const float *dy, const float *x, size_t n) {
  NN_ACC(n, dx, dy, x, d * nn_mish_grad(v));
}

static void elu(float *y, const float *x, size_t n, float alpha, float unused) {
  (void)unused;
  NN_MAP(n, y, x, nn_elu(v, alpha));
}

static void elu_grad(float *dx, const float *dy, const float *x, size_t n,
                     float alpha, float unused) {
  (void)unused;
  NN_ACC(n, dx, dy, x, d * nn_elu_grad(v, alpha));
}

static void softplus(float *y, const float *x, size_t n, float beta,
                     float threshold) {
  NN_MAP(n, y, x, nn_softplus(v, beta, threshold));
}

static void softplus_grad(float *dx, const float *dy, const float *x, size_t n,
                          float beta, float threshold) {
  NN_ACC(n, dx, dy, x, d * nn_softplus_grad(v, beta, threshold));
}

static void exp_shift(float *y, const float *x, float m, size_t n) {
  nn_vf mv = nn_splat(m);
  NN_MAP(n, y, x, nn_exp(v - mv));
}

/* acc[j] += x[i ld + j] over the rows i in order, j in [0, cols): each
 * column's sum in one lane of a register, four vectors of columns at a
 * time through all the rows (a bias's gradient; the loop it replaces
 * added each row into memory, the same sums at four times the time). */
static void col_sums(float *acc, const float *x, size_t rows, size_t cols,
                     size_t ld) {
  size_t j = 0;
  for (; j + 4 * NN_W <= cols; j += 4 * NN_W) {
    nn_vf a0 = nn_load(acc + j), a1 = nn_load(acc + j + NN_W),
          a2 = nn_load(acc + j + 2 * NN_W), a3 = nn_load(acc + j + 3 * NN_W);
    const float *p = x + j;
    for (size_t i = 0; i < rows; i++, p += ld) {
      a0 += nn_load(p);
      a1 += nn_load(p + NN_W);
      a2 += nn_load(p + 2 * NN_W);
      a3 += nn_load(p + 3 * NN_W);
    }
    nn_store(acc + j, a0);
    nn_store(acc + j + NN_W, a1);
    nn_store(acc + j + 2 * NN_W, a2);
    nn_store(acc + j + 3 * NN_W, a3);
  }
  for (; j + NN_W <= cols; j += NN_W) {
    nn_vf a = nn_load(acc + j);
    for (size_t i = 0; i < rows; i++)
      a += nn_load(x + i * ld + j);
    nn_store(acc + j, a);
  }
  for (; j < cols; j++) {
    float a = acc[j];
    for (size_t i = 0; i < rows; i++)
      a += x[i * ld + j];
    acc[j] = a;
  }
}

const nn_kernels NN_KERNELS = {.isa = NN_ISA,
                               .gelu = gelu,
                               .gelu_grad = gelu_grad,
                               .tanh = tanh_,
                               .sigmoid = sigmoid,
                               .silu = silu,
                               .silu_grad = silu_grad,
                               .mish = mish,
                               .mish_grad = mish_grad,
                               .elu = elu,
                               .elu_grad = elu_grad,
                               .softplus = softplus,
                               .softplus_grad = softplus_grad,
                               .exp_shift = exp_shift,
                               .col_sums = col_sums,
                               .sgemm = sgemm};
