/* Shared by the model plugins (linear, softmax, mlp): the matrix product,
 * fused bias and activation, softmax cross-entropy, and the checks of a
 * batch against a model's sizes. Everything is static inline so that each
 * plugin stays one self-contained .so with one exported symbol.
 *
 * All matrices are f32 and row-major. With LK_HAVE_BLAS (configure's
 * --with-blas) products go to OpenBLAS; otherwise to a cache-blocked C loop
 * that is always compiled, so that a test can hold the two against each
 * other in one binary. */
#ifndef LK_MODEL_COMMON_H
#define LK_MODEL_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#ifdef LK_HAVE_BLAS
#include <cblas.h>
#endif

/* ---- matrix product --------------------------------------------------- */

/* Tile of op(B) packed contiguously, so that the inner loop of every
 * transpose case runs over consecutive floats; sized to stay in L1/L2. */
#define MODEL_KB 64
#define MODEL_NB 128

/* C = alpha * op(A) op(B) + beta * C with op(A) [M, K], op(B) [K, N], in
 * portable C. */
static inline void model_sgemm_portable(bool ta, bool tb, size_t m, size_t n,
                                        size_t k, float alpha, const float *a,
                                        size_t lda, const float *b, size_t ldb,
                                        float beta, float *c, size_t ldc) {
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

/* The product every model uses. BLAS's level-2 routines take the shapes a
 * batch of one gives (a row times a matrix, an outer product): cheaper to
 * call than sgemm's general path. */
static inline void model_sgemm(bool ta, bool tb, size_t m, size_t n, size_t k,
                               float alpha, const float *a, size_t lda,
                               const float *b, size_t ldb, float beta, float *c,
                               size_t ldc) {
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

/* OpenBLAS's threads cost more than they give on these models' products:
 * on two shared cores an MLP 784-256-128-10 step ran up to 2.3x faster
 * single-threaded at batch 1, 2x at 32 and 1.1x at 256 (idle workers spin
 * with sched_yield against the loop's own thread between calls), and was
 * never slower when the machine was quiet.
 * So a model runs OpenBLAS on one thread unless the user asked for a
 * number with OPENBLAS_NUM_THREADS (or OMP_NUM_THREADS). Process-wide, but
 * the model plugins are OpenBLAS's only users in a loopkit process. */
static inline void model_blas_threads(void) {
#ifdef LK_HAVE_BLAS
  if (!getenv("OPENBLAS_NUM_THREADS") && !getenv("OMP_NUM_THREADS"))
    openblas_set_num_threads(1);
#endif
}

/* ---- layers ----------------------------------------------------------- */

/* ReLU and its derivative as a mask, four floats at a time: a compare and
 * an and, where the scalar `v > 0 ? v : 0` compiles (gcc -O2) to a branch
 * that the ~50% of active units mispredict half the time: 4 ns an element,
 * 10% of a 256-sample step. The same values bit for bit (+0 where not
 * positive, NaN included). GCC and clang vector extensions; other compilers
 * take the scalar loops. */
#if defined(__GNUC__) || defined(__clang__)
#define MODEL_VEC 1
typedef float model_v4f __attribute__((vector_size(16)));
typedef int32_t model_v4i __attribute__((vector_size(16)));

/* Z[0..m) = max(Z + B, 0) for the whole 4-float blocks; returns where the
 * scalar tail starts. memcpy: the rows need not be aligned. */
static inline size_t model_relu4(float *z, const float *b, size_t m) {
  size_t j = 0;
  for (; j + 4 <= m; j += 4) {
    model_v4f v, w;
    memcpy(&v, z + j, sizeof v);
    memcpy(&w, b + j, sizeof w);
    v += w;
    model_v4i k = (model_v4i)v & (v > 0);
    memcpy(z + j, &k, sizeof k);
  }
  return j;
}

/* D[i] = A[i] > 0 ? D[i] : 0 for the whole 4-float blocks. */
static inline size_t model_relu_grad4(float *d, const float *a, size_t n) {
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

typedef enum model_act { MODEL_NONE = 0, MODEL_RELU, MODEL_TANH } model_act;

/* Z [n, m] += bias per row, then the activation, in one pass. */
static inline void model_bias_act(float *z, const float *bias, size_t n,
                                  size_t m, model_act act) {
  for (size_t i = 0; i < n; i++) {
    float *zi = z + i * m;
    switch (act) {
    case MODEL_RELU: {
      size_t j = 0;
#ifdef MODEL_VEC
      j = model_relu4(zi, bias, m);
#endif
      for (; j < m; j++) {
        float v = zi[j] + bias[j];
        zi[j] = v > 0 ? v : 0;
      }
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

/* D [n, m] *= the activation's derivative, written through its output A. */
static inline void model_act_grad(float *d, const float *a, size_t count,
                                  model_act act) {
  if (act == MODEL_RELU) {
    size_t i = 0;
#ifdef MODEL_VEC
    i = model_relu_grad4(d, a, count);
#endif
    for (; i < count; i++)
      d[i] = a[i] > 0 ? d[i] : 0;
  } else if (act == MODEL_TANH)
    for (size_t i = 0; i < count; i++)
      d[i] *= 1 - a[i] * a[i];
}

/* The gradients of a dense layer z = x W^T + b from D = dL/dz [n, out]:
 * dW [out, in] += alpha * D^T X, db += alpha * column sums of D. */
static inline void model_dense_grad(const float *d, const float *x, size_t n,
                                    size_t in, size_t out, float alpha,
                                    float *dw, float *db) {
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

/* ---- losses and metrics ----------------------------------------------- */

/* Softmax cross-entropy of logits Z [n, c] against labels Y (in range):
 * returns the summed loss, logsumexp(z) - z[y] per row computed from the
 * row's maximum, and counts the rows whose argmax (first on ties) is the
 * label. With D, writes dL/dz of the summed loss, softmax(z) - onehot(y). */
static inline double model_xent(const float *z, const int32_t *y, size_t n,
                                size_t c, float *d, size_t *correct) {
  double loss = 0;
  size_t hits = 0;
  for (size_t i = 0; i < n; i++) {
    const float *zi = z + i * c;
    size_t arg = 0;
    for (size_t j = 1; j < c; j++)
      if (zi[j] > zi[arg])
        arg = j;
    float mx = zi[arg];
    double sum = 0;
    for (size_t j = 0; j < c; j++)
      sum += exp((double)zi[j] - mx);
    loss += (double)mx + log(sum) - zi[y[i]];
    hits += arg == (size_t)y[i];
    if (d) {
      float *di = d + i * c;
      float inv = (float)(1 / sum);
      for (size_t j = 0; j < c; j++)
        di[j] = expf(zi[j] - mx) * inv;
      di[y[i]] -= 1;
    }
  }
  *correct = hits;
  return loss;
}

/* A classifier's result for batch B from its LOGITS [n, classes]: the mean
 * softmax cross-entropy and the metric acc, with dL/dlogits of the summed
 * loss in D unless D is NULL. */
static inline void model_classify(const float *logits, const lk_batch *b,
                                  size_t classes, float *d,
                                  lk_step_result *out) {
  size_t n = b->size, correct;
  double loss = model_xent(logits, b->y.data, n, classes, d, &correct);
  out->has_loss = true;
  out->loss = loss / (double)n;
  lk_result_metric(out, "acc", (double)correct / (double)n);
}

/* ---- top-k accuracy and macro F1 ---------------------------------------
 *
 * What a classifier scores beyond its loss and acc, as torchmetrics'
 * MulticlassAccuracy(top_k) and MulticlassF1Score(average="macro"):
 * acc_top<K> (option top_k), the share of samples whose label's logit is
 * among the K largest (fewer than K logits larger than it), on every
 * batch; and f1 (option f1), over a whole validation or test split: the
 * mean over the classes that occur (as label or prediction) of 2 TP /
 * (2 TP + FP + FN), from counts its batches sum and evaluation_end sums
 * over the processes. A mean of the batches' F1 would not be it. */

#define MODEL_SCORE_OPTIONS                                                    \
  {"top_k", LK_OPT_INT, "0",                                                   \
   "also the accuracy of the K most likely classes, as metric acc_topK "       \
   "(torchmetrics' top_k); 0 or 1: none (acc is top-1)",                       \
   "[0, 1000000]"},                                                            \
  {                                                                            \
    "f1", LK_OPT_BOOL, "false",                                                \
        "the macro F1 of the validation and test splits as metric f1 "         \
        "(val_f1, test_f1), from per-class counts over the whole split",       \
        NULL                                                                   \
  }

typedef struct model_scores {
  size_t top_k;      /* <= 1: no acc_topK */
  char top_name[32]; /* "acc_top5": the metric's name, as long as the run */
  bool f1;
  size_t classes;
  double *counts; /* with f1: [3][classes], TP, FP and FN of the split */
} model_scores;

/* S from the options, for CLASSES classes. */
static inline int model_scores_init(lk_host *host, const lk_options *o,
                                    size_t classes, model_scores *s) {
  *s = (model_scores){.classes = classes};
  int64_t k = lk_opt_int(o, "top_k");
  if (k > (int64_t)classes)
    return lk_fail(host, LK_ECONFIG,
                   "%s: top_k = %lld, but the model has %zu classes",
                   lk_opt_where(o, "top_k"), (long long)k, classes);
  if (k > 1) {
    s->top_k = (size_t)k;
    snprintf(s->top_name, sizeof s->top_name, "acc_top%lld", (long long)k);
  }
  s->f1 = lk_opt_bool(o, "f1");
  if (s->f1 && !(s->counts = calloc(3 * classes, sizeof *s->counts)))
    return lk_fail(host, LK_ENOMEM, "out of memory");
  return 0;
}

static inline void model_scores_free(model_scores *s) {
  free(s->counts);
  s->counts = NULL;
}

/* Batch B's scores from its LOGITS [n, classes]: acc_topK into OUT; with
 * EVALUATING, the F1 counts (argmax: the first largest, as acc's). */
static inline void model_scores_batch(model_scores *s, const float *logits,
                                      const lk_batch *b, bool evaluating,
                                      lk_step_result *out) {
  const int32_t *y = b->y.data;
  size_t n = b->size, c = s->classes, hits = 0;
  for (size_t i = 0; s->top_k && i < n; i++) {
    const float *zi = logits + i * c;
    size_t above = 0;
    for (size_t j = 0; j < c; j++)
      above += zi[j] > zi[y[i]];
    hits += above < s->top_k;
  }
  if (s->top_k)
    lk_result_metric(out, s->top_name, (double)hits / (double)n);
  for (size_t i = 0; s->f1 && evaluating && i < n; i++) {
    const float *zi = logits + i * c;
    size_t arg = 0;
    for (size_t j = 1; j < c; j++)
      if (zi[j] > zi[arg])
        arg = j;
    if (arg == (size_t)y[i])
      s->counts[arg] += 1; /* TP */
    else {
      s->counts[c + arg] += 1;      /* FP of the prediction */
      s->counts[2 * c + y[i]] += 1; /* FN of the label */
    }
  }
}

/* evaluation_end: f1 from the split's counts, summed over the processes;
 * the counts start again for the next split. */
static inline int model_scores_end(model_scores *s, lk_host *host,
                                   lk_step_result *out) {
  if (!s->f1)
    return 0;
  size_t c = s->classes;
  int rc = lk_host_reduce_sum(host, s->counts, 3 * c);
  double sum = 0;
  size_t present = 0;
  for (size_t k = 0; rc == 0 && k < c; k++) {
    double tp = s->counts[k], fp = s->counts[c + k], fn = s->counts[2 * c + k];
    if (tp + fp + fn == 0)
      continue; /* neither a label nor a prediction: not averaged */
    sum += 2 * tp / (2 * tp + fp + fn);
    present++;
  }
  memset(s->counts, 0, 3 * c * sizeof *s->counts);
  if (rc == 0)
    lk_result_metric(out, "f1", present ? sum / (double)present : 0);
  return rc;
}

/* ---- the data, at create --------------------------------------------- */

/* "784 (1x28x28)" */
static inline void model_dims(const size_t *shape, size_t ndim, size_t numel,
                              char *buf, size_t len) {
  int used = snprintf(buf, len, "%zu", numel);
  for (size_t i = 0; ndim > 1 && i < ndim && used > 0 && (size_t)used < len;
       i++)
    used += snprintf(buf + used, len - (size_t)used, "%s%zu%s", i ? "x" : " (",
                     shape[i], i + 1 == ndim ? ")" : "");
}

/* "f32 [1, 28, 28]": the input of one sample as the data plugin declares
 * it (lk_host_data_shape checked it). */
static inline const char *model_sample_text(const lk_sample_shape *s, char *buf,
                                            size_t len) {
  const char *dt = lk_dtype_name(s->x_dtype);
  int used = snprintf(buf, len, "%s [", dt ? dt : "?");
  for (size_t i = 0;
       i < s->x_ndim && i < LK_MAX_DIMS && used > 0 && (size_t)used < len; i++)
    used += snprintf(buf + used, len - (size_t)used, "%s%zu", i ? ", " : "",
                     s->x_shape[i]);
  if (used > 0 && (size_t)used < len)
    snprintf(buf + used, len - (size_t)used, "]");
  return buf;
}

/* The data plugin's samples against the model's sizes, when it says what
 * they look like (ABI 1.4), so that a mismatch is a config error before
 * anything is trained: INPUTS features per sample, and either CLASSES
 * labels (the data's labels must fit: > 0) or OUTPUTS real targets. */
static inline int model_check_data(lk_host *host, const char *inputs_option,
                                   size_t inputs, size_t classes,
                                   size_t outputs) {
  lk_sample_shape s;
  int rc = lk_host_data_shape(host, &s);
  if (rc == LK_ENOTFOUND)
    return 0;  /* no data plugin, or it does not say: checked per batch */
  if (rc != 0) /* the host's message names the plugin and the shape */
    return lk_fail(host, LK_ECONFIG, "the data's sample shape: %s",
                   lk_last_error());
  size_t numel, ynum; /* the host has checked that they fit */
  if (!lk_shape_numel(s.x_shape, s.x_ndim, &numel) ||
      !lk_shape_numel(s.y_shape, s.y_ndim, &ynum))
    return lk_fail(host, LK_ECONFIG, "the data's samples are too large");
  char dims[96];
  model_dims(s.x_shape, s.x_ndim, numel, dims, sizeof dims);
  if (numel != inputs)
    return lk_fail(host, LK_ECONFIG,
                   "%s = %zu, but the data's samples have %s features",
                   inputs_option, inputs, dims);
  if (classes && s.n_classes == 0)
    return lk_fail(host, LK_ECONFIG,
                   "the model classifies, but the data's targets are not "
                   "class labels");
  if (classes && s.n_classes > classes)
    return lk_fail(host, LK_ECONFIG,
                   "the model has %zu classes, but the data's labels go up to "
                   "%zu",
                   classes, s.n_classes - 1);
  if (outputs && (s.n_classes > 0 || s.y_dtype == 0 || ynum != outputs))
    return lk_fail(host, LK_ECONFIG,
                   "outputs = %zu, but the data's samples have %s", outputs,
                   s.n_classes > 0  ? "class labels, not real targets"
                   : s.y_dtype == 0 ? "no targets"
                                    : "another number of targets");
  return 0;
}

/* ---- batch checks ----------------------------------------------------- */

/* "f32 [32, 784]" */
static inline const char *model_shape(const lk_tensor *t, char *buf,
                                      size_t len) {
  const char *dt = lk_dtype_name(t->dtype);
  int used = snprintf(buf, len, "%s [", dt ? dt : "?");
  for (size_t i = 0;
       i < t->ndim && i < LK_MAX_DIMS && used > 0 && (size_t)used < len; i++)
    used += snprintf(buf + used, len - (size_t)used, "%s%zu", i ? ", " : "",
                     t->shape[i]);
  if (used > 0 && (size_t)used < len)
    snprintf(buf + used, len - (size_t)used, "]");
  return buf;
}

/* x must be f32 [B, inputs] with B = the batch's size >= 1. */
static inline int model_check_x(lk_host *host, const lk_batch *b,
                                size_t inputs) {
  const lk_tensor *x = &b->x;
  if (b->size >= 1 && x->data && x->dtype == LK_F32 && x->ndim == 2 &&
      x->shape[0] == b->size && x->shape[1] == inputs)
    return 0;
  char got[96];
  if (b->size == 0 || !x->data)
    return lk_fail(host, LK_EINVAL,
                   "needs batches: x f32 [B, %zu] (is [plugins] data set?)",
                   inputs);
  return lk_fail(host, LK_EINVAL, "x: expected f32 [%zu, %zu], got %s", b->size,
                 inputs, model_shape(x, got, sizeof got));
}

/* y must be i32 [B] with every label in [0, classes). */
static inline int model_check_labels(lk_host *host, const lk_batch *b,
                                     size_t classes) {
  const lk_tensor *y = &b->y;
  char got[96];
  if (!y->data || y->dtype != LK_I32 || y->ndim != 1 || y->shape[0] != b->size)
    return lk_fail(host, LK_EINVAL,
                   "y: expected i32 [%zu] class labels, got %s", b->size,
                   model_shape(y, got, sizeof got));
  const int32_t *v = y->data;
  for (size_t i = 0; i < b->size; i++)
    if (v[i] < 0 || (size_t)v[i] >= classes)
      return lk_fail(host, LK_EINVAL,
                     "label %d of sample %zu is out of range: the model has "
                     "%zu classes (0 to %zu)",
                     (int)v[i], i, classes, classes - 1);
  return 0;
}

/* What predict_step gives: the plugin's f32 [N, WIDTH] at DATA, named
 * "logits" for a classifier's class scores (loopkit predict turns them
 * into probabilities) or anything else for a regression's outputs. */
static inline lk_tensor model_output(const char *name, float *data, size_t n,
                                     size_t width) {
  return (lk_tensor){.name = name,
                     .dtype = LK_F32,
                     .ndim = 2,
                     .shape = {n, width},
                     .numel = n * width,
                     .data = data};
}

/* A 64-byte aligned block of ROWS x WIDTH floats (NULL if out of memory,
 * or if that many bytes do not fit a size_t: a batch's rows multiply
 * sizes again). */
static inline float *model_alloc(size_t rows, size_t width) {
  size_t bytes;
  if (!lk_size_mul(rows, width, &bytes) ||
      !lk_size_mul(bytes, sizeof(float), &bytes) || bytes > SIZE_MAX - 63)
    return NULL;
  bytes = (bytes + 63) / 64 * 64;
  return aligned_alloc(64, bytes ? bytes : 64);
}

/* ---- the scaffolding of a model ---------------------------------------- */

/* A dense layer's parameters, as torch.nn.Linear names and shapes them:
 * PREFIX.weight [out, in] and PREFIX.bias [out] (PREFIX NULL: weight and
 * bias), f32, zero-filled. */
static inline int model_add_dense(lk_host *host, const char *prefix, size_t in,
                                  size_t out, lk_tensor **w, lk_tensor **b) {
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
static inline int model_reserve(lk_host *host, size_t n, size_t *cap,
                                float **buf[], const size_t width[], int k) {
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

/* ---- a model of one dense layer (linear, softmax) ----------------------- */

typedef struct model_single {
  lk_host *host;
  size_t inputs, outputs;
  lk_tensor *w, *b; /* parameters weight [outputs, inputs], bias [outputs] */
  float *buf[2];    /* the plugin's batch buffers, cap rows each */
  size_t cap;       /* batch size the buffers hold; they never shrink */
  size_t ready;     /* batch size of the training step backward may use, or 0 */
  model_scores scores; /* a classifier's top-k and F1 (softmax) */
} model_single;

static inline void model_single_destroy(void *self) {
  model_single *m = self;
  model_scores_free(&m->scores);
  free(m->buf[0]);
  free(m->buf[1]);
  free(m);
}

/* create: a layer of IN inputs and OUT outputs, the logits of OUT classes
 * when CLASSIFY (else OUT real targets), checked against the data's
 * samples; its parameters start at zero. */
static inline int model_single_new(lk_host *host, size_t in, size_t out,
                                   bool classify, void **self) {
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

/* The two batch buffers for a batch of N, of WIDTH0 and WIDTH1 floats a
 * sample. */
static inline int model_single_reserve(model_single *m, size_t n, size_t width0,
                                       size_t width1) {
  float **buf[] = {&m->buf[0], &m->buf[1]};
  size_t width[] = {width0, width1};
  return model_reserve(m->host, n, &m->cap, buf, width, 2);
}

/* backward's precondition: READY, what the last training step left for it
 * (its batch size, 0: nothing), is for this batch of N. */
static inline int model_check_ready(lk_host *host, size_t ready, size_t n) {
  if (ready == 0 || ready != n)
    return lk_fail(host, LK_ESTATE,
                   "backward without a training step on this batch");
  return 0;
}

#endif
