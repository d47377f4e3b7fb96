/* The checkpoint policy, in one place: when the loop's checkpoints are
 * written (last.ckpt at an epoch's end or every checkpoint_every_n_steps
 * steps, and the ones callbacks asked for where the state is whole), and
 * which callbacks keep checkpoints of their own, where, and where the
 * best.ckpt that [loop] test_ckpt = best tests lives. How a checkpoint is
 * written, linked and pruned is rundir.c's.
 *
 * A callback says what it keeps with lk_host_keep_checkpoints, from its
 * create. One that says nothing (a plugin written before the call
 * existed) is taken as Lightning's ModelCheckpoint is, by its options:
 * dirpath and filename mean it keeps files in dirpath, monitor and
 * save_top_k != 0 that best.ckpt is among them. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"

/* ---- when ---------------------------------------------------------------- */

int lk__ckpt_pending(lk_run *run) {
  return run->rd.n_pending ? lk__rundir_write_pending(run) : 0;
}

int lk__ckpt_after_window(lk_run *run, uint64_t step_before) {
  const lk__progress *p = &run->state.progress;
  int rc = p->accum == 0 ? lk__ckpt_pending(run) : 0;
  if (rc == 0 && run->loop.ckpt_every > 0 && p->global_step != step_before &&
      p->global_step % (uint64_t)run->loop.ckpt_every == 0)
    rc = run->calls.save(run);
  return rc;
}

int lk__ckpt_after_epoch(lk_run *run) {
  int rc = lk__ckpt_pending(run);
  if (rc == 0 && run->loop.ckpt_every == 0)
    rc = run->calls.save(run);
  return rc;
}

/* ---- what callbacks keep ------------------------------------------------- */

static bool declares(const lk_descriptor *d, const char *option) {
  for (const lk_option *o = d->options; o && o->name; o++)
    if (strcmp(o->name, option) == 0)
      return true;
  return false;
}

bool lk__ckpt_keeps(const lk__instance *cb) {
  if (cb->keeps.declared)
    return cb->keeps.files;
  return declares(cb->desc, "dirpath") && declares(cb->desc, "filename");
}

bool lk__ckpt_keeps_best(const lk__instance *cb) {
  if (cb->keeps.declared)
    return cb->keeps.best;
  return declares(cb->desc, "monitor") && declares(cb->desc, "save_top_k") &&
         lk_opt_int(cb->opts, "save_top_k") != 0;
}

/* The directory CB keeps its files in as it gave it: absolute, or
 * relative to the run directory; NULL: checkpoints. Undeclared, the
 * bundled checkpoint's rule: dirpath, else checkpoints/NAME for an
 * instance with a name of its own. */
static const char *given_dir(const lk__instance *cb, char *buf, size_t len) {
  if (cb->keeps.declared)
    return cb->keeps.dir;
  const char *d = lk_opt_string(cb->opts, "dirpath"); /* NULL: none */
  if (d && *d)
    return d;
  if (!cb->named)
    return NULL;
  snprintf(buf, len, "checkpoints/%s", cb->name);
  return buf;
}

void lk__ckpt_keeper_dir(const lk__instance *cb, char *buf, size_t len) {
  char own[1024];
  const char *d = given_dir(cb, own, sizeof own);
  if (!d) {
    snprintf(buf, len, "checkpoints");
    return;
  }
  while (d[0] == '.' && d[1] == '/')
    for (d += 2; *d == '/';)
      d++;
  snprintf(buf, len, "%s", *d ? d : ".");
  for (size_t n = strlen(buf); n > 1 && buf[n - 1] == '/';)
    buf[--n] = '\0';
}

char *lk__ckpt_best_path(const lk__instance *cb, const char *run_dir) {
  char own[1024];
  const char *d = given_dir(cb, own, sizeof own);
  if (!d)
    return lk__asprintf("%s/checkpoints/best.ckpt", run_dir);
  return d[0] == '/' ? lk__asprintf("%s/best.ckpt", d)
                     : lk__asprintf("%s/%s/best.ckpt", run_dir, d);
}

const lk__instance *lk__ckpt_best_keeper(const lk_run *run) {
  const lk__listed *cbs = &run->env.reg.listed[LK__KIND_CALLBACK];
  for (size_t i = 0; i < cbs->n; i++)
    if (lk__ckpt_keeps_best(cbs->in[i]))
      return cbs->in[i];
  return NULL;
}

/* ---- the config's checks ------------------------------------------------- */

/* Only rank 0 writes checkpoints, so the other processes would have
 * nothing to load. */
static int check_test_ckpt(lk_run *run, const lk_config *cfg) {
  if (run->loop.test_ckpt != LK__TEST_BEST)
    return 0;
  const lk_config_entry *e = lk_config_find(cfg, "loop", "test_ckpt");
  const char *where = e ? e->where : lk__config_path(cfg);
  bool found = (run->best_keeper = lk__ckpt_best_keeper(run)) != NULL;
  if (!found)
    return lk__err(LK_ECONFIG,
                   "%s: loop.test_ckpt = best needs a checkpoint callback "
                   "that keeps the best checkpoint by a monitored metric "
                   "([plugins] callbacks = checkpoint, with [checkpoint] "
                   "monitor and save_top_k != 0); or test_ckpt = last",
                   where);
  if (run->env.world > 1)
    return lk__err(LK_ECONFIG,
                   "%s: loop.test_ckpt = best with %d processes: only rank "
                   "0 writes best.ckpt; use test_ckpt = last, then loopkit "
                   "test CONFIG --ckpt RUN_DIR/checkpoints/best.ckpt",
                   where, run->env.world);
  return 0;
}

/* CB for messages: its name, and its filename pattern if it has one. */
static void describe(const lk__instance *cb, char *buf, size_t len) {
  const char *f =
      declares(cb->desc, "filename") ? lk_opt_string(cb->opts, "filename") : 0;
  if (f)
    snprintf(buf, len, "%s (filename %s)", cb->name, f);
  else
    snprintf(buf, len, "%s", cb->name);
}

/* Two checkpoint callbacks in one directory would each write best.ckpt
 * there over the other's, and delete each other's kept files when their
 * filenames meet: refused before anything is written. */
static int check_keepers(const lk_run *run) {
  const lk__listed *cbs = &run->env.reg.listed[LK__KIND_CALLBACK];
  char a[1024], b[1024];
  for (size_t i = 0; i < cbs->n; i++) {
    const lk__instance *x = cbs->in[i];
    if (!lk__ckpt_keeps(x))
      continue;
    lk__ckpt_keeper_dir(x, a, sizeof a);
    for (size_t k = i + 1; k < cbs->n; k++) {
      const lk__instance *y = cbs->in[k];
      if (!lk__ckpt_keeps(y))
        continue;
      lk__ckpt_keeper_dir(y, b, sizeof b);
      if (strcmp(a, b) != 0)
        continue;
      char dx[1200], dy[1200];
      describe(x, dx, sizeof dx);
      describe(y, dy, sizeof dy);
      return lk__err(LK_ECONFIG,
                     "callbacks %s and %s both keep their checkpoints in %s: "
                     "each would write best.ckpt there over the other's, and "
                     "delete what the other kept; give one of them a dirpath "
                     "of its own",
                     dx, dy, a);
    }
  }
  return 0;
}

int lk__ckpt_check(lk_run *run, const lk_config *cfg) {
  int rc = check_test_ckpt(run, cfg);
  return rc == 0 ? check_keepers(run) : rc;
}
