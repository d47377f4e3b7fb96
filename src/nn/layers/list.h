/* The built-in layer types, in the order `unknown layer` lists them: one
 * line a layer, ID naming the table lk__layer_ID in ID.c. A new layer is
 * its file (src/nn/layers/ID.c, in src/nn/Makefile.inc) and a line here. */
LK_LAYER_ENTRY(conv2d)
LK_LAYER_ENTRY(maxpool2d)
LK_LAYER_ENTRY(avgpool2d)
LK_LAYER_ENTRY(batchnorm2d)
LK_LAYER_ENTRY(batchnorm1d)
LK_LAYER_ENTRY(layernorm)
LK_LAYER_ENTRY(relu)
LK_LAYER_ENTRY(gelu)
LK_LAYER_ENTRY(tanh)
LK_LAYER_ENTRY(sigmoid)
LK_LAYER_ENTRY(dropout)
LK_LAYER_ENTRY(flatten)
LK_LAYER_ENTRY(linear)
LK_LAYER_ENTRY(embedding)
