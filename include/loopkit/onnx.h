/* loopkit/onnx.h: an ONNX graph builder, what `loopkit export CKPT -o
 * FILE.onnx` gives a model and its layers to write their forward in
 * evaluation mode as ONNX nodes (opset 17, the newest that Debian's onnx
 * 1.12 checks). A model's onnx entry (lk_step_ops, since ABI 1.7) adds
 * nodes from the value named "input" to the value named "output" and
 * declares both (lk_onnx_input, lk_onnx_output); a layer table's onnx
 * lowering (loopkit/layer.h) adds the nodes of one layer. Weights go in
 * as initializers, under their parameters' names.
 *
 * Values are named by strings, as ONNX names them: a node's inputs must be
 * defined before it (the graph's input, an initializer or an earlier
 * node's output) and each output is new, so that the nodes come in the
 * order ONNX wants. Failures return a negative LK_E* code with the message
 * set, naming the node (its index and op type) or the tensor. The file is
 * written by loopkit itself (a hand-written protocol buffers encoder); no
 * ONNX library is needed. */
#ifndef LOOPKIT_ONNX_H
#define LOOPKIT_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "loopkit/export.h"
#include "loopkit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LK_ONNX_OPSET 17     /* the default domain's version written */
#define LK_ONNX_IR_VERSION 8 /* the IR version written (onnx 1.10 to 1.12) */

/* A graph being built. */
typedef struct lk_onnx lk_onnx;

/* An element type of a graph input or output: ONNX's TensorProto numbers. */
typedef enum lk_onnx_type {
  LK_ONNX_F32 = 1, /* float */
  LK_ONNX_I64 = 7  /* int64: tokens, shapes, indices */
} lk_onnx_type;

/* A node's attribute: NAME and one value, as TYPE says (INTS: N values at
 * INTS). */
typedef struct lk_onnx_attr {
  const char *name;
  enum { LK_ONNX_INT, LK_ONNX_FLOAT, LK_ONNX_INTS, LK_ONNX_STRING } type;
  int64_t i;
  float f;
  const int64_t *ints;
  size_t n;
  const char *s;
} lk_onnx_attr;

/* Adds a node of OP_TYPE (an operator of the default domain, opset 17)
 * taking the N_IN values IN ("" for an optional input left out) and
 * giving the N_OUT new values OUT, with the N_A attributes A. A value
 * used before it is defined, or defined twice, is refused. */
LK_API int lk_onnx_node(lk_onnx *g, const char *op_type, const char *const *in,
                        int n_in, const char *const *out, int n_out,
                        const lk_onnx_attr *a, int n_a);

/* Adds tensor T as the initializer NAME (NULL: T's own name): f32 as it
 * is, f64 converted to f32 (ONNX Runtime's kernels take float), its shape
 * as T's. An initializer of that name already there is kept when it is
 * the same tensor (a weight two layers share), else refused. */
LK_API int lk_onnx_initializer(lk_onnx *g, const char *name,
                               const lk_tensor *t);

/* Adds the 1-D int64 initializer NAME of the N values V: a Reshape's
 * shape, a Slice's starts and ends. */
LK_API int lk_onnx_const_i64(lk_onnx *g, const char *name, const int64_t *v,
                             size_t n);

/* Adds the f32 initializer NAME of the N values V, a scalar when N is 0
 * (then V holds one value): a formula's constants (GELU's 0.044715). */
LK_API int lk_onnx_const_f32(lk_onnx *g, const char *name, const float *v,
                             size_t n);

/* A fresh value name, HINT then a number ("gelu_3"), unique in G and
 * owned by it until lk_onnx_free; NULL when out of memory (the message
 * set). */
LK_API const char *lk_onnx_tmp(lk_onnx *g, const char *hint);

/* Declares the graph's input "input": its element type and NDIM
 * dimensions DIMS, -1 for one given at run time (the batch, "N"; a
 * sequence's length, "T"). Once. */
LK_API int lk_onnx_input(lk_onnx *g, lk_onnx_type type, int ndim,
                         const int64_t *dims);

/* Declares the graph's output "output", as lk_onnx_input does its input;
 * a node must give it. Once. */
LK_API int lk_onnx_output(lk_onnx *g, lk_onnx_type type, int ndim,
                          const int64_t *dims);

#ifdef __cplusplus
}
#endif

#endif
