/* The launcher that started this process, read from its environment as
 * Lightning reads its cluster environments: mpirun (Open MPI), an MPICH
 * or Intel MPI launcher (PMI), srun (Slurm). Two uses:
 *
 * - K > 1 processes and a config that does not say which strategy to use
 *   would train K identical copies of the same model, each writing its own
 *   run directory: the run is refused, naming the strategy key, before
 *   anything is made. Saying strategy = single (or any strategy) is
 *   "told otherwise".
 * - Every process but the launcher's rank 0 logs only errors from the
 *   start, before the strategy is set up: the plugins' messages at create
 *   (the data plugin's summary) are rank 0's alone. */
#include <stdlib.h>
#include <string.h>

#include "setup.h"

typedef struct launcher {
  const char *name; /* "mpirun" */
  const char *var;  /* the variable that gave the world size */
  int64_t world;    /* 0: not started by this launcher */
  int64_t rank;     /* -1: not said */
} launcher;

/* A count from the environment: an integer in [LO, HI], else -1 (a value
 * that is not one says nothing; nothing read is trusted). */
static int64_t env_int(const char *name, int64_t lo, int64_t hi) {
  const char *s = getenv(name);
  int64_t v;
  if (!s || lk__parse_int(s, &v) != 0 || v < lo || v > hi)
    return -1;
  return v;
}

static bool from(launcher *l, const char *name, const char *size_var,
                 const char *rank_var) {
  int64_t world = env_int(size_var, 1, 1 << 24);
  if (world < 1)
    return false;
  *l = (launcher){name, size_var, world, env_int(rank_var, 0, world - 1)};
  return true;
}

/* srun sets SLURM_STEP_ID and SLURM_PROCID in each task of a step; a
 * batch script has SLURM_NTASKS (the allocation's) too, but is one
 * process: without a step, the tasks are not ours. */
static bool from_srun(launcher *l) {
  if (!getenv("SLURM_PROCID") || !getenv("SLURM_STEP_ID"))
    return false;
  return from(l, "srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID") ||
         from(l, "srun", "SLURM_NTASKS", "SLURM_PROCID");
}

static launcher detect(void) {
  launcher l = {NULL, NULL, 0, -1};
  if (from(&l, "mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK") ||
      from(&l, "an MPI launcher", "PMI_SIZE", "PMI_RANK") || from_srun(&l))
    return l;
  return (launcher){NULL, NULL, 0, -1};
}

int lk__launcher_check(lk_run *run, const lk_config *cfg) {
  launcher l = detect();
  if (l.world == 0)
    return 0;
  if (l.rank > 0) {
    if (run->env.log.verbosity > LK_LOG_ERROR)
      run->env.log.verbosity = LK_LOG_ERROR;
    run->opts.progress = NULL;
  }
  if (l.world == 1 || lk_config_find(cfg, "plugins", "strategy"))
    return 0;
  const char *path = lk__config_path(cfg);
  return lk__err(LK_ECONFIG,
                 "%s: started by %s as one of %lld processes (%s=%s), but "
                 "[plugins] strategy is not set: each process would train "
                 "the same model alone. Set strategy = mpi to train them "
                 "together (data parallel), or strategy = single for "
                 "separate runs",
                 path ? path : "config", l.name, (long long)l.world, l.var,
                 getenv(l.var));
}

/* Slurm's tasks per node, "2(x3),1": the count of node NODE, or -1. */
static int64_t slurm_tasks_on(const char *list, int64_t node) {
  const char *p = list;
  while (p && *p) {
    char *end;
    long long count = strtoll(p, &end, 10), times = 1;
    if (end == p || count < 1)
      return -1;
    p = end;
    if (*p == '(') {
      if (p[1] != 'x')
        return -1;
      times = strtoll(p + 2, &end, 10);
      if (end == p + 2 || times < 1 || *end != ')')
        return -1;
      p = end + 1;
    }
    if (node < times)
      return count;
    node -= times;
    if (*p == ',')
      p++;
    else if (*p)
      return -1;
  }
  return -1;
}

int lk__launcher_local_ranks(const char **var) {
  static const char *const vars[] = {
      "OMPI_COMM_WORLD_LOCAL_SIZE", /* Open MPI's mpirun */
      "MPI_LOCALNRANKS",            /* MPICH's Hydra, Intel MPI */
  };
  *var = NULL;
  if (detect().world < 1)
    return 1;
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    int64_t n = env_int(vars[i], 1, 1 << 24);
    if (n >= 1) {
      *var = vars[i];
      return (int)n;
    }
  }
  int64_t node = env_int("SLURM_NODEID", 0, 1 << 24);
  const char *names[] = {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"};
  for (size_t i = 0; i < 2 && node >= 0 && getenv("SLURM_STEP_ID"); i++) {
    const char *list = getenv(names[i]);
    int64_t n = list ? slurm_tasks_on(list, node) : -1;
    if (n >= 1 && n <= (1 << 24)) {
      *var = names[i];
      return (int)n;
    }
  }
  return 1;
}
