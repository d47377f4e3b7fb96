/* The activation layers of issue 27 (silu, leakyrelu, elu, softplus, mish,
 * hardswish, hardsigmoid, softmax, logsoftmax, identity) against torch
 * 1.13 (tests/data/activations.ref, written by
 * tests/torch/activations_reference.py, torch's modules in f64 on f32
 * inputs): each layer, parsed from its text in every argument form, its
 * forward and its backward on an input that holds the kinks, tiny and
 * large values, to 1e-5 relative (and 1e-30 absolute: below it the
 * kit's exp stops at e^-87 where torch's goes on into denormals, and the
 * kit's log-softmax keeps -1.8e-35 where torch's, even in f64, rounds it to
 * 0: no float that small is meaningful to a net); the softmaxes' gradients,
 * sums with cancellation whose rounding scales with their terms, to 1e-5 of
 * max(|value|, 0.1 of the tensor's largest), test_nn.c's tolerance; the same
 * bits at 1 and 3 threads and on the portable kernels; backwards that add to
 * what dx holds; arguments out of range refused with a message naming the
 * layer. */
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
#define ATOL 1e-30
#define FLOOR 1e-1
#define MAX_CASES 64

typedef struct tensor {
  size_t n;
  float *v;  /* as read into a float: x and dy */
  double *r; /* as read: torch's y and dx, in f64 */
} tensor;

typedef struct ref_case {
  char text[64];
  int n, ndim, d[4];
  tensor x, dy, y, dx;
} ref_case;

static ref_case cases[MAX_CASES];
static size_t ncases;

static tensor *named(ref_case *c, const char *name) {
  if (!strcmp(name, "x"))
    return &c->x;
  if (!strcmp(name, "dy"))
    return &c->dy;
  if (!strcmp(name, "y"))
    return &c->y;
  if (!strcmp(name, "dx"))
    return &c->dx;
  return NULL;
}

static int load_refs(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096], word[64], rest[128];
  snprintf(path, sizeof path, "%s/activations.ref",
           dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  ref_case *c = NULL;
  while (fscanf(f, "%63s", word) == 1) {
    if (word[0] == '#' || !strcmp(word, "end")) {
      if (word[0] == '#' && fscanf(f, "%*[^\n]") < 0)
        break;
    } else if (!strcmp(word, "case") && ncases < MAX_CASES) {
      c = &cases[ncases++];
      if (fscanf(f, "%63s %d %127[^\n]", c->text, &c->n, rest) != 3)
        break;
      char *p = rest, *e;
      for (long v; c->ndim < 4 && (v = strtol(p, &e, 10), e != p); p = e)
        c->d[c->ndim++] = (int)v;
    } else if (!strcmp(word, "t") && c) {
      size_t n;
      if (fscanf(f, "%63s %zu", word, &n) != 2)
        break;
      tensor *t = named(c, word);
      if (!t || t->v)
        break;
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
  return ncases >= 28 ? 0 : -1;
}

static int free_refs(void **state) {
  (void)state;
  for (size_t i = 0; i < ncases; i++)
    for (int k = 0; k < 4; k++) {
      tensor *t = k == 0   ? &cases[i].x
                  : k == 1 ? &cases[i].dy
                  : k == 2 ? &cases[i].y
                           : &cases[i].dx;
      free(t->v), free(t->r);
    }
  return 0;
}

/* The layer of case C, parsed and inferred for its sample shape. */
static lk_layer layer(const ref_case *c) {
  lk_layer l;
  if (lk_layer_parse(&l, c->text, strlen(c->text)) != 0)
    fail_msg("%s: %s", c->text, lk_last_error());
  lk_layer_shape in = {.dtype = LK_F32, .ndim = c->ndim};
  memcpy(in.d, c->d, sizeof c->d);
  if (lk_layer_infer(&l, 1, &in) != 0)
    fail_msg("%s: %s", c->text, lk_last_error());
  assert_int_equal(l.out_numel * (size_t)c->n, c->x.n);
  return l;
}

/* forward and backward of L on X, DY [count] (repeated from the case's to
 * fill COUNT, for the thread test) into Y and DX (DX's prior contents kept
 * and added to). */
static void run(lk_layer *l, int threads, int n, const float *x,
                const float *dy, float *y, float *dx) {
  lk_nn *nn = NULL;
  /* threads < 0: -threads, on the portable 16-byte kernels */
  assert_int_equal(
      lk_nn_create(&nn, abs(threads), threads < 0 ? LK_NN_PORTABLE : 0), 0);
  if (l->type->flags & LK_LAYER_VIEW) { /* identity: its output is x */
    memcpy(y, x, (size_t)n * l->out_numel * sizeof *y);
    for (size_t i = 0; i < (size_t)n * l->out_numel; i++)
      dx[i] += dy[i];
  } else {
    const float *xs[1] = {x};
    float *dxs[1] = {dx};
    if (l->type->forward(l, nn, y, xs, n, true, NULL) != 0 ||
        l->type->backward(l, nn, dxs, dy, xs, y, n) != 0)
      fail_msg("%s: %s", l->type->name, lk_last_error());
  }
  lk_nn_free(nn);
}

static bool close_to(float got, double want, double floor) {
  double d = fabs((double)got - want);
  return d <= RTOL * fmax(fabs(want), floor) + ATOL ||
         (isnan(got) && isnan(want));
}

static void check(const ref_case *c, const char *what, const float *got,
                  const tensor *want) {
  double floor = 0;
  if (!strcmp(what, "dx") && strstr(c->text, "oftmax"))
    for (size_t i = 0; i < want->n; i++)
      floor = fmax(floor, FLOOR * fabs(want->r[i]));
  for (size_t i = 0; i < want->n; i++)
    if (!close_to(got[i], want->r[i], floor))
      fail_msg("%s: %s[%zu] = %.9g, torch %.17g (x = %.9g)", c->text, what, i,
               (double)got[i], want->r[i], (double)c->x.v[i]);
}

static void against_torch(void **state) {
  (void)state;
  for (size_t k = 0; k < ncases; k++) {
    const ref_case *c = &cases[k];
    lk_layer l = layer(c);
    size_t n = c->x.n;
    float *y = malloc(n * sizeof *y), *dx = calloc(n, sizeof *dx);
    assert_true(y && dx);
    run(&l, 1, c->n, c->x.v, c->dy.v, y, dx);
    check(c, "y", y, &c->y);
    check(c, "dx", dx, &c->dx);
    /* the backward adds: from 1, the same sums plus 1, bit for bit */
    float *dx1 = malloc(n * sizeof *dx1);
    assert_non_null(dx1);
    for (size_t i = 0; i < n; i++)
      dx1[i] = 1;
    run(&l, 1, c->n, c->x.v, c->dy.v, y, dx1);
    for (size_t i = 0; i < n; i++)
      if (dx1[i] != 1 + dx[i])
        fail_msg("%s: dx[%zu] not added to", c->text, i);
    free(y), free(dx), free(dx1);
    lk_layer_free(&l);
  }
}

/* Each case on a batch large enough to be cut among threads (the case's
 * input repeated, every repetition shifted a little): the same bits at 1
 * and 3 threads and on the portable kernels (16-byte vectors where the
 * CPU's may be 64), and each repetition's values equal to those of the same
 * values alone (no value depends on where it lies). */
static void threads(void **state) {
  (void)state;
  for (size_t k = 0; k < ncases; k++) {
    const ref_case *c = &cases[k];
    lk_layer l = layer(c);
    size_t per = c->x.n, reps = 200000 / per + 1, n = per * reps;
    int batch = c->n * (int)reps;
    float *x = malloc(n * sizeof *x), *dy = malloc(n * sizeof *dy);
    float *y[3], *dx[3];
    for (int t = 0; t < 3; t++) {
      y[t] = malloc(n * sizeof *y[t]);
      dx[t] = calloc(n, sizeof *dx[t]);
      assert_true(y[t] && dx[t]);
    }
    assert_true(x && dy);
    for (size_t i = 0; i < n; i++) {
      size_t shift = i / per % 7; /* none: the very values (-0 kept) */
      x[i] = shift ? c->x.v[i % per] + (float)shift * 0.25f : c->x.v[i % per];
      dy[i] = c->dy.v[i % per];
    }
    run(&l, 1, batch, x, dy, y[0], dx[0]);
    run(&l, 3, batch, x, dy, y[1], dx[1]);
    run(&l, -2, batch, x, dy, y[2], dx[2]);
    for (int t = 1; t < 3; t++)
      if (memcmp(y[0], y[t], n * sizeof *y[0]) ||
          memcmp(dx[0], dx[t], n * sizeof *dx[0]))
        fail_msg("%s: 1 thread and %s differ", c->text,
                 t == 1 ? "3" : "2 on the portable kernels");
    /* the repetition at shift 0 (every 7th) is the case's own run */
    float *y1 = malloc(per * sizeof *y1), *dx1 = calloc(per, sizeof *dx1);
    assert_true(y1 && dx1);
    run(&l, 1, c->n, c->x.v, c->dy.v, y1, dx1);
    for (size_t i = 0; i < per; i++)
      if (memcmp(&y1[i], &y[0][7 * per + i], sizeof *y1) ||
          memcmp(&dx1[i], &dx[0][7 * per + i], sizeof *dx1))
        fail_msg("%s: a value's result depends on where it lies: at x = "
                 "%.9g, y %.9g and %.9g, dx %.9g and %.9g",
                 c->text, (double)c->x.v[i], (double)y1[i],
                 (double)y[0][7 * per + i], (double)dx1[i],
                 (double)dx[0][7 * per + i]);
    free(x), free(dy), free(y1), free(dx1);
    for (int t = 0; t < 3; t++)
      free(y[t]), free(dx[t]);
    lk_layer_free(&l);
  }
}

/* every layer of the issue has a case, with its every argument */
static void coverage(void **state) {
  (void)state;
  const char *want[] = {"silu",
                        "leakyrelu(",
                        "elu(",
                        "softplus(",
                        "mish",
                        "hardswish",
                        "hardsigmoid",
                        "softmax(",
                        "logsoftmax(",
                        "identity",
                        "negative_slope=",
                        "alpha=",
                        "beta=",
                        "threshold=",
                        "dim="};
  for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
    bool found = false;
    for (size_t k = 0; k < ncases && !found; k++) {
      char lower[64];
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

static void refused(const char *text, int ndim, const char *message) {
  lk_layer l;
  lk_layer_shape in = {.dtype = LK_F32, .ndim = ndim, .d = {4, 5, 6}};
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
  refused("softmax", 1, "softmax needs dim");
  refused("LogSoftmax()", 1, "logsoftmax needs dim");
  refused("softmax(2)", 1, "dim 2 out of range");
  refused("softmax(-3)", 1, "dim -3 out of range");
  refused("logsoftmax(4)", 3, "dim 4 out of range");
  refused("softmax(0)", 3, "dim 0 is the batch's");
  refused("logsoftmax(dim=-4)", 3, "dim -4 is the batch's");
  refused("softplus(beta=-1)", 1, "beta = -1: must be > 0");
  refused("softplus(0)", 1, "beta = 0: must be > 0");
  refused("leakyrelu(slope=1)", 1, "leakyrelu takes no argument slope");
  /* arguments a float cannot hold */
  refused("softplus(1e-300)", 1, "beta = 1e-300: out of a float's range");
  refused("softplus(1e39)", 1, "beta = 1e+39: out of a float's range");
  refused("softplus(threshold=-1e39)", 1,
          "threshold = -1e+39: out of a float's range");
  refused("leakyrelu(1e39)", 1,
          "negative_slope = 1e+39: out of a float's range");
  refused("elu(-1e300)", 1, "alpha = -1e+300: out of a float's range");
  refused("elu(1, 2)", 1, "elu takes 1 positional argument");
  refused("identity(1)", 1, "identity takes 0 positional arguments");
  /* and the kit's own check, for callers that skip the table */
  lk_nn *nn = NULL;
  float v = 1;
  assert_int_equal(lk_nn_create(&nn, 1, 0), 0);
  assert_int_equal(lk_nn_softplus_forward(nn, &v, &v, 1, -1.0f, 20.0f),
                   LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "softplus"));
  assert_int_equal(lk_nn_softmax_dim_forward(nn, &v, &v, 1, 0, 1), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "softmax"));
  lk_nn_free(nn);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(against_torch), cmocka_unit_test(threads),
      cmocka_unit_test(coverage), cmocka_unit_test(errors)};
  return cmocka_run_group_tests(tests, load_refs, free_refs);
}
