/* Layer plugins (kind layers) whose tables the host must refuse, one fault
 * per build: BAD picks it (tests/Makefile.inc builds badlayer1 to
 * badlayer10; tests/test_layerplug.c holds each message). BAD 0 is a good
 * one, whose table says an older, smaller size. */
#include <math.h>
#include <stddef.h>

#include <loopkit/layer.h>
#include <loopkit/loopkit.h>

#ifndef BAD
#define BAD 0
#endif

static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)nn, (void)training, (void)rng;
  for (size_t i = 0; i < (size_t)n * l->out_numel; i++)
    y[i] = x[0][i];
  return 0;
}

static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)nn, (void)x, (void)y;
  for (size_t i = 0; dx[0] && i < (size_t)n * l->out_numel; i++)
    dx[0][i] += dy[i];
  return 0;
}

static const lk_layer_arg args[] = {
    {"scale", LK_LAYER_REAL, LK_LAYER_ARG_MIN_OPEN, BAD == 7 ? "-1" : "1", 0,
     INFINITY, NULL, "a scale"},
#if BAD == 6
    {"mode", (lk_layer_arg_type)99, 0, NULL, 0, 0, NULL, "a bad type"},
#elif BAD == 8
    {"mode", LK_LAYER_WORD, 0, "a", 0, 0, NULL, "a word with no choices"},
#elif BAD == 9
    {"scale", LK_LAYER_INT, 0, "1", 0, 10, NULL, "twice"},
#endif
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

static const lk_layer_type layer = {
    .size = BAD == 1   ? 8
            : BAD == 0 ? (uint32_t)(offsetof(lk_layer_type, backward) +
                                    sizeof(void (*)(void)))
                       : LK_LAYER_TYPE_SIZE,
    .name = BAD == 2 ? "my layer" : "ident",
    .summary = "y = x",
    .args = args,
    .min_inputs = BAD == 5 ? 3 : 1,
    .max_inputs = BAD == 5 ? 2 : 1,
    .forward = BAD == 3 ? NULL : forward,
    .backward = BAD == 4 ? NULL : backward,
#if BAD == 10 /* the ONNX lowering pointing into data */
    .onnx = (int (*)(const lk_layer *, lk_onnx *, const char *const *,
                     const char *, const char *))(uintptr_t)args,
#endif
};

static const lk_layer_type *const types[] = {&layer, NULL};
static const lk_layers_ops layers = {.types = types};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "badlayer",
    .version = "1.0",
    .summary = "a layer table with one fault",
    .layers = &layers,
};
