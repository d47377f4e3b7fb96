/* An ONNX model file (onnx_write.c) around a graph built with
 * loopkit/onnx.h. Library-internal. */
#ifndef LK_STORE_ONNX_WRITE_H
#define LK_STORE_ONNX_WRITE_H

#include "loopkit/onnx.h"

/* G, complete, as a ModelProto (IR version 8, the default domain at
 * opset 17, producer loopkit) of the graph NAME, written to PATH as
 * lk_output_open writes every file ("-": the standard output). */
int lk__onnx_write(lk_onnx *g, const char *name, const char *path);

#endif
