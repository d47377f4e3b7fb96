/* An ONNX model file: the ModelProto (ir_version 1, producer_name 2,
 * producer_version 3, graph 7, opset_import 8 -> OperatorSetIdProto:
 * domain 1, version 2) around the graph's encoding, written whole. */
#include <stdio.h>

#include "../nn/onnx_graph.h"
#include "internal.h"
#include "loopkit/host.h"
#include "loopkit/version.h"
#include "onnx_write.h"

enum { MODEL_IR = 1, MODEL_PRODUCER = 2, MODEL_PRODUCER_VERSION = 3 };
enum { MODEL_GRAPH = 7, MODEL_OPSET = 8 };

static int encode_model(lk_onnx *g, const char *name, lk__pb *model) {
  lk__pb graph = {0}, opset = {0};
  int rc = lk__onnx_graph(g, name, &graph);
  if (rc != 0)
    return rc;
  lk__pb_int(model, MODEL_IR, LK_ONNX_IR_VERSION);
  lk__pb_str(model, MODEL_PRODUCER, "loopkit");
  lk__pb_str(model, MODEL_PRODUCER_VERSION, LK_VERSION);
  lk__pb_msg(model, MODEL_GRAPH, &graph);
  lk__pb_str(&opset, 1, "");
  lk__pb_int(&opset, 2, LK_ONNX_OPSET);
  lk__pb_msg(model, MODEL_OPSET, &opset);
  lk__pb_free(&graph);
  lk__pb_free(&opset);
  return model->oom ? lk__err(LK_ENOMEM, "out of memory encoding the model")
                    : 0;
}

int lk__onnx_write(lk_onnx *g, const char *name, const char *path) {
  lk__pb model = {0};
  lk_output *out = NULL;
  int rc = encode_model(g, name, &model);
  if (rc == 0)
    rc = lk_output_open(path, "ONNX model", &out);
  if (rc == 0 &&
      fwrite(model.p, 1, model.n, lk_output_stream(out)) != model.n) {
    lk_output_close(out, false);
    rc = lk__err(LK_EIO, "writing ONNX model %s failed", path);
  } else if (rc == 0)
    rc = lk_output_close(out, true);
  lk__pb_free(&model);
  return rc;
}
