/* The layer kit's losses (lk_nn_crossentropy_ex, lk_nn_nll, lk_nn_mse,
 * lk_nn_l1, lk_nn_smooth_l1, lk_nn_huber, lk_nn_bce_with_logits) against
 * torch 1.13 (tests/data/losses.ref, written by
 * tests/torch/losses_reference.py): each loss's value and input gradient,
 * with and without each option, to 1e-6 relative; the same bits at 1 and
 * 3 threads; gradients added to what the array holds; wrong arguments
 * refused with a message. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h>

#define RTOL 1e-6

typedef struct tensor {
  char name[32];
  size_t n;
  double *v;
} tensor;

typedef struct ref_case {
  char name[64], loss[32], params[256];
  tensor t[8];
  size_t nt;
} ref_case;

static ref_case cases[32];
static size_t ncases;

static int load_refs(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096], word[64];
  snprintf(path, sizeof path, "%s/losses.ref",
           dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  ref_case *c = NULL;
  while (fscanf(f, "%63s", word) == 1) {
    if (word[0] == '#') {
      fscanf(f, "%*[^\n]");
    } else if (strcmp(word, "case") == 0 && ncases < 32) {
      c = &cases[ncases++];
      if (fscanf(f, "%63s loss=%31s %255[^\n]", c->name, c->loss, c->params) !=
          3)
        break;
    } else if (strcmp(word, "t") == 0 && c && c->nt < 8) {
      tensor *t = &c->t[c->nt++];
      if (fscanf(f, "%31s %zu", t->name, &t->n) != 2)
        break;
      t->v = malloc(t->n * sizeof *t->v);
      for (size_t i = 0; t->v && i < t->n; i++)
        if (fscanf(f, "%lf", &t->v[i]) != 1)
          return -1;
    }
  }
  fclose(f);
  return ncases >= 16 ? 0 : -1;
}

static int free_refs(void **state) {
  (void)state;
  for (size_t i = 0; i < ncases; i++)
    for (size_t k = 0; k < cases[i].nt; k++)
      free(cases[i].t[k].v);
  return 0;
}

static const tensor *find(const ref_case *c, const char *name) {
  for (size_t k = 0; k < c->nt; k++)
    if (strcmp(c->t[k].name, name) == 0)
      return &c->t[k];
  return NULL;
}

static double param(const ref_case *c, const char *key) {
  char pat[40];
  snprintf(pat, sizeof pat, "%s=", key);
  const char *p = strstr(c->params, pat);
  assert_non_null(p);
  return atof(p + strlen(pat));
}

static float *floats(const tensor *t) {
  if (!t)
    return NULL;
  float *v = malloc(t->n * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < t->n; i++)
    v[i] = (float)t->v[i];
  return v;
}

static int32_t *ints(const tensor *t) {
  int32_t *v = malloc(t->n * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < t->n; i++)
    v[i] = (int32_t)t->v[i];
  return v;
}

/* Runs case C's loss on a context of THREADS threads: *loss and dinp. */
static int run(const ref_case *c, int threads, double *loss, float *dinp) {
  lk_nn *nn = NULL;
  assert_int_equal(lk_nn_create(&nn, threads, 0), 0);
  const tensor *inp = find(c, "inp"), *tg = find(c, "target");
  int N = (int)param(c, "N"), W = (int)param(c, "W");
  float dloss = (float)param(c, "dloss");
  float *x = floats(inp), *t = floats(tg), *w = floats(find(c, "weight"));
  float *pw = floats(find(c, "pos_weight"));
  int32_t *y = ints(tg);
  size_t n = inp->n, hits;
  int rc = -1, correct;
  const char *L = c->loss;
  if (strcmp(L, "mse") == 0)
    rc = lk_nn_mse(nn, loss, dinp, x, t, n, dloss);
  else if (strcmp(L, "l1") == 0)
    rc = lk_nn_l1(nn, loss, dinp, x, t, n, dloss);
  else if (strcmp(L, "smooth_l1") == 0)
    rc = lk_nn_smooth_l1(nn, loss, dinp, x, t, n, (float)param(c, "beta"),
                         dloss);
  else if (strcmp(L, "huber") == 0)
    rc = lk_nn_huber(nn, loss, dinp, x, t, n, (float)param(c, "delta"), dloss);
  else if (strcmp(L, "bce_with_logits") == 0)
    rc = lk_nn_bce_with_logits(nn, loss, dinp, x, t, n, pw, (size_t)W, dloss,
                               &hits);
  else if (strcmp(L, "nll") == 0)
    rc = lk_nn_nll(nn, loss, dinp, x, y, N, W, w, dloss, &correct);
  else if (strcmp(L, "cross_entropy") == 0)
    rc = lk_nn_crossentropy_ex(nn, loss, dinp, x, y, N, W, w,
                               (float)param(c, "label_smoothing"), dloss,
                               &correct);
  if (rc != 0)
    print_error("%s: %s\n", c->name, lk_last_error());
  free(x), free(t), free(w), free(pw), free(y);
  lk_nn_free(nn);
  return rc;
}

/* To RTOL of WANT, or of SCALE / 10 (the largest value of its tensor)
 * where WANT is smaller: torch computes in f32, and a gradient such as
 * sigmoid(x) - t loses digits to cancellation when it is small. */
static bool close_to(double got, double want, double scale) {
  double m = fabs(want) > scale / 10 ? fabs(want) : scale / 10;
  return fabs(got - want) <= RTOL * m + 1e-12;
}

static double largest(const tensor *t) {
  double m = 0;
  for (size_t i = 0; i < t->n; i++)
    m = fabs(t->v[i]) > m ? fabs(t->v[i]) : m;
  return m;
}

static void against_torch(void **state) {
  (void)state;
  for (size_t i = 0; i < ncases; i++) {
    const ref_case *c = &cases[i];
    const tensor *v = find(c, "value"), *d = find(c, "dinp");
    assert_non_null(v);
    assert_non_null(d);
    float *g1 = calloc(d->n, sizeof *g1), *g3 = calloc(d->n, sizeof *g3);
    assert_non_null(g1);
    assert_non_null(g3);
    double l1, l3;
    assert_int_equal(run(c, 1, &l1, g1), 0);
    assert_int_equal(run(c, 3, &l3, g3), 0);
    if (!close_to(l1, v->v[0], 0)) {
      print_error("%s: loss %.9g, torch %.9g\n", c->name, l1, v->v[0]);
      fail();
    }
    for (size_t k = 0; k < d->n; k++)
      if (!close_to(g1[k], d->v[k], largest(d))) {
        print_error("%s: dinp[%zu] %.9g, torch %.9g\n", c->name, k,
                    (double)g1[k], d->v[k]);
        fail();
      }
    /* the same bits at any thread count */
    assert_true(memcmp(&l1, &l3, sizeof l1) == 0);
    assert_memory_equal(g1, g3, d->n * sizeof *g1);
    /* the gradient is added to what the array holds */
    assert_int_equal(run(c, 2, &l3, g3), 0);
    for (size_t k = 0; k < d->n; k++)
      assert_true(close_to(g3[k], 2.0 * g1[k], 0));
    free(g1);
    free(g3);
  }
}

/* Without options, the extended cross-entropy is lk_nn_crossentropy. */
static void crossentropy_plain(void **state) {
  (void)state;
  for (size_t i = 0; i < ncases; i++) {
    const ref_case *c = &cases[i];
    if (strcmp(c->name, "cross_entropy") != 0)
      continue;
    lk_nn *nn = NULL;
    assert_int_equal(lk_nn_create(&nn, 1, 0), 0);
    const tensor *inp = find(c, "inp"), *d = find(c, "dinp");
    float *x = floats(inp), *g = calloc(d->n, sizeof *g);
    int32_t *y = ints(find(c, "target"));
    double loss;
    int correct = -1, hits = -2;
    assert_int_equal(lk_nn_crossentropy(nn, &loss, g, x, y, (int)param(c, "N"),
                                        (int)param(c, "W"),
                                        (float)param(c, "dloss"), &correct),
                     0);
    assert_true(close_to(loss, find(c, "value")->v[0], 0));
    assert_int_equal(
        lk_nn_crossentropy_ex(nn, &loss, NULL, x, y, (int)param(c, "N"),
                              (int)param(c, "W"), NULL, 0, 1, &hits),
        0);
    assert_int_equal(correct, hits);
    free(x), free(g), free(y);
    lk_nn_free(nn);
    return;
  }
  fail();
}

static void errors(void **state) {
  (void)state;
  lk_nn *nn = NULL;
  assert_int_equal(lk_nn_create(&nn, 1, 0), 0);
  float x[4] = {0, 1, 2, 3}, t[4] = {0};
  int32_t y[2] = {0, 7};
  double loss;
  assert_true(lk_nn_huber(nn, &loss, NULL, x, t, 4, 0, 1) < 0);
  assert_non_null(strstr(lk_last_error(), "delta"));
  assert_true(lk_nn_smooth_l1(nn, &loss, NULL, x, t, 4, -1, 1) < 0);
  assert_non_null(strstr(lk_last_error(), "beta"));
  assert_true(lk_nn_mse(nn, &loss, NULL, x, t, 0, 1) < 0);
  assert_true(
      lk_nn_bce_with_logits(nn, &loss, NULL, x, t, 4, NULL, 3, 1, NULL) < 0);
  assert_true(lk_nn_nll(nn, &loss, NULL, x, y, 2, 2, NULL, 1, NULL) < 0);
  assert_non_null(strstr(lk_last_error(), "target 7 of row 1"));
  assert_true(
      lk_nn_crossentropy_ex(nn, &loss, NULL, x, y, 2, 2, NULL, 0, 1, NULL) < 0);
  y[1] = 1;
  float zero[2] = {0, 0};
  assert_true(
      lk_nn_crossentropy_ex(nn, &loss, NULL, x, y, 2, 2, zero, 0, 1, NULL) < 0);
  assert_non_null(strstr(lk_last_error(), "sum to 0"));
  assert_true(lk_nn_crossentropy_ex(nn, &loss, NULL, x, y, 2, 2, NULL, 1.5f, 1,
                                    NULL) < 0);
  assert_non_null(strstr(lk_last_error(), "label_smoothing"));
  lk_nn_free(nn);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(against_torch),
      cmocka_unit_test(crossentropy_plain),
      cmocka_unit_test(errors),
  };
  return cmocka_run_group_tests_name("losses", tests, load_refs, free_refs);
}
