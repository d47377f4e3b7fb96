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

/* The step's loss on one batch, each evaluation from the same generator
 * state: dropout draws the same mask every time, so the loss is one smooth
 * function of the parameters (train mode, its randomness frozen). */
typedef struct probe {
  lk_run *run;
  const lk_batch *b;
  lk_rng rng; /* the generator as the check found it */
  double l0;  /* the loss at the unperturbed parameters */
} probe;

static int loss_at(probe *p, double *loss) {
  const lk__instance *step = lk__role(p->run, LK__KIND_STEP);
  lk_step_result r = {0};
  p->run->env.rng = p->rng;
  uint64_t mark = lk__err_mark();
  int rc = step->desc->step->training_step(step->self, p->b, &r);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "training_step of plugin %s",
                            step->label);
  if (!r.has_loss)
    return lk__err(LK_EPLUGIN, "plugin %s gave no loss: nothing to check",
                   step->label);
  *loss = r.loss;
  return 0;
}

/* Central differences of element K with step H: NUMERIC, NOISE its own
 * rounding (LK_GRADCHECK_NOISE_ULPS units of the dtype's in each loss, over
 * the step) and KINK when the one-sided differences disagree more than a
 * smooth loss and a unit of rounding allow: the steps crossed a ReLU's zero
 * or a max's tie. */
typedef struct diff {
  double numeric, noise;
  bool kink;
} diff;

static int difference(probe *p, lk_tensor *t, size_t k, double h, diff *d) {
  double w = get(t, k), up = 0, down = 0;
  double u = t->dtype == LK_F64 ? 0x1p-53 : 0x1p-24;
  double wp = set(t, k, w + h);
  int rc = loss_at(p, &up);
  double wm = set(t, k, w - h);
  if (rc == 0)
    rc = loss_at(p, &down);
  set(t, k, w);
  if (rc != 0)
    return rc;
  d->numeric = (up - down) / (wp - wm);
  d->noise = LK_GRADCHECK_NOISE_ULPS * u * (fabs(up) + fabs(down)) / (wp - wm);
  double dp = (up - p->l0) / (wp - w), dm = (p->l0 - down) / (w - wm);
  double ulp = 2 * u * (fabs(up) + fabs(down) + fabs(p->l0));
  d->kink = fabs(dp - dm) >
            0.1 * fmax(fabs(dp), fabs(dm)) + ulp / fmin(wp - w, w - wm);
  return 0;
}

/* ANALYTIC's error against D, relative to max(|a|, |n|, 1e-3, noise /
 * tolerance): below that, a gradient is too small for the differences to
 * resolve to the tolerance, and counts as that large. */
static double rel_error(const lk_tensor *t, double analytic, const diff *d) {
  double tol = t->dtype == LK_F64 ? LK_GRADCHECK_TOLERANCE_F64
                                  : LK_GRADCHECK_TOLERANCE_F32;
  double scale =
      fmax(fmax(fabs(analytic), fabs(d->numeric)), fmax(1e-3, d->noise / tol));
  return fabs(analytic - d->numeric) / scale;
}

/* One element: central differences with the dtype's step H and with H / 8.
 * H's answer stands when its one-sided differences agree and the smaller
 * step confirms it (a smooth loss over both); otherwise H crossed a kink,
 * maybe one on each side, and H / 8's answer stands unless it crosses one
 * too: then the element is SKIPPED. */
static int check_element(probe *p, lk_tensor *t, size_t k, double *err,
                         bool *skipped) {
  double w = get(t, k), analytic = lk__element(t->dtype, t->grad, k);
  double step =
      t->dtype == LK_F64 ? LK_GRADCHECK_STEP_F64 : LK_GRADCHECK_STEP_F32;
  double h = step * (fabs(w) > 1 ? fabs(w) : 1);
  diff big, small;
  int rc = difference(p, t, k, h, &big);
  if (rc == 0)
    rc = difference(p, t, k, h / 8, &small);
  if (rc != 0)
    return rc;
  double tol = t->dtype == LK_F64 ? LK_GRADCHECK_TOLERANCE_F64
                                  : LK_GRADCHECK_TOLERANCE_F32;
  bool agree = fabs(big.numeric - small.numeric) <=
               tol / 2 * fmax(fabs(big.numeric), fabs(small.numeric));
  const diff *d = !big.kink && agree ? &big : &small;
  *skipped = d->kink;
  *err = rel_error(t, analytic, d);
  return 0;
}

/* One batch: the analytic gradients, then the differences, parameter by
 * parameter, into each parameter's row. */
static int check_batch(lk_run *run, const lk_batch *b, size_t samples,
                       lk_gradcheck_row *rows) {
  const lk__tensors *ts = &run->env.tensors;
  const lk__instance *bw = lk__role(run, LK__KIND_BACKWARD);
  probe p = {.run = run, .b = b, .rng = run->env.rng};
  int rc;
  for (size_t i = 0; i < ts->n_params; i++)
    memset(ts->params[i]->grad, 0,
           ts->params[i]->numel * lk_dtype_size(ts->params[i]->dtype));
  if ((rc = loss_at(&p, &p.l0)) != 0)
    return rc;
  uint64_t mark = lk__err_mark();
  if ((rc = bw->desc->backward->backward(bw->self, b, 1.0)) != 0)
    return lk__entry_failed(rc, mark, "backward of plugin %s", bw->label);
  for (size_t i = 0; i < ts->n_params; i++) {
    lk_tensor *t = ts->params[i];
    size_t n = t->numel < samples ? t->numel : samples;
    for (size_t s = 0; s < n; s++) {
      size_t k = t->numel == n ? s : (size_t)((double)s * t->numel / n);
      double err;
      bool skipped;
      if ((rc = check_element(&p, t, k, &err, &skipped)) != 0)
        return rc;
      if (skipped) {
        rows[i].skipped++;
        continue;
      }
      if (!(err <= rows[i].max_rel_error)) /* NaN counts as the worst */
        rows[i].max_rel_error = err;
      rows[i].checked++;
    }
  }
  run->env.rng = p.rng;
  return 0;
}

int lk_run_gradcheck_rows(lk_run *run, size_t batches, size_t samples,
                          lk_gradcheck_row_fn report, void *user) {
  const lk__tensors *ts = &run->env.tensors;
  const lk__instance *data = lk__role(run, LK__KIND_DATA);
  if (!lk__role(run, LK__KIND_BACKWARD))
    return lk__err(LK_ECONFIG, "gradcheck needs a backward plugin");
  lk_gradcheck_row *rows =
      calloc(ts->n_params ? ts->n_params : 1, sizeof *rows);
  int rc = rows ? 0 : lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0 && !data)
    rc = check_batch(run, &run->chain.no_data_batch, samples, rows);
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
      rc = check_batch(run, &batch, samples, rows);
  }
  for (size_t i = 0; rc == 0 && i < ts->n_params; i++) {
    rows[i].param = ts->params[i]->name;
    report(user, &rows[i]);
  }
  free(rows);
  return rc;
}

typedef struct legacy {
  lk_gradcheck_fn report;
  void *user;
} legacy;

static void legacy_row(void *user, const lk_gradcheck_row *row) {
  const legacy *l = user;
  l->report(l->user, row->param, row->max_rel_error, row->checked);
}

int lk_run_gradcheck(lk_run *run, size_t batches, size_t samples,
                     lk_gradcheck_fn report, void *user) {
  legacy l = {report, user};
  return lk_run_gradcheck_rows(run, batches, samples, legacy_row, &l);
}
