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
  const lk__instance *bw;
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

/* How far apart (relative) the one-sided differences may be on a smooth
 * loss. A kink of jump J at w + d (d < h) moves the central difference by
 * J (h - d) / 2h, up to J / 2, the same at h and at h / 8 when d is small:
 * it matters once J passes the tolerance. In f32 (step 3e-3, tolerance
 * 1e-2) the bound is the tolerance: a smooth loss parts its one-sided
 * differences by about |f''| h, under it unless |f'' / f'| > 3, and a
 * looser bound (it was 0.1) let ReLU flips under batch norm through as
 * errors of 1 to 2% on a right backward (examples/fashion-mnist-resnet.ini,
 * held against torch in f64). In f64 (step and tolerance 1e-6) the
 * tolerance would take every |f'' / f'| > 1 for a kink: 0.1 there. */
static double kink_bound(const lk_tensor *t) {
  return t->dtype == LK_F64 ? 0.1 : LK_GRADCHECK_TOLERANCE_F32;
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
  d->kink = fabs(dp - dm) > kink_bound(t) * fmax(fabs(dp), fabs(dm)) +
                                ulp / fmin(wp - w, w - wm);
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

/* The backward's value for element K of T with that element set to V (the
 * rest as they are), into *OUT. It overwrites every parameter's gradient:
 * the caller reads the analytic ones from its own copy. */
static int analytic_at(probe *p, lk_tensor *t, size_t k, double v,
                       double *out) {
  const lk__tensors *ts = &p->run->env.tensors;
  double w = get(t, k);
  for (size_t i = 0; i < ts->n_params; i++)
    memset(ts->params[i]->grad, 0,
           ts->params[i]->numel * lk_dtype_size(ts->params[i]->dtype));
  set(t, k, v);
  double loss;
  int rc = loss_at(p, &loss);
  uint64_t mark = lk__err_mark();
  if (rc == 0 &&
      (rc = p->bw->desc->backward->backward(p->bw->self, p->b, 1.0)) != 0)
    rc = lk__entry_failed(rc, mark, "backward of plugin %s", p->bw->label);
  set(t, k, w);
  if (rc == 0)
    *out = lk__element(t->dtype, t->grad, k);
  return rc;
}

/* The difference over [w - h, w + h] is the mean of the derivative over
 * that window, which equals the derivative at w only where the derivative
 * holds still across it. Where a unit's ReLU or max flips inside the
 * window, it does not: with batch norm, one conv weight moves every unit
 * of its channel, and in examples/fashion-mnist-resnet.ini such flips
 * are so dense that differences at f32's step are 1 to 4% from the exact
 * derivative even in exact arithmetic (torch in f64), on a backward equal
 * to torch's to 2e-6. So an element over tolerance is judged once more
 * against the backward's own values at w - h, w - h/2, w, w + h/2 and
 * w + h: the mean lies within the derivative's range over the window, and
 * the distance outside the range of the five (0 inside) is its error (the
 * ends alone missed flips that turn back inside the window). A wrong
 * backward is wrong at all five points. */
static int window_error(probe *p, lk_tensor *t, size_t k, double analytic,
                        double h, const diff *d, double *err) {
  static const double at[] = {-1, -0.5, 0.5, 1};
  double w = get(t, k), lo = analytic, hi = analytic, a;
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    int rc = analytic_at(p, t, k, w + at[i] * h, &a);
    if (rc != 0)
      return rc;
    lo = fmin(lo, a), hi = fmax(hi, a);
  }
  double nearest = fmin(fmax(d->numeric, lo), hi);
  double e = rel_error(t, nearest, d);
  if (e < *err)
    *err = e;
  return 0;
}

/* One element: central differences with the dtype's step H and with H / 8.
 * H's answer stands when its one-sided differences agree and the smaller
 * step confirms it (a smooth loss over both); otherwise H crossed a kink,
 * maybe one on each side, and H / 8's answer stands unless it crosses one
 * too: then the element is SKIPPED. GRAD holds the analytic gradients. An
 * answer over tolerance is judged again over its window (window_error). */
static int check_element(probe *p, lk_tensor *t, const void *grad, size_t k,
                         double *err, bool *skipped) {
  double w = get(t, k), analytic = lk__element(t->dtype, grad, k);
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
  if (!*skipped && !(*err <= tol))
    return window_error(p, t, k, analytic, d == &big ? h : h / 8, d, err);
  return 0;
}

/* A copy of every parameter's gradient, one block (freed by the caller):
 * the window's backwards overwrite the gradients. */
static void *save_grads(const lk__tensors *ts, void **each) {
  size_t bytes = 0;
  for (size_t i = 0; i < ts->n_params; i++)
    bytes += ts->params[i]->numel * lk_dtype_size(ts->params[i]->dtype);
  unsigned char *all = malloc(bytes ? bytes : 1), *at = all;
  if (!all)
    return NULL;
  for (size_t i = 0; i < ts->n_params; i++) {
    size_t n = ts->params[i]->numel * lk_dtype_size(ts->params[i]->dtype);
    memcpy(at, ts->params[i]->grad, n);
    each[i] = at;
    at += n;
  }
  return all;
}

/* Parameter I's SAMPLES elements, evenly spread, into ROW. */
static int check_param(probe *p, size_t i, const void *grad, size_t samples,
                       lk_gradcheck_row *row) {
  lk_tensor *t = p->run->env.tensors.params[i];
  size_t n = t->numel < samples ? t->numel : samples;
  for (size_t s = 0; s < n; s++) {
    size_t k = t->numel == n ? s : (size_t)((double)s * t->numel / n);
    double err;
    bool skipped;
    int rc = check_element(p, t, grad, k, &err, &skipped);
    if (rc != 0)
      return rc;
    if (skipped) {
      row->skipped++;
      continue;
    }
    if (!(err <= row->max_rel_error)) /* NaN counts as the worst */
      row->max_rel_error = err;
    row->checked++;
  }
  return 0;
}

/* One batch: the analytic gradients, then the differences, parameter by
 * parameter, into each parameter's row. The gradients are as the analytic
 * pass left them at the end. */
static int check_batch(lk_run *run, const lk_batch *b, size_t samples,
                       lk_gradcheck_row *rows) {
  const lk__tensors *ts = &run->env.tensors;
  probe p = {.run = run,
             .b = b,
             .rng = run->env.rng,
             .bw = lk__role(run, LK__KIND_BACKWARD)};
  int rc;
  for (size_t i = 0; i < ts->n_params; i++)
    memset(ts->params[i]->grad, 0,
           ts->params[i]->numel * lk_dtype_size(ts->params[i]->dtype));
  if ((rc = loss_at(&p, &p.l0)) != 0)
    return rc;
  uint64_t mark = lk__err_mark();
  if ((rc = p.bw->desc->backward->backward(p.bw->self, b, 1.0)) != 0)
    return lk__entry_failed(rc, mark, "backward of plugin %s", p.bw->label);
  void **each = calloc(ts->n_params ? ts->n_params : 1, sizeof *each);
  void *all = each ? save_grads(ts, each) : NULL;
  if (!all)
    rc = lk__err(LK_ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < ts->n_params; i++)
    rc = check_param(&p, i, each[i], samples, &rows[i]);
  for (size_t i = 0; all && i < ts->n_params; i++)
    memcpy(ts->params[i]->grad, each[i],
           ts->params[i]->numel * lk_dtype_size(ts->params[i]->dtype));
  free(all);
  free(each);
  run->env.rng = p.rng;
  return rc;
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
