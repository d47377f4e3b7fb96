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

static int step_number(const char *name, unsigned long long *n) {
  char tail;
  return sscanf(name, "step-%llu.ckp%c", n, &tail) == 2 && tail == 't' &&
         strlen(name) > 10 && strcmp(name + strlen(name) - 5, ".ckpt") == 0;
}

static int cmp_u64(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a,
                     y = *(const unsigned long long *)b;
  return (x > y) - (x < y);
}

/* Keeps the newest keep_last step-N.ckpt files of DIR. */
static int prune(lk_run *run, const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return lk__err(LK_EIO, "cannot list %s: %s", dir, strerror(errno));
  unsigned long long *steps = NULL, n;
  size_t count = 0, cap = 0;
  int rc = 0;
  struct dirent *e;
  while (rc == 0 && (e = readdir(d)))
    if (step_number(e->d_name, &n)) {
      if (count == cap) {
        size_t nc = cap ? 2 * cap : 16;
        unsigned long long *g = realloc(steps, nc * sizeof *g);
        if (!g) {
          rc = lk__err(LK_ENOMEM, "out of memory");
          break;
        }
        steps = g;
        cap = nc;
      }
      steps[count++] = n;
    }
  closedir(d);
  if (count)
    qsort(steps, count, sizeof *steps, cmp_u64);
  for (size_t i = 0; rc == 0 && i + (size_t)run->loop.keep_last < count; i++) {
    char *path = lk__asprintf("%s/step-%llu.ckpt", dir, steps[i]);
    if (!path || (unlink(path) != 0 && errno != ENOENT))
      rc = lk__err(LK_EIO, "cannot remove old checkpoint %s", path ? path : "");
    free(path);
  }
  free(steps);
  return rc;
}

/* last.ckpt, and with keep_last > 0 step-N.ckpt as well: the step file is
 * written atomically, then hard-linked into place as last.ckpt with a
 * rename, so both are always whole and cost one write. */
int lk__write_checkpoint(lk_run *run, const char *path) {
  *(double *)run->rows_state->data =
      run->metrics ? (double)lk__metrics_rows(run->metrics) : 0;
  return lk__ckpt_write(path, &run->progress, &run->rng, run->params,
                        run->n_params, run->states, run->n_states);
}

/* The checkpoints lk_host_save_checkpoint asked for, now that the loop is
 * between steps (or epochs): resuming one continues exactly from here. */
int lk__write_pending(lk_run *run) {
  int rc = 0;
  if (run->rank != 0)
    run->n_pending = 0; /* never asked for: see lk_host_save_checkpoint */
  for (size_t i = 0; i < run->n_pending; i++) {
    char *path =
        rc == 0 ? lk__asprintf("%s/checkpoints/%s", run->dir, run->pending[i])
                : NULL;
    if (rc == 0 && !path)
      rc = lk__err(LK_ENOMEM, "out of memory");
    if (rc == 0 && (rc = lk__write_checkpoint(run, path)) != 0)
      rc = lk__err_prefix(rc, "checkpoint %s not written", run->pending[i]);
    free(path);
    free(run->pending[i]);
  }
  run->n_pending = 0;
  return rc;
}

static int save(lk_run *run) {
  if (run->loop.keep_last == 0)
    return lk__write_checkpoint(run, run->last_ckpt);
  char *dir = lk__asprintf("%s/checkpoints", run->dir);
  char *step = dir ? lk__asprintf("%s/step-%llu.ckpt", dir,
                                  (unsigned long long)run->progress.global_step)
                   : NULL;
  char *link_tmp = dir ? lk__asprintf("%s/last.ckpt.link", dir) : NULL;
  int rc = step && link_tmp ? 0 : lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0)
    rc = lk__write_checkpoint(run, step);
  if (rc == 0) {
    unlink(link_tmp);
    if (link(step, link_tmp) != 0 || rename(link_tmp, run->last_ckpt) != 0)
      rc = lk__err(LK_EIO, "cannot make %s the last checkpoint: %s", step,
                   strerror(errno));
  }
  if (rc == 0)
    rc = prune(run, dir);
  free(dir);
  free(step);
  free(link_tmp);
  return rc;
}

int lk__save_checkpoint(lk_run *run) {
  if (run->rank != 0)
    return 0; /* rank 0 writes the run's checkpoints */
  int rc = save(run);
  return rc ? lk__err_prefix(rc, "checkpoint not written") : 0;
}

/* After a step: a signal asked the run to stop. */
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
                 (unsigned long long)run->progress.global_step, run->last_ckpt);
}

/* ---- hooks with arguments ------------------------------------------------ */

static int hook_batch_start(lk_run *run, const lk_batch *b) {
  for (size_t i = 0; i < run->n_callbacks; i++) {
    lk__instance *cb = run->callbacks[i];
    int rc = cb->desc->callback->on_train_batch_start
                 ? cb->desc->callback->on_train_batch_start(cb->self, b)
                 : 0;
    if (rc != 0)
      return lk__err_prefix(rc, "on_train_batch_start of plugin %s", cb->name);
  }
  return 0;
}

static int hook_result(lk_run *run, bool validation, const lk_step_result *r) {
  for (size_t i = 0; i < run->n_callbacks; i++) {
    lk__instance *cb = run->callbacks[i];
    int (*fn)(void *, const lk_step_result *) =
        validation ? cb->desc->callback->on_validation_end
                   : cb->desc->callback->on_train_batch_end;
    int rc = fn ? fn(cb->self, r) : 0;
    if (rc != 0)
      return lk__err_prefix(
          rc, "%s of plugin %s",
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
    int rc = fn ? fn(cb->self, epoch) : 0;
    if (rc != 0)
      return lk__err_prefix(rc, "%s of plugin %s",
                            end ? "on_train_epoch_end" : "on_train_epoch_start",
                            cb->name);
  }
  return 0;
}

/* ---- evaluation of the validation and test splits ------------------------ */

int lk__evaluate(lk_run *run, lk_split split, bool *ran, lk_step_result *mean) {
  int (*fn)(void *, const lk_batch *, lk_step_result *) =
      split == LK_SPLIT_TEST ? run->calls.test_step
                             : run->calls.validation_step;
  *ran = false;
  if (!run->data || !fn)
    return 0;
  size_t nb = 0;
  int rc =
      run->calls.data_epoch(run->data->self, split, run->progress.epoch, &nb);
  if (rc != 0)
    return lk__err_prefix(rc, "epoch of data plugin %s", run->data->name);
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
    lk_batch batch = {0};
    if ((rc = run->calls.data_batch(run->data->self, split, b, &batch)) != 0)
      return lk__err_prefix(rc, "batch %zu of data plugin %s", b,
                            run->data->name);
    memset(&r, 0, sizeof r);
    if ((rc = fn(run->step->self, &batch, &r)) != 0)
      return lk__err_prefix(rc, "%s of plugin %s",
                            split == LK_SPLIT_TEST ? "test_step"
                                                   : "validation_step",
                            run->step->name);
    double w = batch.size ? (double)batch.size : 1.0;
    samples += w;
    if (r.has_loss)
      loss_sum += w * r.loss;
    for (size_t m = 0; m < r.n_metrics; m++) {
      sums[m] += w * r.metrics[m].value;
      mean->metrics[m].name = r.metrics[m].name;
    }
    mean->n_metrics = r.n_metrics;
    mean->has_loss = r.has_loss;
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

/* Logs an evaluation as a row: PREFIX_loss and PREFIX_<metric>. */
/* Metrics with names made at run time ("val_loss"): the names live here. */
typedef struct named {
  lk_metric cells[LK_MAX_METRICS + 2 + LK__MAX_EXTRA];
  char names[LK_MAX_METRICS + 2 + LK__MAX_EXTRA][64];
  size_t n;
} named;

/* A name given twice (lr from the scheduler and from lr_monitor) keeps one
 * cell, the later value. */
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
  return lk__metrics_row(run->metrics, step, run->progress.epoch, loss,
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
          (unsigned long long)run->progress.epoch, prefix, line);
  return log_row(run, run->progress.global_step, NULL, nm);
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
  int rc =
      run->calls.scheduler_step(run->scheduler->self, when, nm->cells, nm->n);
  return rc ? lk__err_prefix(rc, "step of scheduler %s", run->scheduler->name)
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
  v[n++] = run->stop_requested ? 1 : 0;
  int rc = lk__reduce_sum(run, v, n);
  if (rc != 0)
    return rc;
  win->loss = v[0] / run->world;
  for (size_t m = 0; m < r->n_metrics; m++)
    r->metrics[m].value = v[1 + m] / run->world;
  run->interrupt_agreed = v[n - 2] > 0;
  run->stop_requested = v[n - 1] > 0;
  return 0;
}

static int train_batch(lk_run *run, const lk_batch *batch, bool epoch_end,
                       window *win) {
  int rc;
  lk__progress *p = &run->progress;
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
    if ((rc = consume(run, &r)) != 0)
      return rc;
  } else if (!window_end) {
    run->accumulating = true;
    run->plain_closure();
    run->accumulating = false;
    if ((rc = consume(run, &r)) != 0)
      return rc;
  } else {
    rc = run->calls.optimizer_step(run->optimizer->self, run->params,
                                   run->n_params, run->opt_closure);
    if (rc != 0) {
      /* The closure's own failure explains the optimizer's. */
      lk_step_result ignored;
      if (consume(run, &ignored) != 0)
        return LK_EPLUGIN;
      return lk__err_prefix(rc, "step of optimizer %s", run->optimizer->name);
    }
    if ((rc = consume(run, &r)) != 0)
      return rc;
    p->global_step++;
    if ((rc = lk__hook(run, offsetof(lk_callback_ops, on_after_optimizer_step),
                       "on_after_optimizer_step")) != 0)
      return rc;
  }
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
  if (window_end) {
    named nm = {.n = 0};
    for (size_t m = 0; m < r.n_metrics; m++)
      add(&nm, "", r.metrics[m].name, r.metrics[m].value);
    if (run->scheduler)
      add(&nm, "", "lr", lr);
    for (size_t i = 0; i < run->n_extra; i++)
      add(&nm, "", run->extra[i].name, run->extra[i].value);
    run->n_extra = 0;
    rc = log_row(run, step_before, win->has_loss ? &win->loss : NULL, &nm);
    if (rc == 0 && p->global_step != step_before) {
      if (win->has_loss)
        add(&nm, "", "loss", win->loss);
      rc = schedule(run, LK_INTERVAL_STEP, &nm);
    }
    if (rc != 0)
      return rc;
    run->have_last_loss = win->has_loss;
    run->last_loss = win->loss;
    *win = (window){0};
  }
  if (p->accum == 0 && run->n_pending && (rc = lk__write_pending(run)) != 0)
    return rc;
  if (run->loop.ckpt_every > 0 && p->global_step != step_before &&
      p->global_step % (uint64_t)run->loop.ckpt_every == 0)
    return run->calls.save(run);
  return 0;
}

static bool steps_done(const lk_run *run) {
  return run->loop.max_steps >= 0 &&
         run->progress.global_step >= (uint64_t)run->loop.max_steps;
}

/* ---- epochs -----------------------------------------------------------------
 */

static int train_without_data(lk_run *run) {
  window win = {0};
  lk__meter_start(run, run->progress.global_step, 0);
  while (!steps_done(run) && !run->stop_requested) {
    run->no_data_batch.index = run->progress.batch;
    uint64_t before = run->progress.global_step;
    int rc = train_batch(run, &run->no_data_batch, false, &win);
    if (rc != 0)
      return rc;
    lk__meter_batch(run, NULL, before);
    /* Between windows only: the accumulated gradients are not saved. */
    if (run->progress.accum == 0 && (rc = interrupted(run)) != 0)
      return rc;
  }
  return 0;
}

int lk__train_epoch(lk_run *run) {
  lk__progress *p = &run->progress;
  size_t nb = 0;
  int rc = hook_epoch(run, false, p->epoch);
  if (rc != 0)
    return rc;
  rc = run->calls.data_epoch(run->data->self, LK_SPLIT_TRAIN, p->epoch, &nb);
  if (rc != 0)
    rc = lk__err_prefix(rc, "epoch of data plugin %s", run->data->name);
  else if (nb == 0)
    rc = lk__err(LK_EPLUGIN, "data plugin %s has no training batches",
                 run->data->name);
  /* Several processes: each takes every world-th batch of the epoch's
   * order, the same count each (they step together), so that K processes
   * with batches of B train as one with batches of K*B. */
  size_t world = (size_t)run->world, rank = (size_t)run->rank;
  if (rc == 0 && world > 1) {
    if (nb < world)
      rc = lk__err(LK_ECONFIG,
                   "data plugin %s has %zu training batches for %zu "
                   "processes: every process needs at least one",
                   run->data->name, nb, world);
    else if (nb % world && !run->warned_shards) {
      lk__log(run, LK_LOG_WARN,
              "%zu training batches over %zu processes: the last %zu of "
              "each epoch are left out",
              nb, world, nb % world);
      run->warned_shards = true;
    }
    nb /= world;
  }
  window win = {0};
  if (rc == 0)
    lk__meter_start(run, p->batch, nb);
  double epoch_loss = 0;
  size_t losses = 0;
  for (size_t b = p->batch; rc == 0 && b < nb; b++) {
    lk_batch batch = {0};
    size_t index = b * world + rank;
    rc = run->calls.data_batch(run->data->self, LK_SPLIT_TRAIN, index, &batch);
    if (rc != 0) {
      rc = lk__err_prefix(rc, "batch %zu of data plugin %s", index,
                          run->data->name);
      break;
    }
    batch.split = LK_SPLIT_TRAIN;
    batch.epoch = p->epoch;
    batch.index = index;
    uint64_t before = p->global_step;
    rc = train_batch(run, &batch, b + 1 == nb, &win);
    if (rc == 0)
      lk__meter_batch(run, &batch, before);
    if (rc == 0 && p->accum == 0 && run->have_last_loss &&
        (p->global_step != before || run->loop.manual)) {
      epoch_loss += run->last_loss;
      losses++;
    }
    if (steps_done(run) || run->stop_requested)
      break;
    if (rc == 0 && p->accum == 0 && signalled(run) && b + 1 < nb)
      return interrupted(run);
  }
  if (rc != 0)
    return rc;
  bool finished = p->batch >= nb;
  if (losses)
    lk__log(run, LK_LOG_INFO, "epoch %llu: train loss %.6g (%zu steps)",
            (unsigned long long)p->epoch, epoch_loss / (double)losses, losses);
  if ((rc = hook_epoch(run, true, p->epoch)) != 0)
    return rc;
  named epoch_metrics = {.n = 0};
  if (losses)
    add(&epoch_metrics, "", "loss", epoch_loss / (double)losses);
  if (finished && (p->epoch + 1) % (uint64_t)run->loop.val_every == 0) {
    bool ran;
    lk_step_result mean;
    rc = run->calls.validate(run, LK_SPLIT_VAL, &ran, &mean);
    if (rc == 0 && ran) {
      named val = {.n = 0};
      add_result(&val, "val", &mean);
      add_result(&epoch_metrics, "val", &mean);
      if ((rc = log_evaluation(run, "val", &val)) == 0)
        rc = hook_result(run, true, &mean);
    }
    if (rc != 0)
      return rc;
  }
  if (finished && (rc = schedule(run, LK_INTERVAL_EPOCH, &epoch_metrics)) != 0)
    return rc;
  if (finished) {
    p->epoch++;
    p->batch = 0;
    p->accum = 0;
  }
  if (finished && run->n_pending && (rc = lk__write_pending(run)) != 0)
    return rc;
  if (finished && run->loop.ckpt_every == 0)
    return run->calls.save(run);
  return 0;
}

int lk__loop_run(lk_run *run) {
  double t0 = lk__now();
  int rc = lk__hook(run, offsetof(lk_callback_ops, on_train_start),
                    "on_train_start");
  if (rc == 0 && !run->data)
    rc = train_without_data(run);
  while (rc == 0 && run->data &&
         run->progress.epoch < (uint64_t)run->loop.max_epochs &&
         !steps_done(run) && !run->stop_requested) {
    rc = run->calls.train_epoch(run);
    if (rc == 0)
      rc = interrupted(run);
  }
  if (rc == 0)
    rc = lk__hook(run, offsetof(lk_callback_ops, on_train_end), "on_train_end");
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
  if (rc == 0 && run->n_pending)
    rc = lk__write_pending(run);
  if (rc == 0)
    rc = run->calls.save(run);
  run->seconds = lk__now() - t0;
  if (run->profiler && run->profiler->desc->profiler->report) {
    int prc =
        run->profiler->desc->profiler->report(run->profiler->self, run->dir);
    if (rc == 0 && prc != 0)
      rc = lk__err_prefix(prc, "report of profiler %s", run->profiler->name);
  }
  return rc;
}

static int open_metrics(lk_run *run) {
  char *path = lk__asprintf("%s/metrics.csv", run->dir);
  if (!path)
    return lk__err(LK_ENOMEM, "out of memory");
  int64_t keep =
      run->resumed ? (int64_t) * (double *)run->rows_state->data : -1;
  int rc = run->metrics ? 0 : lk__metrics_open(path, keep, &run->metrics);
  free(path);
  return rc;
}

int lk_run_train(lk_run *run) {
  if (!run->dir && run->rank == 0)
    return lk__err(LK_ESTATE, "this run was set up without a run directory");
  int rc = run->rank == 0 ? open_metrics(run) : 0;
  if (rc == 0)
    rc = lk__loop_run(run);
  if (rc != 0 && rc != LK_EINTERRUPTED) {
    char msg[2048];
    snprintf(msg, sizeof msg, "training failed: %s", lk_last_error());
    lk__abort_others(run, rc == LK_ECONFIG ? 2 : 1, msg);
  }
  return rc;
}
