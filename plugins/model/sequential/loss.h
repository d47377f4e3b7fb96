/* sequential's loss (option loss), chosen by name from a table in loss.c:
 * cross_entropy (the default), nll, bce_with_logits, mse, l1, smooth_l1 and
 * huber, as torch's functional forms with mean reduction, on the layer
 * kit's losses (loopkit/nn.h), with torch's options (label_smoothing,
 * weight, pos_weight, beta, delta). The loss says what targets it takes
 * (class labels i32 [B], or f32 of the output's shape) and which metrics
 * follow it: acc for the classification losses, mse and mae for the
 * regression ones. */
#ifndef LK_SEQUENTIAL_LOSS_H
#define LK_SEQUENTIAL_LOSS_H

#include <stdbool.h>
#include <stddef.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h>

struct seq_loss_kind;

typedef struct seq_loss {
  const struct seq_loss_kind *kind;
  float label_smoothing, beta, delta;
  float *weight;     /* cross_entropy, nll: [classes], or NULL */
  float *pos_weight; /* bce_with_logits: [1 or the output's last size] */
  size_t n_weight, n_pos_weight;
  size_t width, last; /* values of a sample's output; its last size */
} seq_loss;

#define SEQ_LOSS_OPTIONS                                                       \
  {"loss", LK_OPT_ENUM, "cross_entropy",                                       \
   "the model: the loss, as torch's functional form with mean reduction; "     \
   "cross_entropy and nll take class labels (metric acc), bce_with_logits "    \
   "f32 targets of the output's shape (acc of the logits thresholded at "      \
   "0), mse, l1, smooth_l1 and huber f32 targets of the output's shape "       \
   "(metrics mse and mae)",                                                    \
   "cross_entropy|mse|l1|smooth_l1|huber|bce_with_logits|nll"},                \
      {"label_smoothing", LK_OPT_DOUBLE, "0",                                  \
       "loss = cross_entropy: torch's label_smoothing", "[0, 1]"},             \
      {"weight", LK_OPT_DOUBLES, "",                                           \
       "loss = cross_entropy or nll: a weight for each class (torch's "        \
       "weight; the mean is then divided by the sum of the targets' "          \
       "weights); empty: every class 1",                                       \
       "[0, inf)"},                                                            \
      {"pos_weight", LK_OPT_DOUBLES, "",                                       \
       "loss = bce_with_logits: the weight of the positive term, one value "   \
       "or one for each of the output's last dimension (torch's "              \
       "pos_weight); empty: 1",                                                \
       "[0, inf)"},                                                            \
      {"beta", LK_OPT_DOUBLE, "1",                                             \
       "loss = smooth_l1: where it turns from quadratic to linear (torch's "   \
       "beta; 0 is l1)",                                                       \
       "[0, inf)"},                                                            \
  {                                                                            \
    "delta", LK_OPT_DOUBLE, "1",                                               \
        "loss = huber: where it turns from quadratic to linear (torch's "      \
        "delta)",                                                              \
        "(0, inf)"                                                             \
  }

/* L from the options; an option given for another loss is refused, naming
 * both. */
int seq_loss_init(lk_host *host, const lk_options *o, seq_loss *L);
void seq_loss_free(seq_loss *L);

/* Whether the loss takes class labels (cross_entropy, nll): the network
 * then classifies, as it always did. */
bool seq_loss_labels(const seq_loss *L);
/* Its name, as the option gives it. */
const char *seq_loss_name(const seq_loss *L);

/* A loss that takes f32 targets: the network's output OUT [ND] (of layer
 * LAYER) against the data's targets SH, and the weights' sizes; *WIDTH
 * the values of a sample's output. Config errors name both. */
int seq_loss_shape(lk_host *host, seq_loss *L, const lk_sample_shape *sh,
                   const int *out, int nd, size_t *width);

/* "f32 [2]": the data's targets a sample, for messages. */
const char *seq_loss_y_text(const lk_sample_shape *sh, char *buf, size_t len);

/* Class weights against CLASSES classes (labels losses). */
int seq_loss_classes(lk_host *host, const seq_loss *L, size_t classes);

/* A batch's y for a loss of f32 targets: f32 [B, the output's shape]. */
int seq_loss_check_y(lk_host *host, const seq_loss *L, const lk_batch *b);

/* The loss of OUT [ROWS, WIDTH] against Y (i32 [ROWS] labels, or f32 [ROWS,
 * WIDTH]) into *LOSS; DOUT (NULL: none) += DLOSS times its gradient; the
 * metrics that follow the loss into RES (NULL: none). */
int seq_loss_run(lk_host *host, const seq_loss *L, lk_nn *nn, const float *out,
                 const void *y, size_t rows, size_t width, float dloss,
                 float *dout, double *loss, lk_step_result *res);

#endif
