/* sequential's model and its network as a graph (graph.c): the layers of
 * the list, blocks expanded in place, as nodes in execution order, each
 * with the node(s) it takes. A network of no join (add, cat) is a chain:
 * every node takes the one before, and runs as it always did. */
#ifndef LK_SEQUENTIAL_GRAPH_H
#define LK_SEQUENTIAL_GRAPH_H

#include "loss.h"
#include "model_common.h"
#include "sequential_lr.h"
#include "sequential_spec.h"

typedef struct seq {
  seq_what what; /* SEQ_WHAT_MODEL (sequential_lr.h) */
  lk_host *host;
  lk_nn *nn;
  char *text; /* the layers option, which the layers' texts point into */
  size_t n_layers, classes, max_numel;
  bool tokens;       /* the samples are tokens, i32 [T], into an embedding */
  bool lm;           /* a target at every token: a language model */
  size_t positions;  /* logit rows a sample: T of a language model, else 1 */
  seq_layer *layers; /* the nodes, in execution order */
  size_t cap_layers;
  bool graph;   /* a node takes another than the one before (a join) */
  char **texts; /* the blocks' lists, which their layers' texts point into */
  size_t n_texts;
  float *grad[2]; /* [cap, max_numel]: dL/d(activation), ping-pong */
  size_t cap;     /* batch size the buffers hold; they only grow */
  size_t ready;   /* batch size of the training step backward may use, or 0 */
  model_scores scores; /* top-k and F1 */
  seq_loss loss;       /* loss.c: the loss option */
} seq;

/* m->text, and every block it uses, into m->layers: the nodes, named as
 * torch names them ("3", "3.1"), with their inputs; m->graph. Config
 * errors name the layer's index and text, and the blocks around it. */
int seq_graph_expand(seq *m);

/* Whether layer L has a parameter. */
bool seq_has_params(const lk_layer *l);

/* After the shapes and parameters: how many nodes take each output, and
 * which need a gradient (a parameter at or before them). */
void seq_graph_link(seq *m);

/* The step's onnx entry (onnx.c): the network, the loss apart, into G. */
int seq_onnx(void *self, lk_onnx *g);

/* The node's input K's output, or the data's X. */
static inline const float *seq_input(const seq *m, const seq_layer *sl, int k,
                                     const float *x) {
  return sl->in[k] < 0 ? x : m->layers[sl->in[k]].y;
}

#endif
