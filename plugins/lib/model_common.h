/* Shared by the model plugins (linear, softmax, mlp, sequential): softmax
 * cross-entropy, a classifier's scores, the checks of the data and of a
 * batch against a model's sizes, and the batch buffers. The products and
 * layers are model_dense.h's. Built once into plugins/lib/libplugincommon.la
 * (model_common.c). All matrices are f32 and row-major. */
#ifndef LK_MODEL_COMMON_H
#define LK_MODEL_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

/* ---- losses and metrics ----------------------------------------------- */

/* Softmax cross-entropy of logits Z [n, c] against labels Y (in range):
 * returns the summed loss, logsumexp(z) - z[y] per row computed from the
 * row's maximum, and counts the rows whose argmax (first on ties) is the
 * label. With D, writes dL/dz of the summed loss, softmax(z) - onehot(y). */
double model_xent(const float *z, const int32_t *y, size_t n, size_t c,
                  float *d, size_t *correct);

/* A classifier's result for batch B from its LOGITS [n, classes]: the mean
 * softmax cross-entropy and the metric acc, with dL/dlogits of the summed
 * loss in D unless D is NULL. */
void model_classify(const float *logits, const lk_batch *b, size_t classes,
                    float *d, lk_step_result *out);

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
int model_scores_init(lk_host *host, const lk_options *o, size_t classes,
                      model_scores *s);

void model_scores_free(model_scores *s);

/* Batch B's scores from its LOGITS [n, classes]: acc_topK into OUT; with
 * EVALUATING, the F1 counts (argmax: the first largest, as acc's). */
void model_scores_batch(model_scores *s, const float *logits, const lk_batch *b,
                        bool evaluating, lk_step_result *out);

/* evaluation_end: f1 from the split's counts, summed over the processes;
 * the counts start again for the next split. */
int model_scores_end(model_scores *s, lk_host *host, lk_step_result *out);

/* The step entries of a classifier whose instance, of TYPE, has host and
 * scores, whose step is FORWARD(self, batch, out, training) and whose
 * predict_step is its own: training_step and validation_step differ only
 * in what the forward pass keeps for backward, and evaluation_end gives
 * the scores. Defines them and step_ops. */
#define MODEL_CLASSIFIER_STEPS(type, forward, onnx_graph)                      \
  static int training_step(void *self, const lk_batch *b,                      \
                           lk_step_result *out) {                              \
    return forward(self, b, out, true);                                        \
  }                                                                            \
  static int validation_step(void *self, const lk_batch *b,                    \
                             lk_step_result *out) {                            \
    return forward(self, b, out, false);                                       \
  }                                                                            \
  static int evaluation_end(void *self, lk_split split,                        \
                            const lk_step_result *mean, lk_step_result *out) { \
    type *m = self;                                                            \
    (void)split;                                                               \
    (void)mean;                                                                \
    return model_scores_end(&m->scores, m->host, out);                         \
  }                                                                            \
  static const lk_step_ops step_ops = {.training_step = training_step,         \
                                       .validation_step = validation_step,     \
                                       .predict_step = predict_step,           \
                                       .evaluation_end = evaluation_end,       \
                                       .onnx = onnx_graph}

/* ---- the data, at create --------------------------------------------- */

/* "f32 [1, 28, 28]": the input of one sample as the data plugin declares
 * it (lk_host_data_shape checked it). */
const char *model_sample_text(const lk_sample_shape *s, char *buf, size_t len);

/* The data plugin's samples against the model's sizes, when it says what
 * they look like (ABI 1.4), so that a mismatch is a config error before
 * anything is trained: INPUTS features per sample, and either CLASSES
 * labels (the data's labels must fit: > 0) or OUTPUTS real targets. */
int model_check_data(lk_host *host, const char *inputs_option, size_t inputs,
                     size_t classes, size_t outputs);

/* The init option, once the model has added its parameters (the run's
 * only ones): a FILE.safetensors fills them by name (lk_host_load_params);
 * any other path is a raw little-endian f32 file of every parameter in
 * order, each laid out as torch's (what torch.cat([p.flatten() for p in
 * model.parameters()]) writes with tofile). *LOADED is false when init is
 * empty: the model then draws torch's init. A raw file of another size is
 * error CODE, its message saying that the file holds LAYOUT. */
int model_load_init(lk_host *host, const lk_options *o, const char *layout,
                    int code, bool *loaded);

/* ---- batch checks ----------------------------------------------------- */

/* "f32 [32, 784]" */
const char *model_shape(const lk_tensor *t, char *buf, size_t len);

/* x must be f32 [B, inputs] with B = the batch's size >= 1. */
int model_check_x(lk_host *host, const lk_batch *b, size_t inputs);

/* y must be i32 [B] with every label in [0, classes). */
int model_check_labels(lk_host *host, const lk_batch *b, size_t classes);

/* What predict_step gives: the plugin's f32 [N, WIDTH] at DATA, named
 * "logits" for a classifier's class scores (loopkit predict turns them
 * into probabilities) or anything else for a regression's outputs. */
lk_tensor model_output(const char *name, float *data, size_t n, size_t width);

/* A 64-byte aligned block of ROWS x WIDTH floats (NULL if out of memory,
 * or if that many bytes do not fit a size_t: a batch's rows multiply
 * sizes again). */
float *model_alloc(size_t rows, size_t width);

/* backward's precondition: READY, what the last training step left for it
 * (its batch size, 0: nothing), is for this batch of N. */
int model_check_ready(lk_host *host, size_t ready, size_t n);

#endif
