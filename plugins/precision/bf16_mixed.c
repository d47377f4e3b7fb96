/* bf16-mixed: Lightning's precision="bf16-mixed" for the layer kit.
 *
 * Parameters, gradients and optimizer state stay f32 (a checkpoint is the
 * same as an f32 run's, and either precision resumes from it); the layer
 * kit's products (linear, conv2d, attention's: lk_nn_sgemm and the layers
 * built on it) take bf16 operands, rounded to nearest even, and sum in
 * f32, on the CPU's bf16 engine (AMX tiles, or AVX512-BF16); elementwise
 * layers, norms, softmax, losses and reductions stay f32. bf16 has f32's
 * range, so the loss is not scaled and no step is ever skipped: the
 * precision kind's entries are identities here.
 *
 * The plugin holds the process's bf16 default of the layer kit
 * (lk_nn_bf16_acquire) from create to destroy. That reaches the contexts
 * the run's models made before it was created (the kinds' creation order):
 * a context reads the default at each product. A context made with
 * LK_NN_F32 keeps f32 products.
 *
 * On a CPU without a bf16 product instruction it refuses at create (the
 * run exits 2 before training), naming what is missing: emulating the
 * instruction would be several times slower than the f32 products and buy
 * nothing but bf16's rounding. */
#include <stdio.h>
#include <stdlib.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h>

#include "bundled.h"

typedef struct mixed {
  lk_host *host;
} mixed;

static int create(lk_host *host, const lk_options *opts, void **self) {
  (void)opts;
  mixed *m = calloc(1, sizeof *m);
  if (!m)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  m->host = host;
  if (lk_nn_bf16_acquire() != 0) {
    char why[512]; /* lk_fail writes where lk_last_error's text is */
    snprintf(why, sizeof why, "%s", lk_last_error());
    int rc = lk_fail(host, LK_ECONFIG,
                     "cannot run here: %s. Train without it (remove "
                     "[plugins] precision) on this machine",
                     why);
    free(m);
    return rc;
  }
  lk_log(host, LK_LOG_INFO,
         "the layer kit's products in bf16 with f32 sums (%s); "
         "parameters, gradients and optimizer state f32",
         lk_nn_bf16_engine());
  *self = m;
  return 0;
}

static void destroy(void *self) {
  if (!self)
    return;
  lk_nn_bf16_release();
  free(self);
}

static double loss_scale(void *self) {
  (void)self;
  return 1;
}

static int unscale_gradients(void *self, lk_tensor *const *params, size_t n,
                             bool *skip) {
  (void)self, (void)params, (void)n;
  *skip = false;
  return 0;
}

static const lk_precision_ops precision_ops = {
    .loss_scale = loss_scale, .unscale_gradients = unscale_gradients};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = BUNDLED_DESCRIPTOR(
        .name = "bf16-mixed",
        .summary =
            "bf16 mixed precision: the layer kit's products in bf16 with "
            "f32 sums (AMX or AVX512-BF16), everything else f32",
        .create = create, .destroy = destroy, .precision = &precision_ops);
