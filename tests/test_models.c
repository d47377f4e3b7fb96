/* The shared code of the model plugins (plugins/lib/model_dense.h): the
 * matrix product in both its forms (the portable blocked loop, and the one
 * the plugins call, OpenBLAS when built with LK_HAVE_BLAS) against a plain
 * double-precision product, and the softmax cross-entropy against its
 * definition. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "../plugins/lib/model_dense.h"
#include "../src/plugin/env.h" /* a host handle outside a run, for evaluation_end */

typedef void (*gemm_fn)(bool, bool, size_t, size_t, size_t, float,
                        const float *, size_t, const float *, size_t, float,
                        float *, size_t);

/* Deterministic values in [-1, 1). */
static float value(size_t i, unsigned salt) {
  uint32_t h = (uint32_t)(i * 2654435761u) ^ (salt * 40503u);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return (float)((double)(h % 20001) / 10000.0 - 1.0);
}

/* One product with padded leading dimensions (the routines must honour
 * lda/ldb/ldc, not assume packed rows) checked element by element. */
static void check_gemm(gemm_fn gemm, bool ta, bool tb, size_t m, size_t n,
                       size_t k, float alpha, float beta) {
  size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  size_t lda = ac + 3, ldb = bc + 1, ldc = n + 2;
  float *a = malloc(ar * lda * sizeof *a), *b = malloc(br * ldb * sizeof *b);
  float *c = malloc(m * ldc * sizeof *c);
  double *want = malloc(m * n * sizeof *want);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  assert_non_null(want);
  for (size_t i = 0; i < ar * lda; i++)
    a[i] = value(i, 1);
  for (size_t i = 0; i < br * ldb; i++)
    b[i] = value(i, 2);
  for (size_t i = 0; i < m * ldc; i++) /* beta = 0 must not read C */
    c[i] = beta == 0 ? NAN : value(i, 3);
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++) {
      double s = 0;
      for (size_t p = 0; p < k; p++)
        s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
             (tb ? b[j * ldb + p] : b[p * ldb + j]);
      want[i * n + j] =
          alpha * s + (beta == 0 ? 0 : (double)beta * c[i * ldc + j]);
    }
  float pad = c[n]; /* padding past a row must stay untouched */
  gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++) {
      double err = fabs(c[i * ldc + j] - want[i * n + j]);
      if (!(err <= 1e-5 * (double)(k + 1))) {
        print_error("%s%s m=%zu n=%zu k=%zu alpha=%g beta=%g: C[%zu,%zu] = "
                    "%.9g, expected %.9g\n",
                    ta ? "T" : "N", tb ? "T" : "N", m, n, k, alpha, beta, i, j,
                    c[i * ldc + j], want[i * n + j]);
        fail();
      }
    }
  if (m > 0 && beta != 0)
    assert_true(c[n] == pad);
  free(a);
  free(b);
  free(c);
  free(want);
}

/* Every transpose case on shapes that hit the special paths (a batch of
 * one, a single column, an outer product), tile edges (64, 128) and more
 * than one tile, with beta 0 (C is garbage), 1 (accumulate) and another. */
static void every_case(gemm_fn gemm) {
  static const size_t shapes[][3] = {
      {1, 10, 784}, {1, 256, 300}, {7, 1, 33},    {3, 5, 1},     {4, 9, 1},
      {2, 3, 4},    {5, 13, 70},   {17, 129, 65}, {33, 10, 200}, {64, 128, 64},
      {1, 1, 1},    {9, 300, 3},   {130, 7, 129}};
  static const float betas[] = {0, 1, 0.5f};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 4; t++)
      for (size_t bi = 0; bi < 3; bi++)
        check_gemm(gemm, t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2],
                   bi == 2 ? -0.75f : 1.0f, betas[bi]);
}

static void portable_gemm(void **state) {
  (void)state;
  every_case(model_sgemm_portable);
}

/* What the plugins call: OpenBLAS's sgemm, sgemv and sger when the test is
 * built with LK_HAVE_BLAS, the portable loop otherwise. */
static void dispatched_gemm(void **state) {
  (void)state;
  every_case(model_sgemm);
}

/* alpha = 0 and empty products leave beta * C, as BLAS defines them. */
static void degenerate_gemm(void **state) {
  (void)state;
  gemm_fn fns[2] = {model_sgemm_portable, model_sgemm};
  for (int f = 0; f < 2; f++) {
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {1, 1, 1, 1};
    fns[f](false, false, 2, 2, 2, 0, a, 2, b, 2, 2, c, 2);
    for (int i = 0; i < 4; i++)
      assert_true(c[i] == 2);
    fns[f](false, false, 2, 2, 0, 1, a, 2, b, 2, 0, c, 2);
    for (int i = 0; i < 4; i++)
      assert_true(c[i] == 0);
  }
}

/* Cross-entropy from its definition, in double, with the gradient. */
static void xent_matches_definition(void **state) {
  (void)state;
  enum { N = 5, C = 4 };
  float z[N * C], d[N * C];
  int32_t y[N] = {0, 3, 2, 1, 3};
  for (int i = 0; i < N * C; i++)
    z[i] = 3 * value((size_t)i, 7);
  size_t correct;
  double loss = model_xent(z, y, N, C, d, &correct), want = 0;
  size_t hits = 0;
  for (int i = 0; i < N; i++) {
    double sum = 0;
    int arg = 0;
    for (int j = 0; j < C; j++) {
      sum += exp((double)z[i * C + j]);
      if (z[i * C + j] > z[i * C + arg])
        arg = j;
    }
    want += log(sum) - z[i * C + y[i]];
    hits += arg == y[i];
    for (int j = 0; j < C; j++) {
      double p = exp((double)z[i * C + j]) / sum - (j == y[i]);
      assert_true(fabs(d[i * C + j] - p) < 1e-6);
    }
  }
  assert_true(fabs(loss - want) < 1e-5);
  assert_int_equal(correct, hits);
}

/* Logits far past exp's range: logsumexp from the row's maximum stays
 * finite and exact, and the gradient is a clean softmax - onehot. */
static void xent_is_stable(void **state) {
  (void)state;
  float z[6] = {1000, -1000, 999, -500, 500, 0}, d[6];
  int32_t y[2] = {2, 1};
  size_t correct;
  double loss = model_xent(z, y, 2, 3, d, &correct);
  /* row 0: 1000 + log(1 + e^-1) - 999; row 1: 500 + log(1 + ...) - 500 */
  double want = (1 + log1p(exp(-1.0))) + log1p(exp(-500.0) + exp(-1000.0));
  assert_true(isfinite(loss));
  assert_true(fabs(loss - want) < 1e-9);
  assert_int_equal(correct, 1); /* row 1's argmax is its label */
  assert_true(fabs(d[0] - 1 / (1 + exp(-1.0))) < 1e-6);
  assert_true(fabs(d[2] - (1 / (1 + exp(1.0)) - 1)) < 1e-6);
  assert_true(d[3] == 0 && d[5] == 0 && fabs(d[4]) < 1e-6);
  /* without D the same loss and count, and nothing written */
  assert_true(model_xent(z, y, 2, 3, NULL, &correct) == loss);
}

/* Ties go to the first class, as torch's argmax does. */
static void accuracy_ties(void **state) {
  (void)state;
  float z[4] = {1, 1, 2, 2};
  int32_t y[2] = {1, 0};
  size_t correct;
  model_xent(z, y, 2, 2, NULL, &correct);
  assert_int_equal(correct, 1);
}

static void bias_and_activations(void **state) {
  (void)state;
  float bias[3] = {1, -1, 0.5f};
  float z[6] = {-2, 0.5f, 0, 3, 1, -0.5f};
  float r[6], t[6], n[6];
  memcpy(r, z, sizeof z);
  memcpy(t, z, sizeof z);
  memcpy(n, z, sizeof z);
  model_bias_act(r, bias, 2, 3, MODEL_RELU);
  model_bias_act(t, bias, 2, 3, MODEL_TANH);
  model_bias_act(n, bias, 2, 3, MODEL_NONE);
  for (int i = 0; i < 6; i++) {
    float v = z[i] + bias[i % 3];
    assert_true(n[i] == v);
    assert_true(r[i] == (v > 0 ? v : 0));
    assert_true(fabsf(t[i] - tanhf(v)) < 1e-7f);
  }
  /* derivatives through the outputs: relu 1 or 0, tanh 1 - a^2 */
  float dr[6] = {1, 1, 1, 1, 1, 1}, dt[6] = {2, 2, 2, 2, 2, 2};
  model_act_grad(dr, r, 6, MODEL_RELU);
  model_act_grad(dt, t, 6, MODEL_TANH);
  for (int i = 0; i < 6; i++) {
    assert_true(dr[i] == (r[i] > 0 ? 1 : 0));
    assert_true(fabsf(dt[i] - 2 * (1 - t[i] * t[i])) < 1e-6f);
  }
}

/* dW += alpha D^T X and db += alpha colsum(D): accumulates. */
static void dense_gradients(void **state) {
  (void)state;
  float d[6] = {1, 2, 3, 4, 5, 6}; /* [2 samples, 3 outputs] */
  float x[4] = {1, -1, 2, 0.5f};   /* [2 samples, 2 inputs] */
  float dw[6] = {10, 10, 10, 10, 10, 10}, db[3] = {1, 1, 1};
  model_dense_grad(d, x, 2, 2, 3, 0.5f, dw, db);
  for (int o = 0; o < 3; o++) {
    for (int i = 0; i < 2; i++) {
      float want = 10 + 0.5f * (d[o] * x[i] + d[3 + o] * x[2 + i]);
      assert_true(fabsf(dw[o * 2 + i] - want) < 1e-6f);
    }
    assert_true(fabsf(db[o] - (1 + 0.5f * (d[o] + d[3 + o]))) < 1e-6f);
  }
}

/* Top-k accuracy and macro F1 (model_scores) against torch 1.13
 * (tests/torch/metrics_reference.py, tests/data/metrics.ref): the same
 * logits, scored in three batches as an evaluation's, F1 from the counts
 * summed over them. */
static void check_scores(size_t n, size_t c, size_t k, double want_top,
                         double want_f1) {
  float *z = malloc(n * c * sizeof *z);
  int32_t *y = malloc(n * sizeof *y);
  assert_non_null(z);
  assert_non_null(y);
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < c; j++)
      z[i * c + j] = j + 1 == c ? -10 : value(i * c + j, 7);
    y[i] = (int32_t)((int)(((double)value(i, 99) + 1) * 1000) % (int)(c - 1));
  }
  model_scores s = {.top_k = k, .f1 = true, .classes = c};
  snprintf(s.top_name, sizeof s.top_name, "acc_top%zu", k);
  s.counts = calloc(3 * c, sizeof *s.counts);
  assert_non_null(s.counts);
  lk__env env = {.world = 1};
  lk__instance in = {.label = "scores"};
  lk_host host = {&env, &in};
  double hits = 0;
  for (size_t at = 0; at < n;) {
    size_t size = n - at < n / 3 + 1 ? n - at : n / 3 + 1;
    lk_batch b = {.size = size,
                  .y = {.dtype = LK_I32,
                        .ndim = 1,
                        .shape = {size},
                        .numel = size,
                        .data = y + at}};
    lk_step_result r = {0};
    model_scores_batch(&s, z + at * c, &b, true, &r);
    assert_int_equal(r.n_metrics, 1);
    assert_string_equal(r.metrics[0].name, s.top_name);
    hits += r.metrics[0].value * (double)size;
    at += size;
  }
  lk_step_result end = {0};
  assert_int_equal(model_scores_end(&s, &host, &end), 0);
  assert_int_equal(end.n_metrics, 1);
  assert_string_equal(end.metrics[0].name, "f1");
  if (fabs(hits / (double)n - want_top) > 1e-12 ||
      fabs(end.metrics[0].value - want_f1) > 1e-12)
    fail_msg("n %zu c %zu k %zu: acc_top %.17g f1 %.17g, torch %.17g and "
             "%.17g",
             n, c, k, hits / (double)n, end.metrics[0].value, want_top,
             want_f1);
  for (size_t i = 0; i < 3 * c; i++)
    assert_true(s.counts[i] == 0); /* the next split starts afresh */
  model_scores_free(&s);
  free(z);
  free(y);
}

static void scores_match_torch(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/metrics.ref", dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f)
    fail_msg("cannot open %s", path);
  char line[256];
  size_t n = 0, c = 0, k = 0, cases = 0;
  double top = -1;
  while (fgets(line, sizeof line, f)) {
    double v;
    if (sscanf(line, "case %zu %zu %zu", &n, &c, &k) == 3)
      top = -1;
    else if (sscanf(line, "acc_top %lf", &v) == 1)
      top = v;
    else if (sscanf(line, "f1 %lf", &v) == 1 && top >= 0) {
      check_scores(n, c, k, top, v);
      cases++;
    }
  }
  fclose(f);
  assert_int_equal(cases, 3);
}

static void shapes_print(void **state) {
  (void)state;
  char buf[96];
  lk_tensor t = {.dtype = LK_F64, .ndim = 2, .shape = {32, 3}};
  assert_string_equal(model_shape(&t, buf, sizeof buf), "f64 [32, 3]");
  t = (lk_tensor){.dtype = LK_I32, .ndim = 1, .shape = {7}};
  assert_string_equal(model_shape(&t, buf, sizeof buf), "i32 [7]");
  char small[6];
  assert_string_equal(model_shape(&t, small, sizeof small), "i32 [");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(portable_gemm),
      cmocka_unit_test(dispatched_gemm),
      cmocka_unit_test(degenerate_gemm),
      cmocka_unit_test(xent_matches_definition),
      cmocka_unit_test(xent_is_stable),
      cmocka_unit_test(accuracy_ties),
      cmocka_unit_test(bias_and_activations),
      cmocka_unit_test(dense_gradients),
      cmocka_unit_test(shapes_print),
      cmocka_unit_test(scores_match_torch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
