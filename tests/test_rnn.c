/* The recurrent layers of issue 27 (lstm, gru) against torch 1.13
 * (tests/data/rnn.ref, written by tests/torch/rnn_reference.py: torch's
 * nn.LSTM and nn.GRU, batch_first, in f64 on f32 inputs and parameters):
 * 1 and 2 layers, bidirectional, without biases; their parameters' names
 * and shapes as torch's, in torch's order; the output, the input's
 * gradient and every parameter's gradient to 1e-5 relative; the same bits
 * at 1, 2 and 3 threads on a batch and a state large enough to be cut
 * among them; gradients that add to what they hold; the configurations a
 * layer cannot hold refused naming the argument; dropout between layers
 * in training only; and `last`, the last step of a sequence. */
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
/* a value that is a sum with cancellation (a gradient over N T steps) is
 * held to 1e-5 of FLOOR times the tensor's largest, when that is more: its
 * f32 rounding scales with its terms, not with it (test_nn.c's way) */
#define FLOOR 1e-1
#define MAX_CASES 32
#define MAX_T 40

typedef struct tensor {
  char name[40];
  size_t n;
  float *v;  /* as read into a float: x, dy, the parameters */
  double *r; /* as read: torch's results, in f64 */
} tensor;

typedef struct ref_case {
  char text[64];
  int n, T, C, nt;
  tensor t[MAX_T];
} ref_case;

static ref_case cases[MAX_CASES];
static size_t ncases;

static const tensor *named(const ref_case *c, const char *name) {
  for (int k = 0; k < c->nt; k++)
    if (!strcmp(c->t[k].name, name))
      return &c->t[k];
  fail_msg("%s: no tensor %s in the reference", c->text, name);
  return NULL;
}

static int load_refs(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096], word[64];
  snprintf(path, sizeof path, "%s/rnn.ref", dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  ref_case *c = NULL;
  while (fscanf(f, "%63s", word) == 1) {
    if (word[0] == '#') {
      if (fscanf(f, "%*[^\n]") < 0)
        break;
    } else if (!strcmp(word, "case") && ncases < MAX_CASES) {
      c = &cases[ncases++];
      if (fscanf(f, "%63s %d %d %d", c->text, &c->n, &c->T, &c->C) != 4)
        goto bad;
    } else if (!strcmp(word, "t") && c && c->nt < MAX_T) {
      tensor *t = &c->t[c->nt++];
      if (fscanf(f, "%39s %zu", t->name, &t->n) != 2 || t->n == 0 ||
          t->n > 1000000)
        goto bad;
      t->v = malloc(t->n * sizeof *t->v);
      t->r = malloc(t->n * sizeof *t->r);
      if (!t->v || !t->r)
        goto bad;
      for (size_t i = 0; i < t->n; i++) {
        if (fscanf(f, "%lf", &t->r[i]) != 1)
          goto bad;
        t->v[i] = (float)t->r[i];
      }
    } else if (strcmp(word, "end") != 0)
      goto bad;
  }
  fclose(f);
  return ncases ? 0 : -1;
bad:
  fprintf(stderr, "%s: malformed near %s\n", path, word);
  fclose(f);
  return -1;
}

static int free_refs(void **state) {
  (void)state;
  for (size_t k = 0; k < ncases; k++)
    for (int j = 0; j < cases[k].nt; j++)
      free(cases[k].t[j].v), free(cases[k].t[j].r);
  return 0;
}

/* A layer with its parameters, as sequential makes them. */
typedef struct net {
  lk_layer l;
  lk_tensor t[LK_LAYER_MAX_TENSORS];
  lk_layer_tensor decl[LK_LAYER_MAX_TENSORS];
} net;

static void make(net *m, const char *text, int T, int C, int n) {
  memset(m, 0, sizeof *m);
  if (lk_layer_parse(&m->l, text, strlen(text)) != 0)
    fail_msg("%s: %s", text, lk_last_error());
  lk_layer_shape in = {.dtype = LK_F32, .ndim = 2, .d = {T, C}};
  if (lk_layer_infer(&m->l, 1, &in) != 0)
    fail_msg("%s: %s", text, lk_last_error());
  m->l.n_t = m->l.type->tensors(&m->l, m->decl);
  for (int k = 0; k < m->l.n_t; k++) {
    lk_tensor *t = &m->t[k];
    t->name = m->decl[k].name;
    t->dtype = LK_F32;
    t->ndim = (size_t)m->decl[k].ndim;
    t->numel = 1;
    for (int d = 0; d < m->decl[k].ndim; d++)
      t->shape[d] = m->decl[k].shape[d], t->numel *= t->shape[d];
    t->data = calloc(t->numel, sizeof(float));
    t->grad = calloc(t->numel, sizeof(float));
    assert_true(t->data && t->grad);
    m->l.t[k] = t;
  }
  assert_int_equal(lk_layer_bind(&m->l), 0);
  if (lk_layer_reserve(&m->l, (size_t)n) != 0)
    fail_msg("%s: %s", text, lk_last_error());
}

static void unmake(net *m) {
  for (int k = 0; k < m->l.n_t; k++)
    free(m->t[k].data), free(m->t[k].grad);
  lk_layer_free(&m->l);
}

/* forward (training) and backward on THREADS threads (< 0: -THREADS on the
 * portable kernels) */
static void run(net *m, int threads, int n, const float *x, const float *dy,
                float *y, float *dx) {
  lk_nn *nn = NULL;
  assert_int_equal(
      lk_nn_create(&nn, abs(threads), threads < 0 ? LK_NN_PORTABLE : 0), 0);
  const float *xs[1] = {x};
  float *dxs[1] = {dx};
  if (m->l.type->forward(&m->l, nn, y, xs, n, true, NULL) != 0 ||
      m->l.type->backward(&m->l, nn, dxs, dy, xs, y, n) != 0)
    fail_msg("%s: %s", m->l.type->name, lk_last_error());
  lk_nn_free(nn);
}

static void check(const ref_case *c, const char *what, const float *got,
                  const tensor *want) {
  double top = 0;
  for (size_t i = 0; i < want->n; i++)
    top = fmax(top, FLOOR * fabs(want->r[i]));
  for (size_t i = 0; i < want->n; i++) {
    double d = fabs((double)got[i] - want->r[i]);
    if (!(d <= RTOL * fmax(fabs(want->r[i]), top)))
      fail_msg("%s: %s[%zu] = %.9g, torch %.17g", c->text, what, i,
               (double)got[i], want->r[i]);
  }
}

static void against_torch(void **state) {
  (void)state;
  for (size_t k = 0; k < ncases; k++) {
    const ref_case *c = &cases[k];
    net m;
    make(&m, c->text, c->T, c->C, c->n);
    const tensor *x = named(c, "x"), *dy = named(c, "dy"), *y = named(c, "y");
    assert_int_equal(m.l.out_numel * (size_t)c->n, y->n);
    /* torch's parameters, in torch's order: x, dy, then them */
    int params = 0;
    while (strcmp(c->t[2 + params].name, "y") != 0)
      params++;
    assert_int_equal(m.l.n_t, params);
    for (int j = 0; j < params; j++) {
      const tensor *p = &c->t[2 + j];
      if (strcmp(m.decl[j].name, p->name) != 0 || m.t[j].numel != p->n)
        fail_msg("%s: parameter %d is %s [%zu], torch's %s [%zu]", c->text, j,
                 m.decl[j].name, m.t[j].numel, p->name, p->n);
      memcpy(m.t[j].data, p->v, p->n * sizeof(float));
    }
    float *out = malloc(y->n * sizeof *out);
    float *dx = calloc(x->n, sizeof *dx);
    assert_true(out && dx);
    run(&m, 1, c->n, x->v, dy->v, out, dx);
    check(c, "y", out, y);
    check(c, "dx", dx, named(c, "dx"));
    for (int j = 0; j < params; j++) {
      char g[64];
      snprintf(g, sizeof g, "grad.%s", m.decl[j].name);
      check(c, g, m.t[j].grad, named(c, g));
    }
    /* again: every gradient twice what it was (they add) */
    float *dx2 = malloc(x->n * sizeof *dx2);
    float *g1 = malloc(m.t[0].numel * sizeof *g1);
    assert_true(dx2 && g1);
    memcpy(dx2, dx, x->n * sizeof *dx);
    memcpy(g1, m.t[0].grad, m.t[0].numel * sizeof *g1);
    run(&m, 2, c->n, x->v, dy->v, out, dx2);
    for (size_t i = 0; i < x->n; i++) /* bidirectional: two sums, rounded */
      if (fabsf(dx2[i] - 2 * dx[i]) > 1e-6f * fabsf(dx[i]))
        fail_msg("%s: dx[%zu] not added to", c->text, i);
    for (size_t i = 0; i < m.t[0].numel; i++)
      if (((float *)m.t[0].grad)[i] != 2 * g1[i])
        fail_msg("%s: %s's gradient not added to", c->text, m.decl[0].name);
    free(out), free(dx), free(dx2), free(g1);
    unmake(&m);
  }
}

/* every case's text in the reference: lstm and gru, 1 and 2 layers,
 * bidirectional, without biases */
static void coverage(void **state) {
  (void)state;
  const char *want[] = {"lstm(3)",
                        "lstm(3,2)",
                        "lstm(3,bidirectional=true)",
                        "lstm(3,bias=false)",
                        "lstm(3,2,bias=false,bidirectional=true)",
                        "gru(3)",
                        "gru(3,2)",
                        "gru(3,bidirectional=true)",
                        "gru(3,bias=false)",
                        "gru(3,2,bias=false,bidirectional=true)"};
  for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
    size_t k = 0;
    while (k < ncases && strcmp(cases[k].text, want[w]) != 0)
      k++;
    if (k == ncases)
      fail_msg("no reference case %s", want[w]);
  }
}

/* a value in [-1, 1) from a counter */
static float noise(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

/* 2 layers, bidirectional, 130 units and 9 rows: several blocks of rows
 * and of units a step; the same bits at 1, 2 and 3 threads */
static void threads(void **state) {
  (void)state;
  const char *texts[] = {"lstm(130,2,dropout=0)",
                         "gru(130,bidirectional=true)"};
  const int n = 9, T = 5, C = 7;
  for (size_t k = 0; k < 2; k++) {
    net m[3];
    float *y[3], *dx[3];
    uint32_t s = 7;
    size_t xn = (size_t)n * T * C;
    float *x = malloc(xn * sizeof *x), *dy = NULL;
    assert_non_null(x);
    for (size_t i = 0; i < xn; i++)
      x[i] = noise(&s);
    const int th[3] = {1, 2, 3};
    for (int r = 0; r < 3; r++) {
      make(&m[r], texts[k], T, C, n);
      uint32_t ps = 11;
      for (int j = 0; j < m[r].l.n_t; j++)
        for (size_t i = 0; i < m[r].t[j].numel; i++)
          ((float *)m[r].t[j].data)[i] = 0.3f * noise(&ps);
      size_t yn = (size_t)n * m[r].l.out_numel;
      if (!dy) {
        assert_non_null(dy = malloc(yn * sizeof *dy));
        for (size_t i = 0; i < yn; i++)
          dy[i] = noise(&s);
      }
      y[r] = malloc(yn * sizeof *y[r]);
      dx[r] = calloc(xn, sizeof *dx[r]);
      assert_true(y[r] && dx[r]);
      run(&m[r], th[r], n, x, dy, y[r], dx[r]);
      if (r == 0)
        continue;
      if (memcmp(y[0], y[r], yn * sizeof *y[0]) ||
          memcmp(dx[0], dx[r], xn * sizeof *dx[0]))
        fail_msg("%s: 1 and %d threads differ", texts[k], th[r]);
      for (int j = 0; j < m[r].l.n_t; j++)
        if (memcmp(m[0].t[j].grad, m[r].t[j].grad,
                   m[r].t[j].numel * sizeof(float)))
          fail_msg("%s: %s's gradient at 1 and %d threads differ", texts[k],
                   m[r].decl[j].name, th[r]);
    }
    for (int r = 0; r < 3; r++)
      free(y[r]), free(dx[r]), unmake(&m[r]);
    free(x), free(dy);
  }
}

/* dropout between layers: in training only (evaluation: dropout = 0's
 * output, bit for bit), and then it changes the output, and the backward
 * goes through it (the input's gradient differs from dropout = 0's) */
static void dropout(void **state) {
  (void)state;
  const int n = 4, T = 5, C = 3;
  net m[2];
  const char *texts[2] = {"lstm(6,2,dropout=0.5)", "lstm(6,2)"};
  uint32_t s = 3;
  float x[4 * 5 * 3], dy[4 * 5 * 6], y[2][4 * 5 * 6], ye[2][4 * 5 * 6];
  float dx[2][4 * 5 * 3] = {{0}};
  for (size_t i = 0; i < sizeof x / sizeof *x; i++)
    x[i] = noise(&s);
  for (size_t i = 0; i < sizeof dy / sizeof *dy; i++)
    dy[i] = noise(&s);
  lk_nn *nn = NULL;
  assert_int_equal(lk_nn_create(&nn, 1, 0), 0);
  for (int r = 0; r < 2; r++) {
    make(&m[r], texts[r], T, C, n);
    uint32_t ps = 5;
    for (int j = 0; j < m[r].l.n_t; j++)
      for (size_t i = 0; i < m[r].t[j].numel; i++)
        ((float *)m[r].t[j].data)[i] = 0.5f * noise(&ps);
    const float *xs[1] = {x};
    float *dxs[1] = {dx[r]};
    lk_rng rng;
    lk_rng_seed(&rng, 1, 0);
    assert_int_equal(
        m[r].l.type->forward(&m[r].l, nn, ye[r], xs, n, false, NULL), 0);
    assert_int_equal(m[r].l.type->forward(&m[r].l, nn, y[r], xs, n, true, &rng),
                     0);
    assert_int_equal(m[r].l.type->backward(&m[r].l, nn, dxs, dy, xs, y[r], n),
                     0);
  }
  assert_memory_equal(ye[0], ye[1], sizeof ye[0]);
  assert_memory_equal(ye[1], y[1], sizeof y[1]);
  assert_true(memcmp(y[0], y[1], sizeof y[0]) != 0);
  assert_true(memcmp(dx[0], dx[1], sizeof dx[0]) != 0);
  for (int r = 0; r < 2; r++)
    unmake(&m[r]);
  lk_nn_free(nn);
}

/* a net's first layer gets no input gradient (dx NULL): the parameters'
 * gradients are those of a backward that computes it, bit for bit */
static void no_dx(void **state) {
  (void)state;
  const char *texts[] = {"lstm(4)", "gru(4,2)", "lstm(3,bidirectional=true)"};
  const int n = 3, T = 4, C = 2;
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
    net m[2];
    float x[3 * 4 * 2], dy[3 * 4 * 8], y[3 * 4 * 8], dx[3 * 4 * 2] = {0};
    uint32_t s = 9;
    for (size_t i = 0; i < sizeof x / sizeof *x; i++)
      x[i] = noise(&s);
    for (size_t i = 0; i < sizeof dy / sizeof *dy; i++)
      dy[i] = noise(&s);
    lk_nn *nn = NULL;
    assert_int_equal(lk_nn_create(&nn, 1, 0), 0);
    for (int r = 0; r < 2; r++) {
      make(&m[r], texts[k], T, C, n);
      uint32_t ps = 5;
      for (int j = 0; j < m[r].l.n_t; j++)
        for (size_t i = 0; i < m[r].t[j].numel; i++)
          ((float *)m[r].t[j].data)[i] = 0.5f * noise(&ps);
      const float *xs[1] = {x};
      float *dxs[1] = {r ? NULL : dx};
      assert_int_equal(m[r].l.type->forward(&m[r].l, nn, y, xs, n, true, NULL),
                       0);
      assert_int_equal(m[r].l.type->backward(&m[r].l, nn, dxs, dy, xs, y, n),
                       0);
    }
    for (int j = 0; j < m[0].l.n_t; j++)
      assert_memory_equal(m[0].t[j].grad, m[1].t[j].grad,
                          m[0].t[j].numel * sizeof(float));
    for (int r = 0; r < 2; r++)
      unmake(&m[r]);
    lk_nn_free(nn);
  }
}

/* the kernels' checks: NULL arrays and sizes refused, naming the kernel */
static void kernel_checks(void **state) {
  (void)state;
  lk_nn *nn = NULL;
  assert_int_equal(lk_nn_create(&nn, 1, 0), 0);
  float a[64] = {0};
  assert_int_equal(lk_nn_lstm_forward(nn, a, 2, a, a, a, a, a, NULL, NULL, 1, 1,
                                      1, 2, false),
                   0);
  assert_int_equal(lk_nn_lstm_forward(nn, a, 1, a, a, a, a, a, NULL, NULL, 1, 1,
                                      1, 2, false),
                   LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "lstm: sizes"));
  assert_int_equal(lk_nn_gru_forward(nn, NULL, 2, a, a, a, a, a, NULL, NULL, 1,
                                     1, 1, 2, false),
                   LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "gru: h is NULL"));
  assert_int_equal(lk_nn_gru_backward(nn, NULL, NULL, NULL, NULL, NULL, a, 2, a,
                                      a, a, a, a, a, 0, 1, 1, 2, false),
                   LK_EINVAL);
  assert_int_equal(lk_nn_lstm_backward(nn, NULL, NULL, NULL, NULL, NULL, a, 2,
                                       a, a, a, a, a, a, 65536, 65536, 1, 2,
                                       false),
                   LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "too large"));
  lk_nn_free(nn);
}

/* what a layer cannot be: each refused with a message naming the cause */
static void refused(void **state) {
  (void)state;
  lk_layer l;
  const char *bad[] = {"lstm(0)", "gru", "lstm(4,dropout=1)",
                       "gru(4,num_layers=0)"};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
    if (lk_layer_parse(&l, bad[k], strlen(bad[k])) == 0)
      fail_msg("%s parsed", bad[k]);
  /* an image: not a sequence */
  assert_int_equal(lk_layer_parse(&l, "lstm(4)", 7), 0);
  lk_layer_shape img = {.dtype = LK_F32, .ndim = 3, .d = {1, 4, 4}};
  assert_int_equal(lk_layer_infer(&l, 1, &img), LK_ECONFIG);
  assert_non_null(strstr(lk_last_error(), "expected a sequence [T, C]"));
  lk_layer_free(&l);
  /* 2 layers, 2 directions, biases: 16 parameters, more than a layer holds */
  const char *big = "gru(4,2,bidirectional=true)";
  assert_int_equal(lk_layer_parse(&l, big, strlen(big)), 0);
  lk_layer_shape seq = {.dtype = LK_F32, .ndim = 2, .d = {3, 2}};
  assert_int_equal(lk_layer_infer(&l, 1, &seq), LK_ECONFIG);
  assert_non_null(strstr(lk_last_error(), "16 parameters"));
  lk_layer_free(&l);
  /* input_size given and not the input's */
  assert_int_equal(lk_layer_parse(&l, "lstm(4,input_size=3)", 20), 0);
  assert_int_equal(lk_layer_infer(&l, 1, &seq), LK_ECONFIG);
  assert_non_null(strstr(lk_last_error(), "input_size = 3"));
  lk_layer_free(&l);
}

/* last: [T, C] -> [C], out[:, -1, :]; its backward adds dy there only */
static void last(void **state) {
  (void)state;
  lk_layer l;
  assert_int_equal(lk_layer_parse(&l, "last", 4), 0);
  lk_layer_shape seq = {.dtype = LK_F32, .ndim = 2, .d = {3, 2}};
  assert_int_equal(lk_layer_infer(&l, 1, &seq), 0);
  assert_int_equal(l.out.ndim, 1);
  assert_int_equal(l.out.d[0], 2);
  const float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  float y[4], dx[12] = {0}, dy[4] = {1, 2, 3, 4};
  const float *xs[1] = {x};
  float *dxs[1] = {dx};
  assert_int_equal(l.type->forward(&l, NULL, y, xs, 2, true, NULL), 0);
  assert_true(y[0] == 5 && y[1] == 6 && y[2] == 11 && y[3] == 12);
  dx[4] = 1;
  assert_int_equal(l.type->backward(&l, NULL, dxs, dy, xs, y, 2), 0);
  const float want[12] = {0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 3, 4};
  assert_memory_equal(dx, want, sizeof want);
  lk_layer_shape img = {.dtype = LK_F32, .ndim = 3, .d = {1, 4, 4}};
  lk_layer_free(&l);
  assert_int_equal(lk_layer_parse(&l, "last", 4), 0);
  assert_int_equal(lk_layer_infer(&l, 1, &img), LK_ECONFIG);
  lk_layer_free(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(coverage),      cmocka_unit_test(against_torch),
      cmocka_unit_test(threads),       cmocka_unit_test(refused),
      cmocka_unit_test(last),          cmocka_unit_test(dropout),
      cmocka_unit_test(kernel_checks), cmocka_unit_test(no_dx),
  };
  return cmocka_run_group_tests(tests, load_refs, free_refs);
}
