/* Optimizers outside a run: an optimizer plugin minimising any closure a C
 * program makes (lk_bind of a plain function, say), with no model plugin.
 *
 * The plugin still needs a host: it reads the parameters, adds its state
 * and may create a base optimizer (sam). A bare lk_run gives it one, with
 * the caller's parameters borrowed instead of allocated. */
#include <stdlib.h>
#include <string.h>

#include "run_private.h"

static int check_params(lk_tensor *const *params, size_t n) {
  if (!params || n == 0)
    return lk__err(LK_EINVAL, "lk_optimizer_open: no parameters");
  for (size_t i = 0; i < n; i++) {
    const lk_tensor *t = params[i];
    if (!t || !t->data || !t->grad || t->numel == 0)
      return lk__err(LK_EINVAL,
                     "lk_optimizer_open: parameter %zu (%s) needs data, grad "
                     "and numel > 0",
                     i, t && t->name ? t->name : "unnamed");
    if (t->dtype != LK_F32 && t->dtype != LK_F64)
      return lk__err(LK_EINVAL,
                     "lk_optimizer_open: parameter %zu (%s) is %s; optimizers "
                     "take f32 or f64",
                     i, t->name ? t->name : "unnamed",
                     lk_dtype_name(t->dtype) ? lk_dtype_name(t->dtype) : "?");
  }
  return 0;
}

/* Frees RUN without the parameters, which belong to the caller. */
static void free_bare_run(lk_run *run, lk_config *own_cfg) {
  free(run->params);
  run->params = NULL;
  run->n_params = 0;
  lk_run_free(run);
  lk_config_free(own_cfg);
}

int lk_optimizer_open(const char *name, const lk_config *cfg,
                      lk_tensor *const *params, size_t n, lk_optimizer **out) {
  if (!out)
    return lk__err(LK_EINVAL, "lk_optimizer_open: OUT is NULL");
  *out = NULL;
  if (!name)
    return lk__err(LK_EINVAL, "lk_optimizer_open: NAME is NULL");
  int rc = check_params(params, n);
  if (rc != 0)
    return rc;
  lk_run *run = calloc(1, sizeof *run);
  lk_config *own_cfg = NULL;
  if (!run)
    return lk__err(LK_ENOMEM, "out of memory");
  run->world = 1;
  lk_rng_seed(&run->rng, 0, 0);
  if (!(run->params = malloc(n * sizeof *run->params))) {
    free(run);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  memcpy(run->params, params, n * sizeof *run->params);
  run->n_params = n;
  if (!cfg && (rc = lk_config_new(&own_cfg)) != 0) {
    free_bare_run(run, NULL);
    return rc;
  }
  run->src_cfg = cfg ? cfg : own_cfg;

  lk__instance *in = NULL;
  rc = lk__instance_for(run, name, "lk_optimizer_open", &in);
  if (rc == 0 && !lk__has_kind(in, "optimizer")) {
    char kinds[128];
    rc = lk__err(LK_EKIND,
                 "lk_optimizer_open: plugin %s (%s) is not an optimizer: it "
                 "implements %s",
                 name, lk_plugin_path(in->plugin),
                 *lk_plugin_kinds(in->plugin, kinds, sizeof kinds) ? kinds
                                                                   : "no kind");
  }
  if (rc == 0 &&
      !(run->created = calloc(1 + LK__MAX_NESTED, sizeof *run->created)))
    rc = lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0)
    rc = lk__instance_create(run, in);
  if (rc != 0) {
    free_bare_run(run, own_cfg);
    return rc;
  }
  /* Options are parsed: the config is not needed any more. */
  run->src_cfg = NULL;
  lk_config_free(own_cfg);
  run->setup_done = true;
  *out = (lk_optimizer *)in;
  return 0;
}

void lk_optimizer_close(lk_optimizer *opt) {
  if (!opt)
    return;
  lk__instance *in = (lk__instance *)opt;
  free_bare_run(in->host.run, NULL);
}
