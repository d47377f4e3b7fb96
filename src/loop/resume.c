/* Resuming: a checkpoint's state restored into a run that its config has
 * just built. Nothing in the file is trusted: the parser (checkpoint.c)
 * checks its format, this file checks what the values mean for this run
 * (the loop's counters, the generator, the tensors' names and shapes), and
 * each plugin then checks its own state (check_state). A checkpoint that
 * does not fit loads nothing the run goes on to use: lk_run_new fails and
 * the run is freed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loop.h"

/* Counters beyond 2^53 lose their units in the f64 state plugins keep
 * (a checkpoint callback's step numbers), and no run takes that many. */
#define MAX_COUNT (UINT64_C(1) << 53)

static int same_shape(const lk_tensor *a, const lk_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim)
    return 0;
  for (size_t i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i])
      return 0;
  return 1;
}

static void shape_text(const lk_tensor *t, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "%s[", lk_dtype_name(t->dtype));
  for (size_t i = 0; i < t->ndim && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%zu", i ? "," : "",
                             t->shape[i]);
  if (used < len)
    snprintf(buf + used, len - used, "]");
}

static int bad(const char *path, const char *what, unsigned long long value,
               const char *why) {
  return lk__err(LK_EFORMAT, "%s: loop state %s = %llu %s", path, what, value,
                 why);
}

/* Values this run could not have written. */
static int check_loop_state(const lk_run *run, const char *path,
                            const lk__ckpt *ck) {
  const lk__loop_state *st = &ck->state;
  const lk__progress *p = &st->progress;
  if (ck->version < 2)
    return lk__err(LK_EFORMAT,
                   "%s: checkpoint format version %u, from an older loopkit "
                   "that did not save the loop's whole state: it can be "
                   "dumped, not resumed",
                   path, (unsigned)ck->version);
  const struct {
    const char *name;
    uint64_t v;
  } counts[] = {{"epoch", p->epoch},
                {"batch", p->batch},
                {"global_step", p->global_step},
                {"metrics_rows", st->metrics_rows},
                {"epoch_losses", st->epoch_losses}};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    if (counts[i].v > MAX_COUNT)
      return bad(path, counts[i].name, (unsigned long long)counts[i].v,
                 "is beyond any run (at most 2^53)");
  if (p->accum != 0)
    return bad(path, "accum", (unsigned long long)p->accum,
               "is not 0: loopkit writes checkpoints between accumulation "
               "windows only");
  if (!lk__role(run, LK__KIND_DATA) && p->epoch != 0)
    return bad(path, "epoch", (unsigned long long)p->epoch,
               "but this config has no data plugin, so no epochs");
  if (st->epoch_losses > p->batch)
    return bad(path, "epoch_losses", (unsigned long long)st->epoch_losses,
               "is more than the batches done in the epoch");
  if (st->epoch_losses == 0 && st->epoch_loss_sum != 0)
    return lk__err(LK_EFORMAT,
                   "%s: loop state epoch_loss_sum = %g with no losses "
                   "counted",
                   path, st->epoch_loss_sum);
  if (!lk__role(run, LK__KIND_DATA) && st->epoch_losses != 0)
    return bad(path, "epoch_losses", (unsigned long long)st->epoch_losses,
               "but this config has no data plugin, so no epochs");
  if (!(ck->rng.s[0] | ck->rng.s[1] | ck->rng.s[2] | ck->rng.s[3]))
    return lk__err(LK_EFORMAT,
                   "%s: the random generator's state is all zero, which it "
                   "can never reach (it would then draw only zeros)",
                   path);
  return 0;
}

/* Every tensor of the checkpoint is one this config builds, with the same
 * dtype and shape, and the other way round. MATCH[i] gets the run's tensor
 * for the checkpoint's tensor i. */
static int match_tensors(lk_run *run, const char *path, const lk__ckpt *ck,
                         lk_tensor **match) {
  const lk__tensors *ts = &run->env.tensors;
  int rc = 0;
  for (size_t i = 0; i < ck->n && rc == 0; i++) {
    lk_tensor **list = ck->kinds[i] == LK__CKPT_PARAM ? ts->params : ts->states;
    size_t n = ck->kinds[i] == LK__CKPT_PARAM ? ts->n_params : ts->n_states;
    match[i] = NULL;
    for (size_t k = 0; k < n; k++)
      if (strcmp(list[k]->name, ck->tensors[i].name) == 0)
        match[i] = list[k];
    char a[96], b[96];
    if (!match[i])
      rc = lk__err(LK_EFORMAT, "%s: holds %s, which this config does not build",
                   path, ck->tensors[i].name);
    else if (!same_shape(match[i], &ck->tensors[i])) {
      shape_text(&ck->tensors[i], a, sizeof a);
      shape_text(match[i], b, sizeof b);
      rc = lk__err(LK_EFORMAT, "%s: %s is %s there but %s in this config", path,
                   ck->tensors[i].name, a, b);
    }
  }
  size_t want = ts->n_params + ts->n_states;
  if (rc == 0 && ck->n != want)
    rc = lk__err(LK_EFORMAT,
                 "%s: holds %zu tensors, this config builds %zu (parameters "
                 "and optimizer state)",
                 path, ck->n, want);
  return rc;
}

int lk__check_state(const lk__instance *in, const char *path) {
  if (in->minor < 4 || !in->desc->check_state)
    return 0;
  uint64_t mark = lk__err_mark();
  int rc = in->desc->check_state(in->self);
  if (rc != 0) {
    lk__entry_failed(rc, mark, "%s: state of plugin %s", path, in->label);
    return LK_EFORMAT;
  }
  return 0;
}

/* Each plugin checks the state it was given back. */
static int check_plugins(lk_run *run, const char *path) {
  const lk__registry *reg = &run->env.reg;
  int rc = 0;
  for (size_t i = 0; i < reg->n_created && rc == 0; i++)
    rc = lk__check_state(reg->created[i], path);
  return rc;
}

int lk__resume(lk_run *run, const char *path, struct stat *st) {
  lk__ckpt *ck;
  int rc = lk__ckpt_read(path, &ck, st);
  if (rc != 0)
    return rc;
  lk_tensor **match = calloc(ck->n ? ck->n : 1, sizeof *match);
  if (!match) {
    lk__ckpt_free(ck);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  rc = check_loop_state(run, path, ck);
  if (rc == 0)
    rc = match_tensors(run, path, ck, match);
  if (rc == 0) {
    for (size_t i = 0; i < ck->n; i++)
      memcpy(match[i]->data, ck->tensors[i].data,
             match[i]->numel * lk_dtype_size(match[i]->dtype));
    run->state = ck->state;
    run->env.rng = ck->rng;
    rc = check_plugins(run, path);
  }
  free(match);
  lk__ckpt_free(ck);
  return rc;
}
