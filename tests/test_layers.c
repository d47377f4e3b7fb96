/* The layer interface (loopkit/layer.h): the registry and its lookup in
 * any case, the generic parser of a layer's text against its type's
 * argument table (defaults, positions, keywords, ranges, the messages),
 * and each built-in table's shape inference and declared tensors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <loopkit/error.h>
#include <loopkit/layer.h>

static void registry(void **state) {
  (void)state;
  const char *names[] = {"conv2d",
                         "maxpool2d",
                         "avgpool2d",
                         "batchnorm2d",
                         "batchnorm1d",
                         "layernorm",
                         "relu",
                         "gelu",
                         "tanh",
                         "sigmoid",
                         "dropout",
                         "flatten",
                         "linear",
                         "embedding",
                         "silu",
                         "leakyrelu",
                         "elu",
                         "softplus",
                         "mish",
                         "hardswish",
                         "hardsigmoid",
                         "softmax",
                         "logsoftmax",
                         "identity",
                         "lstm",
                         "gru",
                         "last",
                         "conv1d",
                         "maxpool1d",
                         "avgpool1d",
                         "adaptiveavgpool1d",
                         "adaptiveavgpool2d"};
  assert_int_equal(lk_layer_count(), 32);
  for (size_t i = 0; i < 32; i++) {
    const lk_layer_type *t = lk_layer_at(i);
    assert_non_null(t);
    assert_string_equal(t->name, names[i]);
    assert_int_equal(t->size, LK_LAYER_TYPE_SIZE);
    assert_ptr_equal(lk_layer_find(names[i], strlen(names[i])), t);
    assert_true(t->forward != NULL || (t->flags & LK_LAYER_VIEW));
  }
  assert_null(lk_layer_at(32));
  /* torch's class names, any case */
  assert_ptr_equal(lk_layer_find("Conv2d", 6), lk_layer_at(0));
  assert_ptr_equal(lk_layer_find("BATCHNORM1D", 11), lk_layer_at(4));
  assert_ptr_equal(lk_layer_find("ReLUx", 4), lk_layer_at(6));
  assert_ptr_equal(lk_layer_find("SiLU", 4), lk_layer_at(14));
  assert_ptr_equal(lk_layer_find("LogSoftmax", 10), lk_layer_at(22));
  assert_null(lk_layer_find("swish", 5));
  assert_null(lk_layer_find("conv", 4));
  assert_null(lk_layer_find(NULL, 0));
  /* training and evaluation differ for dropout, the batch norms and the
   * recurrent layers (their dropout between layers) only */
  for (size_t i = 0; i < 27; i++) {
    const lk_layer_type *t = lk_layer_at(i);
    bool differs = !strcmp(t->name, "dropout") ||
                   !strncmp(t->name, "batch", 5) || !strcmp(t->name, "lstm") ||
                   !strcmp(t->name, "gru");
    assert_int_equal(!!(t->flags & LK_LAYER_TRAIN_DIFFERS), differs);
  }
}

static lk_layer parsed(const char *text) {
  lk_layer l;
  int rc = lk_layer_parse(&l, text, strlen(text));
  if (rc != 0)
    fail_msg("%s: %s", text, lk_last_error());
  return l;
}

static void refused(const char *text, const char *message) {
  lk_layer l;
  assert_int_equal(lk_layer_parse(&l, text, strlen(text)), LK_ECONFIG);
  if (!strstr(lk_last_error(), message))
    fail_msg("%s: \"%s\" lacks \"%s\"", text, lk_last_error(), message);
}

static void parsing(void **state) {
  (void)state;
  lk_layer l = parsed("Conv2d(32, (3, 5), padding=1, bias=false)");
  int out = lk_layer_arg_index(l.type, "out_channels"),
      k = lk_layer_arg_index(l.type, "kernel_size"),
      st = lk_layer_arg_index(l.type, "stride"),
      pad = lk_layer_arg_index(l.type, "padding"),
      bias = lk_layer_arg_index(l.type, "bias"),
      in = lk_layer_arg_index(l.type, "in_channels");
  assert_int_equal(l.args[out].i, 32);
  assert_int_equal(l.args[k].i, 3);
  assert_int_equal(l.args[k].j, 5);
  assert_true(!l.args[st].given && l.args[st].set); /* the default, 1 */
  assert_int_equal(l.args[st].i, 1);
  assert_int_equal(l.args[pad].i, 1);
  assert_int_equal(l.args[pad].j, 1);
  assert_int_equal(l.args[bias].i, 0);
  assert_false(l.args[in].given || l.args[in].set);
  assert_int_equal(lk_layer_arg_index(l.type, "pad"), -1);
  lk_layer_free(&l);
  l = parsed("batchnorm2d");
  assert_true(l.args[0].r == 1e-5 && l.args[1].r == 0.1 && l.args[2].i == 1);
  lk_layer_free(&l);
  l = parsed(" dropout ( p = 0.25 ) ");
  assert_true(l.args[0].r == 0.25);
  lk_layer_free(&l);
  l = parsed("flatten(-3)");
  assert_int_equal(l.args[0].i, -3);
  assert_int_equal(l.args[1].i, -1);
  lk_layer_free(&l);
  l = parsed("gelu(approximate='tanh')");
  assert_string_equal(l.args[0].word, "tanh");
  lk_layer_free(&l);
  refused("maxpol2d(2)", "unknown layer maxpol2d; expected one of conv2d, ");
  /* the whole list, the last built-in and the joins too (the message was
   * once cut at 256 bytes) */
  refused("maxpol2d(2)", "adaptiveavgpool2d, add(@NAME), cat(@NAME)");
  refused("conv2d(4, 3, pad=1)", "conv2d takes no argument pad (it takes: "
                                 "out_channels, kernel_size, stride, padding, "
                                 "bias, in_channels, dilation, groups)");
  refused("conv2d(4, x)", "kernel_size = x: expected a whole number or a pair");
  refused("conv2d(4, 0)", "kernel_size = 0: must be >= 1");
  refused("conv2d(stride=1, 4, 3)", "positional argument 4 after a keyword");
  refused("conv2d(4)", "conv2d needs kernel_size");
  refused("dropout(0.1, 0.2)", "dropout takes 1 positional argument");
  refused("linear(3, out_features=3)", "out_features given twice");
  refused("dropout(1.5)", "p = 1.5: must be in [0, 1)");
  refused("batchnorm1d(0)", "eps = 0: must be > 0");
  refused("batchnorm1d(momentum=2)", "momentum = 2: must be in [0, 1]");
  refused("flatten(9)", "start_dim = 9: expected a whole number in [-8, 8]");
  refused("linear(3, bias=yes)", "bias = yes: expected true or false");
  refused("gelu(approximate=none)", "approximate = none: only 'tanh'");
  refused("relu x", "expected relu or relu(ARGUMENTS)");
  refused("linear(0)", "out_features = 0: expected a whole number in [1, ");
}

static lk_layer_shape shp(int ndim, int a, int b, int c) {
  lk_layer_shape s = {.dtype = LK_F32, .ndim = ndim, .d = {a, b, c}};
  return s;
}

/* TEXT on input IN gives OUT (ndim, dims) and N_T tensors named NAMES. */
static void infers(const char *text, lk_layer_shape in, lk_layer_shape out,
                   const char *names) {
  lk_layer l = parsed(text);
  if (lk_layer_infer(&l, 1, &in) != 0)
    fail_msg("%s: %s", text, lk_last_error());
  assert_int_equal(l.out.ndim, out.ndim);
  for (int i = 0; i < out.ndim; i++)
    assert_int_equal(l.out.d[i], out.d[i]);
  char got[256] = "";
  lk_layer_tensor t[LK_LAYER_MAX_TENSORS];
  int n = l.type->tensors ? l.type->tensors(&l, t) : 0;
  for (int k = 0; k < n; k++)
    snprintf(got + strlen(got), sizeof got - strlen(got), "%s%.31s",
             k ? " " : "", t[k].name);
  assert_string_equal(got, names);
  lk_layer_free(&l);
}

static void not_inferred(const char *text, lk_layer_shape in,
                         const char *message) {
  lk_layer l = parsed(text);
  assert_int_equal(lk_layer_infer(&l, 1, &in), LK_ECONFIG);
  if (!strstr(lk_last_error(), message))
    fail_msg("%s: \"%s\" lacks \"%s\"", text, lk_last_error(), message);
  lk_layer_free(&l);
}

static void shapes(void **state) {
  (void)state;
  lk_layer_shape img = shp(3, 3, 8, 8), vec = shp(1, 64, 0, 0);
  infers("conv2d(4, 3, padding=1)", img, shp(3, 4, 8, 8), "weight bias");
  infers("conv2d(4, 3, stride=2, bias=false)", img, shp(3, 4, 3, 3), "weight");
  infers("maxpool2d(2)", img, shp(3, 3, 4, 4), "");
  infers("avgpool2d(3, 1, 1)", img, shp(3, 3, 8, 8), "");
  infers("batchnorm2d", img, img,
         "weight bias running_mean running_var num_batches_tracked");
  infers("batchnorm1d(affine=false)", vec, vec,
         "running_mean running_var num_batches_tracked");
  infers("batchnorm1d", shp(2, 4, 5, 0), shp(2, 4, 5, 0),
         "weight bias running_mean running_var num_batches_tracked");
  infers("layernorm", shp(2, 5, 7, 0), shp(2, 5, 7, 0), "weight bias");
  infers("relu", img, img, "");
  infers("gelu", vec, vec, "");
  infers("tanh", vec, vec, "");
  infers("sigmoid", vec, vec, "");
  infers("dropout", img, img, "");
  infers("flatten", img, shp(1, 192, 0, 0), "");
  infers("flatten(2)", img, shp(2, 3, 64, 0), "");
  infers("linear(10)", vec, shp(1, 10, 0, 0), "weight bias");
  infers("linear(10, false)", shp(2, 5, 64, 0), shp(2, 5, 10, 0), "weight");
  lk_layer_shape tok = {.dtype = LK_I32, .ndim = 1, .d = {12}, .tokens = 50};
  infers("embedding(100, 8)", tok, shp(2, 12, 8, 0), "weight");
  not_inferred("embedding(40, 8)", tok,
               "num_embeddings = 40, but the data's tokens go up to 49");
  not_inferred("conv2d(4, 3)", vec, "input [64]; expected an image");
  not_inferred("conv2d(4, 3, in_channels=1)", img,
               "in_channels = 1, but its input is [3, 8, 8]");
  not_inferred("maxpool2d(9)", img, "window 9 x 9");
  not_inferred("maxpool2d(2, padding=2)", img, "padding 2 x 2 for a window");
  not_inferred("batchnorm1d", img, "expected [C] or [C, L]");
  not_inferred("linear(3, in_features=5)", vec, "in_features = 5, but its");
  not_inferred("layernorm(normalized_shape=5)", img, "normalized_shape = 5");
  not_inferred("flatten(0)", img, "would merge the batch");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(registry),
                                     cmocka_unit_test(parsing),
                                     cmocka_unit_test(shapes)};
  return cmocka_run_group_tests_name("layers", tests, NULL, NULL);
}
