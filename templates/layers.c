/* @NAME@: Swish, x * sigmoid(beta x) (torch.nn.SiLU at beta = 1, the
 * built-in silu), as a layer that networks described in a config use as
 * they use the built-in ones. A loopkit plugin of kind layers, written by
 * `loopkit new`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini loads this plugin with `[plugins] layers = ./@NAME@.so` and
 * trains the bundled sequential model, `linear(16), swish, linear(1)`, on
 * features.csv: its loss falls as it learns y = 0.5 x^2 - x + 2.
 * `loopkit gradcheck @NAME@.ini` holds the backward below against central
 * differences of the loss, `loopkit inspect ./@NAME@.so` lists the
 * layer and its argument, and `loopkit export RUN/checkpoints/last.ckpt
 * -o net.onnx` writes the trained network as an ONNX model, this layer
 * through its onnx lowering below.
 *
 * A layers plugin has no create and no options of its own: its descriptor
 * points to a NULL-terminated array of layer tables (lk_layer_type,
 * include/loopkit/layer.h, which says what each field is for). The host
 * checks each table before it uses it and refuses a layer named like a
 * built-in or like another plugin's. A layer's arguments, `swish(beta=2)`,
 * are declared as a table, as a plugin's options are; the host parses and
 * checks them and hands the values over in l->args, in the table's order. */
#include "preamble.h"

#include <loopkit/layer.h>

enum { ARG_BETA }; /* the index of each argument in args[] below */

static const lk_layer_arg swish_args[] = {
    {"beta", LK_LAYER_REAL,
     LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_MIN_OPEN, /* beta > 0 */
     "1", 0, INFINITY, NULL,
     "the slope inside the sigmoid: x * sigmoid(beta x); 1 is torch's SiLU"},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL}};

static float sigmoid(float z) {
  return 1.0f / (1.0f + expf(-z));
}

/* forward: Y [n, out_numel] from X[0] [n, in_numel]; an elementwise layer
 * keeps the shape (no infer: the output's shape is the input's). The
 * consumer owns Y and keeps X and Y for backward. NN is the layer kit
 * (loopkit/nn.h) for products and threads; a layer this small needs
 * neither. */
static int forward(lk_layer *l, lk_nn *nn, float *y, const float *const *x,
                   int n, bool training, lk_rng *rng) {
  (void)nn, (void)training, (void)rng;
  float beta = (float)l->args[ARG_BETA].r;
  size_t count = (size_t)n * l->out_numel;
  for (size_t i = 0; i < count; i++)
    y[i] = x[0][i] * sigmoid(beta * x[0][i]);
  return 0;
}

/* backward: DX[0] += DY * dy/dx, where, with s = sigmoid(beta x),
 * dy/dx = s + beta x s (1 - s). DX[0] is NULL when nothing before this
 * layer needs a gradient (no parameters before it); a layer with
 * parameters would add their gradients to l->t[k]->grad here. */
static int backward(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                    const float *const *x, const float *y, int n) {
  (void)nn, (void)y;
  if (!dx[0])
    return 0;
  float beta = (float)l->args[ARG_BETA].r;
  size_t count = (size_t)n * l->out_numel;
  for (size_t i = 0; i < count; i++) {
    float s = sigmoid(beta * x[0][i]);
    dx[0][i] += dy[i] * (s + beta * x[0][i] * s * (1.0f - s));
  }
  return 0;
}

/* onnx: the forward in evaluation mode as ONNX nodes (loopkit/onnx.h),
 * from the value IN[0] to the new value OUT: Mul(x, Sigmoid(Mul(x,
 * beta))). Values of its own are named with lk_onnx_tmp; a layer with
 * parameters adds them with lk_onnx_initializer under PREFIX then their
 * declared names. Without it (.onnx NULL) `loopkit export` to .onnx
 * refuses a network that uses this layer. */
static int onnx(const lk_layer *l, lk_onnx *g, const char *const *in,
                const char *out, const char *prefix) {
  (void)prefix;
  float beta = (float)l->args[ARG_BETA].r;
  const char *b = lk_onnx_tmp(g, "swish_beta");
  const char *bx = lk_onnx_tmp(g, "swish_bx");
  const char *s = lk_onnx_tmp(g, "swish_s");
  if (!b || !bx || !s)
    return LK_ENOMEM;
  const char *mul[2] = {in[0], b}, *sig[1] = {bx}, *y[2] = {in[0], s};
  int rc = lk_onnx_const_f32(g, b, &beta, 0); /* a scalar */
  if (rc == 0)
    rc = lk_onnx_node(g, "Mul", mul, 2, &bx, 1, NULL, 0);
  if (rc == 0)
    rc = lk_onnx_node(g, "Sigmoid", sig, 1, &s, 1, NULL, 0);
  return rc ? rc : lk_onnx_node(g, "Mul", y, 2, &out, 1, NULL, 0);
}

static const lk_layer_type swish = {
    .size = LK_LAYER_TYPE_SIZE, /* the layer.h this file was compiled for */
    .name = "swish",            /* as `layers = ...` names it, in any case */
    .summary = "x * sigmoid(beta x)",
    .args = swish_args,
    .min_inputs = 1, /* one input: a layer of a chain */
    .max_inputs = 1,
    .forward = forward,
    .backward = backward,
    .onnx = onnx, /* NULL: not exportable to ONNX */
};

/* Every layer of the plugin, NULL last. */
static const lk_layer_type *const types[] = {&swish, NULL};

static const lk_layers_ops layers_ops = {.types = types};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@",
    .version = "0.1",
    .summary = "Swish, x * sigmoid(beta x), a layer for sequential",
    .layers = &layers_ops,
};
