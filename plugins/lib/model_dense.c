/* The dense layers of the model plugins (model_dense.h). */
#include "model_dense.h"

#ifdef LK_HAVE_BLAS
#include <cblas.h>
#endif

/* Tile of op(B) packed contiguously, so that the inner loop of every
 * transpose case runs over consecutive floats; sized to stay in L1/L2. */
#define MODEL_KB 64
#define MODEL_NB 128

void model_sgemm_portable(bool ta, bool tb, size_t m, size_t n, size_t k,
                          float alpha, const float *a, size_t lda,
                          const float *b, size_t ldb, float beta, float *c,
                          size_t ldc) {
  for (size_t i = 0; i < m; i++) {
    float *ci = c + i * ldc;
    if (beta == 0) /* BLAS convention: C is not read, NaN included */
      memset(ci, 0, n * sizeof *ci);
    else if (beta != 1)
      for (size_t j = 0; j < n; j++)
        ci[j] *= beta;
  }
  if (alpha == 0 || k == 0)
    return;
  if (!ta && tb && m <= 4) {
    /* Few rows against B stored [N, K] (a batch of one through a layer):
     * dot products read B once, where packing would copy it for nothing.
     * Four partial sums hide the latency of the additions. */
    for (size_t i = 0; i < m; i++) {
      const float *ai = a + i * lda;
      for (size_t j = 0; j < n; j++) {
        const float *bj = b + j * ldb;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        size_t p = 0;
        for (; p + 4 <= k; p += 4) {
          s0 += ai[p] * bj[p];
          s1 += ai[p + 1] * bj[p + 1];
          s2 += ai[p + 2] * bj[p + 2];
          s3 += ai[p + 3] * bj[p + 3];
        }
        for (; p < k; p++)
          s0 += ai[p] * bj[p];
        c[i * ldc + j] += alpha * ((s0 + s1) + (s2 + s3));
      }
    }
    return;
  }
  float tile[MODEL_KB * MODEL_NB];
  for (size_t p0 = 0; p0 < k; p0 += MODEL_KB) {
    size_t kb = k - p0 < MODEL_KB ? k - p0 : MODEL_KB;
    for (size_t j0 = 0; j0 < n; j0 += MODEL_NB) {
      size_t nb = n - j0 < MODEL_NB ? n - j0 : MODEL_NB;
      for (size_t p = 0; p < kb; p++)
        for (size_t j = 0; j < nb; j++)
          tile[p * nb + j] =
              tb ? b[(j0 + j) * ldb + p0 + p] : b[(p0 + p) * ldb + j0 + j];
      for (size_t i = 0; i < m; i++) {
        float *ci = c + i * ldc + j0;
        for (size_t p = 0; p < kb; p++) {
          float s = alpha * (ta ? a[(p0 + p) * lda + i] : a[i * lda + p0 + p]);
          if (s == 0) /* ReLU activations and their deltas are sparse */
            continue;
          const float *t = tile + p * nb;
          for (size_t j = 0; j < nb; j++)
            ci[j] += s * t[j];
        }
      }
    }
  }
}

void model_sgemm(bool ta, bool tb, size_t m, size_t n, size_t k, float alpha,
                 const float *a, size_t lda, const float *b, size_t ldb,
                 float beta, float *c, size_t ldc) {
#ifdef LK_HAVE_BLAS
  if (m == 0 || n == 0)
    return;
  if (k == 0 || alpha == 0) {
    model_sgemm_portable(ta, tb, m, n, 0, 0, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (beta == 0) /* some OpenBLAS versions scale C by 0: NaN would stay */
    for (size_t i = 0; i < m; i++)
      memset(c + i * ldc, 0, n * sizeof *c);
  int ia = (int)(ta ? lda : 1); /* stride of the row op(A)[0, :] */
  if (m == 1)
    cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans,
                (int)(tb ? n : k), (int)(tb ? k : n), alpha, b, (int)ldb, a, ia,
                beta, c, 1);
  else if (n == 1)
    cblas_sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                (int)(ta ? k : m), (int)(ta ? m : k), alpha, a, (int)lda, b,
                (int)(tb ? 1 : ldb), beta, c, (int)ldc);
  else if (k == 1 && beta == 1)
    cblas_sger(CblasRowMajor, (int)m, (int)n, alpha, a, (int)(ta ? 1 : lda), b,
               (int)(tb ? ldb : 1), c, (int)ldc);
  else
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha,
                a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
#else
  model_sgemm_portable(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

void model_blas_threads(void) {
#ifdef LK_HAVE_BLAS
  if (!getenv("OPENBLAS_NUM_THREADS") && !getenv("OMP_NUM_THREADS"))
    openblas_set_num_threads(1);
#endif
}

/* ReLU (a sum masked by itself) and its derivative (a delta masked by the
 * activation) as one mask, four floats at a time: a compare and
 * an and, where the scalar `v > 0 ? v : 0` compiles (gcc -O2) to a branch
 * that the ~50% of active units mispredict half the time: 4 ns an element,
 * 10% of a 256-sample step. The same values bit for bit (+0 where not
 * positive, NaN included). GCC and clang vector extensions; other compilers
 * take the scalar loops. */
#if defined(__GNUC__) || defined(__clang__)
#define MODEL_VEC 1
typedef float model_v4f __attribute__((vector_size(16)));
typedef int32_t model_v4i __attribute__((vector_size(16)));

/* D[i] = A[i] > 0 ? D[i] : 0 for the whole 4-float blocks. */
static size_t model_mask4(float *d, const float *a, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    model_v4f dv, av;
    memcpy(&dv, d + i, sizeof dv);
    memcpy(&av, a + i, sizeof av);
    model_v4i k = (model_v4i)dv & (av > 0);
    memcpy(d + i, &k, sizeof k);
  }
  return i;
}
#endif

void model_bias_act(float *z, const float *bias, size_t n, size_t m,
                    model_act act) {
  for (size_t i = 0; i < n; i++) {
    float *zi = z + i * m;
    switch (act) {
    case MODEL_RELU: {
      for (size_t j = 0; j < m; j++)
        zi[j] += bias[j];
      size_t j = 0;
#ifdef MODEL_VEC
      j = model_mask4(zi, zi, m); /* the sum masked by itself */
#endif
      for (; j < m; j++)
        zi[j] = zi[j] > 0 ? zi[j] : 0;
      break;
    }
    case MODEL_TANH:
      for (size_t j = 0; j < m; j++)
        zi[j] = tanhf(zi[j] + bias[j]);
      break;
    default:
      for (size_t j = 0; j < m; j++)
        zi[j] += bias[j];
    }
  }
}

void model_act_grad(float *d, const float *a, size_t count, model_act act) {
  if (act == MODEL_RELU) {
    size_t i = 0;
#ifdef MODEL_VEC
    i = model_mask4(d, a, count);
#endif
    for (; i < count; i++)
      d[i] = a[i] > 0 ? d[i] : 0;
  } else if (act == MODEL_TANH)
    for (size_t i = 0; i < count; i++)
      d[i] *= 1 - a[i] * a[i];
}

void model_dense_grad(const float *d, const float *x, size_t n, size_t in,
                      size_t out, float alpha, float *dw, float *db) {
  if (n == 1) {
    /* One sample: dW += (alpha d) x^T row by row, as BLAS's sger does it,
     * but skipping the rows whose delta is 0 (the units ReLU switched off,
     * about half), which sger reads and writes back unchanged. */
    for (size_t j = 0; j < out; j++) {
      float s = alpha * d[j];
      db[j] += s;
      if (s == 0)
        continue;
      float *row = dw + j * in;
#ifdef LK_HAVE_BLAS
      cblas_saxpy((int)in, s, x, 1, row, 1);
#else
      for (size_t p = 0; p < in; p++)
        row[p] += s * x[p];
#endif
    }
    return;
  }
  model_sgemm(true, false, out, in, n, alpha, d, out, x, in, 1, dw, in);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < out; j++)
      db[j] += alpha * d[i * out + j];
}

int model_add_dense(lk_host *host, const char *prefix, size_t in, size_t out,
                    lk_tensor **w, lk_tensor **b) {
  char name[64];
  size_t shape[2] = {out, in};
  snprintf(name, sizeof name, "%s%sweight", prefix ? prefix : "",
           prefix ? "." : "");
  int rc = lk_host_add_param(host, name, LK_F32, 2, shape, w);
  snprintf(name, sizeof name, "%s%sbias", prefix ? prefix : "",
           prefix ? "." : "");
  return rc ? rc : lk_host_add_param(host, name, LK_F32, 1, shape, b);
}

/* Makes the K batch buffers BUF[i] hold N rows of WIDTH[i] floats; *CAP is
 * the rows they hold, and they never shrink. On failure *CAP is 0 (every
 * buffer is reallocated at the next batch). */
static int model_reserve(lk_host *host, size_t n, size_t *cap, float **buf[],
                         const size_t width[], int k) {
  if (n <= *cap)
    return 0;
  bool ok = true;
  for (int i = 0; i < k; i++) {
    free(*buf[i]);
    ok = (*buf[i] = model_alloc(n, width[i])) && ok;
  }
  *cap = ok ? n : 0;
  return ok ? 0
            : lk_fail(host, LK_ENOMEM, "out of memory for a batch of %zu", n);
}

void model_single_destroy(void *self) {
  model_single *m = self;
  model_scores_free(&m->scores);
  free(m->buf[0]);
  free(m->buf[1]);
  free(m);
}

int model_single_new(lk_host *host, size_t in, size_t out, bool classify,
                     void **self) {
  model_blas_threads();
  int rc = model_check_data(host, "inputs", in, classify ? out : 0,
                            classify ? 0 : out);
  if (rc != 0)
    return rc;
  model_single *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  m->inputs = in;
  m->outputs = out;
  if ((rc = model_add_dense(host, NULL, in, out, &m->w, &m->b)) != 0) {
    free(m);
    return rc;
  }
  *self = m;
  return 0;
}

int model_single_reserve(model_single *m, size_t n, size_t width0,
                         size_t width1) {
  float **buf[] = {&m->buf[0], &m->buf[1]};
  size_t width[] = {width0, width1};
  return model_reserve(m->host, n, &m->cap, buf, width, 2);
}

/* ---- ONNX ---------------------------------------------------------------- */

int model_onnx_io(lk_host *host, lk_onnx *g, size_t inputs, size_t outputs) {
  int64_t in[2] = {-1, (int64_t)inputs}, out[2] = {-1, (int64_t)outputs};
  int rc = lk_onnx_input(g, LK_ONNX_F32, 2, in);
  if (rc == 0)
    rc = lk_onnx_output(g, LK_ONNX_F32, 2, out);
  return rc ? lk_fail(host, rc, "%s", lk_last_error()) : 0;
}

int model_onnx_dense(lk_host *host, lk_onnx *g, const char *x,
                     const lk_tensor *w, const lk_tensor *b, model_act act,
                     const char *out, const char **made) {
  lk_onnx_attr trans = {.name = "transB", .type = LK_ONNX_INT, .i = 1};
  const char *in[3] = {x, w->name, b->name};
  /* The Gemm's output is OUT itself unless an activation follows. */
  const char *z = act == MODEL_NONE && out ? out : lk_onnx_tmp(g, "dense");
  const char *y = act == MODEL_NONE ? z : out ? out : lk_onnx_tmp(g, "act");
  int rc = z && y ? 0 : LK_ENOMEM;
  if (rc == 0)
    rc = lk_onnx_initializer(g, NULL, w);
  if (rc == 0)
    rc = lk_onnx_initializer(g, NULL, b);
  if (rc == 0)
    rc = lk_onnx_node(g, "Gemm", in, 3, &z, 1, &trans, 1);
  if (rc == 0 && act != MODEL_NONE)
    rc = lk_onnx_node(g, act == MODEL_RELU ? "Relu" : "Tanh", &z, 1, &y, 1,
                      NULL, 0);
  if (rc != 0)
    return lk_fail(host, rc, "%s", lk_last_error());
  if (made)
    *made = y;
  return 0;
}
