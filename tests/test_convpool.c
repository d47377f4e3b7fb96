/* The convolutions and pools of issue 27 item 1 (conv1d; conv2d's dilation
 * and groups, depthwise included; maxpool1d, avgpool1d, adaptiveavgpool1d,
 * adaptiveavgpool2d) against torch 1.13 (tests/data/convpool.ref, written
 * by tests/torch/convpool_reference.py, torch's modules in f64 on f32
 * inputs and weights): each layer parsed from its text in every argument
 * form, its declared parameters' sizes, its forward and its backward (the
 * input's, the weight's and the bias's gradients) to 1e-5 of max(|value|,
 * 0.1 of the tensor's largest) (sums with cancellation round with their
 * terms; test_nn.c's tolerance); the same bits at 1, 2 and 3 threads on a
 * batch large enough to be cut; backwards that add to what the gradients
 * hold; and the shapes and sizes refused with a message naming them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <loopkit/error.h>
#include <loopkit/layer.h>
#include <loopkit/nn.h>

#define RTOL 1e-5
#define FLOOR 1e-1
#define MAX_CASES 64
#define NT 8 /* x dy weight bias y dx dweight dbias */

static const char *const names[NT] = {"x", "dy", "weight",  "bias",
                                      "y", "dx", "dweight", "dbias"};
enum { X, DY, W, B, Y, DX, DW, DB };

typedef struct tensor {
  size_t n;
  float *v;  /* as read into a float: x, dy, weight, bias */
  double *r; /* as read: torch's results, in f64 */
} tensor;

typedef struct ref_case {
  char text[80];
  int n, ndim, d[4];
  tensor t[NT];
} ref_case;

static ref_case cases[MAX_CASES];
static size_t ncases;

static int load_refs(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096], word[80], rest[128];
  snprintf(path, sizeof path, "%s/convpool.ref",
           dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  ref_case *c = NULL;
  while (fscanf(f, "%79s", word) == 1) {
    if (word[0] == '#' || !strcmp(word, "end")) {
      if (word[0] == '#' && fscanf(f, "%*[^\n]") < 0)
        break;
    } else if (!strcmp(word, "case") && ncases < MAX_CASES) {
      c = &cases[ncases++];
      if (fscanf(f, "%79s %d %127[^\n]", c->text, &c->n, rest) != 3)
        break;
      char *p = rest, *e;
      for (long v; c->ndim < 4 && (v = strtol(p, &e, 10), e != p); p = e)
        c->d[c->ndim++] = (int)v;
    } else if (!strcmp(word, "t") && c) {
      size_t n;
      int k = 0;
      if (fscanf(f, "%79s %zu", word, &n) != 2)
        break;
      while (k < NT && strcmp(names[k], word))
        k++;
      if (k == NT || c->t[k].v)
        break;
      tensor *t = &c->t[k];
      t->n = n;
      if (!(t->v = malloc(n * sizeof *t->v)) ||
          !(t->r = malloc(n * sizeof *t->r)))
        break;
      for (size_t i = 0; i < n; i++) {
        if (fscanf(f, "%lf", &t->r[i]) != 1) {
          fclose(f);
          return -1;
        }
        t->v[i] = (float)t->r[i];
      }
    }
  }
  fclose(f);
  return ncases >= 26 ? 0 : -1;
}

static int free_refs(void **state) {
  (void)state;
  for (size_t i = 0; i < ncases; i++)
    for (int k = 0; k < NT; k++)
      free(cases[i].t[k].v), free(cases[i].t[k].r);
  return 0;
}

/* A layer of case C with its parameters (torch's values, zeroed
 * gradients), for a batch of up to CAP. */
typedef struct inst {
  lk_layer l;
  lk_tensor p[2];
} inst;

static void make(inst *in, const ref_case *c, size_t cap) {
  memset(in, 0, sizeof *in);
  lk_layer *l = &in->l;
  if (lk_layer_parse(l, c->text, strlen(c->text)) != 0)
    fail_msg("%s: %s", c->text, lk_last_error());
  lk_layer_shape s = {.dtype = LK_F32, .ndim = c->ndim};
  memcpy(s.d, c->d, sizeof c->d);
  if (lk_layer_infer(l, 1, &s) != 0)
    fail_msg("%s: %s", c->text, lk_last_error());
  assert_int_equal(l->out_numel * (size_t)c->n, c->t[DY].n);
  lk_layer_tensor t[LK_LAYER_MAX_TENSORS];
  int n = l->type->tensors ? l->type->tensors(l, t) : 0;
  for (int k = 0; k < n; k++) {
    size_t numel = 1;
    for (int d = 0; d < t[k].ndim; d++)
      numel *= t[k].shape[d];
    if (numel != c->t[W + k].n)
      fail_msg("%s: %s has %zu values, torch's %zu", c->text, t[k].name, numel,
               c->t[W + k].n);
    in->p[k] = (lk_tensor){.name = names[W + k],
                           .dtype = LK_F32,
                           .ndim = (size_t)t[k].ndim,
                           .numel = numel,
                           .data = malloc(numel * sizeof(float)),
                           .grad = calloc(numel, sizeof(float))};
    assert_true(in->p[k].data && in->p[k].grad);
    memcpy(in->p[k].data, c->t[W + k].v, numel * sizeof(float));
    l->t[k] = &in->p[k];
  }
  l->n_t = n;
  if (c->t[B].n && n < 2)
    fail_msg("%s: torch has a bias, the layer none", c->text);
  if (lk_layer_bind(l) != 0 || lk_layer_reserve(l, cap) != 0)
    fail_msg("%s: %s", c->text, lk_last_error());
}

static void unmake(inst *in) {
  for (int k = 0; k < 2; k++)
    free(in->p[k].data), free(in->p[k].grad);
  lk_layer_free(&in->l);
}

static void run(inst *in, int threads, int n, const float *x, const float *dy,
                float *y, float *dx) {
  lk_nn *nn = NULL;
  assert_int_equal(lk_nn_create(&nn, threads, 0), 0);
  const float *xs[1] = {x};
  float *dxs[1] = {dx};
  if (in->l.type->forward(&in->l, nn, y, xs, n, true, NULL) != 0 ||
      in->l.type->backward(&in->l, nn, dxs, dy, xs, y, n) != 0)
    fail_msg("%s: %s", in->l.type->name, lk_last_error());
  lk_nn_free(nn);
}

static void check(const ref_case *c, const char *what, const float *got,
                  const tensor *want) {
  double floor = 0;
  for (size_t i = 0; i < want->n; i++)
    floor = fmax(floor, FLOOR * fabs(want->r[i]));
  for (size_t i = 0; i < want->n; i++)
    if (fabs((double)got[i] - want->r[i]) >
        RTOL * fmax(fabs(want->r[i]), floor))
      fail_msg("%s: %s[%zu] = %.9g, torch %.17g", c->text, what, i,
               (double)got[i], want->r[i]);
}

static void against_torch(void **state) {
  (void)state;
  for (size_t k = 0; k < ncases; k++) {
    const ref_case *c = &cases[k];
    inst in;
    make(&in, c, (size_t)c->n);
    size_t nx = c->t[X].n, ny = c->t[DY].n;
    float *y = malloc(ny * sizeof *y), *dx = calloc(nx, sizeof *dx);
    assert_true(y && dx);
    run(&in, 1, c->n, c->t[X].v, c->t[DY].v, y, dx);
    check(c, "y", y, &c->t[Y]);
    check(c, "dx", dx, &c->t[DX]);
    for (int p = 0; p < in.l.n_t; p++)
      check(c, names[DW + p], in.p[p].grad, &c->t[DW + p]);
    /* a second backward adds: twice the gradients (x + x is exact) */
    run(&in, 1, c->n, c->t[X].v, c->t[DY].v, y, dx);
    for (size_t i = 0; i < nx; i++) {
      float once = (float)c->t[DX].r[i];
      if (fabs(dx[i] - 2 * once) > 2e-5 * fmax(fabs(once), 1e-2))
        fail_msg("%s: dx[%zu] not added to", c->text, i);
    }
    for (int p = 0; p < in.l.n_t; p++)
      for (size_t i = 0; i < in.p[p].numel; i++) {
        float g = ((float *)in.p[p].grad)[i], once = (float)c->t[DW + p].r[i];
        if (fabs(g - 2 * once) > 2e-5 * fmax(fabs(once), 1e-1))
          fail_msg("%s: %s[%zu] not added to", c->text, names[DW + p], i);
      }
    free(y), free(dx);
    unmake(&in);
  }
}

/* each case on a batch of 96 (the case's samples repeated): the same bits
 * at 1, 2 and 3 threads, parameters' gradients included */
static void threads(void **state) {
  (void)state;
  for (size_t k = 0; k < ncases; k++) {
    const ref_case *c = &cases[k];
    size_t reps = 96 / (size_t)c->n, batch = reps * (size_t)c->n;
    size_t px = c->t[X].n / (size_t)c->n, py = c->t[DY].n / (size_t)c->n;
    float *x = malloc(batch * px * sizeof *x),
          *dy = malloc(batch * py * sizeof *dy);
    assert_true(x && dy);
    for (size_t i = 0; i < batch * px; i++)
      x[i] = c->t[X].v[i % c->t[X].n] + (float)(i / c->t[X].n % 5) * 0.125f;
    for (size_t i = 0; i < batch * py; i++)
      dy[i] = c->t[DY].v[i % c->t[DY].n];
    float *y[3], *dx[3], *g[3][2] = {{NULL}};
    for (int t = 0; t < 3; t++) {
      inst in;
      make(&in, c, batch);
      y[t] = malloc(batch * py * sizeof *y[t]);
      dx[t] = calloc(batch * px, sizeof *dx[t]);
      assert_true(y[t] && dx[t]);
      run(&in, t + 1, (int)batch, x, dy, y[t], dx[t]);
      for (int p = 0; p < in.l.n_t; p++) {
        g[t][p] = in.p[p].grad;
        in.p[p].grad = NULL;
      }
      if (t > 0) {
        if (memcmp(y[0], y[t], batch * py * sizeof *y[0]) ||
            memcmp(dx[0], dx[t], batch * px * sizeof *dx[0]))
          fail_msg("%s: 1 thread and %d differ", c->text, t + 1);
        for (int p = 0; p < in.l.n_t; p++)
          if (memcmp(g[0][p], g[t][p], in.p[p].numel * sizeof(float)))
            fail_msg("%s: %s at 1 thread and %d differ", c->text, names[DW + p],
                     t + 1);
      }
      unmake(&in);
    }
    free(x), free(dy);
    for (int t = 0; t < 3; t++)
      free(y[t]), free(dx[t]), free(g[t][0]), free(g[t][1]);
  }
}

/* every layer and argument of the item has a case */
static void coverage(void **state) {
  (void)state;
  const char *want[] = {"conv1d(",
                        "conv2d(",
                        "maxpool1d(",
                        "avgpool1d(",
                        "adaptiveavgpool1d(",
                        "adaptiveavgpool2d(",
                        "dilation=",
                        "groups=",
                        "padding=",
                        "stride=",
                        "bias=false",
                        "output_size="};
  for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
    bool found = false;
    for (size_t k = 0; k < ncases && !found; k++) {
      char lower[80];
      size_t i = 0;
      for (; cases[k].text[i] && i < sizeof lower - 1; i++)
        lower[i] = (char)(cases[k].text[i] | 0x20 * (cases[k].text[i] >= 'A' &&
                                                     cases[k].text[i] <= 'Z'));
      lower[i] = '\0';
      found = strstr(lower, want[w]) != NULL;
    }
    if (!found)
      fail_msg("no case with %s", want[w]);
  }
}

static void refused(const char *text, int ndim, int d0, int d1, int d2,
                    const char *message) {
  lk_layer l;
  lk_layer_shape in = {.dtype = LK_F32, .ndim = ndim, .d = {d0, d1, d2}};
  int rc = lk_layer_parse(&l, text, strlen(text));
  if (rc == 0) {
    rc = lk_layer_infer(&l, 1, &in);
    lk_layer_free(&l);
  }
  assert_int_equal(rc, LK_ECONFIG);
  if (!strstr(lk_last_error(), message))
    fail_msg("%s: \"%s\" lacks \"%s\"", text, lk_last_error(), message);
}

static void errors(void **state) {
  (void)state;
  refused("conv1d(4, 3, groups=3)", 2, 4, 10, 0,
          "groups = 3 must divide the input's channels (4");
  refused("conv1d(5, 3, groups=2)", 2, 4, 10, 0, "out_channels (5)");
  refused("conv2d(6, 3, groups=4)", 3, 6, 8, 8, "groups = 4 must divide");
  refused("conv1d(4, 3)", 3, 4, 8, 8, "expected a sequence [C, L]");
  refused("maxpool1d(2)", 1, 4, 0, 0, "expected a sequence [C, L]");
  refused("conv2d(4, 3)", 2, 4, 8, 0, "expected an image [C, H, W]");
  refused("conv1d(4, 3, dilation=5)", 2, 4, 8, 0,
          "the kernel is larger than the padded sequence");
  refused("conv2d(4, 3, dilation=(1, 4))", 3, 4, 8, 8,
          "the kernel is larger than the padded image");
  refused("avgpool1d(4, padding=3)", 2, 4, 8, 0, "at most half the window");
  refused("adaptiveavgpool1d(11)", 2, 3, 10, 0,
          "output_size 11 is longer than the input [3, 10]");
  refused("adaptiveavgpool2d((2, 9))", 3, 3, 8, 8,
          "output_size 2 x 9 is larger than the input [3, 8, 8]");
  refused("adaptiveavgpool2d(0)", 3, 3, 8, 8, "output_size");
  refused("conv1d(4, 3, groups=0)", 2, 4, 8, 0, "groups");
  /* and the kit's own checks, for callers that skip the tables */
  lk_nn *nn = NULL;
  float v[64] = {0};
  assert_int_equal(lk_nn_create(&nn, 1, 0), 0);
  lk_nn_conv2d c = {
      .n = 1, .c = 4, .h = 4, .w = 4, .oc = 4, .kh = 1, .kw = 1, .groups = 3};
  assert_int_equal(lk_nn_conv2d_forward(nn, &c, v, v, v, NULL), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "divisible by groups"));
  c.groups = 1, c.dilation_h = -1;
  assert_int_equal(lk_nn_conv2d_forward(nn, &c, v, v, v, NULL), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "dilation"));
  lk_nn_adaptivepool2d a = {.n = 1, .c = 1, .h = 2, .w = 2, .oh = 3, .ow = 1};
  assert_int_equal(lk_nn_adaptiveavgpool2d_forward(nn, &a, v, v), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "adaptiveavgpool2d"));
  lk_nn_free(nn);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(against_torch), cmocka_unit_test(threads),
      cmocka_unit_test(coverage), cmocka_unit_test(errors)};
  return cmocka_run_group_tests(tests, load_refs, free_refs);
}
