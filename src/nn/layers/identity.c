/* Identity: torch.nn.Identity(), the input unchanged: a view (no forward
 * or backward runs; the output is the input's memory), for a net that
 * keeps a layer's place (a config that swaps an activation out). */
#include "layers.h"

const lk_layer_type lk__layer_identity = {.size = LK_LAYER_TYPE_SIZE,
                                          .name = "identity",
                                          .summary = "the input unchanged",
                                          .flags = LK_LAYER_VIEW,
                                          .min_inputs = 1,
                                          .max_inputs = 1};
