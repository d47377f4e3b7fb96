/* sequential's network as an ONNX graph (graph.h, loopkit/onnx.h): each
 * node, in execution order, through its layer table's onnx lowering, from
 * the graph's "input" (the data's samples, a batch of them) to "output"
 * (the last node's: a classifier's logits, a regression's output); the
 * loss is left out. A node's value is named after it ("3", "3.1"), its
 * parameters' prefix is that name and a dot, as the checkpoint names
 * them. A layer without a lowering (a layer plugin's that has none) is
 * refused naming it. */
#include <stdio.h>

#include "graph.h"
#include <loopkit/onnx.h>

/* The ONNX dimensions of a batch of samples of shape S: -1 (the batch),
 * then S's; their count. */
static int batch_dims(const lk_layer_shape *s, int64_t *dims) {
  dims[0] = -1;
  for (int d = 0; d < s->ndim; d++)
    dims[d + 1] = s->d[d];
  return s->ndim + 1;
}

/* Node I of M lowered into G: its value named after it, or "output" for
 * the last. */
static int lower(seq *m, size_t i, lk_onnx *g) {
  const seq_layer *sl = &m->layers[i];
  const lk_layer_type *t = sl->l.type;
  if (!t->onnx)
    return lk_fail(m->host, LK_ECONFIG,
                   "layers: layer %s \"%.*s\": %s cannot be exported to ONNX "
                   "(its layer table has no onnx lowering)",
                   sl->name, sl->text_len, sl->text, t->name);
  const char *in[2];
  for (int k = 0; k < (sl->ref ? 2 : 1); k++)
    in[k] = sl->in[k] < 0 ? "input" : m->layers[sl->in[k]].name;
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s.", sl->name);
  const char *out = i + 1 == m->n_layers ? "output" : sl->name;
  int rc = t->onnx(&sl->l, g, in, out, prefix);
  if (rc != 0)
    return lk_fail(m->host, rc, "layers: layer %s \"%.*s\": ONNX: %s", sl->name,
                   sl->text_len, sl->text, lk_last_error());
  return 0;
}

int seq_onnx(void *self, lk_onnx *g) {
  seq *m = self;
  int64_t dims[LK_MAX_DIMS + 1];
  const lk_layer_shape *x = &m->layers[0].l.in; /* the data's */
  int n = batch_dims(x, dims), rc;
  rc = lk_onnx_input(g, m->tokens ? LK_ONNX_I64 : LK_ONNX_F32, n, dims);
  for (size_t i = 0; rc == 0 && i < m->n_layers; i++)
    rc = lower(m, i, g);
  if (rc == 0) {
    n = batch_dims(&m->layers[m->n_layers - 1].l.out, dims);
    rc = lk_onnx_output(g, LK_ONNX_F32, n, dims);
  }
  return rc;
}
