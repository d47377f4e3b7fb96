/* Stepping the run's optimizers (optim.c made them): one optimizer's step
 * over its groups on one evaluation of the closure; whose turn it is when
 * there are several; the other optimizers' gradients kept while one's loss
 * is backpropagated; the rates metrics.csv logs; the schedulers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"

/* ---- one step of one optimizer ------------------------------------------- */

/* The closure every group's step calls: the first call evaluates, the
 * later ones give the same result, as torch's step() evaluates once and
 * updates group after group. A second call by one group's step means an
 * optimizer that evaluates several times (lbfgs, sam): it gets NaN, stops,
 * and the step fails. */
static void once_handler(ffi_cif *cif, void *ret, void **args, void *user) {
  (void)cif;
  (void)args;
  lk__optim *o = user;
  double v = NAN;
  if (++o->calls == 1) {
    if (!o->evaluated) {
      o->evaluated = true;
      o->cached = o->inner();
    }
    v = o->cached;
  }
  *(double *)ret = v;
}

static int step_part(lk_run *run, const lk__optimizer *op,
                     const lk__opt_part *p, lk_closure_fn fn, bool shared) {
  lk__optim *o = &run->optim;
  o->calls = 0;
  uint64_t mark = lk__err_mark();
  int rc = p->step(p->in->self, p->in->own_params, p->in->n_own_params, fn);
  if (shared && o->calls > 1) /* what the config asks cannot be done */
    return lk__err(LK_ECONFIG,
                   "optimizer %s called the closure %u times in one step: "
                   "parameter groups need an optimizer that evaluates it "
                   "once per step (torch's LBFGS refuses groups too); "
                   "remove %s.groups",
                   p->in->label, o->calls, op->in->name);
  return rc ? lk__entry_failed(rc, mark, "step of optimizer %s", p->in->label)
            : 0;
}

int lk__optim_step(lk_run *run, lk__optimizer *op, lk_closure_fn closure) {
  lk__optim *o = &run->optim;
  if (op->n_parts == 1)
    return step_part(run, op, &op->parts[0], closure, false);
  lk_closure_fn fn = closure; /* NULL: manual, the gradients are there */
  if (closure) {
    if (!o->once_ready) {
      int rc = lk__thunk_init(&o->once, once_handler, o, "parameter groups");
      if (rc != 0)
        return rc;
      o->once_ready = true;
    }
    o->inner = closure;
    o->evaluated = false;
    fn = o->once.fn;
  }
  int rc = 0;
  for (size_t g = 0; g < op->n_parts && rc == 0; g++)
    rc = step_part(run, op, &op->parts[g], fn, closure != NULL);
  return rc;
}

/* ---- several optimizers: whose turn ------------------------------------ */

void lk__optim_turn(lk_run *run, lk__optimizer *op) {
  run->optim.active = run->optim.n > 1 ? op : NULL;
}

lk_tensor *const *lk__optim_active_params(const lk_run *run, size_t *n) {
  const lk__optimizer *a = run->optim.active;
  if (!a) {
    *n = run->env.tensors.n_params;
    return run->env.tensors.params;
  }
  *n = a->n_params;
  return a->params;
}

lk_tensor *const *lk__optim_zero_set(const lk_run *run, size_t *n) {
  const lk__optimizer *a = run->optim.active;
  if (!a) {
    *n = run->env.tensors.n_params;
    return run->env.tensors.params;
  }
  *n = a->n_zero;
  return a->zero_set;
}

/* The other optimizers' parameters: their gradients are kept aside while
 * the active one's loss is backpropagated and put back after, as if they
 * did not require gradients (Lightning's toggle_optimizer): with
 * accumulation, each optimizer then sums the gradients of its own losses
 * only. */
static bool others_own(const lk_run *run, const lk_tensor *t) {
  const lk__optim *o = &run->optim;
  for (size_t i = 0; i < o->n; i++) {
    if (&o->opt[i] == o->active)
      continue;
    for (size_t k = 0; k < o->opt[i].n_params; k++)
      if (o->opt[i].params[k] == t)
        return true;
  }
  return false;
}

int lk__optim_stash(lk_run *run, bool keep) {
  lk__optim *o = &run->optim;
  const lk__tensors *ts = &run->env.tensors;
  if (!o->active)
    return 0;
  if (!o->stash) {
    o->stash = calloc(ts->n_params ? ts->n_params : 1, sizeof *o->stash);
    if (!o->stash)
      return lk__err(LK_ENOMEM, "out of memory");
    o->n_stash = ts->n_params;
  }
  for (size_t i = 0; i < ts->n_params; i++) {
    lk_tensor *t = ts->params[i];
    if (!others_own(run, t))
      continue;
    size_t bytes = t->numel * lk_dtype_size(t->dtype);
    if (!o->stash[i] && !(o->stash[i] = malloc(bytes ? bytes : 1)))
      return lk__err(LK_ENOMEM, "out of memory for the gradients of %s",
                     t->name);
    if (keep)
      memcpy(o->stash[i], t->grad, bytes);
    else
      memcpy(t->grad, o->stash[i], bytes);
  }
  return 0;
}

int lk_host_optimizer_index(lk_host *host) {
  const lk_run *run = host->env->run;
  return run && run->optim.active ? (int)run->optim.active->index : -1;
}

/* ---- rates and schedulers ------------------------------------------------ */

void lk__optim_note_lr(lk_run *run) {
  lk__optim *o = &run->optim;
  for (size_t i = 0; i < o->n; i++)
    for (size_t g = 0; g < o->opt[i].n_parts; g++) {
      lk__opt_part *p = &o->opt[i].parts[g];
      const lk_optimizer_ops *ops = lk__lr_ops(p->in);
      p->lr_before = ops ? ops->get_lr(p->in->self) : NAN;
    }
}

void lk__optim_add_lr(const lk_run *run, lk__named *nm) {
  const lk__optim *o = &run->optim;
  if (!o->n_sched)
    return;
  for (size_t i = 0; i < o->n; i++)
    for (size_t g = 0; g < o->opt[i].n_parts; g++)
      lk__named_add(nm, "", o->opt[i].parts[g].lr_column,
                    o->opt[i].parts[g].lr_before);
}

int lk__optim_schedule(lk_run *run, lk_interval when, const lk__named *nm) {
  lk__optim *o = &run->optim;
  int rc = 0;
  for (size_t i = 0; i < o->n_sched && rc == 0; i++) {
    lk__sched *s = &o->sched[i];
    for (size_t c = 0; c <= s->n_copies && rc == 0; c++) {
      const lk__instance *in = c ? s->copies[c - 1] : s->in;
      uint64_t mark = lk__err_mark();
      rc = s->step(in->self, when, nm->cells, nm->n);
      if (rc != 0)
        rc = lk__entry_failed(rc, mark, "step of scheduler %s", in->label);
    }
  }
  return rc;
}
