/* The run as hosts see it: what lk_run_new built (setup.c), read and
 * freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "setup.h"

const char *lk_run_dir(const lk_run *run) {
  return run->rd.dir;
}

int lk_run_rank(const lk_run *run) {
  return run->env.rank;
}

lk_closure_fn lk_run_closure(lk_run *run) {
  return run->chain.opt_closure;
}

lk_tensor *const *lk_run_params(lk_run *run, size_t *n) {
  *n = run->env.tensors.n_params;
  return run->env.tensors.params;
}

void *lk_run_instance(lk_run *run, const char *role,
                      const lk_descriptor **desc) {
  const lk__kind *k = lk__kind_of_role(role);
  const lk__instance *in =
      k && !k->many ? run->env.reg.role[k - lk__kinds] : NULL;
  if (desc)
    *desc = in ? in->desc : NULL;
  return in ? in->self : NULL;
}

int lk_run_summary(const lk_run *run, char *buf, size_t len) {
  char epochs[48] = "", loss[64] = "";
  const lk__loop_state *st = &run->state;
  if (lk__role(run, LK__KIND_DATA))
    snprintf(epochs, sizeof epochs, " (%llu epoch%s)",
             (unsigned long long)st->progress.epoch,
             st->progress.epoch == 1 ? "" : "s");
  if (st->has_last_loss)
    snprintf(loss, sizeof loss, "; last loss %.9g", st->last_loss);
  const char *dir = run->rd.dir ? run->rd.dir : "(none: rank 0 writes it)";
  if (run->complete)
    snprintf(buf, len,
             "the run was complete already: %llu steps%s%s; run directory %s",
             (unsigned long long)st->progress.global_step, epochs, loss, dir);
  else
    snprintf(buf, len, "trained %llu steps%s in %.3f s%s; run directory %s",
             (unsigned long long)st->progress.global_step, epochs, run->seconds,
             loss, dir);
  return 0;
}

void lk_run_free(lk_run *run) {
  if (!run)
    return;
  lk__metrics_close(run->rows.csv);
  /* Closures point into plugin code: free them before any dlclose. */
  lk__chain_free(&run->chain);
  lk__calls_free(&run->prof);
  lk__optim_free(&run->optim);
  lk__registry_free(&run->env.reg);
  lk__tensors_free(&run->env.tensors);
  lk__model_layers_free(&run->env.layers);
  lk__claims_free(&run->env.claims);
  lk_config_free(run->cfg);
  lk__rundir_close(&run->rd);
  free(run->set_effects);
  free(run);
}

void lk_run_interrupt(lk_run *run) {
  run->interrupted = 1;
}

const char *lk_run_checkpoint(const lk_run *run) {
  return run->rd.last_ckpt;
}
