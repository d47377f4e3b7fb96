/* Step results checked, and the validation and test splits evaluated:
 * every batch's loss and metrics, averaged over the samples (and the
 * processes, which share the batches out). */
#include <string.h>

#include "loop.h"

/* Step metric names become metrics.csv columns, after a "val_" or "test_"
 * prefix for evaluations: at most this long. */
#define METRIC_NAME_MAX (LK__NAME_MAX - 1 - 5)

/* A step result is the plugin's: its count indexes the loop's arrays and
 * its names become columns, so both are checked before anything uses
 * them. A name the host writes itself is not a metric's. */
int lk__check_result(const lk_step_result *r, const char *entry,
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

/* The step plugin's evaluation_end (ABI 1.6): the split's metrics that are
 * not means of its batches', added to MEAN's once checked. */
static int evaluation_end(const lk__instance *step, lk_split split,
                          lk_step_result *mean) {
  int (*fn)(void *, lk_split, const lk_step_result *, lk_step_result *) =
      (int (*)(void *, lk_split, const lk_step_result *, lk_step_result *))
          lk__entry_of(step, LK__KIND_STEP,
                       LK__ENTRY(lk_step_ops, evaluation_end));
  if (!fn)
    return 0;
  lk_step_result extra = {0};
  uint64_t mark = lk__err_mark();
  int rc = fn(step->self, split, mean, &extra);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "evaluation_end of plugin %s",
                            step->label);
  if ((rc = lk__check_result(&extra, "evaluation_end", step->label)) != 0)
    return rc;
  if (extra.has_loss)
    return lk__err(LK_EPLUGIN,
                   "evaluation_end of plugin %s gave a loss: the split's is "
                   "the mean of its batches'",
                   step->label);
  for (size_t m = 0; m < extra.n_metrics; m++) {
    for (size_t k = 0; k < mean->n_metrics; k++)
      if (!strcmp(mean->metrics[k].name, extra.metrics[m].name))
        return lk__err(LK_EPLUGIN,
                       "evaluation_end of plugin %s: metric \"%s\" is one "
                       "its batches already gave",
                       step->label, extra.metrics[m].name);
    if (mean->n_metrics == LK_MAX_METRICS)
      return lk__err(LK_EPLUGIN,
                     "evaluation_end of plugin %s: more than %d metrics with "
                     "its batches' (LK_MAX_METRICS)",
                     step->label, LK_MAX_METRICS);
    mean->metrics[mean->n_metrics++] = extra.metrics[m];
  }
  return 0;
}

/* HOOKS: the validation's own (on_validation_start) are called; outside
 * training (lk_run_evaluate) no callback is, since it would act on a run
 * that is not there. */
static int evaluate(lk_run *run, lk_split split, bool hooks, bool *ran,
                    lk_step_result *mean) {
  int (*fn)(void *, const lk_batch *, lk_step_result *) =
      split == LK_SPLIT_TEST ? run->calls.test_step
                             : run->calls.validation_step;
  const char *entry = split == LK_SPLIT_TEST ? "test_step" : "validation_step";
  const lk__instance *data = lk__role(run, LK__KIND_DATA);
  const lk__instance *step = lk__role(run, LK__KIND_STEP);
  int world = run->env.world, rank = run->env.rank;
  *ran = false;
  if (!data || !fn)
    return 0;
  size_t nb = 0;
  uint64_t mark = lk__err_mark();
  int rc =
      run->calls.data_epoch(data->self, split, run->state.progress.epoch, &nb);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "epoch of data plugin %s", data->label);
  if (nb == 0)
    return 0;
  /* Only a validation that runs is announced: on_validation_end follows. */
  if (split == LK_SPLIT_VAL && hooks &&
      (rc = lk__hooks_call(&run->env.reg, LK__ON_VALIDATION_START,
                           (lk__hook_arg){0})) != 0)
    return rc;
  /* Several processes share the batches and add up their sums. */
  lk__shard sh = lk__shard_eval(nb, world, rank);
  double loss_sum = 0, samples = 0, sums[LK_MAX_METRICS] = {0};
  lk_step_result r = {0};
  memset(mean, 0, sizeof *mean);
  for (size_t i = 0; i < sh.count; i++) {
    size_t b = lk__shard_batch(&sh, i);
    /* The test comes after the last checkpoint of training: a signal can
     * end it at once, and a resumed run tests again. */
    if (split == LK_SPLIT_TEST && world == 1 && run->interrupted)
      return lk__err(LK_EINTERRUPTED,
                     "interrupted during the test, at batch %zu of %zu; "
                     "checkpoint %s holds the trained run (resuming it runs "
                     "the test)",
                     b, nb, run->rd.last_ckpt ? run->rd.last_ckpt : "");
    lk_batch batch = {0};
    mark = lk__err_mark();
    if ((rc = run->calls.data_batch(data->self, split, b, &batch)) != 0)
      return lk__entry_failed(rc, mark, "batch %zu of data plugin %s", b,
                              data->label);
    memset(&r, 0, sizeof r);
    mark = lk__err_mark();
    if ((rc = fn(step->self, &batch, &r)) != 0)
      return lk__entry_failed(rc, mark, "%s of plugin %s", entry, step->label);
    if ((rc = lk__check_result(&r, entry, step->label)) != 0)
      return rc;
    if (i == 0)
      *mean = r;
    else if ((rc = same_metrics(mean, &r, entry, step->label, b)) != 0)
      return rc;
    double w = batch.size ? (double)batch.size : 1.0;
    samples += w;
    if (r.has_loss)
      loss_sum += w * r.loss;
    for (size_t m = 0; m < r.n_metrics; m++)
      sums[m] += w * r.metrics[m].value;
  }
  if (sh.stride > 1) {
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
  return evaluation_end(step, split, mean);
}

int lk__evaluate(lk_run *run, lk_split split, bool *ran, lk_step_result *mean) {
  return evaluate(run, split, true, ran, mean);
}

int lk_run_evaluate(lk_run *run, lk_split split, bool *ran,
                    lk_step_result *mean) {
  if (split != LK_SPLIT_VAL && split != LK_SPLIT_TEST)
    return lk__err(LK_EINVAL, "evaluate: split %d is not val or test",
                   (int)split);
  *ran = false;
  if (!lk__role(run, LK__KIND_DATA))
    return lk__err(LK_ECONFIG, "the config names no data plugin: there is "
                               "nothing to evaluate ([plugins] data)");
  return evaluate(run, split, false, ran, mean);
}
