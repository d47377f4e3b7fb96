/* The gpt plugin against torch 1.13 (tests/data/gpt.ref, written by
 * tests/torch/gpt_reference.py: nanoGPT's model with the tanh GELU):
 *
 * 1. for each case the plugin is created in a run without data or run
 *    directory, its parameters are set to the reference's (by name: the
 *    names are nanoGPT's state_dict's), and on the reference's batch the
 *    training step's loss, predict_step's logits and every gradient of
 *    backward must match;
 * 2. the same at 1 and 2 threads, bit for bit, and backward's scale: 0.5
 *    gives exactly half of every gradient.
 *
 * Tolerance, per element: |got - want| <= 1e-5 * max(|want|, 0.1 max|want|),
 * test_nn.c's for one layer (measured: the worst error is 0.4 of it, in
 * ln_2.bias's gradient; LK_GPT_VERBOSE=1 prints each tensor's). */
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

#define RTOL 1e-5
#define FLOOR 0.1
#define MAX_TENSORS 128

typedef struct tensor {
  char name[96];
  size_t n;
  double *v;
} tensor;

typedef struct ref_case {
  char name[48];
  char params[256];
  tensor t[MAX_TENSORS];
  size_t nt;
} ref_case;

static ref_case cases[8];
static size_t ncases;

static int load_refs(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096], word[128];
  snprintf(path, sizeof path, "%s/gpt.ref", dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  ref_case *c = NULL;
  int ch;
  while (fscanf(f, "%127s", word) == 1) {
    if (word[0] == '#') {
      while ((ch = fgetc(f)) != EOF && ch != '\n')
        ;
    } else if (!strcmp(word, "case") && ncases < 8) {
      c = &cases[ncases++];
      if (fscanf(f, "%47s", c->name) != 1 ||
          !fgets(c->params, sizeof c->params, f))
        return -1;
    } else if (!strcmp(word, "t") && c && c->nt < MAX_TENSORS) {
      tensor *t = &c->t[c->nt++];
      if (fscanf(f, "%95s %zu", t->name, &t->n) != 2)
        return -1;
      t->v = malloc((t->n ? t->n : 1) * sizeof *t->v);
      for (size_t i = 0; i < t->n; i++)
        if (!t->v || fscanf(f, "%lf", &t->v[i]) != 1)
          return -1;
    } else if (!strcmp(word, "end"))
      c = NULL;
    else {
      fprintf(stderr, "%s: unexpected \"%s\"\n", path, word);
      return -1;
    }
  }
  fclose(f);
  return ncases > 0 ? 0 : -1;
}

static int free_refs(void **state) {
  (void)state;
  for (size_t i = 0; i < ncases; i++)
    for (size_t k = 0; k < cases[i].nt; k++)
      free(cases[i].t[k].v);
  return 0;
}

static const tensor *find(const ref_case *c, const char *name) {
  for (size_t i = 0; i < c->nt; i++)
    if (!strcmp(c->t[i].name, name))
      return &c->t[i];
  print_error("%s: no tensor %s\n", c->name, name);
  fail();
  return NULL;
}

static int param(const ref_case *c, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, " %s=", key);
  const char *p = strstr(c->params, pat);
  assert_non_null(p);
  return atoi(p + strlen(pat));
}

/* Elements of GOT [n] outside the tolerance of WANT; prints the first. */
static void expect_close(const char *what, const float *got,
                         const tensor *want) {
  double top = 0, worst = 0;
  for (size_t i = 0; i < want->n; i++)
    top = fmax(top, fabs(want->v[i]));
  size_t bad = 0;
  for (size_t i = 0; i < want->n; i++) {
    double tol = RTOL * fmax(fabs(want->v[i]), FLOOR * top);
    double err = fabs((double)got[i] - want->v[i]);
    worst = fmax(worst, tol > 0 ? err / tol : 0);
    if (!(err <= tol) && bad++ == 0)
      print_error("%s[%zu] = %.9g, expected %.9g (error %.3g, tolerance "
                  "%.3g)\n",
                  what, i, (double)got[i], want->v[i], err, tol);
  }
  if (getenv("LK_GPT_VERBOSE"))
    print_message("%s: worst error / tolerance %.3g\n", what, worst);
  assert_int_equal(bad, 0);
}

/* ---- one model ----------------------------------------------------------- */

typedef struct model {
  lk_run *run;
  const lk_descriptor *desc;
  void *self;
  lk_tensor *const *params;
  size_t n_params;
  lk_batch batch;
  int32_t *x, *y;
} model;

/* The case's model at THREADS threads, its parameters the reference's. */
static void open_model(model *m, const ref_case *c, int threads) {
  char text[1024];
  snprintf(text, sizeof text,
           "[loop]\nmax_steps = 1\nthreads = %d\n"
           "[plugins]\nstep = gpt\noptimizer = sgd\n"
           "[gpt]\nn_layer = %d\nn_head = %d\nn_embd = %d\nblock_size = %d\n"
           "vocab_size = %d\nbias = %s\n[sgd]\nlr = 0.1\n",
           threads, param(c, "n_layer"), param(c, "n_head"), param(c, "n_embd"),
           param(c, "block_size"), param(c, "vocab_size"),
           param(c, "bias") ? "true" : "false");
  lk_config *cfg;
  assert_int_equal(lk_config_parse("gpt-test.ini", text, &cfg), 0);
  lk_run_options o = {.no_run_dir = true, .verbosity = LK_LOG_ERROR};
  int rc = lk_run_new(cfg, &o, &m->run);
  lk_config_free(cfg);
  if (rc != 0)
    print_error("%s\n", lk_last_error());
  assert_int_equal(rc, 0);
  m->self = lk_run_instance(m->run, "step", &m->desc);
  assert_non_null(m->desc);
  m->params = lk_run_params(m->run, &m->n_params);
  size_t want = 0;
  for (size_t i = 0; i < c->nt; i++)
    want += !strncmp(c->t[i].name, "p.", 2);
  assert_int_equal(m->n_params, want); /* every parameter is nanoGPT's */
  for (size_t i = 0; i < m->n_params; i++) {
    char name[128];
    snprintf(name, sizeof name, "p.%s", m->params[i]->name);
    const tensor *t = find(c, name);
    assert_int_equal(t->n, m->params[i]->numel);
    float *d = m->params[i]->data;
    for (size_t k = 0; k < t->n; k++)
      d[k] = (float)t->v[k];
  }
  size_t B = (size_t)param(c, "B"), T = (size_t)param(c, "T");
  const tensor *x = find(c, "x"), *y = find(c, "y");
  m->x = malloc(B * T * sizeof *m->x);
  m->y = malloc(B * T * sizeof *m->y);
  assert_non_null(m->x);
  assert_non_null(m->y);
  for (size_t i = 0; i < B * T; i++)
    m->x[i] = (int32_t)x->v[i], m->y[i] = (int32_t)y->v[i];
  m->batch = (lk_batch){.split = LK_SPLIT_TRAIN,
                        .size = B,
                        .x = {.name = "x",
                              .dtype = LK_I32,
                              .ndim = 2,
                              .shape = {B, T},
                              .numel = B * T,
                              .data = m->x},
                        .y = {.name = "y",
                              .dtype = LK_I32,
                              .ndim = 2,
                              .shape = {B, T},
                              .numel = B * T,
                              .data = m->y}};
}

static void close_model(model *m) {
  lk_run_free(m->run);
  free(m->x);
  free(m->y);
}

/* A training step then backward at SCALE, the gradients zeroed first. */
static double step(model *m, double scale) {
  lk_step_result r = {0};
  int rc = m->desc->step->training_step(m->self, &m->batch, &r);
  if (rc != 0)
    print_error("%s\n", lk_last_error());
  assert_int_equal(rc, 0);
  assert_true(r.has_loss);
  for (size_t i = 0; i < m->n_params; i++)
    memset(m->params[i]->grad, 0, m->params[i]->numel * sizeof(float));
  assert_int_equal(m->desc->backward->backward(m->self, &m->batch, scale), 0);
  return r.loss;
}

static void against_torch(void **state) {
  (void)state;
  for (size_t ci = 0; ci < ncases; ci++) {
    const ref_case *c = &cases[ci];
    model m;
    open_model(&m, c, 1);
    double loss = step(&m, 1.0), want = find(c, "loss")->v[0];
    if (!(fabs(loss - want) <= 1e-5 * fabs(want))) {
      print_error("%s: loss %.9g, expected %.9g\n", c->name, loss, want);
      fail();
    }
    for (size_t i = 0; i < m.n_params; i++) {
      char name[128];
      snprintf(name, sizeof name, "g.%s", m.params[i]->name);
      expect_close(name, m.params[i]->grad, find(c, name));
    }
    lk_tensor logits;
    assert_non_null(m.desc->step->predict_step);
    assert_int_equal(m.desc->step->predict_step(m.self, &m.batch, &logits), 0);
    assert_int_equal(logits.dtype, LK_F32);
    assert_int_equal(logits.ndim, 2);
    assert_int_equal(logits.shape[0], (size_t)param(c, "B"));
    assert_int_equal(logits.shape[1], (size_t)param(c, "vocab_size"));
    expect_close("logits_last", logits.data, find(c, "logits_last"));
    /* after predict, the activations are no training step's */
    assert_int_not_equal(m.desc->backward->backward(m.self, &m.batch, 1.0), 0);
    close_model(&m);
  }
}

/* The same bits at 1 and 2 threads; scale 0.5 halves every gradient
 * exactly (a power of two changes no rounding). */
static void threads_and_scale(void **state) {
  (void)state;
  for (size_t ci = 0; ci < ncases; ci++) {
    const ref_case *c = &cases[ci];
    model a, b;
    open_model(&a, c, 1);
    open_model(&b, c, 2);
    double la = step(&a, 1.0), lb = step(&b, 1.0);
    assert_memory_equal(&la, &lb, sizeof la);
    for (size_t i = 0; i < a.n_params; i++)
      assert_memory_equal(a.params[i]->grad, b.params[i]->grad,
                          a.params[i]->numel * sizeof(float));
    step(&b, 0.5);
    for (size_t i = 0; i < a.n_params; i++) {
      const float *g = a.params[i]->grad, *h = b.params[i]->grad;
      for (size_t k = 0; k < a.params[i]->numel; k++)
        assert_true(h[k] == 0.5f * g[k]);
    }
    close_model(&a);
    close_model(&b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(against_torch),
      cmocka_unit_test(threads_and_scale),
  };
  return cmocka_run_group_tests(tests, load_refs, free_refs);
}
