/* lk_run_export_onnx: a run's model, with a checkpoint's parameters, as an
 * ONNX model (run.h). The model writes its own graph through its step's
 * onnx entry (ABI 1.7, loopkit/onnx.h); the library checks what it built
 * and writes the file. */
#include <string.h>

#include "../nn/onnx_graph.h"
#include "loop.h"
#include "onnx_write.h"

int lk_run_export_onnx(lk_run *run, const char *ckpt, const char *path) {
  if (!run || !ckpt || !path || !*path)
    return lk__err(LK_EINVAL,
                   "lk_run_export_onnx: NULL run, checkpoint or path");
  const lk__instance *step = lk__role(run, LK__KIND_STEP);
  if (!step)
    return lk__err(LK_ECONFIG, "the config names no model ([plugins] step)");
  int (*fn)(void *, lk_onnx *) = NULL;
  void (*entry)(void) =
      lk__entry_of(step, LK__KIND_STEP, LK__ENTRY(lk_step_ops, onnx));
  if (!entry)
    return lk__err(LK_EKIND,
                   "model %s cannot be exported to ONNX (its step has no "
                   "onnx entry, ABI 1.7)",
                   step->label);
  memcpy(&fn, &entry, sizeof fn);
  int rc = lk_run_load_params(run, ckpt);
  lk_onnx *g = NULL;
  if (rc == 0)
    rc = lk__onnx_new(&g);
  uint64_t mark = lk__err_mark();
  if (rc == 0 && (rc = fn(step->self, g)) != 0)
    rc = lk__entry_failed(rc, mark, "model %s: export to ONNX", step->label);
  if (rc == 0)
    rc = lk__onnx_write(g, step->label, path);
  lk__onnx_free(g);
  return rc;
}
