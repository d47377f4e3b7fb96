/* Inference without the loop (infer.h): the step plugin a config names,
 * created in an environment (env.h) of its own with the layer plugins and
 * nothing else, its weights loaded, and its predict_step called on the
 * caller's samples.
 *
 * A network such as sequential sizes itself from the data's sample shape
 * (lk_host_data_shape), which no config key holds (the config's names are
 * a fixed contract, and a conv net's weights do not say its image size).
 * So the config's data plugin is created once, alone in a throwaway
 * environment, for that shape; it is freed before the model is made, and
 * the model's environment answers lk_host_data_shape with the shape kept
 * (env->sample_shape): no data stays in memory. */
#include <stdlib.h>
#include <string.h>

#include "layertypes.h"
#include "loop.h"
#include "setup.h"

struct lk_model {
  lk__env *env;
  lk__instance *step;
  int (*predict)(void *, const lk_batch *, lk_tensor *);
  lk_sample_shape data; /* the data's, which env->sample_shape points to */
  size_t in_numel;      /* values of an input sample */
  size_t out_ndim, out_dims[LK_MAX_DIMS], out_numel;
  char out_name[32];
};

static void free_env(lk__env *env) {
  if (!env)
    return;
  lk__registry_free(&env->reg);
  lk__tensors_free(&env->tensors);
  lk__model_layers_free(&env->layers);
  lk__claims_free(&env->claims);
  free(env);
}

static bool is_none(const lk_config_entry *e) {
  return e && strcmp(e->value, "none") == 0;
}

/* An environment for CFG's plugins: one process, [loop] threads. */
static lk__env *new_env(const lk_config *cfg) {
  lk__env *env = calloc(1, sizeof *env);
  if (!env)
    return NULL;
  env->world = 1;
  lk_rng_seed(&env->rng, 0, 0);
  const lk_config_entry *t = lk_config_find(cfg, "loop", "threads");
  char *end = NULL;
  long long n = t ? strtoll(t->value, &end, 10) : 0;
  env->threads = lk__threads_resolve(t && end && !*end && n > 0 ? n : 0);
  return env;
}

/* KEY's instance in ENV as kind K, created with its options from CFG. */
static int make(lk__env *env, const lk_config *cfg, lk__kind_id k,
                const char *spec, const char *where, lk__instance **out) {
  int rc = lk__registry_assign(env, k, spec, where, out);
  if (rc != 0)
    return rc;
  env->src_cfg = cfg;
  rc = lk__registry_create(env, *out);
  env->src_cfg = NULL;
  return rc;
}

/* The step plugin of CFG in ENV, its options parsed, not created: what
 * a data plugin's auto size (text's block_size) is taken from. */
static int model_options(lk__env *env, const lk_config *cfg) {
  const lk_config_entry *e = lk_config_find(cfg, "plugins", "step");
  if (!e || is_none(e))
    return lk__err(LK_ECONFIG, "lk_model_open: [plugins] step names no "
                               "model plugin");
  lk__instance *in = NULL;
  int rc = lk__registry_assign(env, LK__KIND_STEP, e->value, e->where, &in);
  if (rc == 0)
    rc = lk__options_parse(in->desc, in->name, cfg, &in->opts);
  env->reg.role[LK__KIND_STEP] = in;
  return rc;
}

/* The sample shape of CFG's data plugin into *S. */
static int data_shape(const lk_config *cfg, lk_sample_shape *s) {
  const lk_config_entry *e = lk_config_find(cfg, "plugins", "data");
  if (!e || is_none(e))
    return lk__err(LK_ECONFIG,
                   "lk_model_open: the config names no data plugin "
                   "([plugins] data): the model's input shape is the data's "
                   "sample shape");
  lk__env *env = new_env(cfg);
  if (!env)
    return lk__err(LK_ENOMEM, "out of memory");
  env->prepare = lk__auto_data_options;
  lk__instance *in = NULL;
  int rc = model_options(env, cfg);
  if (rc == 0)
    rc = make(env, cfg, LK__KIND_DATA, e->value, e->where, &in);
  if (rc == 0) {
    env->reg.role[LK__KIND_DATA] = in;
    rc = lk_host_data_shape(&in->host, s);
  }
  free_env(env);
  return rc;
}

/* [plugins] layers: each listed plugin, created before the model. */
static int make_layers(lk__env *env, const lk_config *cfg) {
  const lk_config_entry *e = lk_config_find(cfg, "plugins", "layers");
  if (!e || is_none(e))
    return 0;
  char *list = lk__strdup(e->value), *save = NULL;
  if (!list)
    return lk__err(LK_ENOMEM, "out of memory");
  lk__listed *l = &env->reg.listed[LK__KIND_LAYERS];
  int rc = 0;
  for (char *t = strtok_r(list, ", \t", &save); t && rc == 0;
       t = strtok_r(NULL, ", \t", &save)) {
    lk__instance *in = NULL;
    if (l->n == LK__MAX_LISTED)
      rc = lk__err(LK_ECONFIG, "%s: more than %d layers", e->where,
                   LK__MAX_LISTED);
    else if ((rc = make(env, cfg, LK__KIND_LAYERS, t, e->where, &in)) == 0)
      l->in[l->n++] = in;
  }
  free(list);
  return rc == 0 ? lk__layers_check(&env->reg, e->where) : rc;
}

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), k = strlen(tail);
  return n >= k && strcmp(s + n - k, tail) == 0;
}

/* The model of CFG in M->env, its weights from WEIGHTS. */
static int make_model(lk_model *m, const lk_config *cfg, const char *weights) {
  const lk_config_entry *e = lk_config_find(cfg, "plugins", "step");
  if (!e || is_none(e))
    return lk__err(LK_ECONFIG, "lk_model_open: [plugins] step names no "
                               "model plugin");
  int rc = make_layers(m->env, cfg);
  if (rc == 0)
    rc = make(m->env, cfg, LK__KIND_STEP, e->value, e->where, &m->step);
  if (rc != 0)
    return rc;
  m->env->reg.role[LK__KIND_STEP] = m->step;
  void (*fn)(void) = lk__entry_of(m->step, LK__KIND_STEP,
                                  LK__ENTRY(lk_step_ops, predict_step));
  if (!fn)
    return lk__err(LK_EKIND,
                   "plugin %s (the step) has no predict_step (ABI 1.4): it "
                   "cannot predict",
                   m->step->label);
  memcpy(&m->predict, &fn, sizeof fn);
  /* The parameters and buffers as torch names them, or a checkpoint's. */
  rc = ends_with(weights, ".safetensors")
           ? lk_host_load_params(&m->step->host, weights, NULL)
           : lk__env_load_params(m->env, weights);
  m->env->tensors.sealed = true;
  return rc;
}

/* The model's output on B, checked as lk_run_predict checks it. */
static int run_predict(lk_model *m, const lk_batch *b, lk_tensor *out) {
  *out = (lk_tensor){0};
  uint64_t mark = lk__err_mark();
  int rc = m->predict(m->step->self, b, out);
  if (rc != 0)
    return lk__entry_failed(rc, mark, "predict_step of plugin %s",
                            m->step->label);
  size_t numel = 1;
  for (size_t i = 0; i < out->ndim && i < LK_MAX_DIMS; i++)
    numel *= out->shape[i];
  if (!out->data || (out->dtype != LK_F32 && out->dtype != LK_F64) ||
      out->ndim < 1 || out->ndim > LK_MAX_DIMS || out->numel != numel ||
      out->shape[0] != b->size)
    return lk__err(LK_EPLUGIN,
                   "predict_step of plugin %s gave no tensor of [%zu, ...] "
                   "f32 or f64 values (dtype %d, %zu dimensions, numel %zu)",
                   m->step->label, b->size, (int)out->dtype, out->ndim,
                   out->numel);
  return 0;
}

static int forward(lk_model *m, const void *input, size_t n, lk_tensor *out) {
  /* As the data plugins give batches: a sample a row, whatever its
   * shape ([B, features] for an image [C, H, W], [B, T] for tokens). */
  lk_batch b = {.split = LK_SPLIT_TEST, .size = n};
  b.x.dtype = m->data.x_dtype;
  b.x.ndim = 2;
  b.x.shape[0] = n;
  b.x.shape[1] = m->in_numel;
  if (!lk_size_mul(n, m->in_numel, &b.x.numel))
    return lk__err(LK_EINVAL, "lk_model_forward: %zu samples are too many", n);
  b.x.data = (void *)(uintptr_t)input; /* predict_step only reads x */
  return run_predict(m, &b, out);
}

/* The output's shape, from one forward of a sample of zeros (a valid
 * token, a finite feature). */
static int probe(lk_model *m) {
  if (!lk_shape_numel(m->data.x_shape, m->data.x_ndim, &m->in_numel))
    return lk__err(LK_ECONFIG, "lk_model_open: the data's samples are too "
                               "large");
  void *zeros =
      calloc(m->in_numel ? m->in_numel : 1, lk_dtype_size(m->data.x_dtype));
  if (!zeros)
    return lk__err(LK_ENOMEM, "out of memory");
  lk_tensor out;
  int rc = forward(m, zeros, 1, &out);
  free(zeros);
  if (rc != 0)
    return rc;
  m->out_ndim = out.ndim - 1;
  memcpy(m->out_dims, out.shape + 1, m->out_ndim * sizeof *m->out_dims);
  m->out_numel = out.numel;
  snprintf(m->out_name, sizeof m->out_name, "%s",
           out.name ? out.name : "output");
  return 0;
}

int lk_model_open_config(const lk_config *cfg, const char *weights,
                         lk_model **out) {
  if (!out)
    return lk__err(LK_EINVAL, "lk_model_open: OUT is NULL");
  *out = NULL;
  if (!cfg || !weights)
    return lk__err(LK_EINVAL, "lk_model_open: %s is NULL",
                   cfg ? "WEIGHTS" : "CONFIG");
  lk_model *m = calloc(1, sizeof *m);
  if (!m || !(m->env = new_env(cfg))) {
    free(m);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  int rc = data_shape(cfg, &m->data);
  m->env->sample_shape = &m->data;
  if (rc == 0)
    rc = make_model(m, cfg, weights);
  if (rc == 0)
    rc = probe(m);
  if (rc != 0) {
    lk_model_close(m);
    return rc;
  }
  *out = m;
  return 0;
}

int lk_model_open(const char *config, const char *weights, lk_model **out) {
  if (out)
    *out = NULL;
  if (!config)
    return lk__err(LK_EINVAL, "lk_model_open: CONFIG is NULL");
  lk_config *cfg = NULL;
  int rc = lk_config_load(config, &cfg);
  if (rc != 0)
    return rc;
  rc = lk_model_open_config(cfg, weights, out);
  lk_config_free(cfg);
  return rc;
}

int lk_model_input_shape(const lk_model *m, lk_dtype *dtype, size_t *ndim,
                         size_t *dims) {
  if (!m)
    return lk__err(LK_EINVAL, "lk_model_input_shape: M is NULL");
  if (dtype)
    *dtype = m->data.x_dtype;
  if (ndim)
    *ndim = m->data.x_ndim;
  if (dims)
    memcpy(dims, m->data.x_shape, m->data.x_ndim * sizeof *dims);
  return 0;
}

int lk_model_output_shape(const lk_model *m, size_t *ndim, size_t *dims,
                          const char **name) {
  if (!m)
    return lk__err(LK_EINVAL, "lk_model_output_shape: M is NULL");
  if (ndim)
    *ndim = m->out_ndim;
  if (dims)
    memcpy(dims, m->out_dims, m->out_ndim * sizeof *dims);
  if (name)
    *name = m->out_name;
  return 0;
}

int lk_model_forward(lk_model *m, const void *input, size_t n, float *output) {
  if (!m)
    return lk__err(LK_EINVAL, "lk_model_forward: M is NULL");
  if (n == 0)
    return 0;
  if (!input || !output)
    return lk__err(LK_EINVAL, "lk_model_forward: %s is NULL",
                   input ? "OUTPUT" : "INPUT");
  lk_tensor out;
  int rc = forward(m, input, n, &out);
  if (rc != 0)
    return rc;
  if (out.numel / n != m->out_numel)
    return lk__err(LK_EPLUGIN,
                   "predict_step of plugin %s gave %zu values a sample, %zu "
                   "when opened",
                   m->step->label, out.numel / n, m->out_numel);
  for (size_t i = 0; i < out.numel; i++)
    output[i] = out.dtype == LK_F32 ? ((const float *)out.data)[i]
                                    : (float)((const double *)out.data)[i];
  return 0;
}

void lk_model_close(lk_model *m) {
  if (!m)
    return;
  free_env(m->env);
  free(m);
}
