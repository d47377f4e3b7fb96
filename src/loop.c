/* The training loop: epochs, batches, accumulation windows, the optimizer
 * step with its closure, validation, test, metrics and checkpoints. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "run_private.h"

/* ---- clipping ------------------------------------------------------------ */

/* As torch.nn.utils.clip_grad_norm_ (coefficient max / (norm + 1e-6),
 * applied when below 1) and clip_grad_value_. */
int lk__clip_gradients(lk_run *run, double value, int algorithm) {
  if (algorithm == LK__CLIP_VALUE) {
    for (size_t i = 0; i < run->n_params; i++) {
      lk_tensor *t = run->params[i];
      if (t->dtype == LK_F64) {
        double *g = t->grad;
        for (size_t k = 0; k < t->numel; k++)
          g[k] = g[k] > value ? value : g[k] < -value ? -value : g[k];
      } else {
        float *g = t->grad, v = (float)value;
        for (size_t k = 0; k < t->numel; k++)
          g[k] = g[k] > v ? v : g[k] < -v ? -v : g[k];
      }
    }
    return 0;
  }
  double sum = 0;
  for (size_t i = 0; i < run->n_params; i++) {
    const lk_tensor *t = run->params[i];
    for (size_t k = 0; k < t->numel; k++) {
      double g = lk__element(t->dtype, t->grad, k);
      sum += g * g;
    }
  }
  double norm = sqrt(sum);
  double coef = value / (norm + 1e-6);
  if (!isfinite(norm))
    return lk__err(LK_ENONFINITE,
                   "gradient norm is %g: cannot clip (use terminate_on_nan "
                   "to find where it started)",
                   norm);
  if (coef >= 1.0)
    return 0;
  for (size_t i = 0; i < run->n_params; i++) {
    lk_tensor *t = run->params[i];
    if (t->dtype == LK_F64) {
      double *g = t->grad;
      for (size_t k = 0; k < t->numel; k++)
        g[k] *= coef;
    } else {
      float *g = t->grad, c = (float)coef;
      for (size_t k = 0; k < t->numel; k++)
        g[k] *= c;
    }
  }
  return 0;
}

/* ---- checkpoints ----------------------------------------------------------
 */

/* The loop's "checkpoint_save" phase (profiled): the policy is rundir.c's. */
int lk__save_checkpoint(lk_run *run) {
  return lk__rundir_save(run);
}

/* A signal asked the run to stop: in one process, as soon as it came;
 * with several, once they all know (agree()), so they stop together. */
static bool signalled(const lk_run *run) {
  return run->world > 1 ? run->interrupt_agreed : run->interrupted;
}

static int interrupted(lk_run *run) {
  if (!signalled(run))
    return 0;
  int rc = run->calls.save(run);
  if (rc != 0)
    return rc;
  return lk__err(LK_EINTERRUPTED,
                 "interrupted after step %llu; checkpoint %s written",
                 (unsigned long long)run->state.progress.global_step,
                 run->rd.last_ckpt ? run->rd.last_ckpt : "(rank 0's)");
}

/* ---- hooks with arguments ------------------------------------------------ */

static int hook_batch_start(lk_run *run, const lk_batch *b) {
  for (size_t i = 0; i < run->n_callbacks; i++) {
    lk__instance *cb = run->callbacks[i];
    uint64_t mark = lk__err_mark();
    int rc = cb->desc->callback->on_train_batch_start
                 ? cb->desc->callback->on_train_batch_start(cb->self, b)
                 : 0;
    if (rc != 0)
      return lk__entry_failed(rc, mark, "on_train_batch_start of plugin %s",
                              cb->name);
  }
  return 0;
}

static int hook_result(lk_run *run, bool validation, const lk_step_result *r) {
  for (size_t i = 0; i < run->n_callbacks; i++) {
    lk__instance *cb = run->callbacks[i];
    int (*fn)(void *, const lk_step_result *) =
        validation ? cb->desc->callback->on_validation_end
                   : cb->desc->callback->on_train_batch_end;
    uint64_t mark = lk__err_mark();
    int rc = fn ? fn(cb->self, r) : 0;
    if (rc != 0)
      return lk__entry_failed(
          rc, mark, "%s of plugin %s",
          validation ? "on_validation_end" : "on_train_batch_end", cb->name);
  }
  return 0;
}

static int hook_epoch(lk_run *run, bool end, uint64_t epoch) {
  for (size_t i = 0; i < run->n_callbacks; i++) {
    lk__instance *cb = run->callbacks[i];
    int (*fn)(void *, uint64_t) =
        end ? cb->desc->callback->on_train_epoch_end
            : cb->desc->callback->on_train_epoch_start;
    uint64_t mark = lk__err_mark();
    int rc = fn ? fn(cb->self, epoch) : 0;
    if (rc != 0)
      return lk__entry_failed(
          rc, mark, "%s of plugin %s",
          end ? "on_train_epoch_end" : "on_train_epoch_start", cb->name);
  }
  return 0;
}

/* ---- step results ------------------------------------------------------- */

/* Step metric names become metrics.csv columns, after a "val_" or "test_"
 * prefix for evaluations: at most this long. */
#define METRIC_NAME_MAX (LK__NAME_MAX - 1 - 5)

/* A step result is the plugin's: its count indexes the loop's arrays and
 * its names become columns, so both are checked before anything uses
 * them. A name the host writes itself is not a metric's. */
static int check_result(const lk_step_result *r, const char *entry,
                        const char *plugin) {
  if (r->n_metrics > LK_MAX_METRICS)
    return lk__err(LK_EPLUGIN,
                   "%s of plugin %s returned %zu metrics, at most %d "
                   "(LK_MAX_METRICS)",
                   entry, plugin, r->n_metrics, LK_MAX_METRICS);
  for (size_t m = 0; m < r->n_metrics; m++) {
    const char *name = r->metrics[m].name;
    size_t len = name ? strnlen(name, LK__NAME_MAX) : 0;
    const char *why = NULL;
    if (!name)
      why = "has no name (NULL)";
    else if (!lk__column_name_ok(name, len) || len > METRIC_NAME_MAX)
      why = "is not a metrics.csv column name";
    else if (!strcmp(name, "step") || !strcmp(name, "epoch") ||
             !strcmp(name, "loss"))
      why = "is a column the host writes itself";
    for (size_t k = 0; !why && k < m; k++)
      if (!strcmp(r->metrics[k].name, name))
        why = "appears twice in one result";
    if (why)
      return lk__err(LK_EPLUGIN,
                     "%s of plugin %s: metric %zu \"%.*s\" %s (names are 1 "
                     "to %d characters without a comma, quote or newline; "
                     "step, epoch and loss are taken)",
                     entry, plugin, m, name ? (int)len : 6,
                     name ? name : "(null)", why, METRIC_NAME_MAX);
  }
  return 0;
}

/* Every batch of an evaluation reports the same metrics, in the same
 * order: they are averaged by position. */
static int same_metrics(const lk_step_result *a, const lk_step_result *b,
                        const char *entry, const char *plugin, size_t batch) {
  bool same = a->n_metrics == b->n_metrics && a->has_loss == b->has_loss;
  for (size_t m = 0; same && m < a->n_metrics; m++)
    same = strcmp(a->metrics[m].name, b->metrics[m].name) == 0;
  if (same)
    return 0;
  return lk__err(LK_EPLUGIN,
                 "%s of plugin %s: batch %zu reported other metrics than "
                 "batch 0 (%zu%s against %zu%s): every batch must report the "
                 "same ones, in the same order",
                 entry, plugin, batch, b->n_metrics,
                 b->has_loss ? " and a loss" : "", a->n_metrics,
                 a->has_loss ? " and a loss" : "");
}

/* ---- evaluation of the validation and test splits ------------------------ */

int lk__evaluate(lk_run *run, lk_split split, bool *ran, lk_step_result *mean) {
  int (*fn)(void *, const lk_batch *, lk_step_result *) =
      split == LK_SPLIT_TEST ? run->calls.test_step
                             : run->calls.validation_step;
  const char *entry = split == LK_SPLIT_TEST ? "test_step" : "validation_step";
  *ran = false;
  if (!run->data || !fn)
    return 0;
  size_t nb = 0;
  uint64_t mark = lk__err_mark();
  int rc = run->calls.data_epoch(run->data->self, split,
                                 run->state.progress.epoch, &nb);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "epoch of data plugin %s",
                            run->data->name);
  if (nb == 0)
    return 0;
  /* Only a validation that runs is announced: on_validation_end follows. */
  if (split == LK_SPLIT_VAL &&
      (rc = lk__hook(run, offsetof(lk_callback_ops, on_validation_start),
                     "on_validation_start")) != 0)
    return rc;
  /* Several processes share the batches (b = rank, rank + world, ...) and
   * add up their sums; with fewer batches than processes each does all. */
  size_t first = 0, stride = 1;
  if (run->world > 1 && nb >= (size_t)run->world) {
    first = (size_t)run->rank;
    stride = (size_t)run->world;
  }
  double loss_sum = 0, samples = 0, sums[LK_MAX_METRICS] = {0};
  lk_step_result r = {0};
  memset(mean, 0, sizeof *mean);
  for (size_t b = first; b < nb; b += stride) {
    /* The test comes after the last checkpoint of training: a signal can
     * end it at once, and a resumed run tests again. */
    if (split == LK_SPLIT_TEST && run->world == 1 && run->interrupted)
      return lk__err(LK_EINTERRUPTED,
                     "interrupted during the test, at batch %zu of %zu; "
                     "checkpoint %s holds the trained run (resuming it runs "
                     "the test)",
                     b, nb, run->rd.last_ckpt ? run->rd.last_ckpt : "");
    lk_batch batch = {0};
    mark = lk__err_mark();
    if ((rc = run->calls.data_batch(run->data->self, split, b, &batch)) != 0)
      return lk__entry_failed(rc, mark, "batch %zu of data plugin %s", b,
                              run->data->name);
    memset(&r, 0, sizeof r);
    mark = lk__err_mark();
    if ((rc = fn(run->step->self, &batch, &r)) != 0)
      return lk__entry_failed(rc, mark, "%s of plugin %s", entry,
                              run->step->name);
    if ((rc = check_result(&r, entry, run->step->name)) != 0)
      return rc;
    if (b == first)
      *mean = r;
    else if ((rc = same_metrics(mean, &r, entry, run->step->name, b)) != 0)
      return rc;
    double w = batch.size ? (double)batch.size : 1.0;
    samples += w;
    if (r.has_loss)
      loss_sum += w * r.loss;
    for (size_t m = 0; m < r.n_metrics; m++)
      sums[m] += w * r.metrics[m].value;
  }
  if (stride > 1) {
    double v[LK_MAX_METRICS + 2] = {loss_sum, samples};
    memcpy(v + 2, sums, sizeof sums);
    if ((rc = lk__reduce_sum(run, v, LK_MAX_METRICS + 2)) != 0)
      return rc;
    loss_sum = v[0];
    samples = v[1];
    memcpy(sums, v + 2, sizeof sums);
  }
  mean->loss = loss_sum / samples;
  for (size_t m = 0; m < mean->n_metrics; m++)
    mean->metrics[m].value = sums[m] / samples;
  *ran = true;
  return 0;
}

/* Metrics with names made at run time ("val_loss"): the names live here. */
typedef struct named {
  lk_metric cells[LK_MAX_METRICS + 2 + LK__MAX_EXTRA];
  char names[LK_MAX_METRICS + 2 + LK__MAX_EXTRA][LK__NAME_MAX];
  size_t n;
} named;

/* A name given twice (lr from the scheduler and from lr_monitor) keeps one
 * cell, the later value. Names are checked where they come from, so that
 * they fit. */
static void add(named *nm, const char *prefix, const char *name, double v) {
  char full[sizeof nm->names[0]];
  snprintf(full, sizeof full, "%s%s%s", prefix, *prefix ? "_" : "", name);
  for (size_t i = 0; i < nm->n; i++)
    if (strcmp(nm->names[i], full) == 0) {
      nm->cells[i].value = v;
      return;
    }
  if (nm->n == LK_MAX_METRICS + 2 + LK__MAX_EXTRA)
    return;
  memcpy(nm->names[nm->n], full, sizeof full);
  nm->cells[nm->n] = (lk_metric){nm->names[nm->n], v};
  nm->n++;
}

/* Every row goes through here: lk_host_metric sees what was logged. */
static int log_row(lk_run *run, uint64_t step, const double *loss,
                   const named *nm) {
  if (loss)
    lk__metric_seen(run, "loss", *loss);
  for (size_t i = 0; i < nm->n; i++)
    lk__metric_seen(run, nm->cells[i].name, nm->cells[i].value);
  if (!run->metrics)
    return 0; /* not rank 0: it writes metrics.csv */
  return lk__metrics_row(run->metrics, step, run->state.progress.epoch, loss,
                         nm->cells, nm->n);
}

static void add_result(named *nm, const char *prefix, const lk_step_result *r) {
  if (r->has_loss)
    add(nm, prefix, "loss", r->loss);
  for (size_t m = 0; m < r->n_metrics; m++)
    add(nm, prefix, r->metrics[m].name, r->metrics[m].value);
}

/* Logs an evaluation as a row: PREFIX_loss and PREFIX_<metric>. */
static int log_evaluation(lk_run *run, const char *prefix, const named *nm) {
  char line[1024];
  size_t used = 0;
  line[0] = '\0';
  for (size_t i = 0; i < nm->n && used < sizeof line; i++)
    used += (size_t)snprintf(line + used, sizeof line - used, " %s %.6g",
                             nm->cells[i].name, nm->cells[i].value);
  lk__log(run, LK_LOG_INFO, "epoch %llu %s:%s",
          (unsigned long long)run->state.progress.epoch, prefix, line);
  return log_row(run, run->state.progress.global_step, NULL, nm);
}

/* ---- the learning-rate scheduler ----------------------------------------- */

static double current_lr(const lk_run *run) {
  const lk_optimizer_ops *ops =
      run->optimizer ? lk__optimizer_lr_ops(run->optimizer) : NULL;
  return ops ? ops->get_lr(run->optimizer->self) : NAN;
}

static int schedule(lk_run *run, lk_interval when, const named *nm) {
  if (!run->scheduler)
    return 0;
  uint64_t mark = lk__err_mark();
  int rc =
      run->calls.scheduler_step(run->scheduler->self, when, nm->cells, nm->n);
  return rc ? lk__entry_failed(rc, mark, "step of scheduler %s",
                               run->scheduler->name)
            : 0;
}

/* ---- one batch ------------------------------------------------------------
 */

typedef struct window {
  double loss; /* sum of the window's (divided) losses */
  bool has_loss;
} window;

static int consume(lk_run *run, lk_step_result *r) {
  int rc = lk_closure_consume(run->closure, r);
  if (rc == 0 && run->hook_rc != 0) {
    rc = lk__err(run->hook_rc, "%s", run->hook_msg);
    run->hook_rc = 0;
  }
  if (rc == 0)
    rc = check_result(r, "training_step", run->step->name);
  return rc;
}

/* With several processes, at the end of every window: the window's loss
 * and the step's metrics become their means over the processes, and a
 * stop asked for on any process (a signal, a callback) holds for all of
 * them, after this same step. */
static int agree(lk_run *run, window *win, lk_step_result *r) {
  if (run->world <= 1)
    return 0;
  double v[LK_MAX_METRICS + 3];
  size_t n = 0;
  v[n++] = win->has_loss ? win->loss : 0;
  for (size_t m = 0; m < r->n_metrics; m++)
    v[n++] = r->metrics[m].value;
  v[n++] = run->interrupted ? 1 : 0;
  v[n++] = run->state.stopped ? 1 : 0;
  int rc = lk__reduce_sum(run, v, n);
  if (rc != 0)
    return rc;
  win->loss = v[0] / run->world;
  for (size_t m = 0; m < r->n_metrics; m++)
    r->metrics[m].value = v[1 + m] / run->world;
  run->interrupt_agreed = v[n - 2] > 0;
  run->state.stopped = v[n - 1] > 0;
  return 0;
}

/* The optimizer step of a window's last batch: the optimizer calls the
 * closure (once or many times) and the result of its last call is kept. */
static int optimizer_step(lk_run *run, lk_step_result *r) {
  uint64_t mark = lk__err_mark();
  int rc = run->calls.optimizer_step(run->optimizer->self, run->params,
                                     run->n_params, run->opt_closure);
  if (rc != 0) {
    /* The closure's own failure explains the optimizer's: keep its code
     * and message. Otherwise the optimizer's are the reason. */
    lk_step_result ignored;
    int crc = lk__closure_error(run->closure) != 0 || run->hook_rc != 0
                  ? consume(run, &ignored)
                  : 0;
    if (crc != 0)
      return crc;
    return lk__entry_failed(rc, mark, "step of optimizer %s",
                            run->optimizer->name);
  }
  if ((rc = consume(run, r)) != 0)
    return rc;
  run->state.progress.global_step++;
  return lk__hook(run, offsetof(lk_callback_ops, on_after_optimizer_step),
                  "on_after_optimizer_step");
}

/* The row of a window's end: the step's metrics, the rate it used, what
 * callbacks added; then the step-interval scheduler. */
static int end_window(lk_run *run, window *win, const lk_step_result *r,
                      uint64_t step_before, double lr) {
  named nm = {.n = 0};
  for (size_t m = 0; m < r->n_metrics; m++)
    add(&nm, "", r->metrics[m].name, r->metrics[m].value);
  if (run->scheduler)
    add(&nm, "", "lr", lr);
  for (size_t i = 0; i < run->n_extra; i++)
    add(&nm, "", run->extra[i].name, run->extra[i].value);
  run->n_extra = 0;
  int rc = log_row(run, step_before, win->has_loss ? &win->loss : NULL, &nm);
  if (rc == 0 && run->state.progress.global_step != step_before) {
    if (win->has_loss)
      add(&nm, "", "loss", win->loss);
    rc = schedule(run, LK_INTERVAL_STEP, &nm);
  }
  if (rc != 0)
    return rc;
  lk__loop_state *st = &run->state;
  st->has_last_loss = win->has_loss;
  st->last_loss = win->loss;
  /* The epoch's mean loss counts every step's (every batch's, in manual
   * optimization), before any checkpoint of this step is written. */
  if (run->data && win->has_loss &&
      (st->progress.global_step != step_before || run->loop.manual)) {
    st->epoch_loss_sum += win->loss;
    st->epoch_losses++;
  }
  *win = (window){0};
  return 0;
}

static int train_batch(lk_run *run, const lk_batch *batch, bool epoch_end,
                       window *win) {
  int rc;
  lk__progress *p = &run->state.progress;
  uint64_t step_before = p->global_step;
  bool window_end = (int64_t)p->accum + 1 >= run->loop.accumulate || epoch_end;
  double lr = current_lr(run); /* the rate this step uses */
  lk_step_result r;

  if ((rc = hook_batch_start(run, batch)) != 0)
    return rc;
  lk_closure_prepare(run->closure, batch, (double)run->loop.accumulate,
                     p->accum == 0, p->epoch, p->batch);
  if (run->loop.manual) {
    run->in_training_step = true;
    run->plain_closure();
    run->in_training_step = false;
    rc = consume(run, &r);
  } else if (!window_end) {
    run->accumulating = true;
    run->plain_closure();
    run->accumulating = false;
    rc = consume(run, &r);
  } else {
    rc = optimizer_step(run, &r);
  }
  if (rc != 0)
    return rc;
  run->trained = true;
  if (r.has_loss) {
    win->loss += r.loss;
    win->has_loss = true;
  }
  if ((rc = hook_result(run, false, &r)) != 0)
    return rc;
  p->batch++;
  p->accum = window_end ? 0 : p->accum + 1;
  if (window_end && (rc = agree(run, win, &r)) != 0)
    return rc;
  if (window_end && (rc = end_window(run, win, &r, step_before, lr)) != 0)
    return rc;
  if (p->accum == 0 && run->rd.n_pending &&
      (rc = lk__rundir_write_pending(run)) != 0)
    return rc;
  if (run->loop.ckpt_every > 0 && p->global_step != step_before &&
      p->global_step % (uint64_t)run->loop.ckpt_every == 0)
    return run->calls.save(run);
  return 0;
}

static bool steps_done(const lk_run *run) {
  return run->loop.max_steps >= 0 &&
         run->state.progress.global_step >= (uint64_t)run->loop.max_steps;
}

/* Whether the loop would train at all: the limits are not reached and no
 * callback stopped the run. */
static bool more_to_train(const lk_run *run) {
  if (run->state.stopped || steps_done(run))
    return false;
  return !run->data ||
         run->state.progress.epoch < (uint64_t)run->loop.max_epochs;
}

/* ---- epochs -----------------------------------------------------------------
 */

static int train_without_data(lk_run *run) {
  window win = {0};
  lk__meter_start(run, run->state.progress.global_step, 0);
  while (more_to_train(run)) {
    run->no_data_batch.index = run->state.progress.batch;
    uint64_t before = run->state.progress.global_step;
    int rc = train_batch(run, &run->no_data_batch, false, &win);
    if (rc != 0)
      return rc;
    lk__meter_batch(run, NULL, before);
    /* Between windows only: the accumulated gradients are not saved. */
    if (run->state.progress.accum == 0 && (rc = interrupted(run)) != 0)
      return rc;
  }
  return 0;
}

/* The epoch's batches for this process: with several, each takes every
 * world-th batch of the epoch's order, the same count each (they step
 * together), so that K processes with batches of B train as one with
 * batches of K*B. */
static int epoch_batches(lk_run *run, size_t *out) {
  lk__progress *p = &run->state.progress;
  size_t nb = 0, world = (size_t)run->world;
  uint64_t mark = lk__err_mark();
  int rc =
      run->calls.data_epoch(run->data->self, LK_SPLIT_TRAIN, p->epoch, &nb);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "epoch of data plugin %s",
                            run->data->name);
  if (nb == 0)
    return lk__err(LK_EPLUGIN, "data plugin %s has no training batches",
                   run->data->name);
  if (world > 1) {
    if (nb < world)
      return lk__err(LK_ECONFIG,
                     "data plugin %s has %zu training batches for %zu "
                     "processes: every process needs at least one",
                     run->data->name, nb, world);
    if (nb % world && !run->warned_shards) {
      lk__log(run, LK_LOG_WARN,
              "%zu training batches over %zu processes: the last %zu of "
              "each epoch are left out",
              nb, world, nb % world);
      run->warned_shards = true;
    }
    nb /= world;
  }
  /* A resumed epoch goes on where its checkpoint was. */
  if (p->batch > nb)
    return lk__err(LK_EFORMAT,
                   "%s: the checkpoint is at batch %llu of epoch %llu, but "
                   "the epoch has %zu batches here (is the data or the "
                   "batch size not the one of the run that wrote it?)",
                   run->opts.resume ? run->opts.resume : "resumed state",
                   (unsigned long long)p->batch, (unsigned long long)p->epoch,
                   nb);
  *out = nb;
  return 0;
}

/* After an epoch's last batch: its mean loss, on_train_epoch_end, the
 * validation, the epoch-interval scheduler, and the next epoch. */
static int end_epoch(lk_run *run, bool finished) {
  lk__loop_state *st = &run->state;
  lk__progress *p = &st->progress;
  double mean =
      st->epoch_losses ? st->epoch_loss_sum / (double)st->epoch_losses : NAN;
  if (st->epoch_losses)
    lk__log(run, LK_LOG_INFO, "epoch %llu: train loss %.6g (%llu steps)",
            (unsigned long long)p->epoch, mean,
            (unsigned long long)st->epoch_losses);
  int rc = hook_epoch(run, true, p->epoch);
  if (rc != 0)
    return rc;
  named epoch_metrics = {.n = 0};
  if (st->epoch_losses)
    add(&epoch_metrics, "", "loss", mean);
  if (finished && (p->epoch + 1) % (uint64_t)run->loop.val_every == 0) {
    bool ran;
    lk_step_result val;
    rc = run->calls.validate(run, LK_SPLIT_VAL, &ran, &val);
    if (rc == 0 && ran) {
      named row = {.n = 0};
      add_result(&row, "val", &val);
      add_result(&epoch_metrics, "val", &val);
      if ((rc = log_evaluation(run, "val", &row)) == 0)
        rc = hook_result(run, true, &val);
    }
    if (rc != 0)
      return rc;
  }
  if (!finished)
    return 0;
  if ((rc = schedule(run, LK_INTERVAL_EPOCH, &epoch_metrics)) != 0)
    return rc;
  p->epoch++;
  p->batch = 0;
  p->accum = 0;
  st->epoch_losses = 0;
  st->epoch_loss_sum = 0;
  if (run->rd.n_pending && (rc = lk__rundir_write_pending(run)) != 0)
    return rc;
  return run->loop.ckpt_every == 0 ? run->calls.save(run) : 0;
}

int lk__train_epoch(lk_run *run) {
  lk__loop_state *st = &run->state;
  lk__progress *p = &st->progress;
  size_t nb = 0, world = (size_t)run->world, rank = (size_t)run->rank;
  int rc = hook_epoch(run, false, p->epoch);
  if (rc == 0)
    rc = epoch_batches(run, &nb);
  if (rc != 0)
    return rc;
  window win = {0};
  lk__meter_start(run, p->batch, nb);
  for (size_t b = p->batch; b < nb; b++) {
    lk_batch batch = {0};
    size_t index = b * world + rank;
    uint64_t mark = lk__err_mark();
    rc = run->calls.data_batch(run->data->self, LK_SPLIT_TRAIN, index, &batch);
    if (rc != 0)
      return lk__entry_failed(rc, mark, "batch %zu of data plugin %s", index,
                              run->data->name);
    batch.split = LK_SPLIT_TRAIN;
    batch.epoch = p->epoch;
    batch.index = index;
    uint64_t before = p->global_step;
    if ((rc = train_batch(run, &batch, b + 1 == nb, &win)) != 0)
      return rc;
    lk__meter_batch(run, &batch, before);
    if (steps_done(run) || st->stopped)
      break;
    if (p->accum == 0 && signalled(run) && b + 1 < nb)
      return interrupted(run);
  }
  return end_epoch(run, p->batch >= nb);
}

/* With several processes, whether any was signalled: they stop together. */
static int agree_interrupt(lk_run *run) {
  if (run->world <= 1)
    return 0;
  double v = run->interrupted ? 1 : 0;
  int rc = lk__reduce_sum(run, &v, 1);
  if (rc == 0)
    run->interrupt_agreed = v > 0;
  return rc;
}

/* on_train_end, the test, the last checkpoint. The run's last checkpoint
 * so far was written before on_train_end: stopped here, a resumed run does
 * all of this again, so the test's row is never written twice. */
static int finish(lk_run *run) {
  int rc =
      lk__hook(run, offsetof(lk_callback_ops, on_train_end), "on_train_end");
  if (rc == 0) {
    bool ran;
    lk_step_result mean;
    rc = run->calls.test(run, LK_SPLIT_TEST, &ran, &mean);
    if (rc == 0 && ran) {
      named test = {.n = 0};
      add_result(&test, "test", &mean);
      rc = log_evaluation(run, "test", &test);
    }
  }
  if (rc == 0)
    rc = agree_interrupt(run);
  if (rc == 0 && signalled(run))
    return lk__err(LK_EINTERRUPTED,
                   "interrupted as training ended (after step %llu); "
                   "checkpoint %s holds the trained run (resuming it runs "
                   "the test)",
                   (unsigned long long)run->state.progress.global_step,
                   run->rd.last_ckpt ? run->rd.last_ckpt : "(rank 0's)");
  if (rc == 0 && run->rd.n_pending)
    rc = lk__rundir_write_pending(run);
  if (rc == 0) {
    run->state.finished = true;
    rc = run->calls.save(run);
  }
  return rc;
}

int lk__loop_run(lk_run *run) {
  double t0 = lk__now();
  int rc = lk__hook(run, offsetof(lk_callback_ops, on_train_start),
                    "on_train_start");
  if (rc == 0 && !run->data)
    rc = train_without_data(run);
  while (rc == 0 && run->data && more_to_train(run)) {
    rc = run->calls.train_epoch(run);
    if (rc == 0)
      rc = interrupted(run);
  }
  if (rc == 0)
    rc = finish(run);
  run->seconds = lk__now() - t0;
  if (run->profiler && run->profiler->desc->profiler->report) {
    uint64_t mark = lk__err_mark();
    int prc =
        run->profiler->desc->profiler->report(run->profiler->self, run->rd.dir);
    if (rc == 0 && prc != 0)
      rc = lk__entry_failed(prc, mark, "report of profiler %s",
                            run->profiler->name);
  }
  return rc;
}

int lk_run_train(lk_run *run) {
  if (!run->rd.dir && run->rank == 0)
    return lk__err(LK_ESTATE, "this run was set up without a run directory");
  if (run->state.finished) {
    /* A complete run stays complete, unless its limits were raised. */
    if (!more_to_train(run)) {
      run->complete = true;
      lk__log(run, LK_LOG_INFO,
              "the run is complete (it ended at epoch %llu, step %llu): "
              "nothing to train",
              (unsigned long long)run->state.progress.epoch,
              (unsigned long long)run->state.progress.global_step);
      return 0;
    }
    run->state.finished = false;
  }
  int rc = lk__loop_run(run);
  if (rc != 0 && rc != LK_EINTERRUPTED) {
    char msg[2048];
    snprintf(msg, sizeof msg, "training failed: %s", lk_last_error());
    lk__abort_others(run, lk_run_failed_before_training(run, rc) ? 2 : 1, msg);
  }
  return rc;
}

bool lk_run_failed_before_training(const lk_run *run, int rc) {
  return (rc == LK_ECONFIG || rc == LK_EFORMAT) && !run->trained;
}
