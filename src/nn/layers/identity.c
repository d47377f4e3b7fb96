/* Identity: torch.nn.Identity(), the input unchanged: a view (no forward
 * or backward runs; the output is the input's memory), for a net that
 * keeps a layer's place (a config that swaps an activation out). */
#include "layers.h"

/* a view in the kit, a node in ONNX (the graph's output must be some
 * node's) */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)l, (void)prefix;
  return layer_onnx_op(g, "Identity", in, 1, out, NULL, 0);
}

const lk_layer_type lk__layer_identity = {.size = LK_LAYER_TYPE_SIZE,
                                          .name = "identity",
                                          .summary = "the input unchanged",
                                          .flags = LK_LAYER_VIEW,
                                          .min_inputs = 1,
                                          .max_inputs = 1,
                                          .onnx = onnx};
