/* The run's part (src/run/): a config made into a run (setup.c, with the
 * optimizers and schedulers of optim.c and the launcher's checks of
 * launcher.c) and the run as hosts see it (run.c). The run itself, lk_run,
 * is the loop's (loop.h), so that the loop never reaches up to here. */
#ifndef LK_SETUP_H
#define LK_SETUP_H

#include "loop.h"

/* ---- launcher.c: mpirun, srun ------------------------------------------- */

/* Under a launcher's K > 1 processes, refuses a config that names no
 * strategy; on its ranks but 0, logs only errors from now on. */
int lk__launcher_check(lk_run *run, const lk_config *cfg);
/* The processes a launcher started on this node (from its local-rank
 * variables: Open MPI's, MPICH's and Intel MPI's, Slurm's), 1 without a
 * launcher or when it does not say; *VAR names the variable that said. */
int lk__launcher_local_ranks(const char **var);

/* ---- setup.c ------------------------------------------------------------- */

/* What the instances CFG makes start with: every parameter and state
 * tensor, copied as a checkpoint holds them (OUT->state and rng are left
 * zero). The instances are created and nothing more (no strategy set up,
 * no closure, no run directory, no log), then freed. */
int lk__start_values(const lk_config *cfg, lk__ckpt **out);

/* ---- optim.c: the optimizers and schedulers from the config ------------- */

/* [plugins] optimizer or scheduler (K), a list: its instances, the first
 * in the role. */
int lk__optim_assign(lk_run *run, lk__kind_id k, const lk_config_entry *e);
/* Their sections: params, groups (each group an instance), a scheduler's
 * optimizer; the options of all of these. Before the other instances'. */
int lk__optim_parse(lk_run *run, const lk_config *cfg);
/* registry_create_all's hook (registry.h). */
bool lk__optim_create(lk__env *env, lk__kind_id k, int *rc);
/* What the effective config records of them beyond the plugins' options. */
int lk__optim_export(const lk_run *run, const lk_config *src, lk_config *out);
void lk__optim_free(lk__optim *o);

/* ---- auto.c -------------------------------------------------------------- */

/* IN's options given as auto, made numbers before its create: a
 * scheduler's length, the run's; a data plugin's size, the model's
 * (env->prepare of a run). */
int lk__auto_options(lk__env *env, lk__instance *in);
/* The same for a data plugin outside a run (lk_model_open's): its sizes
 * given as auto, from the model's options (parsed, the step role set). */
int lk__auto_data_options(lk__env *env, lk__instance *in);

#endif
