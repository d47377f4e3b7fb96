/* The ONNX graph builder's insides (onnx_graph.c, loopkit/onnx.h): what
 * the library makes, checks and encodes it with. Library-internal. */
#ifndef LK_NN_ONNX_GRAPH_H
#define LK_NN_ONNX_GRAPH_H

#include "loopkit/onnx.h"
#include "onnx_pb.h"

/* A new, empty graph into *OUT. */
int lk__onnx_new(lk_onnx **out);
void lk__onnx_free(lk_onnx *g);

/* G as an encoded GraphProto (named NAME) into OUT, once its input and
 * output are declared and a node gives "output". */
int lk__onnx_graph(lk_onnx *g, const char *name, lk__pb *out);

#endif
