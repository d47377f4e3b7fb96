/* The training loop: epochs and batches. One batch runs the hooks in the
 * order of README.md's list (train_batch below reads top-down as it); an
 * epoch's end logs its loss, validates, steps the epoch scheduler and
 * writes its checkpoint; the run's end runs on_train_end, the test and
 * the last checkpoint. Everything the loop knows between batches is in
 * run->state, which every checkpoint carries. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"

/* ---- signals ---------------------------------------------------------- */

/* A signal asked the run to stop: in one process, as soon as it came;
 * with several, once they all know (agree()), so they stop together. */
static bool signalled(const lk_run *run) {
  return run->env.world > 1 ? run->interrupt_agreed : run->interrupted;
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

/* ---- the learning-rate schedulers --------------------------------------- */

static int schedule(lk_run *run, lk_interval when, const lk__named *nm) {
  return lk__optim_schedule(run, when, nm);
}

/* ---- one batch ---------------------------------------------------------- */

/* Per optimizer (one in manual optimization): the sum of the window's
 * (divided) losses. */
typedef struct window {
  double loss[LK__MAX_OPTIMIZERS];
  bool has_loss[LK__MAX_OPTIMIZERS];
} window;

/* With several processes, at the end of every window: the window's loss
 * and the step's metrics become their means over the processes, and a
 * stop asked for on any process (a signal, a callback) holds for all of
 * them, after this same step. */
static int agree(lk_run *run, window *win, lk_step_result *r) {
  int world = run->env.world;
  if (world <= 1)
    return 0;
  double v[LK__MAX_OPTIMIZERS + LK_MAX_METRICS + 2];
  size_t n = 0;
  for (size_t i = 0; i < LK__MAX_OPTIMIZERS; i++)
    v[n++] = win->has_loss[i] ? win->loss[i] : 0;
  for (size_t m = 0; m < r->n_metrics; m++)
    v[n++] = r->metrics[m].value;
  v[n++] = run->interrupted ? 1 : 0;
  v[n++] = run->state.stopped ? 1 : 0;
  int rc = lk__reduce_sum(run, v, n);
  if (rc != 0)
    return rc;
  for (size_t i = 0; i < LK__MAX_OPTIMIZERS; i++)
    win->loss[i] = v[i] / world;
  for (size_t m = 0; m < r->n_metrics; m++)
    r->metrics[m].value = v[LK__MAX_OPTIMIZERS + m] / world;
  run->interrupt_agreed = v[n - 2] > 0;
  run->state.stopped = v[n - 1] > 0;
  return 0;
}

/* The optimizer step of a window's last batch: the optimizer calls the
 * closure (once or many times) and the result of its last call is kept;
 * then on_after_optimizer_step. */
static int optimizer_step(lk_run *run, lk__optimizer *op, lk_step_result *r) {
  lk__closure_set_caller(run->chain.closure, op->in->label);
  int rc = lk__optim_step(run, op, run->chain.opt_closure);
  if (rc != 0) {
    /* The closure's own failure explains the optimizer's: keep its code
     * and message. Otherwise the optimizer's are the reason. */
    lk_step_result ignored;
    int crc = lk__closure_error(run->chain.closure)
                  ? lk__chain_consume(run, &ignored)
                  : 0;
    return crc ? crc : rc;
  }
  if ((rc = lk__chain_consume(run, r)) != 0)
    return rc;
  run->state.progress.global_step++;
  return lk__hooks_call(&run->env.reg, LK__ON_AFTER_OPTIMIZER_STEP,
                        (lk__hook_arg){0});
}

/* One evaluation for optimizer OP (NULL: manual optimization): called by
 * the step plugin's own optimizer calls (manual), by the loop inside an
 * accumulation window (no update), or through the optimizer at the
 * window's end. */
static int one_closure(lk_run *run, const lk_batch *batch, bool window_end,
                       lk__optimizer *op, lk_step_result *r) {
  lk__progress *p = &run->state.progress;
  lk__chain *c = &run->chain;
  lk_closure_prepare(c->closure, batch, (double)run->loop.accumulate,
                     p->accum == 0, p->epoch, p->batch);
  if (!op) {
    c->in_training_step = true;
    c->plain_closure();
    c->in_training_step = false;
  } else if (!window_end) {
    c->accumulating = true;
    c->plain_closure();
    c->accumulating = false;
  } else {
    return optimizer_step(run, op, r);
  }
  return lk__chain_consume(run, r);
}

/* The closure of one batch for each optimizer in turn (Lightning 1.x's
 * automatic optimization of several), or once in manual optimization. R
 * gets the first's loss and every evaluation's metrics; WIN the losses. */
static int run_closure(lk_run *run, const lk_batch *batch, bool window_end,
                       window *win, lk_step_result *r) {
  lk__optim *o = &run->optim;
  size_t k = run->loop.manual ? 1 : o->n;
  int rc = 0;
  for (size_t i = 0; i < k && rc == 0; i++) {
    lk__optimizer *op = run->loop.manual ? NULL : &o->opt[i];
    lk_step_result ri;
    lk__optim_turn(run, op);
    rc = one_closure(run, batch, window_end, op, &ri);
    lk__optim_turn(run, NULL);
    if (rc != 0)
      break;
    if (ri.has_loss) {
      win->loss[i] += ri.loss;
      win->has_loss[i] = true;
    }
    if (i == 0) {
      *r = ri;
      continue;
    }
    for (size_t m = 0; m < ri.n_metrics && r->n_metrics < LK_MAX_METRICS; m++)
      r->metrics[r->n_metrics++] = ri.metrics[m];
  }
  return rc;
}

/* The row of a window's end: the step's metrics, the rate it used, what
 * callbacks added; then the step-interval scheduler. */
static int end_window(lk_run *run, window *win, const lk_step_result *r,
                      uint64_t step_before) {
  lk__loop_state *st = &run->state;
  const lk__optim *o = &run->optim;
  lk__named nm = {.n = 0};
  for (size_t m = 0; m < r->n_metrics; m++)
    lk__named_add(&nm, "", r->metrics[m].name, r->metrics[m].value);
  for (size_t i = 1; i < o->n && !run->loop.manual; i++)
    if (win->has_loss[i])
      lk__named_add(&nm, "", o->opt[i].loss_column, win->loss[i]);
  lk__optim_add_lr(run, &nm);
  for (size_t i = 0; i < run->rows.n_extra; i++)
    lk__named_add(&nm, "", run->rows.extra[i].name, run->rows.extra[i].value);
  run->rows.n_extra = 0;
  int rc = lk__rows_log(run, step_before,
                        win->has_loss[0] ? &win->loss[0] : NULL, &nm);
  if (rc == 0 && st->progress.global_step != step_before) {
    if (win->has_loss[0])
      lk__named_add(&nm, "", "loss", win->loss[0]);
    rc = schedule(run, LK_INTERVAL_STEP, &nm);
  }
  if (rc != 0)
    return rc;
  st->has_last_loss = win->has_loss[0];
  st->last_loss = win->loss[0];
  /* The epoch's mean loss counts every step's (every batch's, in manual
   * optimization), before any checkpoint of this step is written. */
  if (lk__role(run, LK__KIND_DATA) && win->has_loss[0] &&
      (st->progress.global_step != step_before || run->loop.manual)) {
    st->epoch_loss_sum += win->loss[0];
    st->epoch_losses++;
  }
  *win = (window){0};
  return 0;
}

static int validate(lk_run *run, lk__named *epoch_metrics);

/* [loop] val_check_interval = N: a validation after every N-th optimizer
 * step of an epoch (one a batch in manual optimization), in the epochs
 * that validate, but not after the epoch's last batch, whose validation
 * the epoch's end runs. Before the step's checkpoints: a checkpoint holds
 * what the validation logged and what its callbacks decided, and a run
 * resumed from it does not validate again. */
static int validate_within(lk_run *run, bool epoch_end) {
  const lk__progress *p = &run->state.progress;
  const lk__loop_config *l = &run->loop;
  if (l->val_check <= 0 || epoch_end || !lk__role(run, LK__KIND_DATA) ||
      (p->epoch + 1) % (uint64_t)l->val_every != 0)
    return 0;
  uint64_t steps = l->manual ? p->batch : p->batch / (uint64_t)l->accumulate;
  if (steps == 0 || steps % (uint64_t)l->val_check != 0)
    return 0;
  lk__named unused = {.n = 0};
  return validate(run, &unused);
}

/* One batch, in the hook order of README.md: on_train_batch_start, the
 * closure (training_step, on_before_zero_grad, zero_grad,
 * on_before_backward, backward, on_after_backward, on_before_optimizer_step,
 * clipping, the update, on_after_optimizer_step), on_train_batch_end; at a
 * window's end its row, the step scheduler and a validation if one is due
 * within the epoch; the checkpoints due. */
static int train_batch(lk_run *run, const lk_batch *batch, bool epoch_end,
                       window *win) {
  lk__progress *p = &run->state.progress;
  const lk__registry *reg = &run->env.reg;
  uint64_t step_before = p->global_step;
  bool window_end = (int64_t)p->accum + 1 >= run->loop.accumulate || epoch_end;
  lk__optim_note_lr(run); /* the rates this step uses */
  lk_step_result r;
  int rc = lk__hooks_call(reg, LK__ON_TRAIN_BATCH_START,
                          (lk__hook_arg){.batch = batch});
  if (rc == 0)
    rc = run_closure(run, batch, window_end, win, &r);
  if (rc != 0)
    return rc;
  run->trained = true;
  rc =
      lk__hooks_call(reg, LK__ON_TRAIN_BATCH_END, (lk__hook_arg){.result = &r});
  if (rc != 0)
    return rc;
  p->batch++;
  p->accum = window_end ? 0 : p->accum + 1;
  if (window_end && ((rc = agree(run, win, &r)) != 0 ||
                     (rc = end_window(run, win, &r, step_before)) != 0 ||
                     (rc = validate_within(run, epoch_end)) != 0))
    return rc;
  return lk__ckpt_after_window(run, step_before); /* where the state is whole */
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
  return !lk__role(run, LK__KIND_DATA) || run->loop.max_epochs < 0 ||
         run->state.progress.epoch < (uint64_t)run->loop.max_epochs;
}

/* ---- epochs -------------------------------------------------------------- */

static int train_without_data(lk_run *run) {
  window win = {0};
  lk_batch *batch = &run->chain.no_data_batch;
  lk__meter_start(run, run->state.progress.global_step, 0);
  while (more_to_train(run)) {
    batch->index = run->state.progress.batch;
    uint64_t before = run->state.progress.global_step;
    int rc = train_batch(run, batch, false, &win);
    if (rc != 0)
      return rc;
    lk__meter_batch(run, NULL, before);
    /* Between windows only: the accumulated gradients are not saved. */
    if (run->state.progress.accum == 0 && (rc = interrupted(run)) != 0)
      return rc;
  }
  return 0;
}

/* The epoch's batches for this process (lk__shard_train). */
static int epoch_batches(lk_run *run, lk__shard *out) {
  const lk__instance *data = lk__role(run, LK__KIND_DATA);
  lk__progress *p = &run->state.progress;
  size_t nb = 0, world = (size_t)run->env.world;
  uint64_t mark = lk__err_mark();
  int rc = run->calls.data_epoch(data->self, LK_SPLIT_TRAIN, p->epoch, &nb);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "epoch of data plugin %s", data->label);
  if (nb == 0)
    return lk__err(LK_EPLUGIN, "data plugin %s has no training batches",
                   data->label);
  if (world > 1) {
    if (nb < world)
      return lk__err(LK_ECONFIG,
                     "data plugin %s has %zu training batches for %zu "
                     "processes: every process needs at least one",
                     data->label, nb, world);
    if (nb % world && !run->warned_shards) {
      lk__log(&run->env, LK_LOG_WARN,
              "%zu training batches over %zu processes: the last %zu of "
              "each epoch are left out",
              nb, world, nb % world);
      run->warned_shards = true;
    }
  }
  lk__shard sh = lk__shard_train(nb, run->env.world, run->env.rank);
  /* A resumed epoch goes on where its checkpoint was. */
  if (p->batch > sh.count)
    return lk__err(LK_EFORMAT,
                   "%s: the checkpoint is at batch %llu of epoch %llu, but "
                   "the epoch has %zu batches here (is the data or the "
                   "batch size not the one of the run that wrote it?)",
                   run->opts.resume ? run->opts.resume : "resumed state",
                   (unsigned long long)p->batch, (unsigned long long)p->epoch,
                   sh.count);
  *out = sh;
  return 0;
}

/* With several processes, once: batch_size is per process (as DDP's), so
 * that a step takes WORLD times the batch, which users ask about. */
static void note_batch(lk_run *run, const lk_batch *batch) {
  long long world = run->env.world, b = (long long)batch->size;
  long long acc = run->loop.manual ? 1 : run->loop.accumulate;
  if (world <= 1 || run->noted_batch)
    return;
  run->noted_batch = true;
  char accumulated[96] = "";
  if (acc > 1)
    snprintf(accumulated, sizeof accumulated,
             " (%lld accumulated: %lld an optimizer step)", acc,
             world * b * acc);
  lk__log(&run->env, LK_LOG_INFO,
          "%lld processes with batches of %lld each: %lld samples a step%s; "
          "batch_size is per process, as DDP's",
          world, b, world * b, accumulated);
}

/* The validation of an epoch's end: its row, on_validation_end, and its
 * metrics for the epoch scheduler. */
static int validate(lk_run *run, lk__named *epoch_metrics) {
  bool ran;
  lk_step_result val;
  int rc = run->calls.validate(run, LK_SPLIT_VAL, &ran, &val);
  if (rc != 0 || !ran)
    return rc;
  lk__named row = {.n = 0};
  lk__named_result(&row, "val", &val);
  lk__named_result(epoch_metrics, "val", &val);
  rc = lk__rows_log_evaluation(run, run->state.progress.epoch, "val", &row);
  return rc ? rc
            : lk__hooks_call(&run->env.reg, LK__ON_VALIDATION_END,
                             (lk__hook_arg){.result = &val});
}

/* After an epoch's last batch: its mean loss, on_train_epoch_end, the
 * validation, the epoch-interval scheduler, and the next epoch. */
static int end_epoch(lk_run *run, bool finished) {
  lk__loop_state *st = &run->state;
  lk__progress *p = &st->progress;
  double mean =
      st->epoch_losses ? st->epoch_loss_sum / (double)st->epoch_losses : NAN;
  if (st->epoch_losses)
    lk__log(&run->env, LK_LOG_INFO, "epoch %llu: train loss %.6g (%llu steps)",
            (unsigned long long)p->epoch, mean,
            (unsigned long long)st->epoch_losses);
  int rc = lk__hooks_call(&run->env.reg, LK__ON_TRAIN_EPOCH_END,
                          (lk__hook_arg){.epoch = p->epoch});
  if (rc != 0)
    return rc;
  lk__named epoch_metrics = {.n = 0};
  if (st->epoch_losses)
    lk__named_add(&epoch_metrics, "", "loss", mean);
  if (finished && (p->epoch + 1) % (uint64_t)run->loop.val_every == 0 &&
      (rc = validate(run, &epoch_metrics)) != 0)
    return rc;
  if (!finished)
    return 0;
  if ((rc = schedule(run, LK_INTERVAL_EPOCH, &epoch_metrics)) != 0)
    return rc;
  p->epoch++;
  p->batch = 0;
  p->accum = 0;
  st->epoch_losses = 0;
  st->epoch_loss_sum = 0;
  return lk__ckpt_after_epoch(run);
}

int lk__train_epoch(lk_run *run) {
  const lk__instance *data = lk__role(run, LK__KIND_DATA);
  lk__loop_state *st = &run->state;
  lk__progress *p = &st->progress;
  lk__shard sh = {0, 1, 0};
  int rc = lk__hooks_call(&run->env.reg, LK__ON_TRAIN_EPOCH_START,
                          (lk__hook_arg){.epoch = p->epoch});
  if (rc == 0)
    rc = epoch_batches(run, &sh);
  if (rc != 0)
    return rc;
  size_t nb = sh.count;
  window win = {0};
  lk__meter_start(run, p->batch, nb);
  for (size_t b = p->batch; b < nb; b++) {
    lk_batch batch = {0};
    size_t index = lk__shard_batch(&sh, b);
    uint64_t mark = lk__err_mark();
    rc = run->calls.data_batch(data->self, LK_SPLIT_TRAIN, index, &batch);
    if (rc != 0)
      return lk__entry_failed(rc, mark, "batch %zu of data plugin %s", index,
                              data->label);
    batch.split = LK_SPLIT_TRAIN;
    batch.epoch = p->epoch;
    batch.index = index;
    note_batch(run, &batch);
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

/* ---- the end ------------------------------------------------------------- */

/* With several processes, whether any was signalled: they stop together. */
static int agree_interrupt(lk_run *run) {
  if (run->env.world <= 1)
    return 0;
  double v = run->interrupted ? 1 : 0;
  int rc = lk__reduce_sum(run, &v, 1);
  if (rc == 0)
    run->interrupt_agreed = v > 0;
  return rc;
}

/* The last epoch that trained, counted from 0 as everywhere: once an epoch
 * has finished, the loop's counter has moved on to the next one, which
 * the test or a complete run must not be said to be at. */
static uint64_t last_epoch(const lk__progress *p) {
  return p->batch == 0 && p->epoch > 0 ? p->epoch - 1 : p->epoch;
}

/* Whether the test split has batches (and a step to test them). */
static int has_test(lk_run *run, bool *yes) {
  const lk__instance *data = lk__role(run, LK__KIND_DATA);
  size_t nb = 0;
  *yes = false;
  if (!data || !run->calls.test_step)
    return 0;
  uint64_t mark = lk__err_mark();
  int rc = run->calls.data_epoch(data->self, LK_SPLIT_TEST,
                                 run->state.progress.epoch, &nb);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "epoch of data plugin %s", data->name);
  *yes = nb > 0;
  return 0;
}

/* The best.ckpt to test, in *PATH; NULL when there is none to test. The
 * callback's kept list is state: a run resumed in a new directory goes on
 * with the list of the run it continues, and the bundled callback carries
 * those files, best.ckpt included, into the new directory (checkpoint.c).
 * When it could not (they were gone, the checkpoint was in no run
 * directory), the run cannot be said to have a best checkpoint: the test
 * is the trained model's, with a warning, so that the run can finish. In
 * a run that started here, or goes on in place, its absence is an error:
 * the callback kept nothing. */
static int find_best(lk_run *run, char **path) {
  *path = lk__ckpt_best_path(run->best_keeper, run->rd.dir);
  if (!*path)
    return lk__err(LK_ENOMEM, "out of memory");
  if (access(*path, F_OK) == 0)
    return 0;
  int rc = 0;
  if (run->resumed && !run->rd.in_place)
    lk__log(&run->env, LK_LOG_WARN,
            "[loop] test_ckpt = best: no %s (its checkpoint callback found "
            "no best checkpoint of the run it continues, %s, to carry): "
            "testing the trained model, as test_ckpt = last",
            *path, run->rd.source ? run->rd.source : run->opts.resume);
  else
    rc = lk__err(LK_ESTATE,
                 "[loop] test_ckpt = best, but %s was never written: the "
                 "checkpoint callback kept no checkpoint (was its monitor "
                 "ever checked and finite?)",
                 *path);
  free(*path);
  *path = NULL;
  return rc;
}

/* [loop] test_ckpt = best: the trained model kept aside in *KEPT and
 * best.ckpt's loaded in its place (the checkpoints callbacks asked for are
 * written first: best.ckpt may be one). */
static int load_best(lk_run *run, lk__model_copy **kept) {
  bool test;
  int rc = has_test(run, &test);
  if (rc != 0 || !test || !run->rd.dir)
    return rc;
  if ((rc = lk__ckpt_pending(run)) != 0)
    return rc;
  char *path = NULL;
  rc = find_best(run, &path);
  if (rc != 0 || !path)
    return rc;
  rc = lk__model_keep(run, kept);
  if (rc == 0 && (rc = lk_run_load_params(run, path)) != 0) {
    lk__model_restore(*kept);
    lk__model_copy_free(*kept);
    *kept = NULL;
  }
  if (rc == 0)
    lk__log(&run->env, LK_LOG_INFO, "testing %s ([loop] test_ckpt = best)",
            path);
  free(path);
  return rc;
}

/* The test, on the trained model or on best.ckpt's, which then gives the
 * trained model back to the last checkpoint. */
static int test(lk_run *run) {
  bool ran = false;
  lk_step_result mean;
  lk__model_copy *kept = NULL;
  int rc = 0;
  if (run->loop.test_ckpt == LK__TEST_BEST)
    rc = load_best(run, &kept);
  if (rc == 0)
    rc = run->calls.test(run, LK_SPLIT_TEST, &ran, &mean);
  if (kept) {
    lk__model_restore(kept);
    lk__model_copy_free(kept);
  }
  if (rc != 0 || !ran)
    return rc;
  lk__named row = {.n = 0};
  lk__named_result(&row, "test", &mean);
  return lk__rows_log_evaluation(run, last_epoch(&run->state.progress), "test",
                                 &row);
}

/* on_train_end, the test, the last checkpoint. The run's last checkpoint
 * so far was written before on_train_end (now, if the run directory has
 * none yet: a run resumed in a new one with nothing left to train, a run
 * that checkpoints only at its end): stopped or failed here, a resumed
 * run does all of this again, so the test's row is never written twice,
 * and a failed test never leaves a run that cannot be resumed. */
static int finish(lk_run *run) {
  int rc = lk__rundir_has_last(run) ? 0 : run->calls.save(run);
  if (rc == 0)
    rc = lk__hooks_call(&run->env.reg, LK__ON_TRAIN_END, (lk__hook_arg){0});
  if (rc == 0)
    rc = test(run);
  if (rc == 0)
    rc = agree_interrupt(run);
  if (rc == 0 && signalled(run))
    return lk__err(LK_EINTERRUPTED,
                   "interrupted as training ended (after step %llu); "
                   "checkpoint %s holds the trained run (resuming it runs "
                   "the test)",
                   (unsigned long long)run->state.progress.global_step,
                   run->rd.last_ckpt ? run->rd.last_ckpt : "(rank 0's)");
  if (rc == 0)
    rc = lk__ckpt_pending(run);
  if (rc == 0) {
    run->state.finished = true;
    rc = run->calls.save(run);
  }
  return rc;
}

static int report(lk_run *run) {
  const lk__instance *p = lk__role(run, LK__KIND_PROFILER);
  if (!p || !p->desc->profiler->report)
    return 0;
  uint64_t mark = lk__err_mark();
  int rc = p->desc->profiler->report(p->self, run->rd.dir);
  return rc ? lk__entry_failed(rc, mark, "report of profiler %s", p->label) : 0;
}

static int loop_run(lk_run *run) {
  double t0 = lk__now();
  int rc = lk__loggers_start(run);
  if (rc == 0)
    rc = lk__hooks_call(&run->env.reg, LK__ON_TRAIN_START, (lk__hook_arg){0});
  if (rc == 0 && !lk__role(run, LK__KIND_DATA))
    rc = train_without_data(run);
  while (rc == 0 && lk__role(run, LK__KIND_DATA) && more_to_train(run)) {
    rc = run->calls.train_epoch(run);
    if (rc == 0)
      rc = interrupted(run);
  }
  if (rc == 0)
    rc = finish(run);
  run->seconds = lk__now() - t0;
  int prc = report(run); /* also when training failed */
  return lk__loggers_finalize(run, rc ? rc : prc);
}

int lk_run_train(lk_run *run) {
  if (!run->rd.dir && run->env.rank == 0)
    return lk__err(LK_ESTATE, "this run was set up without a run directory");
  if (run->state.finished) {
    /* A complete run stays complete, unless its limits were raised. */
    if (!more_to_train(run)) {
      run->complete = true;
      lk__log(&run->env, LK_LOG_INFO,
              "the run is complete (it ended after epoch %llu, step %llu): "
              "nothing to train",
              (unsigned long long)last_epoch(&run->state.progress),
              (unsigned long long)run->state.progress.global_step);
      return 0;
    }
    run->state.finished = false;
  }
  int rc = loop_run(run);
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
