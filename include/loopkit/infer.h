/* loopkit — inference without the loop: a trained model's forward from C,
 * with the model plugin and the layer kit alone (no run directory, no
 * optimizer, no data kept). */
#ifndef LOOPKIT_INFER_H
#define LOOPKIT_INFER_H

#include <stddef.h>

#include "loopkit/config.h"
#include "loopkit/export.h"
#include "loopkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lk_model lk_model;

/* Opens a trained model for inference: the model CONFIG describes, with
 * the weights of WEIGHTS, for lk_model_forward. CONFIG is the training config
 * (.ini): [plugins] step names the model plugin, its section its options,
 * [plugins] layers any layer plugins. The input's shape is the sample shape of
 * the config's data plugin ([plugins] data, required), as a network such as
 * sequential sizes itself from it: that plugin is created for its shape alone
 * and freed before this returns. WEIGHTS is a .safetensors file (what `init =
 * FILE.safetensors` reads, or `loopkit export` writes: the parameters by
 * torch's names, the buffers such as batch norm's running statistics included)
 * or, any other name, a checkpoint of the model. The forward runs as in
 * evaluation: no dropout, batch norm on its running statistics. Returns 0 and
 * *OUT, or a negative LK_E* code (*OUT NULL) with lk_last_error() naming the
 * file, plugin or key at fault. */
LK_API int lk_model_open(const char *config, const char *weights,
                         lk_model **out);

/* Opens a trained model from a loaded config: as lk_model_open does, from
 * CFG, a config already loaded (lk_config_load) and perhaps changed
 * (lk_config_set, as `--set` does); CFG is only read during the call. */
LK_API int lk_model_open_config(const lk_config *cfg, const char *weights,
                                lk_model **out);

/* The shape of one input sample of M, the batch dimension apart: *DTYPE
 * (LK_F32 for features, LK_I32 for tokens), *NDIM (1 to LK_MAX_DIMS - 1)
 * and DIMS[0 .. *NDIM - 1]; DIMS has room for LK_MAX_DIMS. Any of DTYPE,
 * NDIM, DIMS may be NULL. Returns 0, or LK_EINVAL when M is NULL. */
LK_API int lk_model_input_shape(const lk_model *m, lk_dtype *dtype,
                                size_t *ndim, size_t *dims);

/* The shape of one output sample of M, the batch dimension apart: *NDIM
 * and DIMS[0 .. *NDIM - 1] (room for LK_MAX_DIMS), the values
 * lk_model_forward writes a sample being their product; *NAME is what the
 * model calls its output: "logits" for a classifier (take the softmax for
 * probabilities), otherwise its outputs ("y" for a regression). Any of
 * NDIM, DIMS, NAME may be NULL. Returns 0, or LK_EINVAL when M is NULL. */
LK_API int lk_model_output_shape(const lk_model *m, size_t *ndim, size_t *dims,
                                 const char **name);

/* Runs M's forward on N samples: in evaluation mode, on the N samples at
 * INPUT (N times the input shape's elements, of its dtype, sample after
 * sample), and writes N times the output shape's values to OUTPUT, as floats. N
 * = 0 writes nothing. Returns 0, or a negative LK_E* code with lk_last_error()
 * saying why (a token out of the vocabulary, a NaN, memory). */
LK_API int lk_model_forward(lk_model *m, const void *input, size_t n,
                            float *output);

/* Frees M and everything it holds, and unloads its plugins. NULL is
 * ignored. */
LK_API void lk_model_close(lk_model *m);

#ifdef __cplusplus
}
#endif

#endif
