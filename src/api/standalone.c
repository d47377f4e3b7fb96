/* Optimizers outside a run: an optimizer plugin minimising any closure a C
 * program makes (lk_bind of a plain function, say), with no model plugin.
 *
 * The plugin still needs a host: it reads the parameters, adds its state
 * and may create a base optimizer (sam). It gets an environment (env.h)
 * of its own, with the caller's parameters borrowed instead of allocated,
 * and no run: what needs one answers as a run that has not started. */
#include <stdlib.h>
#include <string.h>

#include "env.h"

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

static void free_env(lk__env *env) {
  lk__registry_free(&env->reg);
  lk__tensors_free(&env->tensors); /* the params are borrowed */
  lk__model_layers_free(&env->layers);
  lk__claims_free(&env->claims);
  free(env);
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
  lk__env *env = calloc(1, sizeof *env);
  lk_config *own_cfg = NULL;
  if (!env)
    return lk__err(LK_ENOMEM, "out of memory");
  env->world = 1;
  lk_rng_seed(&env->rng, 0, 0);
  env->tensors.borrowed = true;
  if (!(env->tensors.params = malloc(n * sizeof *env->tensors.params))) {
    free(env);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  memcpy(env->tensors.params, params, n * sizeof *env->tensors.params);
  env->tensors.n_params = n;
  if (!cfg && (rc = lk_config_new(&own_cfg)) != 0) {
    free_env(env);
    return rc;
  }
  env->src_cfg = cfg ? cfg : own_cfg;
  lk__instance *in = NULL;
  rc = lk__registry_find(env, name, "lk_optimizer_open", &in);
  if (rc == 0 && !lk__kind_has(in->desc, &lk__kinds[LK__KIND_OPTIMIZER])) {
    char kinds[128];
    rc = lk__err(LK_EKIND,
                 "lk_optimizer_open: plugin %s (%s) is not an optimizer: it "
                 "implements %s",
                 name, lk_plugin_path(in->plugin),
                 *lk_plugin_kinds(in->plugin, kinds, sizeof kinds) ? kinds
                                                                   : "no kind");
  }
  if (rc == 0)
    rc = lk__registry_create(env, in);
  /* Options are parsed: the config is not needed any more. */
  env->src_cfg = NULL;
  lk_config_free(own_cfg);
  if (rc != 0) {
    free_env(env);
    return rc;
  }
  env->tensors.sealed = true;
  *out = (lk_optimizer *)in;
  return 0;
}

void lk_optimizer_close(lk_optimizer *opt) {
  if (!opt)
    return;
  free_env(((lk__instance *)opt)->host.env);
}
