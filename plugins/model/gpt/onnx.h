/* gpt's forward as an ONNX graph (onnx.c), from what gpt.c holds. */
#ifndef LK_GPT_ONNX_H
#define LK_GPT_ONNX_H

#include <loopkit/loopkit.h>

/* A block's parameters in nanoGPT's order (gpt.c's block): ln_1 weight
 * and bias, c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, each weight
 * then bias; a bias NULL without bias. */
enum { GPT_BLOCK_TENSORS = 12 };

typedef struct gpt_onnx_spec {
  int L, NH, C, maxT, V; /* n_layer, n_head, n_embd, block_size, vocab */
  lk_tensor *wte, *wpe, *lnfw, *lnfb;
  lk_tensor *const *blocks; /* [L * GPT_BLOCK_TENSORS] */
} gpt_onnx_spec;

/* int64 tokens [N, T] (T given at run time, up to block_size) to the
 * logits at every position [N, T, V], into G. */
int gpt_onnx(lk_onnx *g, const gpt_onnx_spec *s);

#endif
