/* The gradient check: a backward plugin's gradients against central
 * differences of the step's loss, element by element. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"

static double get(const lk_tensor *t, size_t k) {
  return lk__element(t->dtype, t->data, k);
}

/* Sets element K to V; returns the value actually stored (f32 rounds). */
static double set(lk_tensor *t, size_t k, double v) {
  if (t->dtype == LK_F64)
    return ((double *)t->data)[k] = v;
  return ((float *)t->data)[k] = (float)v;
}

static int loss_at(lk_run *run, const lk_batch *b, double *loss) {
  const lk__instance *step = lk__role(run, LK__KIND_STEP);
  lk_step_result r = {0};
  uint64_t mark = lk__err_mark();
  int rc = step->desc->step->training_step(step->self, b, &r);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "training_step of plugin %s",
                            step->label);
  if (!r.has_loss)
    return lk__err(LK_EPLUGIN, "plugin %s gave no loss: nothing to check",
                   step->label);
  *loss = r.loss;
  return 0;
}

/* One batch: the analytic gradients, then the differences, parameter by
 * parameter; MAX collects each parameter's largest relative error. */
static int check_batch(lk_run *run, const lk_batch *b, size_t samples,
                       double *max, size_t *checked) {
  const lk__tensors *ts = &run->env.tensors;
  const lk__instance *bw = lk__role(run, LK__KIND_BACKWARD);
  int rc;
  double loss;
  for (size_t i = 0; i < ts->n_params; i++)
    memset(ts->params[i]->grad, 0,
           ts->params[i]->numel * lk_dtype_size(ts->params[i]->dtype));
  if ((rc = loss_at(run, b, &loss)) != 0)
    return rc;
  uint64_t mark = lk__err_mark();
  if ((rc = bw->desc->backward->backward(bw->self, b, 1.0)) != 0)
    return lk__entry_failed(rc, mark, "backward of plugin %s", bw->label);
  for (size_t i = 0; i < ts->n_params; i++) {
    lk_tensor *t = ts->params[i];
    size_t n = t->numel < samples ? t->numel : samples;
    /* f64 steps near the optimum for central differences; f32 ones are
     * larger, as its rounding error is (run.h). */
    double eps =
        t->dtype == LK_F64 ? LK_GRADCHECK_STEP_F64 : LK_GRADCHECK_STEP_F32;
    for (size_t s = 0; s < n; s++) {
      size_t k = t->numel == n ? s : (size_t)((double)s * t->numel / n);
      double w = get(t, k), h = eps * (fabs(w) > 1 ? fabs(w) : 1);
      double analytic = lk__element(t->dtype, t->grad, k), up, down;
      double wp = set(t, k, w + h);
      rc = loss_at(run, b, &up);
      double wm = set(t, k, w - h);
      if (rc == 0)
        rc = loss_at(run, b, &down);
      set(t, k, w);
      if (rc != 0)
        return rc;
      double numeric = (up - down) / (wp - wm);
      double scale = fmax(fmax(fabs(analytic), fabs(numeric)), 1e-3);
      double rel = fabs(analytic - numeric) / scale;
      if (!(rel <= max[i])) /* NaN counts as the worst */
        max[i] = rel;
      checked[i]++;
    }
  }
  return 0;
}

int lk_run_gradcheck(lk_run *run, size_t batches, size_t samples,
                     lk_gradcheck_fn report, void *user) {
  const lk__tensors *ts = &run->env.tensors;
  const lk__instance *data = lk__role(run, LK__KIND_DATA);
  if (!lk__role(run, LK__KIND_BACKWARD))
    return lk__err(LK_ECONFIG, "gradcheck needs a backward plugin");
  double *max = calloc(ts->n_params, sizeof *max);
  size_t *checked = calloc(ts->n_params, sizeof *checked);
  int rc = max && checked ? 0 : lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0 && !data)
    rc = check_batch(run, &run->chain.no_data_batch, samples, max, checked);
  size_t nb = 0;
  uint64_t mark = lk__err_mark();
  if (rc == 0 && data &&
      (rc = data->desc->data->epoch(data->self, LK_SPLIT_TRAIN, 0, &nb)) != 0)
    rc = lk__entry_failed(rc, mark, "epoch of data plugin %s", data->label);
  for (size_t b = 0; rc == 0 && data && b < nb && b < batches; b++) {
    lk_batch batch = {0};
    mark = lk__err_mark();
    rc = data->desc->data->batch(data->self, LK_SPLIT_TRAIN, b, &batch);
    if (rc != 0)
      rc = lk__entry_failed(rc, mark, "batch %zu of data plugin %s", b,
                            data->label);
    else
      rc = check_batch(run, &batch, samples, max, checked);
  }
  for (size_t i = 0; rc == 0 && i < ts->n_params; i++)
    report(user, ts->params[i]->name, max[i], checked[i]);
  free(max);
  free(checked);
  return rc;
}
