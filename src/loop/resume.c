/* Resuming: a checkpoint's state restored into a run that its config has
 * just built. Nothing in the file is trusted: the parser (checkpoint.c)
 * checks its format, this file checks what the values mean for this run
 * (the loop's counters, the generator, the tensors' names and shapes), and
 * each plugin then checks its own state (check_state). A checkpoint that
 * does not fit loads nothing the run goes on to use: lk_run_new fails and
 * the run is freed.
 *
 * It also decides, in one place and for every plugin, what a --set given
 * with the resume does to the values the checkpoint holds (set_rule
 * below): it takes effect from the resumed step, or it is refused. */
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
  if (!in->desc->check_state) /* none, or a plugin older than ABI 1.4 */
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

/* ---- a --set on a resume ---------------------------------------------------
 *
 * The rule, the same for every plugin: a --set on a resume either takes
 * effect from the resumed step or is refused; it is never silently
 * outweighed by the checkpoint. Which of the checkpoint's values a --set
 * reaches the host finds without knowing any plugin: it creates the run's
 * instances a second time from the config without that --set, and
 * compares what the two creations start with. A state element that
 * differs is one the --set feeds (sgd's lr and momentum, adam's beta1 from
 * betas, a scheduler's base_lr from its optimizer's lr, a restart period
 * from T_0), a plugin's own or another's. For each such element:
 *  - the checkpoint holds the value the run started with (training never
 *    changed it): it takes the new value from the resumed step, and the
 *    run says so (the log, and config.ini's history line);
 *  - the checkpoint holds another value (training changed it: a scheduler
 *    drives it, or the plugin does): the resume is refused, naming the
 *    --set and the state, since the new value has no defined place in a
 *    schedule already under way;
 *  - it already holds the new value: nothing to do.
 * A parameter the --set would start otherwise (an init, or a data option
 * that changes what is drawn from the generator before the model) keeps
 * its trained values, as a resume must: a note says so. Options no state
 * holds (weight_decay, nesterov, batch_size) take effect as they are.
 * [loop] keys are the host's own and feed no plugin state; of them only
 * the seed is held by the checkpoint (the generator), so a new seed is
 * refused. The cost, one more creation per --set of a plugin's section,
 * is paid only by a resume with such a --set. */

/* V as the shortest %g that reads back as V. */
static void number(double v, char *buf, size_t len) {
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, len, "%.*g", p, v);
    if (strtod(buf, NULL) == v)
      return;
  }
}

/* The tensor of START named NAME, a parameter or a state, like LIKE. */
static const lk_tensor *counterpart(const lk__ckpt *start, const char *name,
                                    lk__ckpt_kind kind, const lk_tensor *like) {
  for (size_t k = 0; k < start->n; k++)
    if (start->kinds[k] == kind && !strcmp(start->tensors[k].name, name))
      return same_shape(&start->tensors[k], like) ? &start->tensors[k] : NULL;
  return NULL;
}

/* What one --set did to the checkpoint's values. */
typedef struct fed {
  const lk__config_override *o;
  const lk_tensor *param; /* a parameter it would start otherwise */
  size_t changed;         /* state elements it gave the new value */
  char what[1024];        /* each state it changed, for the messages */
} fed;

/* Adds to F->what: state T's first changed element E, from WAS to IS, and
 * how many more of T's changed. */
static void describe(fed *f, const lk_tensor *t, size_t e, double was,
                     double is, size_t more) {
  char idx[32] = "", a[32], b[32], rest[64] = "";
  if (t->numel > 1)
    snprintf(idx, sizeof idx, "[%zu]", e);
  if (more)
    snprintf(rest, sizeof rest, " and %zu more of its values", more);
  number(was, a, sizeof a);
  number(is, b, sizeof b);
  size_t used = strlen(f->what);
  snprintf(f->what + used, sizeof f->what - used,
           "%sstate %s%s = %s (the checkpoint had %s)%s", used ? "; " : "",
           t->name, idx, b, a, rest);
}

static int refuse(const char *path, const lk__config_override *o,
                  const lk_tensor *t, size_t e, double ck, double base,
                  double now) {
  char idx[32] = "", a[32], b[32], c[32];
  if (t->numel > 1)
    snprintf(idx, sizeof idx, "[%zu]", e);
  number(ck, a, sizeof a);
  number(base, b, sizeof b);
  number(now, c, sizeof c);
  return lk__err(LK_ECONFIG,
                 "%s: --set %s on a resume: state %s%s is %s in the "
                 "checkpoint, not the %s the run started with: training has "
                 "changed it (a scheduler drives it, or its plugin does), so "
                 "the new value (%s) cannot take effect from the resumed "
                 "step. Resume without this --set (the checkpoint's value "
                 "goes on), or start a new run with it",
                 path, o->arg, t->name, idx, a, b, c);
}

/* One tensor of the checkpoint (CK, the run's NOW, the config without the
 * --set's BASE): the rule above, element by element. CK's data takes the
 * new values that take effect, before it is restored. */
static int feed(const char *path, fed *f, lk_tensor *ck, const lk_tensor *now,
                const lk_tensor *base, bool param) {
  size_t es = lk_dtype_size(now->dtype);
  const char *n = now->data, *b = base->data;
  char *c = ck->data;
  if (!memcmp(n, b, now->numel * es))
    return 0; /* the --set does not reach it */
  size_t changed = 0, first = 0;
  double was = 0;
  for (size_t e = 0; e < now->numel; e++) {
    size_t at = e * es;
    if (!memcmp(n + at, b + at, es) || !memcmp(c + at, n + at, es))
      continue;
    if (param) {
      f->param = f->param ? f->param : now;
      continue;
    }
    double vc = lk__element(ck->dtype, c, e);
    if (memcmp(c + at, b + at, es) != 0)
      return refuse(path, f->o, now, e, vc, lk__element(now->dtype, b, e),
                    lk__element(now->dtype, n, e));
    if (changed++ == 0) {
      first = e;
      was = vc;
    }
    memcpy(c + at, n + at, es);
  }
  if (changed)
    describe(f, now, first, was, lk__element(now->dtype, n, first),
             changed - 1);
  f->changed += changed;
  return 0;
}

/* The --set against the checkpoint's tensors (MATCH: the run's for each),
 * with START, what the run would start with without it. */
static int feed_all(const char *path, fed *f, lk__ckpt *ck, lk_tensor **match,
                    const lk__ckpt *start) {
  int rc = 0;
  for (size_t i = 0; i < ck->n && rc == 0; i++) {
    const lk_tensor *b =
        counterpart(start, match[i]->name, ck->kinds[i], match[i]);
    if (b)
      rc = feed(path, f, &ck->tensors[i], match[i], b,
                ck->kinds[i] == LK__CKPT_PARAM);
  }
  return rc;
}

/* Whether the config's final value of O's key is the one before its first
 * --set: nothing to compare. */
static bool unchanged(const lk_config *cfg, const lk__config_override *o) {
  for (size_t i = 0; i < lk__config_n_overrides(cfg); i++) {
    const lk__config_override *first = lk__config_override_at(cfg, i);
    if (strcmp(first->section, o->section) || strcmp(first->key, o->key))
      continue;
    const lk_config_entry *e = lk_config_find(cfg, o->section, o->key);
    return e ? first->was && !strcmp(first->was, e->value) : !first->was;
  }
  return true;
}

/* Whether O is the last --set of its key (each key is compared once). */
static bool last_of_key(const lk_config *cfg, size_t i) {
  const lk__config_override *o = lk__config_override_at(cfg, i);
  for (size_t k = i + 1; k < lk__config_n_overrides(cfg); k++) {
    const lk__config_override *later = lk__config_override_at(cfg, k);
    if (!strcmp(later->section, o->section) && !strcmp(later->key, o->key))
      return false;
  }
  return true;
}

/* [loop] seed: the generator's state is the checkpoint's. */
static int check_seed(const lk_run *run, const lk_config *cfg, const char *path,
                      const lk__config_override *o) {
  lk_config *was = NULL;
  lk__loop_config before;
  int rc = lk__config_without_set(cfg, "loop", "seed", &was);
  if (rc == 0)
    rc = lk__loop_config_parse(was, &before);
  lk_config_free(was);
  if (rc != 0 || before.seed == run->loop.seed)
    return rc;
  return lk__err(LK_ECONFIG,
                 "%s: --set %s on a resume: the run's generator goes on from "
                 "the checkpoint's state, drawn from seed %lld since step 0; "
                 "a new seed would change only the data's order from the "
                 "next epoch on. Resume without it, or start a new run with "
                 "it",
                 path, o->arg, (long long)before.seed);
}

/* Appends TEXT to the run's record of what the --set arguments did. */
static int note(lk_run *run, const char *text) {
  char *longer = run->set_effects
                     ? lk__asprintf("%s; %s", run->set_effects, text)
                     : lk__strdup(text);
  if (!longer)
    return lk__err(LK_ENOMEM, "out of memory");
  free(run->set_effects);
  run->set_effects = longer;
  return 0;
}

/* One --set of a plugin's section (or [plugins]) against the checkpoint. */
static int set_rule_one(lk_run *run, const lk_config *cfg, lk__starts_fn starts,
                        const char *path, lk__ckpt *ck, lk_tensor **match,
                        const lk__config_override *o) {
  lk_config *without = NULL;
  lk__ckpt *start = NULL;
  int rc = lk__config_without_set(cfg, o->section, o->key, &without);
  if (rc != 0)
    return rc;
  rc = starts(without, &start);
  lk_config_free(without);
  if (rc == LK_ENOMEM)
    return rc;
  if (rc != 0) {
    char why[1024];
    snprintf(why, sizeof why, "%s", lk_last_error());
    lk__log(&run->env, LK_LOG_WARN,
            "--set %s: which of the checkpoint's values it changes is not "
            "known: the config without it does not build (%s)",
            o->arg, why);
    return 0;
  }
  fed f = {.o = o};
  rc = feed_all(path, &f, ck, match, start);
  lk__ckpt_free(start);
  unsigned long long step = ck->state.progress.global_step;
  if (rc == 0 && f.changed) {
    lk__log(&run->env, LK_LOG_INFO, "--set %s takes effect from step %llu: %s",
            o->arg, step, f.what);
    rc = note(run, f.what);
  }
  if (rc == 0 && f.param)
    lk__log(&run->env, LK_LOG_INFO,
            "note: --set %s would start parameter %s otherwise; a resume "
            "keeps the trained values",
            o->arg, f.param->name);
  return rc;
}

static int set_rule(lk_run *run, const lk_config *cfg, lk__starts_fn starts,
                    const char *path, lk__ckpt *ck, lk_tensor **match) {
  int rc = 0;
  for (size_t i = 0; i < lk__config_n_overrides(cfg) && rc == 0; i++) {
    const lk__config_override *o = lk__config_override_at(cfg, i);
    if (!last_of_key(cfg, i) || unchanged(cfg, o))
      continue;
    if (!strcmp(o->section, "loop"))
      rc = strcmp(o->key, "seed") ? 0 : check_seed(run, cfg, path, o);
    else
      rc = set_rule_one(run, cfg, starts, path, ck, match, o);
  }
  return rc;
}

int lk__resume(lk_run *run, const lk_config *cfg, lk__starts_fn starts,
               const char *path, struct stat *st) {
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
  /* Before the restore: the run's tensors still hold what it starts with. */
  if (rc == 0 && cfg && starts)
    rc = set_rule(run, cfg, starts, path, ck, match);
  if (rc == 0) {
    for (size_t i = 0; i < ck->n; i++)
      memcpy(match[i]->data, ck->tensors[i].data,
             match[i]->numel * lk_dtype_size(match[i]->dtype));
    run->state = ck->state;
    run->env.rng = ck->rng;
    rc = check_plugins(run, path);
  }
  if (rc != 0 && run->set_effects) { /* the state a --set gave, refused */
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    rc = lk__err(rc, "%s (after %s)", msg, run->set_effects);
  }
  free(match);
  lk__ckpt_free(ck);
  return rc;
}
