/* The layer kit (loopkit/nn.h):
 *
 * 1. every layer against torch 1.13 (tests/data/nn.ref, written by
 *    tests/torch/nn_reference.py): forward outputs, saved statistics and
 *    every gradient, with the gradients added into buffers that already
 *    hold values (the kit adds), on one thread and three with the default
 *    library (oneDNN where the build has it), on two with OpenBLAS, on
 *    two with the portable code, on three with the kit's own product in
 *    the widest vectors; and wrongly configured layers
 *    against the same references, which must fail the comparison;
 * 2. the matrix product against a double-precision one, every case;
 * 3. every layer's backward against central differences;
 * 4. bit-identical results at 1, 2 and 3 threads, and from run to run;
 * 5. errors: bad sizes, bad indices, a workspace over its limit;
 * 6. dropout's masks: determined by the generator, which advances by one
 *    draw a call;
 * 7. the kernels in the CPU's widest vectors against the 16-byte ones (the
 *    same bits), and the pool under many small jobs.
 *
 * THE TOLERANCE against torch, element by element:
 *     |got - want| <= 1e-5 * max(|want|, 0.1 * max_j |want_j|)
 * i.e. 1e-5 relative for every element of at least a tenth of the
 * tensor's largest, and 1e-6 of the largest for the others: those are
 * sums with cancellation (products, the norms' gradients, 1 - tanh^2 near
 * saturation), whose rounding error scales with their terms, not with
 * the result, in torch as in the kit. Measured: the largest difference is
 * 1e-6 of a tensor's largest value (conv2d's dweight, sums of 432
 * products, torch's oneDNN against OpenBLAS), and the worst ratio to the
 * tolerance is printed (LK_NN_VERBOSE=1 prints it per comparison). A
 * wrong kernel is off by far more: wrong_layers_fail shows plausible
 * mistakes failing, down to one value off by 2e-5. */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h>

#define RTOL 1e-5
#define FLOOR 1e-1

/* ---- reference file ------------------------------------------------------ */

typedef struct tensor {
  char name[32];
  size_t n;
  float *v;
} tensor;

typedef struct ref_case {
  char name[48];
  char params[512];
  tensor t[16];
  size_t nt;
} ref_case;

static ref_case *cases;
static size_t ncases;

static int load_refs(void **state) {
  (void)state;
  const char *dir = getenv("LK_TEST_DATA");
  char path[4096];
  snprintf(path, sizeof path, "%s/nn.ref", dir && *dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open %s (set LK_TEST_DATA)\n", path);
    return -1;
  }
  size_t cap = 0;
  char word[64];
  ref_case *c = NULL;
  int ch;
  while (fscanf(f, "%63s", word) == 1) {
    if (word[0] == '#') {
      while ((ch = fgetc(f)) != EOF && ch != '\n')
        ;
    } else if (!strcmp(word, "case")) {
      if (ncases == cap) {
        cap = cap ? 2 * cap : 64;
        cases = realloc(cases, cap * sizeof *cases);
        if (!cases)
          return -1;
      }
      c = &cases[ncases++];
      memset(c, 0, sizeof *c);
      if (fscanf(f, "%47s", c->name) != 1 ||
          !fgets(c->params, sizeof c->params, f))
        return -1;
    } else if (!strcmp(word, "t") && c && c->nt < 16) {
      tensor *t = &c->t[c->nt++];
      if (fscanf(f, "%31s %zu", t->name, &t->n) != 2)
        return -1;
      t->v = malloc((t->n ? t->n : 1) * sizeof *t->v);
      for (size_t i = 0; i < t->n; i++) {
        double v;
        if (!t->v || fscanf(f, "%lf", &v) != 1)
          return -1;
        t->v[i] = (float)v;
      }
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
  free(cases);
  return 0;
}

static const ref_case *find_case(const char *name) {
  for (size_t i = 0; i < ncases; i++)
    if (!strcmp(cases[i].name, name))
      return &cases[i];
  print_error("no case %s in nn.ref\n", name);
  fail();
  return NULL;
}

static double param(const ref_case *c, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, " %s=", key);
  const char *p = strstr(c->params, pat);
  if (!p) {
    print_error("case %s has no %s\n", c->name, key);
    fail();
  }
  return strtod(p + strlen(pat), NULL);
}

static int iparam(const ref_case *c, const char *key) {
  return (int)param(c, key);
}

static const tensor *maybe(const ref_case *c, const char *name) {
  for (size_t i = 0; i < c->nt; i++)
    if (!strcmp(c->t[i].name, name))
      return &c->t[i];
  return NULL;
}

static size_t tensor_count(const ref_case *c, const char *name) {
  const tensor *t = maybe(c, name);
  if (!t) {
    print_error("case %s has no tensor %s\n", c->name, name);
    fail();
  }
  return t->n;
}

static const float *get(const ref_case *c, const char *name, size_t n) {
  const tensor *t = maybe(c, name);
  if (!t || t->n != n) {
    print_error("case %s: tensor %s %s (expected %zu values)\n", c->name, name,
                t ? "has another size" : "is missing", n);
    fail();
  }
  return t->v;
}

static int32_t *get_int(const ref_case *c, const char *name, size_t n) {
  const float *v = get(c, name, n);
  int32_t *r = malloc(n * sizeof *r);
  assert_non_null(r);
  for (size_t i = 0; i < n; i++)
    r[i] = (int32_t)v[i];
  return r;
}

/* ---- comparisons --------------------------------------------------------- */

static const char *label = ""; /* the configuration under test */
static double worst;           /* the largest error / tolerance seen */

/* How many elements are outside THE TOLERANCE; the first one is printed
 * unless QUIET. GOT[i] - BASE[i] is compared (BASE: what the buffer held
 * before a backward added into it; NULL: 0). */
static size_t mismatches(const char *what, const float *got, const float *base,
                         const float *want, size_t n, bool quiet) {
  double top = 0;
  for (size_t i = 0; i < n; i++)
    top = fmax(top, fabs(want[i]));
  size_t bad = 0;
  double worst_here = 0;
  for (size_t i = 0; i < n; i++) {
    double g = (double)got[i] - (base ? (double)base[i] : 0);
    double tol = RTOL * fmax(fabs(want[i]), FLOOR * top);
    double err = fabs(g - want[i]);
    if (tol > 0)
      worst_here = fmax(worst_here, err / tol);
    if (!(err <= tol) && !(isinf(want[i]) && g == want[i])) {
      if (!bad && !quiet)
        print_error("%s %s[%zu] = %.9g, expected %.9g (error %.3g, tolerance "
                    "%.3g)\n",
                    label, what, i, g, (double)want[i], err, tol);
      bad++;
    }
  }
  if (!quiet) {
    worst = fmax(worst, worst_here);
    if (getenv("LK_NN_VERBOSE")) {
      double nw = 0, big = 0;
      for (size_t i = 0; i < n; i++) {
        double g = (double)got[i] - (base ? (double)base[i] : 0);
        double err = fabs(g - want[i]);
        nw = fmax(nw, err / top);
        if (fabs(want[i]) > 0.1 * top)
          big = fmax(big, err / fabs(want[i]));
      }
      print_message("%s %s: worst error / tolerance %.3g (max err / max|want| "
                    "%.3g, relative err where |want| > max/10: %.3g)\n",
                    label, what, worst_here, nw, big);
    }
  }
  return bad;
}

static void expect_close(const char *what, const float *got, const float *want,
                         size_t n) {
  if (mismatches(what, got, NULL, want, n, false))
    fail();
}

/* A backward added into BUF, which held BASE before. */
static void expect_added(const char *what, const float *buf, const float *base,
                         const float *want, size_t n) {
  if (mismatches(what, buf, base, want, n, false))
    fail();
}

/* For the negative controls: GOT must be outside the tolerance. */
static void expect_differs(const char *what, const float *got,
                           const float *want, size_t n) {
  if (!mismatches(what, got, NULL, want, n, true)) {
    print_error("%s %s: a wrong configuration passed the comparison\n", label,
                what);
    fail();
  }
}

/* Deterministic values in [-1, 1). */
static float value(size_t i, unsigned salt) {
  uint32_t h = (uint32_t)(i * 2654435761u) ^ (salt * 40503u + 0x9e3779b9u);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return (float)((double)(h % 20001) / 10000.0 - 1.0);
}

static float *zeros(size_t n) {
  float *p = calloc(n ? n : 1, sizeof *p);
  assert_non_null(p);
  return p;
}

static float *copy(const float *v, size_t n) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  assert_non_null(p);
  memcpy(p, v, n * sizeof *p);
  return p;
}

/* A gradient buffer that already holds values of the gradient's size, and
 * a copy of them: the kit must add to them. */
typedef struct gbuf {
  float *buf, *base;
  size_t n;
} gbuf;

static gbuf prefilled(size_t n, const float *want, unsigned salt) {
  double top = 0;
  for (size_t i = 0; i < n; i++)
    top = fmax(top, fabs(want[i]));
  gbuf g = {zeros(n), zeros(n), n};
  for (size_t i = 0; i < n; i++)
    g.buf[i] = g.base[i] = (float)(0.5 * top) * value(i, salt);
  return g;
}

static void gfree(gbuf *g) {
  free(g->buf);
  free(g->base);
}

/* ---- contexts ------------------------------------------------------------ */

typedef struct config {
  const char *name;
  int threads;
  unsigned flags;
} config;

static const config configs[] = {{"1 thread", 1, 0},
                                 {"3 threads", 3, 0},
                                 {"OpenBLAS, 2 threads", 2, LK_NN_NO_ONEDNN},
                                 {"portable, 2 threads", 2, LK_NN_PORTABLE},
                                 {"no BLAS, 3 threads", 3, LK_NN_NO_BLAS}};
#define NCONFIGS (sizeof configs / sizeof configs[0])

static lk_nn *open_nn(int threads, unsigned flags) {
  lk_nn *nn = NULL;
  int rc = lk_nn_create(&nn, threads, flags);
  if (rc != 0)
    print_error("lk_nn_create: %s\n", lk_last_error());
  assert_int_equal(rc, 0);
  return nn;
}

#define OK(call)                                                               \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != 0) {                                                            \
      print_error("%s: %s returned %d: %s\n", label, #call, rc_,               \
                  lk_last_error());                                            \
      fail();                                                                  \
    }                                                                          \
  } while (0)

/* ---- 1. against torch ---------------------------------------------------- */

static void run_linear(lk_nn *nn, const ref_case *c) {
  int N = iparam(c, "N"), C = iparam(c, "C"), OC = iparam(c, "OC");
  bool has_bias = iparam(c, "bias");
  size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
  const float *x = get(c, "inp", ni), *w = get(c, "weight", nw);
  const float *b = has_bias ? get(c, "bias", (size_t)OC) : NULL;
  const float *dy = get(c, "dout", no);
  float *y = zeros(no);
  OK(lk_nn_linear_forward(nn, y, x, w, b, N, C, OC));
  expect_close("out", y, get(c, "out", no), no);
  gbuf dx = prefilled(ni, get(c, "dinp", ni), 1),
       dw = prefilled(nw, get(c, "dweight", nw), 2);
  gbuf db =
      prefilled((size_t)OC, has_bias ? get(c, "dbias", (size_t)OC) : w, 3);
  OK(lk_nn_linear_backward(nn, dx.buf, dw.buf, has_bias ? db.buf : NULL, dy, x,
                           w, N, C, OC));
  expect_added("dinp", dx.buf, dx.base, get(c, "dinp", ni), ni);
  expect_added("dweight", dw.buf, dw.base, get(c, "dweight", nw), nw);
  if (has_bias)
    expect_added("dbias", db.buf, db.base, get(c, "dbias", (size_t)OC),
                 (size_t)OC);
  /* no input gradient (a first layer): the others are unchanged */
  float *dw2 = zeros(nw);
  OK(lk_nn_linear_backward(nn, NULL, dw2, NULL, dy, x, NULL, N, C, OC));
  expect_close("dweight without dinp", dw2, get(c, "dweight", nw), nw);
  free(dw2);
  free(y);
  gfree(&dx);
  gfree(&dw);
  gfree(&db);
}

static lk_nn_conv2d conv_of(const ref_case *c) {
  return (lk_nn_conv2d){.n = iparam(c, "N"),
                        .c = iparam(c, "C"),
                        .h = iparam(c, "H"),
                        .w = iparam(c, "W"),
                        .oc = iparam(c, "OC"),
                        .kh = iparam(c, "KH"),
                        .kw = iparam(c, "KW"),
                        .stride_h = iparam(c, "SH"),
                        .stride_w = iparam(c, "SW"),
                        .pad_h = iparam(c, "PH"),
                        .pad_w = iparam(c, "PW")};
}

static void run_conv(lk_nn *nn, const ref_case *c) {
  lk_nn_conv2d p = conv_of(c);
  int oh, ow;
  OK(lk_nn_conv2d_size(&p, &oh, &ow));
  assert_int_equal(oh, iparam(c, "OH"));
  assert_int_equal(ow, iparam(c, "OW"));
  bool has_bias = iparam(c, "bias");
  size_t ni = (size_t)p.n * p.c * p.h * p.w,
         nw = (size_t)p.oc * p.c * p.kh * p.kw;
  size_t no = (size_t)p.n * p.oc * oh * ow;
  const float *x = get(c, "inp", ni), *w = get(c, "weight", nw);
  const float *b = has_bias ? get(c, "bias", (size_t)p.oc) : NULL;
  const float *dy = get(c, "dout", no);
  float *y = zeros(no);
  OK(lk_nn_conv2d_forward(nn, &p, y, x, w, b));
  expect_close("out", y, get(c, "out", no), no);
  gbuf dx = prefilled(ni, get(c, "dinp", ni), 4),
       dw = prefilled(nw, get(c, "dweight", nw), 5);
  gbuf db = prefilled((size_t)p.oc, b ? get(c, "dbias", (size_t)p.oc) : w, 6);
  OK(lk_nn_conv2d_backward(nn, &p, dx.buf, dw.buf, b ? db.buf : NULL, dy, x,
                           w));
  expect_added("dinp", dx.buf, dx.base, get(c, "dinp", ni), ni);
  expect_added("dweight", dw.buf, dw.base, get(c, "dweight", nw), nw);
  if (b)
    expect_added("dbias", db.buf, db.base, get(c, "dbias", (size_t)p.oc),
                 (size_t)p.oc);
  float *dw2 = zeros(nw), *dx2 = zeros(ni);
  OK(lk_nn_conv2d_backward(nn, &p, NULL, dw2, NULL, dy, x, NULL));
  expect_close("dweight without dinp", dw2, get(c, "dweight", nw), nw);
  OK(lk_nn_conv2d_backward(nn, &p, dx2, NULL, NULL, dy, NULL, w));
  expect_close("dinp alone", dx2, get(c, "dinp", ni), ni);
  free(dw2);
  free(dx2);
  free(y);
  gfree(&dx);
  gfree(&dw);
  gfree(&db);
}

static lk_nn_pool2d pool_of(const ref_case *c) {
  return (lk_nn_pool2d){.n = iparam(c, "N"),
                        .c = iparam(c, "C"),
                        .h = iparam(c, "H"),
                        .w = iparam(c, "W"),
                        .kh = iparam(c, "KH"),
                        .kw = iparam(c, "KW"),
                        .stride_h = iparam(c, "SH"),
                        .stride_w = iparam(c, "SW"),
                        .pad_h = iparam(c, "PH"),
                        .pad_w = iparam(c, "PW")};
}

static void run_pool(lk_nn *nn, const ref_case *c, bool max) {
  lk_nn_pool2d p = pool_of(c);
  int oh, ow;
  OK(lk_nn_pool2d_size(&p, &oh, &ow));
  assert_int_equal(oh, iparam(c, "OH"));
  assert_int_equal(ow, iparam(c, "OW"));
  size_t ni = (size_t)p.n * p.c * p.h * p.w, no = (size_t)p.n * p.c * oh * ow;
  const float *x = get(c, "inp", ni), *dy = get(c, "dout", no);
  float *y = zeros(no);
  int32_t *arg = calloc(no, sizeof *arg);
  assert_non_null(arg);
  if (max) {
    OK(lk_nn_maxpool2d_forward(nn, &p, y, arg, x));
    int32_t *want = get_int(c, "argmax", no);
    assert_memory_equal(arg, want, no * sizeof *arg);
    free(want);
  } else
    OK(lk_nn_avgpool2d_forward(nn, &p, y, x));
  expect_close("out", y, get(c, "out", no), no);
  gbuf dx = prefilled(ni, get(c, "dinp", ni), 7);
  if (max)
    OK(lk_nn_maxpool2d_backward(nn, &p, dx.buf, dy, arg));
  else
    OK(lk_nn_avgpool2d_backward(nn, &p, dx.buf, dy));
  expect_added("dinp", dx.buf, dx.base, get(c, "dinp", ni), ni);
  free(y);
  free(arg);
  gfree(&dx);
}

static void run_batchnorm(lk_nn *nn, const ref_case *c) {
  int N = iparam(c, "N"), C = iparam(c, "C"), HW = iparam(c, "HW");
  bool training = iparam(c, "training"), affine = iparam(c, "affine");
  size_t n = (size_t)N * C * HW;
  const float *x = get(c, "inp", n), *dy = get(c, "dout", n);
  const float *w = affine ? get(c, "weight", (size_t)C) : NULL;
  const float *b = affine ? get(c, "bias", (size_t)C) : NULL;
  float *rm = copy(get(c, "running_mean_in", (size_t)C), (size_t)C);
  float *rv = copy(get(c, "running_var_in", (size_t)C), (size_t)C);
  float *y = zeros(n), *mean = zeros((size_t)C), *rstd = zeros((size_t)C);
  OK(lk_nn_batchnorm_forward(nn, y, mean, rstd, x, w, b, rm, rv, N, C, HW,
                             training, (float)param(c, "momentum"),
                             (float)param(c, "eps")));
  expect_close("out", y, get(c, "out", n), n);
  expect_close("mean", mean, get(c, "mean", (size_t)C), (size_t)C);
  expect_close("rstd", rstd, get(c, "rstd", (size_t)C), (size_t)C);
  expect_close("running_mean", rm, get(c, "running_mean", (size_t)C),
               (size_t)C);
  expect_close("running_var", rv, get(c, "running_var", (size_t)C), (size_t)C);
  gbuf dx = prefilled(n, get(c, "dinp", n), 8);
  gbuf dw = prefilled((size_t)C, affine ? get(c, "dweight", (size_t)C) : x, 9);
  gbuf db = prefilled((size_t)C, affine ? get(c, "dbias", (size_t)C) : x, 10);
  OK(lk_nn_batchnorm_backward(nn, dx.buf, affine ? dw.buf : NULL,
                              affine ? db.buf : NULL, dy, x, w, mean, rstd, N,
                              C, HW, training));
  expect_added("dinp", dx.buf, dx.base, get(c, "dinp", n), n);
  if (affine) {
    expect_added("dweight", dw.buf, dw.base, get(c, "dweight", (size_t)C),
                 (size_t)C);
    expect_added("dbias", db.buf, db.base, get(c, "dbias", (size_t)C),
                 (size_t)C);
  }
  /* without running statistics, training still normalises the same */
  if (training) {
    OK(lk_nn_batchnorm_forward(nn, y, mean, rstd, x, w, b, NULL, NULL, N, C, HW,
                               true, 0.1f, (float)param(c, "eps")));
    expect_close("out without running statistics", y, get(c, "out", n), n);
  }
  free(rm);
  free(rv);
  free(y);
  free(mean);
  free(rstd);
  gfree(&dx);
  gfree(&dw);
  gfree(&db);
}

static void run_layernorm(lk_nn *nn, const ref_case *c) {
  int N = iparam(c, "N"), C = iparam(c, "C");
  bool affine = iparam(c, "affine");
  size_t n = (size_t)N * C;
  const float *x = get(c, "inp", n), *dy = get(c, "dout", n);
  const float *w = affine ? get(c, "weight", (size_t)C) : NULL;
  const float *b = affine ? get(c, "bias", (size_t)C) : NULL;
  float *y = zeros(n), *mean = zeros((size_t)N), *rstd = zeros((size_t)N);
  OK(lk_nn_layernorm_forward(nn, y, mean, rstd, x, w, b, N, C,
                             (float)param(c, "eps")));
  expect_close("out", y, get(c, "out", n), n);
  expect_close("mean", mean, get(c, "mean", (size_t)N), (size_t)N);
  expect_close("rstd", rstd, get(c, "rstd", (size_t)N), (size_t)N);
  gbuf dx = prefilled(n, get(c, "dinp", n), 11);
  gbuf dw = prefilled((size_t)C, affine ? get(c, "dweight", (size_t)C) : x, 12);
  gbuf db = prefilled((size_t)C, affine ? get(c, "dbias", (size_t)C) : x, 13);
  OK(lk_nn_layernorm_backward(nn, dx.buf, affine ? dw.buf : NULL,
                              affine ? db.buf : NULL, dy, x, w, mean, rstd, N,
                              C));
  expect_added("dinp", dx.buf, dx.base, get(c, "dinp", n), n);
  if (affine) {
    expect_added("dweight", dw.buf, dw.base, get(c, "dweight", (size_t)C),
                 (size_t)C);
    expect_added("dbias", db.buf, db.base, get(c, "dbias", (size_t)C),
                 (size_t)C);
  }
  free(y);
  free(mean);
  free(rstd);
  gfree(&dx);
  gfree(&dw);
  gfree(&db);
}

typedef int (*act_fwd)(lk_nn *, float *, const float *, size_t);
typedef int (*act_bwd)(lk_nn *, float *, const float *, const float *, size_t);

static void run_activation(lk_nn *nn, const ref_case *c, act_fwd f, act_bwd b,
                           bool through_input) {
  size_t n = (size_t)iparam(c, "n");
  const float *x = get(c, "inp", n), *dy = get(c, "dout", n);
  float *y = zeros(n);
  OK(f(nn, y, x, n));
  expect_close("out", y, get(c, "out", n), n);
  gbuf dx = prefilled(n, get(c, "dinp", n), 14);
  OK(b(nn, dx.buf, dy, through_input ? x : y, n));
  expect_added("dinp", dx.buf, dx.base, get(c, "dinp", n), n);
  /* in place */
  float *z = copy(x, n);
  OK(f(nn, z, z, n));
  assert_memory_equal(z, y, n * sizeof *z);
  free(z);
  free(y);
  gfree(&dx);
}

static void run_dropout(lk_nn *nn, const ref_case *c) {
  size_t n = (size_t)iparam(c, "n");
  float p = (float)param(c, "p");
  const float *x = get(c, "inp", n), *dy = get(c, "dout", n);
  const float *m = get(c, "mask", n);
  uint8_t *mask = malloc(n);
  assert_non_null(mask);
  for (size_t i = 0; i < n; i++)
    mask[i] = m[i] != 0;
  float *y = zeros(n);
  OK(lk_nn_dropout_apply(nn, y, mask, x, n, p));
  expect_close("out", y, get(c, "out", n), n);
  gbuf dx = prefilled(n, get(c, "dinp", n), 15);
  OK(lk_nn_dropout_backward(nn, dx.buf, dy, mask, n, p, true));
  expect_added("dinp", dx.buf, dx.base, get(c, "dinp", n), n);
  free(mask);
  free(y);
  gfree(&dx);
}

static void run_embedding(lk_nn *nn, const ref_case *c) {
  int N = iparam(c, "N"), V = iparam(c, "V"), C = iparam(c, "C");
  int32_t *idx = get_int(c, "idx", (size_t)N);
  const float *table = get(c, "table", (size_t)V * C);
  const float *dy = get(c, "dout", (size_t)N * C);
  float *y = zeros((size_t)N * C);
  OK(lk_nn_embedding_forward(nn, y, idx, table, N, V, C));
  expect_close("out", y, get(c, "out", (size_t)N * C), (size_t)N * C);
  gbuf dt = prefilled((size_t)V * C, get(c, "dtable", (size_t)V * C), 16);
  OK(lk_nn_embedding_backward(nn, dt.buf, dy, idx, N, V, C));
  expect_added("dtable", dt.buf, dt.base, get(c, "dtable", (size_t)V * C),
               (size_t)V * C);
  free(idx);
  free(y);
  gfree(&dt);
}

static void run_attention(lk_nn *nn, const ref_case *c) {
  int B = iparam(c, "B"), T = iparam(c, "T"), C = iparam(c, "C"),
      NH = iparam(c, "NH");
  size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C,
         na = (size_t)B * NH * T * T;
  const float *qkv = get(c, "qkv", nq), *dy = get(c, "dout", no);
  float *y = zeros(no), *att = zeros(na);
  OK(lk_nn_attention_forward(nn, y, att, qkv, B, T, C, NH));
  expect_close("out", y, get(c, "out", no), no);
  expect_close("att", att, get(c, "att", na), na);
  gbuf dq = prefilled(nq, get(c, "dqkv", nq), 17);
  OK(lk_nn_attention_backward(nn, dq.buf, dy, qkv, att, B, T, C, NH));
  expect_added("dqkv", dq.buf, dq.base, get(c, "dqkv", nq), nq);
  free(y);
  free(att);
  gfree(&dq);
}

static void run_xent(lk_nn *nn, const ref_case *c) {
  int N = iparam(c, "N"), V = iparam(c, "V");
  size_t n = (size_t)N * V;
  const float *z = get(c, "logits", n);
  int32_t *y = get_int(c, "targets", (size_t)N);
  float *probs = zeros(n);
  OK(lk_nn_softmax_forward(nn, probs, z, N, V));
  expect_close("probs", probs, get(c, "probs", n), n);
  gbuf dz = prefilled(n, get(c, "dlogits", n), 18);
  double loss;
  int correct;
  OK(lk_nn_crossentropy(nn, &loss, dz.buf, z, y, N, V, (float)param(c, "dloss"),
                        &correct));
  float l = (float)loss;
  expect_close("loss", &l, get(c, "loss", 1), 1);
  expect_added("dlogits", dz.buf, dz.base, get(c, "dlogits", n), n);
  assert_int_equal(correct, (int)get(c, "correct", 1)[0]);
  /* without dlogits: the loss alone */
  double loss2;
  OK(lk_nn_crossentropy(nn, &loss2, NULL, z, y, N, V, 1, NULL));
  assert_true(loss2 == loss);
  free(y);
  free(probs);
  gfree(&dz);
}

static void run_residual(lk_nn *nn, const ref_case *c) {
  size_t n = (size_t)iparam(c, "n");
  const float *a = get(c, "a", n), *b = get(c, "b", n), *dy = get(c, "dout", n);
  float *y = zeros(n);
  OK(lk_nn_residual_forward(nn, y, a, b, n));
  expect_close("out", y, get(c, "out", n), n);
  gbuf da = prefilled(n, get(c, "da", n), 19),
       db = prefilled(n, get(c, "db", n), 20);
  OK(lk_nn_residual_backward(nn, da.buf, db.buf, dy, n));
  expect_added("da", da.buf, da.base, get(c, "da", n), n);
  expect_added("db", db.buf, db.base, get(c, "db", n), n);
  free(y);
  gfree(&da);
  gfree(&db);
}

static void run_case(lk_nn *nn, const ref_case *c) {
  const char *k = c->name;
  if (!strncmp(k, "linear", 6))
    run_linear(nn, c);
  else if (!strncmp(k, "conv", 4))
    run_conv(nn, c);
  else if (!strncmp(k, "maxpool", 7))
    run_pool(nn, c, true);
  else if (!strncmp(k, "avgpool", 7))
    run_pool(nn, c, false);
  else if (!strncmp(k, "bn", 2))
    run_batchnorm(nn, c);
  else if (!strncmp(k, "layernorm", 9))
    run_layernorm(nn, c);
  else if (!strcmp(k, "relu"))
    run_activation(nn, c, lk_nn_relu_forward, lk_nn_relu_backward, false);
  else if (!strcmp(k, "gelu"))
    run_activation(nn, c, lk_nn_gelu_forward, lk_nn_gelu_backward, true);
  else if (!strcmp(k, "tanh"))
    run_activation(nn, c, lk_nn_tanh_forward, lk_nn_tanh_backward, false);
  else if (!strcmp(k, "sigmoid"))
    run_activation(nn, c, lk_nn_sigmoid_forward, lk_nn_sigmoid_backward, false);
  else if (!strcmp(k, "dropout"))
    run_dropout(nn, c);
  else if (!strcmp(k, "embedding"))
    run_embedding(nn, c);
  else if (!strncmp(k, "attention", 9))
    run_attention(nn, c);
  else if (!strncmp(k, "xent", 4))
    run_xent(nn, c);
  else if (!strcmp(k, "residual"))
    run_residual(nn, c);
  else {
    print_error("case %s: no runner\n", k);
    fail();
  }
}

static void against_torch(void **state) {
  (void)state;
  char buf[128];
  for (size_t k = 0; k < NCONFIGS; k++) {
    lk_nn *nn = open_nn(configs[k].threads, configs[k].flags);
    for (size_t i = 0; i < ncases; i++) {
      snprintf(buf, sizeof buf, "%s (%s, %s):", cases[i].name, configs[k].name,
               lk_nn_backend(nn));
      label = buf;
      run_case(nn, &cases[i]);
    }
    lk_nn_free(nn);
  }
  label = "";
  print_message("against torch: %zu cases x %zu configurations, worst error "
                "%.3g of the tolerance\n",
                ncases, NCONFIGS, worst);
}

/* The comparison catches wrong kernels: each of these plausible mistakes,
 * made on purpose with the kit or by hand, fails it. */
static void wrong_layers_fail(void **state) {
  (void)state;
  lk_nn *nn = open_nn(1, 0);
  label = "negative control";
  { /* linear without its bias */
    const ref_case *c = find_case("linear_bias");
    int N = iparam(c, "N"), C = iparam(c, "C"), OC = iparam(c, "OC");
    float *y = zeros((size_t)N * OC);
    OK(lk_nn_linear_forward(nn, y, get(c, "inp", (size_t)N * C),
                            get(c, "weight", (size_t)OC * C), NULL, N, C, OC));
    expect_differs("linear without bias", y, get(c, "out", (size_t)N * OC),
                   (size_t)N * OC);
    free(y);
  }
  { /* a convolution (kernel flipped) instead of a cross-correlation, and
       padding on the wrong side */
    const ref_case *c = find_case("conv_s2p1");
    lk_nn_conv2d p = conv_of(c);
    size_t nw = (size_t)p.oc * p.c * p.kh * p.kw,
           ni = (size_t)p.n * p.c * p.h * p.w;
    size_t no = (size_t)p.n * p.oc * iparam(c, "OH") * iparam(c, "OW");
    const float *w = get(c, "weight", nw);
    float *flip = zeros(nw), *y = zeros(no);
    for (size_t i = 0; i < nw; i += (size_t)p.kh * p.kw)
      for (int k = 0; k < p.kh * p.kw; k++)
        flip[i + (size_t)k] = w[i + (size_t)(p.kh * p.kw - 1 - k)];
    OK(lk_nn_conv2d_forward(nn, &p, y, get(c, "inp", ni), flip,
                            get(c, "bias", (size_t)p.oc)));
    expect_differs("conv2d with a flipped kernel", y, get(c, "out", no), no);
    free(flip);
    free(y);
  }
  { /* max pooling where average pooling was asked, same window */
    const ref_case *c = find_case("avgpool_pad");
    lk_nn_pool2d p = pool_of(c);
    size_t ni = (size_t)p.n * p.c * p.h * p.w,
           no = (size_t)p.n * p.c * iparam(c, "OH") * iparam(c, "OW");
    float *y = zeros(no);
    int32_t *arg = calloc(no, sizeof *arg);
    OK(lk_nn_maxpool2d_forward(nn, &p, y, arg, get(c, "inp", ni)));
    expect_differs("max instead of average", y, get(c, "out", no), no);
    /* count_include_pad = False: the divisor without the padding */
    for (int pl = 0; pl < p.n * p.c; pl++)
      for (int oh = 0; oh < iparam(c, "OH"); oh++)
        for (int ow = 0; ow < iparam(c, "OW"); ow++) {
          const float *x = get(c, "inp", ni) + (size_t)pl * p.h * p.w;
          int h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
          float s = 0;
          int cnt = 0;
          for (int ih = h0; ih < h0 + p.kh; ih++)
            for (int iw = w0; iw < w0 + p.kw; iw++)
              if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w)
                s += x[ih * p.w + iw], cnt++;
          y[((size_t)pl * iparam(c, "OH") + oh) * iparam(c, "OW") + ow] =
              s / cnt;
        }
    expect_differs("average without the padding", y, get(c, "out", no), no);
    free(y);
    free(arg);
  }
  { /* batch norm in evaluation where training was asked */
    const ref_case *c = find_case("bn2d_train");
    int N = iparam(c, "N"), C = iparam(c, "C"), HW = iparam(c, "HW");
    size_t n = (size_t)N * C * HW;
    float *y = zeros(n), *mean = zeros((size_t)C), *rstd = zeros((size_t)C);
    float *rm = copy(get(c, "running_mean_in", (size_t)C), (size_t)C);
    float *rv = copy(get(c, "running_var_in", (size_t)C), (size_t)C);
    OK(lk_nn_batchnorm_forward(
        nn, y, mean, rstd, get(c, "inp", n), get(c, "weight", (size_t)C),
        get(c, "bias", (size_t)C), rm, rv, N, C, HW, false, 0.1f, 1e-5f));
    expect_differs("batchnorm evaluated", y, get(c, "out", n), n);
    /* and the evaluation backward on training statistics */
    float *dx = zeros(n);
    OK(lk_nn_batchnorm_backward(nn, dx, NULL, NULL, get(c, "dout", n),
                                get(c, "inp", n), get(c, "weight", (size_t)C),
                                get(c, "mean", (size_t)C),
                                get(c, "rstd", (size_t)C), N, C, HW, false));
    expect_differs("batchnorm backward evaluated", dx, get(c, "dinp", n), n);
    free(y), free(mean), free(rstd), free(rm), free(rv), free(dx);
  }
  { /* layer norm with eps 1e-3 instead of 1e-5 */
    const ref_case *c = find_case("layernorm");
    int N = iparam(c, "N"), C = iparam(c, "C");
    size_t n = (size_t)N * C;
    float *y = zeros(n), *mean = zeros((size_t)N), *rstd = zeros((size_t)N);
    OK(lk_nn_layernorm_forward(nn, y, mean, rstd, get(c, "inp", n),
                               get(c, "weight", (size_t)C),
                               get(c, "bias", (size_t)C), N, C, 1e-3f));
    expect_differs("layernorm with eps 1e-3", y, get(c, "out", n), n);
    free(y), free(mean), free(rstd);
  }
  { /* GELU exact (erf) where torch's tanh form was asked */
    const ref_case *c = find_case("gelu");
    size_t n = (size_t)iparam(c, "n");
    const float *x = get(c, "inp", n);
    float *y = zeros(n);
    for (size_t i = 0; i < n; i++)
      y[i] = 0.5f * x[i] * (1 + erff(x[i] * (float)M_SQRT1_2));
    expect_differs("gelu with erf", y, get(c, "out", n), n);
    free(y);
  }
  { /* dropout scaled for p = 0.25 instead of 0.3 */
    const ref_case *c = find_case("dropout");
    size_t n = (size_t)iparam(c, "n");
    uint8_t *mask = malloc(n);
    for (size_t i = 0; i < n; i++)
      mask[i] = get(c, "mask", n)[i] != 0;
    float *y = zeros(n);
    OK(lk_nn_dropout_apply(nn, y, mask, get(c, "inp", n), n, 0.25f));
    expect_differs("dropout with p = 0.25", y, get(c, "out", n), n);
    free(mask), free(y);
  }
  { /* attention with one head of 8 instead of two of 4 */
    const ref_case *c = find_case("attention");
    int B = iparam(c, "B"), T = iparam(c, "T"), C = iparam(c, "C");
    size_t no = (size_t)B * T * C;
    float *y = zeros(no), *att = zeros((size_t)B * T * T);
    OK(lk_nn_attention_forward(nn, y, att, get(c, "qkv", (size_t)B * T * 3 * C),
                               B, T, C, 1));
    expect_differs("attention with one head", y, get(c, "out", no), no);
    free(y), free(att);
  }
  { /* cross-entropy's gradient not scaled by dloss (0.5) */
    const ref_case *c = find_case("xent_scaled");
    int N = iparam(c, "N"), V = iparam(c, "V");
    size_t n = (size_t)N * V;
    int32_t *y = get_int(c, "targets", (size_t)N);
    float *dz = zeros(n);
    double loss;
    OK(lk_nn_crossentropy(nn, &loss, dz, get(c, "logits", n), y, N, V, 1,
                          NULL));
    expect_differs("crossentropy with dloss 1", dz, get(c, "dlogits", n), n);
    free(y), free(dz);
  }
  { /* embedding rows off by one */
    const ref_case *c = find_case("embedding");
    int N = iparam(c, "N"), V = iparam(c, "V"), C = iparam(c, "C");
    int32_t *idx = get_int(c, "idx", (size_t)N);
    for (int i = 0; i < N; i++)
      idx[i] = (idx[i] + 1) % V;
    float *y = zeros((size_t)N * C);
    OK(lk_nn_embedding_forward(nn, y, idx, get(c, "table", (size_t)V * C), N, V,
                               C));
    expect_differs("embedding off by one", y, get(c, "out", (size_t)N * C),
                   (size_t)N * C);
    free(idx), free(y);
  }
  { /* a single element off by 2e-5 relative fails; 2e-6 passes */
    const ref_case *c = find_case("conv_planes");
    size_t n = (size_t)tensor_count(c, "out");
    float *y = copy(get(c, "out", n), n);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) /* the largest: no floor applies */
      at = fabsf(y[i]) > fabsf(y[at]) ? i : at;
    float orig = y[at];
    y[at] = orig * (1 + 2e-5f);
    expect_differs("one element off by 2e-5", y, get(c, "out", n), n);
    y[at] = orig * (1 + 2e-6f);
    assert_int_equal(mismatches("one element off by 2e-6", y, NULL,
                                get(c, "out", n), n, true),
                     0);
    free(y);
  }
  label = "";
  lk_nn_free(nn);
}

/* ---- 2. the product ------------------------------------------------------ */

/* One product with padded leading dimensions against a double one, on
 * every context of NNS (the reference is made once):
 * |c - want| <= 1e-5 (K + 1) for values in [-1, 1]. */
static void check_gemm(lk_nn *const *nns, int count, bool ta, bool tb, int m,
                       int n, int k, float alpha, float beta) {
  int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  int lda = ac + 3, ldb = bc + 1, ldc = n + 2;
  float *a = zeros((size_t)ar * lda), *b = zeros((size_t)br * ldb),
        *c0 = zeros((size_t)m * ldc), *c = zeros((size_t)m * ldc);
  double *want = calloc((size_t)m * n + 1, sizeof *want);
  assert_non_null(want);
  for (size_t i = 0; i < (size_t)ar * lda; i++)
    a[i] = value(i, 1);
  for (size_t i = 0; i < (size_t)br * ldb; i++)
    b[i] = value(i, 2);
  for (size_t i = 0; i < (size_t)m * ldc; i++) /* beta = 0 must not read C */
    c0[i] = beta == 0 ? NAN : value(i, 3);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int p = 0; p < k; p++)
        s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
             (tb ? b[j * ldb + p] : b[p * ldb + j]);
      want[i * n + j] =
          alpha * s + (beta == 0 ? 0 : (double)beta * c0[i * ldc + j]);
    }
  for (int x = 0; x < count; x++) {
    lk_nn *nn = nns[x];
    memcpy(c, c0, (size_t)m * ldc * sizeof *c);
    OK(lk_nn_sgemm(nn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        double err = fabs(c[i * ldc + j] - want[i * n + j]);
        if (!(err <= 1e-5 * (k + 1))) {
          print_error("%s/%s, %d threads, %s%s m=%d n=%d k=%d alpha=%g "
                      "beta=%g: C[%d,%d] = %.9g, expected %.9g\n",
                      lk_nn_backend(nn), lk_nn_isa(nn), lk_nn_threads(nn),
                      ta ? "T" : "N", tb ? "T" : "N", m, n, k, alpha, beta, i,
                      j, c[i * ldc + j], want[i * n + j]);
          fail();
        }
      }
    if (m > 0 && beta != 0) /* the padding past a row is not touched */
      assert_true(c[n] == c0[n]);
  }
  free(a);
  free(b);
  free(c);
  free(c0);
  free(want);
}

/* Every transpose case, alpha and beta, on shapes that hit the special
 * paths: one row or column, K past the portable blocks (128), several
 * tiles along M (520 = 4 x 130) and along N; with oneDNN, OpenBLAS, the
 * portable product and the kit's in the widest vectors, on 1 and 3
 * threads. */
static void gemm_cases(void **state) {
  (void)state;
  static const int shapes[][3] = {{1, 10, 300},  {7, 1, 33},    {3, 5, 1},
                                  {2, 3, 4},     {17, 129, 65}, {33, 10, 200},
                                  {64, 128, 64}, {1, 1, 1},     {130, 7, 129},
                                  {520, 40, 64}, {40, 520, 64}, {9, 300, 300}};
  static const float betas[] = {0, 1, 0.5f};
  static const unsigned flags[] = {0, LK_NN_NO_ONEDNN, LK_NN_PORTABLE,
                                   LK_NN_NO_BLAS};
  lk_nn *nns[8];
  for (int f = 0; f < 4; f++)
    for (int t = 0; t < 2; t++)
      nns[2 * f + t] = open_nn(t ? 3 : 1, flags[f]);
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int tr = 0; tr < 4; tr++)
      for (int bi = 0; bi < 3; bi++)
        check_gemm(nns, 8, tr & 1, tr & 2, shapes[s][0], shapes[s][1],
                   shapes[s][2], bi == 2 ? -0.75f : 1.0f, betas[bi]);
  for (int x = 0; x < 8; x++) {
    lk_nn *nn = nns[x];
    /* empty products leave beta C, as BLAS defines them */
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {1, 1, 1, 1};
    OK(lk_nn_sgemm(nn, false, false, 2, 2, 2, 0, a, 2, b, 2, 2, c, 2));
    for (int i = 0; i < 4; i++)
      assert_true(c[i] == 2);
    OK(lk_nn_sgemm(nn, false, false, 2, 2, 0, 1, NULL, 2, NULL, 2, 0, c, 2));
    for (int i = 0; i < 4; i++)
      assert_true(c[i] == 0);
    OK(lk_nn_sgemm(nn, false, false, 0, 2, 2, 1, NULL, 2, NULL, 2, 0, NULL, 2));
    lk_nn_free(nn);
  }
}

/* f32 X rounded to bf16 (to nearest even), as the bf16 products round
 * their operands. */
static float bf16_round(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&x, &u, sizeof u);
  return x;
}

/* The bf16 products (LK_NN_BF16): every transpose case, alpha and beta, on
 * the shapes of gemm_cases, against a double product of the operands
 * rounded to bf16 (the products of two bf16 are exact in f32, so only the
 * f32 sums differ: the bound of the f32 products holds), on 1 and 3
 * threads; and they are bf16 indeed: the same product of the unrounded
 * operands is farther off. Skipped where the CPU has no bf16 product. */
static void bf16_engine_cases(void) {
  print_message("bf16 engine: %s\n", lk_nn_bf16_engine());
  static const int shapes[][3] = {{1, 10, 300},  {7, 1, 33},    {3, 5, 1},
                                  {2, 3, 4},     {17, 129, 65}, {33, 10, 200},
                                  {64, 128, 64}, {1, 1, 1},     {130, 7, 129},
                                  {520, 40, 64}, {40, 520, 64}, {9, 300, 1100}};
  static const float betas[] = {0, 1, 0.5f};
  lk_nn *nns[2] = {open_nn(1, LK_NN_BF16), open_nn(3, LK_NN_BF16)};
  assert_string_equal(lk_nn_products(nns[0]), "bf16");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int tr = 0; tr < 4; tr++)
      for (int bi = 0; bi < 3; bi++) {
        bool ta = tr & 1, tb = tr & 2;
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float alpha = bi == 2 ? -0.75f : 1.0f, beta = betas[bi];
        int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        int lda = ac + 3, ldb = bc + 1, ldc = n + 2;
        float *a = zeros((size_t)ar * lda), *b = zeros((size_t)br * ldb),
              *c0 = zeros((size_t)m * ldc), *c = zeros((size_t)m * ldc);
        for (size_t i = 0; i < (size_t)ar * lda; i++)
          a[i] = value(i, 1);
        for (size_t i = 0; i < (size_t)br * ldb; i++)
          b[i] = value(i, 2);
        for (size_t i = 0; i < (size_t)m * ldc; i++)
          c0[i] = beta == 0 ? NAN : value(i, 3);
        double far = 0;
        for (int x = 0; x < 2; x++) {
          memcpy(c, c0, (size_t)m * ldc * sizeof *c);
          OK(lk_nn_sgemm(nns[x], ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
                         c, ldc));
          for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
              double sr = 0, s32 = 0;
              for (int p = 0; p < k; p++) {
                float av = ta ? a[p * lda + i] : a[i * lda + p];
                float bv = tb ? b[j * ldb + p] : b[p * ldb + j];
                sr += (double)bf16_round(av) * bf16_round(bv);
                s32 += (double)av * bv;
              }
              double keep = beta == 0 ? 0 : (double)beta * c0[i * ldc + j];
              double want = alpha * sr + keep, got = c[i * ldc + j];
              double off = fabs(got - (alpha * s32 + keep));
              far = off > far ? off : far;
              if (!(fabs(got - want) <= 1e-5 * (k + 1))) {
                print_error("bf16, %d threads, %s%s m=%d n=%d k=%d alpha=%g "
                            "beta=%g: C[%d,%d] = %.9g, expected %.9g\n",
                            lk_nn_threads(nns[x]), ta ? "T" : "N",
                            tb ? "T" : "N", m, n, k, alpha, beta, i, j, got,
                            want);
                fail();
              }
            }
          if (m > 0 && beta != 0) /* the padding past a row is not touched */
            assert_true(c[n] == c0[n]);
        }
        if (k >= 64) /* bf16's 8 bits show: 2^-9 per operand */
          assert_true(far > 1e-3);
        free(a), free(b), free(c), free(c0);
      }
  lk_nn_free(nns[0]);
  lk_nn_free(nns[1]);
}

/* Each engine the CPU has: AMX's, and AVX512-BF16's on an AMX CPU too
 * (LOOPKIT_BF16=avx512_bf16). Skipped where there is none. */
static void bf16_gemm_cases(void **state) {
  (void)state;
  if (!lk_nn_bf16_engine()) {
    print_message("skipped: this CPU has neither AMX-BF16 nor AVX512_BF16 "
                  "(the bf16 products refuse to run without them)\n");
    skip();
  }
  bf16_engine_cases();
  if (!strcmp(lk_nn_bf16_engine(), "amx_bf16")) {
    setenv("LOOPKIT_BF16", "avx512_bf16", 1);
    if (lk_nn_bf16_engine())
      bf16_engine_cases();
    unsetenv("LOOPKIT_BF16");
  }
}

/* The process's default precision of products: contexts created with
 * neither flag follow lk_nn_bf16_acquire from their next product on, those
 * made with LK_NN_F32 do not; and LOOPKIT_BF16=none (a CPU without the
 * instruction) refuses both ways in, naming what is missing. */
static void bf16_default(void **state) {
  (void)state;
  lk_nn *any = open_nn(1, 0), *f32 = open_nn(1, LK_NN_F32);
  assert_string_equal(lk_nn_products(any), "f32");
  float a[4] = {1.00390625f, 0, 0, 1}, b[4] = {1, 0, 0, 1}, c[4];
  if (lk_nn_bf16_engine()) {
    OK(lk_nn_bf16_acquire());
    OK(lk_nn_bf16_acquire());
    assert_string_equal(lk_nn_products(any), "bf16");
    assert_string_equal(lk_nn_products(f32), "f32");
    OK(lk_nn_sgemm(any, false, false, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2));
    assert_true(c[0] == 1.0f); /* 1 + 2^-8 is 1 in bf16 */
    OK(lk_nn_sgemm(f32, false, false, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2));
    assert_true(c[0] == 1.00390625f);
    lk_nn_bf16_release();
    assert_string_equal(lk_nn_products(any), "bf16"); /* one still holds it */
    lk_nn_bf16_release();
  }
  assert_string_equal(lk_nn_products(any), "f32");
  OK(lk_nn_sgemm(any, false, false, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2));
  assert_true(c[0] == 1.00390625f);
  lk_nn_bf16_release(); /* one too many changes nothing */
  assert_string_equal(lk_nn_products(any), "f32");
  lk_nn_free(any);
  lk_nn_free(f32);

  setenv("LOOPKIT_BF16", "none", 1);
  assert_null(lk_nn_bf16_engine());
  lk_nn *nn = (lk_nn *)&nn;
  assert_int_equal(lk_nn_create(&nn, 1, LK_NN_BF16), LK_EINVAL);
  assert_null(nn);
  assert_non_null(strstr(lk_last_error(), "AVX512_BF16"));
  assert_int_equal(lk_nn_bf16_acquire(), LK_EINVAL);
  assert_non_null(strstr(lk_last_error(), "AVX512_BF16"));
  unsetenv("LOOPKIT_BF16");
  assert_int_equal(lk_nn_create(&nn, 1, LK_NN_BF16 | LK_NN_F32), LK_EINVAL);
}

/* ---- 3. gradients against central differences ---------------------------- */

/* For a scalar L = sum_i y_i w_i (w fixed in [-1, 1]) of a layer's output
 * y, every derivative dL/dx_j from the backward (with dout = w) against
 * (L(x_j + h) - L(x_j - h)) / (the difference of the two f32 inputs), L
 * summed in double from the f32 forward.
 *
 * Step and tolerance: h = 1e-2 for inputs of size ~1. The forward's f32
 * rounding (~6e-8 relative per output) over the ~100 outputs, divided by
 * 2h, puts ~3e-5 of noise on a difference quotient; the truncation error
 * h^2 f'''/6 is ~2e-5 on these smooth layers. So
 *     |numeric - analytic| <= 1e-3 * max_j |analytic_j| + 5e-3 |analytic|
 * passes with a margin, and any wrong term (O(1) relative) fails it. ReLU
 * and max pooling have kinks: their inputs are kept further than h from
 * them (|x| >= 0.05, maxima apart by 0.05). */
#define GC_H 1e-2
#define GC_ATOL 1e-3
#define GC_RTOL 5e-3

typedef struct gc gc;
struct gc {
  const char *name;
  lk_nn *nn;
  int nx;
  float *x[4];
  size_t n[4];
  size_t ny;
  int iv[8]; /* sizes */
  float fv[4];
  const void *aux[2];
  act_fwd af;
  act_bwd ab;
  float *save[4]; /* what the forward keeps for the backward */
  int (*forward)(gc *g, float *y);
  int (*backward)(gc *g, const float *dy, float *const *dx);
};

static double gc_loss(gc *g, float *y, const float *w) {
  OK(g->forward(g, y));
  double l = 0;
  for (size_t i = 0; i < g->ny; i++)
    l += (double)y[i] * w[i];
  return l;
}

static double gc_worst;

static void gradcheck(gc *g) {
  float *y = zeros(g->ny), *w = zeros(g->ny), *dx[4];
  for (size_t i = 0; i < g->ny; i++)
    w[i] = value(i, 77);
  for (int k = 0; k < g->nx; k++)
    dx[k] = zeros(g->n[k]);
  OK(g->forward(g, y));
  OK(g->backward(g, w, dx));
  for (int k = 0; k < g->nx; k++) {
    double top = 0;
    for (size_t i = 0; i < g->n[k]; i++)
      top = fmax(top, fabs(dx[k][i]));
    for (size_t i = 0; i < g->n[k]; i++) {
      float orig = g->x[k][i], hi = orig + (float)GC_H, lo = orig - (float)GC_H;
      g->x[k][i] = hi;
      double lp = gc_loss(g, y, w);
      g->x[k][i] = lo;
      double lm = gc_loss(g, y, w);
      g->x[k][i] = orig;
      double num = (lp - lm) / ((double)hi - (double)lo), ana = dx[k][i];
      double tol = GC_ATOL * top + GC_RTOL * fabs(ana);
      gc_worst = fmax(gc_worst, fabs(num - ana) / tol);
      if (!(fabs(num - ana) <= tol)) {
        print_error("gradcheck %s: input %d [%zu]: backward %.7g, central "
                    "difference %.7g (tolerance %.3g)\n",
                    g->name, k, i, ana, num, tol);
        fail();
      }
    }
  }
  OK(g->forward(g, y)); /* leaves the saved state as the inputs give it */
  for (int k = 0; k < g->nx; k++)
    free(dx[k]);
  free(y);
  free(w);
}

static float *gc_input(size_t n, unsigned salt) {
  float *x = zeros(n);
  for (size_t i = 0; i < n; i++)
    x[i] = value(i, salt);
  return x;
}

/* linear: iv = N, C, OC */
static int lin_f(gc *g, float *y) {
  return lk_nn_linear_forward(g->nn, y, g->x[0], g->x[1], g->x[2], g->iv[0],
                              g->iv[1], g->iv[2]);
}
static int lin_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_linear_backward(g->nn, dx[0], dx[1], dx[2], dy, g->x[0], g->x[1],
                               g->iv[0], g->iv[1], g->iv[2]);
}

static lk_nn_conv2d gc_conv = {.n = 2,
                               .c = 2,
                               .h = 5,
                               .w = 4,
                               .oc = 3,
                               .kh = 3,
                               .kw = 2,
                               .stride_h = 2,
                               .stride_w = 1,
                               .pad_h = 1,
                               .pad_w = 1};
static int conv_f(gc *g, float *y) {
  return lk_nn_conv2d_forward(g->nn, &gc_conv, y, g->x[0], g->x[1], g->x[2]);
}
static int conv_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_conv2d_backward(g->nn, &gc_conv, dx[0], dx[1], dx[2], dy,
                               g->x[0], g->x[1]);
}

static lk_nn_pool2d gc_pool = {.n = 1,
                               .c = 2,
                               .h = 5,
                               .w = 5,
                               .kh = 3,
                               .kw = 3,
                               .stride_h = 2,
                               .stride_w = 2,
                               .pad_h = 1,
                               .pad_w = 1};
static int maxp_f(gc *g, float *y) {
  return lk_nn_maxpool2d_forward(g->nn, &gc_pool, y, (int32_t *)g->save[0],
                                 g->x[0]);
}
static int maxp_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_maxpool2d_backward(g->nn, &gc_pool, dx[0], dy,
                                  (const int32_t *)g->save[0]);
}
static int avgp_f(gc *g, float *y) {
  return lk_nn_avgpool2d_forward(g->nn, &gc_pool, y, g->x[0]);
}
static int avgp_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_avgpool2d_backward(g->nn, &gc_pool, dx[0], dy);
}

/* batchnorm: iv = N, C, HW, training; save = mean, rstd, running mean, var */
static int bn_f(gc *g, float *y) {
  int C = g->iv[1];
  /* the running statistics restart each time: they are inputs here */
  for (int c = 0; c < C; c++)
    g->save[2][c] = 0.1f * (float)c, g->save[3][c] = 1 + 0.2f * (float)c;
  return lk_nn_batchnorm_forward(g->nn, y, g->save[0], g->save[1], g->x[0],
                                 g->x[1], g->x[2], g->save[2], g->save[3],
                                 g->iv[0], C, g->iv[2], g->iv[3], 0.1f, 1e-5f);
}
static int bn_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_batchnorm_backward(g->nn, dx[0], dx[1], dx[2], dy, g->x[0],
                                  g->x[1], g->save[0], g->save[1], g->iv[0],
                                  g->iv[1], g->iv[2], g->iv[3]);
}

static int ln_f(gc *g, float *y) {
  return lk_nn_layernorm_forward(g->nn, y, g->save[0], g->save[1], g->x[0],
                                 g->x[1], g->x[2], g->iv[0], g->iv[1], 1e-5f);
}
static int ln_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_layernorm_backward(g->nn, dx[0], dx[1], dx[2], dy, g->x[0],
                                  g->x[1], g->save[0], g->save[1], g->iv[0],
                                  g->iv[1]);
}

/* activations: af, ab; iv[0]: differentiates through the input; save[0] =
 * the output */
static int act_f(gc *g, float *y) {
  int rc = g->af(g->nn, y, g->x[0], g->n[0]);
  memcpy(g->save[0], y, g->n[0] * sizeof *y);
  return rc;
}
static int act_b(gc *g, const float *dy, float *const *dx) {
  return g->ab(g->nn, dx[0], dy, g->iv[0] ? g->x[0] : g->save[0], g->n[0]);
}

static int drop_f(gc *g, float *y) {
  return lk_nn_dropout_apply(g->nn, y, g->aux[0], g->x[0], g->n[0], 0.4f);
}
static int drop_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_dropout_backward(g->nn, dx[0], dy, g->aux[0], g->n[0], 0.4f,
                                true);
}

/* embedding: iv = N, V, C; aux[0] = indices */
static int emb_f(gc *g, float *y) {
  return lk_nn_embedding_forward(g->nn, y, g->aux[0], g->x[0], g->iv[0],
                                 g->iv[1], g->iv[2]);
}
static int emb_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_embedding_backward(g->nn, dx[0], dy, g->aux[0], g->iv[0],
                                  g->iv[1], g->iv[2]);
}

/* attention: iv = B, T, C, NH; save[0] = att */
static int att_f(gc *g, float *y) {
  return lk_nn_attention_forward(g->nn, y, g->save[0], g->x[0], g->iv[0],
                                 g->iv[1], g->iv[2], g->iv[3]);
}
static int att_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_attention_backward(g->nn, dx[0], dy, g->x[0], g->save[0],
                                  g->iv[0], g->iv[1], g->iv[2], g->iv[3]);
}

static int res_f(gc *g, float *y) {
  return lk_nn_residual_forward(g->nn, y, g->x[0], g->x[1], g->n[0]);
}
static int res_b(gc *g, const float *dy, float *const *dx) {
  return lk_nn_residual_backward(g->nn, dx[0], dx[1], dy, g->n[0]);
}

/* crossentropy: iv = N, V; aux[0] = targets; y = the loss */
static int xent_f(gc *g, float *y) {
  double l;
  int rc = lk_nn_crossentropy(g->nn, &l, NULL, g->x[0], g->aux[0], g->iv[0],
                              g->iv[1], 1, NULL);
  y[0] = (float)l;
  return rc;
}
static int xent_b(gc *g, const float *dy, float *const *dx) {
  double l;
  return lk_nn_crossentropy(g->nn, &l, dx[0], g->x[0], g->aux[0], g->iv[0],
                            g->iv[1], dy[0], NULL);
}

static void gc_free(gc *g) {
  for (int k = 0; k < 4; k++) {
    if (k < g->nx)
      free(g->x[k]);
    free(g->save[k]);
  }
}

static void gradchecks(void **state) {
  (void)state;
  lk_nn *nn = open_nn(2, 0);
  { /* linear, with and without bias */
    gc g = {.name = "linear",
            .nn = nn,
            .nx = 3,
            .iv = {3, 5, 4},
            .ny = 12,
            .forward = lin_f,
            .backward = lin_b};
    g.n[0] = 15, g.n[1] = 20, g.n[2] = 4;
    for (int k = 0; k < 3; k++)
      g.x[k] = gc_input(g.n[k], 30u + (unsigned)k);
    gradcheck(&g);
    gc_free(&g);
  }
  { /* conv2d: stride 2 x 1, padding 1, a 3 x 2 kernel */
    int oh, ow;
    OK(lk_nn_conv2d_size(&gc_conv, &oh, &ow));
    gc g = {.name = "conv2d",
            .nn = nn,
            .nx = 3,
            .forward = conv_f,
            .backward = conv_b};
    g.ny = (size_t)2 * 3 * oh * ow;
    g.n[0] = 2 * 2 * 5 * 4, g.n[1] = 3 * 2 * 3 * 2, g.n[2] = 3;
    for (int k = 0; k < 3; k++)
      g.x[k] = gc_input(g.n[k], 40u + (unsigned)k);
    gradcheck(&g);
    gc_free(&g);
  }
  { /* pooling: distinct values 0.05 apart, so no step changes a max */
    int oh, ow;
    OK(lk_nn_pool2d_size(&gc_pool, &oh, &ow));
    for (int avg = 0; avg < 2; avg++) {
      gc g = {.name = avg ? "avgpool2d" : "maxpool2d",
              .nn = nn,
              .nx = 1,
              .forward = avg ? avgp_f : maxp_f,
              .backward = avg ? avgp_b : maxp_b};
      g.ny = (size_t)2 * oh * ow;
      g.n[0] = 50;
      g.x[0] = zeros(50);
      for (size_t i = 0; i < 50; i++)
        g.x[0][i] = 0.05f * (float)((i * 37) % 50) - 1.2f;
      g.save[0] = zeros(g.ny);
      gradcheck(&g);
      gc_free(&g);
    }
  }
  { /* batchnorm 2d and 1d, training and evaluation */
    static const int shapes[][4] = {
        {3, 2, 4, 1}, {3, 2, 4, 0}, {5, 3, 1, 1}, {5, 3, 1, 0}};
    for (int s = 0; s < 4; s++) {
      gc g = {.name = shapes[s][3] ? "batchnorm train" : "batchnorm eval",
              .nn = nn,
              .nx = 3,
              .forward = bn_f,
              .backward = bn_b};
      memcpy(g.iv, shapes[s], sizeof shapes[s]);
      size_t C = (size_t)g.iv[1];
      g.ny = g.n[0] = (size_t)g.iv[0] * C * (size_t)g.iv[2];
      g.n[1] = g.n[2] = C;
      for (int k = 0; k < 3; k++)
        g.x[k] = gc_input(g.n[k], 50u + (unsigned)k);
      for (int k = 0; k < 4; k++)
        g.save[k] = zeros(C);
      gradcheck(&g);
      gc_free(&g);
    }
  }
  { /* layernorm */
    gc g = {.name = "layernorm",
            .nn = nn,
            .nx = 3,
            .iv = {4, 6},
            .ny = 24,
            .forward = ln_f,
            .backward = ln_b};
    g.n[0] = 24, g.n[1] = g.n[2] = 6;
    for (int k = 0; k < 3; k++)
      g.x[k] = gc_input(g.n[k], 60u + (unsigned)k);
    g.save[0] = zeros(4), g.save[1] = zeros(4);
    gradcheck(&g);
    gc_free(&g);
  }
  { /* activations, on 23 values (a tail) in [-3, 3], |x| >= 0.05 */
    act_fwd fs[] = {lk_nn_relu_forward, lk_nn_gelu_forward, lk_nn_tanh_forward,
                    lk_nn_sigmoid_forward};
    act_bwd bs[] = {lk_nn_relu_backward, lk_nn_gelu_backward,
                    lk_nn_tanh_backward, lk_nn_sigmoid_backward};
    const char *names[] = {"relu", "gelu", "tanh", "sigmoid"};
    for (int a = 0; a < 4; a++) {
      gc g = {.name = names[a],
              .nn = nn,
              .nx = 1,
              .ny = 23,
              .iv = {a == 1},
              .forward = act_f,
              .backward = act_b};
      g.af = fs[a], g.ab = bs[a];
      g.n[0] = 23;
      g.x[0] = zeros(23);
      for (size_t i = 0; i < 23; i++) {
        float v = 3 * value(i, 70);
        g.x[0][i] = fabsf(v) < 0.05f ? 0.3f : v;
      }
      g.save[0] = zeros(23);
      gradcheck(&g);
      gc_free(&g);
    }
  }
  { /* dropout with a fixed mask */
    uint8_t mask[19];
    for (int i = 0; i < 19; i++)
      mask[i] = (uint8_t)(i % 3 != 1);
    gc g = {.name = "dropout",
            .nn = nn,
            .nx = 1,
            .ny = 19,
            .forward = drop_f,
            .backward = drop_b};
    g.aux[0] = mask;
    g.n[0] = 19;
    g.x[0] = gc_input(19, 80);
    gradcheck(&g);
    gc_free(&g);
  }
  { /* embedding with repeated indices */
    static const int32_t idx[6] = {2, 0, 2, 3, 2, 0};
    gc g = {.name = "embedding",
            .nn = nn,
            .nx = 1,
            .iv = {6, 4, 3},
            .ny = 18,
            .forward = emb_f,
            .backward = emb_b};
    g.aux[0] = idx;
    g.n[0] = 12;
    g.x[0] = gc_input(12, 90);
    gradcheck(&g);
    gc_free(&g);
  }
  { /* attention: one row block, and two (T = 34 > 32) */
    static const int shapes[][4] = {{2, 6, 8, 2}, {1, 34, 4, 2}};
    for (int s = 0; s < 2; s++) {
      gc g = {.name = s ? "attention (two row blocks)" : "attention",
              .nn = nn,
              .nx = 1,
              .forward = att_f,
              .backward = att_b};
      memcpy(g.iv, shapes[s], sizeof shapes[s]);
      size_t B = (size_t)g.iv[0], T = (size_t)g.iv[1], C = (size_t)g.iv[2];
      g.ny = B * T * C;
      g.n[0] = B * T * 3 * C;
      g.x[0] = gc_input(g.n[0], 100u + (unsigned)s);
      g.save[0] = zeros(B * (size_t)g.iv[3] * T * T);
      gradcheck(&g);
      gc_free(&g);
    }
  }
  { /* residual */
    gc g = {.name = "residual",
            .nn = nn,
            .nx = 2,
            .ny = 9,
            .forward = res_f,
            .backward = res_b};
    g.n[0] = g.n[1] = 9;
    g.x[0] = gc_input(9, 110), g.x[1] = gc_input(9, 111);
    gradcheck(&g);
    gc_free(&g);
  }
  { /* cross-entropy: the mean loss itself */
    static const int32_t y[4] = {1, 4, 0, 4};
    gc g = {.name = "crossentropy",
            .nn = nn,
            .nx = 1,
            .iv = {4, 5},
            .ny = 1,
            .forward = xent_f,
            .backward = xent_b};
    g.aux[0] = y;
    g.n[0] = 20;
    g.x[0] = gc_input(20, 120);
    gradcheck(&g);
    gc_free(&g);
  }
  print_message("gradcheck: worst error %.3g of the tolerance\n", gc_worst);
  lk_nn_free(nn);
}

/* ---- 4. threads ---------------------------------------------------------- */

/* Every layer on shapes that cut into many tasks (products of several
 * tiles, convolutions of several chunks and groups, attention over 12
 * heads of 3 row blocks, more than one part of every elementwise layer),
 * all outputs and gradients appended to one array. */
typedef struct outbuf {
  float *v;
  size_t n, cap;
} outbuf;

/* N more values; the array never moves (earlier pointers stay valid). */
static float *take(outbuf *o, size_t n) {
  if (!o->v) {
    o->cap = 4u << 20;
    o->v = malloc(o->cap * sizeof *o->v);
    assert_non_null(o->v);
  }
  assert_true(o->n + n <= o->cap);
  float *p = o->v + o->n;
  memset(p, 0, n * sizeof *p);
  o->n += n;
  return p;
}

static float *filled(size_t n, unsigned salt) {
  float *p = zeros(n);
  for (size_t i = 0; i < n; i++)
    p[i] = value(i, salt);
  return p;
}

static void everything(lk_nn *nn, outbuf *o) {
  o->n = 0;
  { /* the product, tiled along M and along N */
    int m = 520, n = 300, k = 64;
    float *a = filled((size_t)m * k, 1), *b = filled((size_t)k * n, 2);
    OK(lk_nn_sgemm(nn, false, false, m, n, k, 1, a, k, b, n, 0,
                   take(o, (size_t)m * n), n));
    OK(lk_nn_sgemm(nn, true, true, n, m, k, 0.5f, b, n, a, k, 0,
                   take(o, (size_t)m * n), m));
    free(a);
    free(b);
  }
  { /* linear */
    int N = 200, C = 96, OC = 160;
    float *x = filled((size_t)N * C, 3), *w = filled((size_t)OC * C, 4),
          *b = filled((size_t)OC, 5), *dy = filled((size_t)N * OC, 6);
    OK(lk_nn_linear_forward(nn, take(o, (size_t)N * OC), x, w, b, N, C, OC));
    float *dx = take(o, (size_t)N * C), *dw = take(o, (size_t)OC * C),
          *db = take(o, (size_t)OC);
    OK(lk_nn_linear_backward(nn, dx, dw, db, dy, x, w, N, C, OC));
    free(x), free(w), free(b), free(dy);
  }
  { /* conv2d: one sample a chunk (P = 196), and 8 a chunk (P = 16) */
    lk_nn_conv2d ps[2] = {{.n = 8,
                           .c = 8,
                           .h = 14,
                           .w = 14,
                           .oc = 16,
                           .kh = 3,
                           .kw = 3,
                           .pad_h = 1,
                           .pad_w = 1},
                          {.n = 37,
                           .c = 4,
                           .h = 4,
                           .w = 4,
                           .oc = 6,
                           .kh = 3,
                           .kw = 3,
                           .pad_h = 1,
                           .pad_w = 1}};
    for (int s = 0; s < 2; s++) {
      lk_nn_conv2d *p = &ps[s];
      int oh, ow;
      OK(lk_nn_conv2d_size(p, &oh, &ow));
      size_t ni = (size_t)p->n * p->c * p->h * p->w,
             nw = (size_t)p->oc * p->c * p->kh * p->kw,
             no = (size_t)p->n * p->oc * oh * ow;
      float *x = filled(ni, 7), *w = filled(nw, 8),
            *b = filled((size_t)p->oc, 9), *dy = filled(no, 10);
      OK(lk_nn_conv2d_forward(nn, p, take(o, no), x, w, b));
      float *dx = take(o, ni), *dw = take(o, nw), *db = take(o, (size_t)p->oc);
      OK(lk_nn_conv2d_backward(nn, p, dx, dw, db, dy, x, w));
      free(x), free(w), free(b), free(dy);
    }
  }
  { /* pooling */
    lk_nn_pool2d p = {.n = 8,
                      .c = 16,
                      .h = 28,
                      .w = 28,
                      .kh = 3,
                      .kw = 3,
                      .stride_h = 2,
                      .stride_w = 2,
                      .pad_h = 1,
                      .pad_w = 1};
    int oh, ow;
    OK(lk_nn_pool2d_size(&p, &oh, &ow));
    size_t ni = (size_t)p.n * p.c * p.h * p.w, no = (size_t)p.n * p.c * oh * ow;
    float *x = filled(ni, 11), *dy = filled(no, 12);
    int32_t *arg = calloc(no, sizeof *arg);
    OK(lk_nn_maxpool2d_forward(nn, &p, take(o, no), arg, x));
    OK(lk_nn_maxpool2d_backward(nn, &p, take(o, ni), dy, arg));
    OK(lk_nn_avgpool2d_forward(nn, &p, take(o, no), x));
    OK(lk_nn_avgpool2d_backward(nn, &p, take(o, ni), dy));
    free(x), free(dy), free(arg);
  }
  { /* batchnorm 2d and 1d */
    static const int shapes[][3] = {{16, 32, 49}, {300, 70, 1}};
    for (int s = 0; s < 2; s++) {
      int N = shapes[s][0], C = shapes[s][1], HW = shapes[s][2];
      size_t n = (size_t)N * C * HW;
      float *x = filled(n, 13), *dy = filled(n, 14), *w = filled((size_t)C, 15),
            *b = filled((size_t)C, 16), *rm = take(o, (size_t)C),
            *rv = take(o, (size_t)C), *mean = take(o, (size_t)C),
            *rstd = take(o, (size_t)C);
      OK(lk_nn_batchnorm_forward(nn, take(o, n), mean, rstd, x, w, b, rm, rv, N,
                                 C, HW, true, 0.1f, 1e-5f));
      OK(lk_nn_batchnorm_backward(nn, take(o, n), take(o, (size_t)C),
                                  take(o, (size_t)C), dy, x, w, mean, rstd, N,
                                  C, HW, true));
      free(x), free(dy), free(w), free(b);
    }
  }
  { /* layernorm, activations, dropout, residual on a GPT's [768, 128] */
    int N = 768, C = 128;
    size_t n = (size_t)N * C;
    float *x = filled(n, 17), *dy = filled(n, 18), *w = filled((size_t)C, 19),
          *b = filled((size_t)C, 20), *mean = take(o, (size_t)N),
          *rstd = take(o, (size_t)N);
    OK(lk_nn_layernorm_forward(nn, take(o, n), mean, rstd, x, w, b, N, C,
                               1e-5f));
    OK(lk_nn_layernorm_backward(nn, take(o, n), take(o, (size_t)C),
                                take(o, (size_t)C), dy, x, w, mean, rstd, N,
                                C));
    act_fwd fs[] = {lk_nn_relu_forward, lk_nn_gelu_forward, lk_nn_tanh_forward,
                    lk_nn_sigmoid_forward};
    act_bwd bs[] = {lk_nn_relu_backward, lk_nn_gelu_backward,
                    lk_nn_tanh_backward, lk_nn_sigmoid_backward};
    for (int a = 0; a < 4; a++) {
      float *y = take(o, n);
      OK(fs[a](nn, y, x, n));
      OK(bs[a](nn, take(o, n), dy, a == 1 ? x : y, n));
    }
    lk_rng rng;
    lk_rng_seed(&rng, 42, 0);
    uint8_t *mask = malloc(n);
    float *y = take(o, n);
    OK(lk_nn_dropout_forward(nn, y, mask, x, n, 0.1f, true, &rng));
    OK(lk_nn_dropout_backward(nn, take(o, n), dy, mask, n, 0.1f, true));
    OK(lk_nn_residual_forward(nn, take(o, n), x, dy, n));
    free(mask), free(x), free(dy), free(w), free(b);
  }
  { /* embedding, softmax, cross-entropy */
    int N = 768, V = 256, C = 128;
    int32_t *idx = malloc((size_t)N * sizeof *idx);
    for (int i = 0; i < N; i++)
      idx[i] = (int32_t)((i * 7919) % V);
    float *table = filled((size_t)V * C, 21), *dy = filled((size_t)N * C, 22);
    OK(lk_nn_embedding_forward(nn, take(o, (size_t)N * C), idx, table, N, V,
                               C));
    OK(lk_nn_embedding_backward(nn, take(o, (size_t)V * C), dy, idx, N, V, C));
    float *z = filled((size_t)N * V, 23);
    OK(lk_nn_softmax_forward(nn, take(o, (size_t)N * V), z, N, V));
    double loss;
    OK(lk_nn_crossentropy(nn, &loss, take(o, (size_t)N * V), z, idx, N, V, 1,
                          NULL));
    *take(o, 1) = (float)loss;
    free(idx), free(table), free(dy), free(z);
  }
  { /* attention: 12 heads of 3 row blocks */
    int B = 3, T = 70, C = 32, NH = 4;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    float *qkv = filled(nq, 24), *dy = filled(no, 25);
    float *att = take(o, (size_t)B * NH * T * T);
    OK(lk_nn_attention_forward(nn, take(o, no), att, qkv, B, T, C, NH));
    OK(lk_nn_attention_backward(nn, take(o, nq), dy, qkv, att, B, T, C, NH));
    free(qkv), free(dy);
  }
}

static void same_at_any_thread_count(void **state) {
  (void)state;
  static const unsigned settings[] = {0, LK_NN_NO_ONEDNN, LK_NN_PORTABLE,
                                      LK_NN_NO_BLAS, LK_NN_BF16};
  for (int f = 0; f < 5; f++) {
    unsigned flags = settings[f];
    if ((flags & LK_NN_BF16) && !lk_nn_bf16_engine()) {
      print_message("bf16 products: skipped, this CPU has no AVX512_BF16\n");
      continue;
    }
    outbuf ref = {0}, o = {0};
    lk_nn *nn1 = open_nn(1, flags);
    everything(nn1, &ref);
    lk_nn_free(nn1);
    for (int t = 1; t <= 3; t++) {
      lk_nn *nn = open_nn(t, flags);
      for (int again = 0; again < (t == 3 ? 2 : 1); again++) {
        everything(nn, &o);
        assert_int_equal(o.n, ref.n);
        if (memcmp(o.v, ref.v, ref.n * sizeof *o.v)) {
          size_t i = 0;
          while (o.v[i] == ref.v[i] || (isnan(o.v[i]) && isnan(ref.v[i])))
            i++;
          print_error("%s at %d threads (run %d): value %zu of %zu is %.9g, "
                      "%.9g at 1 thread\n",
                      lk_nn_backend(nn), t, again + 1, i, ref.n, (double)o.v[i],
                      (double)ref.v[i]);
          fail();
        }
      }
      lk_nn_free(nn);
    }
    free(ref.v);
    free(o.v);
  }
}

/* The exp-based kernels in the CPU's widest vectors (lk_nn_isa) give the
 * bits of the portable 16-byte ones, as vmath.h says they must. */
static void isa_agree(void **state) {
  (void)state;
  lk_nn *wide = open_nn(1, 0), *base = open_nn(1, LK_NN_PORTABLE);
  assert_string_equal(lk_nn_isa(base), "base");
  print_message("widest kernels: %s\n", lk_nn_isa(wide));
  size_t n = 1000 + 13;
  float *x = zeros(n), *d = filled(n, 2);
  for (size_t i = 0; i < n; i++) /* -30 to 30, every range of the code */
    x[i] = 60 * value(i, 1) * (i % 3 ? 1 : 0.02f);
  act_fwd fs[] = {lk_nn_gelu_forward, lk_nn_tanh_forward,
                  lk_nn_sigmoid_forward};
  for (int a = 0; a < 3; a++) {
    float *y0 = zeros(n), *y1 = zeros(n);
    OK(fs[a](wide, y0, x, n));
    OK(fs[a](base, y1, x, n));
    assert_memory_equal(y0, y1, n * sizeof *y0);
    free(y0), free(y1);
  }
  float *g0 = zeros(n), *g1 = zeros(n);
  OK(lk_nn_gelu_backward(wide, g0, d, x, n));
  OK(lk_nn_gelu_backward(base, g1, d, x, n));
  assert_memory_equal(g0, g1, n * sizeof *g0);
  int N = 7, V = 131;
  int32_t y[7] = {0, 5, 130, 64, 1, 2, 3};
  float *p0 = zeros((size_t)N * V), *p1 = zeros((size_t)N * V);
  OK(lk_nn_softmax_forward(wide, p0, x, N, V));
  OK(lk_nn_softmax_forward(base, p1, x, N, V));
  assert_memory_equal(p0, p1, (size_t)N * V * sizeof *p0);
  double l0, l1;
  memset(p0, 0, (size_t)N * V * sizeof *p0);
  memset(p1, 0, (size_t)N * V * sizeof *p1);
  OK(lk_nn_crossentropy(wide, &l0, p0, x, y, N, V, 1, NULL));
  OK(lk_nn_crossentropy(base, &l1, p1, x, y, N, V, 1, NULL));
  assert_true(l0 == l1);
  assert_memory_equal(p0, p1, (size_t)N * V * sizeof *p0);
  free(x), free(d), free(g0), free(g1), free(p0), free(p1);
  /* 2 x 2 max pooling (AVX-512's own plane loop): rows of 7, 14, 20 and
   * 14 windows with a column left over, ties, -inf and NaN in windows */
  int widths[4] = {14, 28, 40, 29};
  for (int w = 0; w < 4; w++) {
    lk_nn_pool2d pp = {
        .n = 2, .c = 3, .h = 6, .w = widths[w], .kh = 2, .kw = 2};
    size_t ni = (size_t)2 * 3 * 6 * widths[w], no = ni / 4;
    float *in = zeros(ni), *o0 = zeros(no), *o1 = zeros(no);
    int32_t *a0 = calloc(no, sizeof *a0), *a1 = calloc(no, sizeof *a1);
    assert_non_null(a0), assert_non_null(a1);
    for (size_t i = 0; i < ni; i++)
      in[i] = i % 11 == 3   ? NAN
              : i % 13 == 5 ? -INFINITY
                            : (float)((i * 7) % 5); /* many ties */
    OK(lk_nn_maxpool2d_forward(wide, &pp, o0, a0, in));
    OK(lk_nn_maxpool2d_forward(base, &pp, o1, a1, in));
    assert_memory_equal(o0, o1, no * sizeof *o0);
    assert_memory_equal(a0, a1, no * sizeof *a0);
    free(in), free(o0), free(o1), free(a0), free(a1);
  }
  lk_nn_free(wide);
  lk_nn_free(base);
  /* the kit's own product too: the widest against 16 bytes, every case */
  wide = open_nn(2, LK_NN_NO_BLAS), base = open_nn(2, LK_NN_PORTABLE);
  int m = 300, nn_ = 77, k = 333;
  float *a = filled((size_t)m * k, 3), *b = filled((size_t)k * nn_, 4);
  float *c0 = filled((size_t)m * nn_, 5), *c1 = copy(c0, (size_t)m * nn_);
  for (int tr = 0; tr < 4; tr++) {
    bool ta = tr & 1, tb = tr & 2;
    OK(lk_nn_sgemm(wide, ta, tb, m, nn_, k, 0.5f, a, ta ? m : k, b,
                   tb ? k : nn_, 0.25f, c0, nn_));
    OK(lk_nn_sgemm(base, ta, tb, m, nn_, k, 0.5f, a, ta ? m : k, b,
                   tb ? k : nn_, 0.25f, c1, nn_));
    assert_memory_equal(c0, c1, (size_t)m * nn_ * sizeof *c0);
  }
  free(a), free(b), free(c0), free(c1);
  lk_nn_free(wide);
  lk_nn_free(base);
}

/* Many small jobs back to back, on more threads than cores: every one
 * complete when its call returns, whoever ran its tasks. */
static void pool_stress(void **state) {
  (void)state;
  lk_nn *nn = open_nn(3, 0);
  size_t n = 4 * 16384 + 5; /* five parts */
  float *a = filled(n, 1), *b = filled(n, 2), *y = zeros(n);
  for (int r = 0; r < 3000; r++) {
    b[(size_t)r % n] = (float)r;
    OK(lk_nn_residual_forward(nn, y, a, b, n));
    for (size_t i = (size_t)r % 7; i < n; i += 4099)
      assert_true(y[i] == a[i] + b[i]);
    assert_true(y[(size_t)r % n] == a[(size_t)r % n] + (float)r);
  }
  free(a), free(b), free(y);
  lk_nn_free(nn);
}

/* ---- 5. errors ----------------------------------------------------------- */

/* RC must be LK_EINVAL (or CODE) with a message containing every one of
 * the NULL-terminated strings. */
static void expect_error(int rc, int code, ...) {
  if (rc != code) {
    print_error("returned %d, expected %d (%s)\n", rc, code, lk_last_error());
    fail();
  }
  va_list ap;
  va_start(ap, code);
  for (const char *s; (s = va_arg(ap, const char *));)
    if (!strstr(lk_last_error(), s)) {
      print_error("message \"%s\" does not name \"%s\"\n", lk_last_error(), s);
      fail();
    }
  va_end(ap);
}

static void errors(void **state) {
  (void)state;
  lk_nn *nn = open_nn(2, 0);
  float buf[64] = {0}, out[64];
  int32_t idx[4] = {0, 1, 5, 2};
  int oh, ow;
  lk_nn *none;
  expect_error(lk_nn_create(&none, -1, 0), LK_EINVAL, "lk_nn_create", "-1",
               NULL);
  expect_error(lk_nn_create(&none, 1, 0x100), LK_EINVAL, "flags", NULL);
  expect_error(
      lk_nn_sgemm(nn, false, false, -1, 2, 2, 1, buf, 2, buf, 2, 0, out, 2),
      LK_EINVAL, "sgemm", "M = -1", NULL);
  expect_error(
      lk_nn_sgemm(nn, false, false, 2, 3, 4, 1, buf, 3, buf, 3, 0, out, 3),
      LK_EINVAL, "sgemm", "lda = 3", NULL);
  expect_error(lk_nn_linear_forward(nn, out, buf, buf, NULL, 0, 3, 2),
               LK_EINVAL, "linear", "N = 0", NULL);
  expect_error(
      lk_nn_linear_backward(nn, out, NULL, NULL, buf, buf, buf, 2, -3, 2),
      LK_EINVAL, "linear", "C = -3", NULL);
  lk_nn_conv2d big = {
      .n = 1, .c = 1, .h = 2, .w = 2, .oc = 1, .kh = 5, .kw = 5, .pad_h = 1};
  expect_error(lk_nn_conv2d_size(&big, &oh, &ow), LK_EINVAL, "conv2d",
               "[1, 1, 2, 2]", "[1, 1, 5, 5]", "larger than the padded input",
               NULL);
  expect_error(lk_nn_conv2d_forward(nn, &big, out, buf, buf, NULL), LK_EINVAL,
               "conv2d", NULL);
  lk_nn_conv2d zero = {
      .n = 1, .c = 0, .h = 4, .w = 4, .oc = 1, .kh = 1, .kw = 1};
  expect_error(lk_nn_conv2d_backward(nn, &zero, out, NULL, NULL, buf, buf, buf),
               LK_EINVAL, "conv2d", "[1, 0, 4, 4]", ">= 1", NULL);
  lk_nn_conv2d negpad = {
      .n = 1, .c = 1, .h = 4, .w = 4, .oc = 1, .kh = 1, .kw = 1, .pad_w = -1};
  expect_error(lk_nn_conv2d_size(&negpad, &oh, &ow), LK_EINVAL, "conv2d",
               "padding", NULL);
  lk_nn_pool2d wide = {
      .n = 1, .c = 1, .h = 3, .w = 3, .kh = 6, .kw = 6, .pad_h = 1, .pad_w = 1};
  expect_error(lk_nn_maxpool2d_forward(nn, &wide, out, idx, buf), LK_EINVAL,
               "maxpool2d", "window 6 x 6", "[1, 1, 3, 3]",
               "larger than the padded input", NULL);
  lk_nn_pool2d halfpad = {
      .n = 1, .c = 1, .h = 8, .w = 8, .kh = 2, .kw = 2, .pad_h = 2};
  expect_error(lk_nn_avgpool2d_forward(nn, &halfpad, out, buf), LK_EINVAL,
               "avgpool2d", "at most half", NULL);
  expect_error(lk_nn_batchnorm_forward(nn, out, buf, buf, buf, NULL, NULL, NULL,
                                       NULL, 1, 3, 1, true, 0.1f, 1e-5f),
               LK_EINVAL, "batchnorm", "more than one value", NULL);
  expect_error(lk_nn_batchnorm_forward(nn, out, buf, buf, buf, NULL, NULL, NULL,
                                       NULL, 4, 3, 1, false, 0.1f, 1e-5f),
               LK_EINVAL, "batchnorm", "running_mean", NULL);
  expect_error(
      lk_nn_layernorm_forward(nn, out, buf, buf, buf, NULL, NULL, 3, 0, 1e-5f),
      LK_EINVAL, "layernorm", "C = 0", NULL);
  expect_error(lk_nn_gelu_forward(nn, out, buf, 0), LK_EINVAL, "gelu", NULL);
  expect_error(lk_nn_dropout_forward(nn, out, NULL, buf, 4, 1.5f, false, NULL),
               LK_EINVAL, "dropout", "1.5", NULL);
  expect_error(lk_nn_attention_forward(nn, out, buf, buf, 1, 2, 6, 4),
               LK_EINVAL, "attention", "C = 6", "NH = 4", NULL);
  /* an index out of range: named, and nothing written */
  for (int i = 0; i < 64; i++)
    out[i] = -7;
  expect_error(lk_nn_embedding_forward(nn, out, idx, buf, 4, 5, 2), LK_EINVAL,
               "embedding", "index 5 at position 2", "5 rows", NULL);
  for (int i = 0; i < 64; i++)
    assert_true(out[i] == -7);
  expect_error(lk_nn_embedding_backward(nn, out, buf, idx, 4, 5, 2), LK_EINVAL,
               "embedding", "index 5", NULL);
  for (int i = 0; i < 64; i++)
    assert_true(out[i] == -7);
  double loss;
  expect_error(lk_nn_crossentropy(nn, &loss, out, buf, idx, 4, 5, 1, NULL),
               LK_EINVAL, "crossentropy", "target 5 of row 2", NULL);
  for (int i = 0; i < 64; i++)
    assert_true(out[i] == -7);
  int shape[3] = {2, 3, 4}, fs[3], fn;
  expect_error(lk_nn_flatten(shape, 3, 2, 1, fs, &fn), LK_EINVAL, "flatten",
               NULL);
  lk_nn_free(nn);
}

/* Sizes whose products wrap (in int, long long or size_t) are refused by
 * the shape functions and the layers, naming the sizes, where they were
 * accepted with a wrapped size (a kernel of 2^64 values as 0, a flatten
 * of four 2^24 dimensions as 0) or went on to index past their arrays.
 * Every product goes through lk_size_mul, checked here first. */
static void overflowing_shapes(void **state) {
  (void)state;
  size_t p = 7;
  assert_true(lk_size_mul(SIZE_MAX, 1, &p) && p == SIZE_MAX);
  assert_true(lk_size_mul(0, SIZE_MAX, &p) && p == 0);
  assert_true(lk_size_mul((size_t)1 << 31, (size_t)1 << 31, &p) &&
              p == (size_t)1 << 62);
  p = 7;
  assert_false(lk_size_mul(SIZE_MAX, 2, &p));
  assert_false(lk_size_mul((size_t)1 << 32, (size_t)1 << 32, &p));
  assert_int_equal(p, 7); /* left as it was */
  size_t s2[2] = {65536, 65536},
         s4[4] = {1u << 24, 1u << 24, 1u << 24, 1u << 24};
  assert_true(lk_shape_numel(s2, 2, &p) && p == (size_t)1 << 32);
  assert_false(lk_shape_numel(s4, 4, &p));
  assert_true(lk_shape_numel(s4, 0, &p) && p == 1);

  lk_nn *nn = open_nn(1, 0);
  float buf[64] = {0}, out[64] = {0};
  int oh = -1, ow = -1;
  /* a kernel of C KH KW = 2^64 values: 0 in a long long */
  lk_nn_conv2d kernel = {.n = 1,
                         .c = 1 << 21,
                         .h = 1 << 22,
                         .w = 1 << 22,
                         .oc = 1,
                         .kh = 1 << 21,
                         .kw = 1 << 22};
  expect_error(lk_nn_conv2d_size(&kernel, &oh, &ow), LK_EINVAL, "conv2d",
               "[1, 2097152, 4194304, 4194304]",
               "[1, 2097152, 2097152, 4194304]", "too large", NULL);
  assert_int_equal(oh, -1);
  /* an input of 2^31 x 2^29 x 2^31 x 2^31 values, one output pixel */
  lk_nn_conv2d input = {.n = INT_MAX,
                        .c = 1 << 29,
                        .h = INT_MAX,
                        .w = INT_MAX,
                        .oc = 1,
                        .kh = 1,
                        .kw = 1,
                        .stride_h = INT_MAX,
                        .stride_w = INT_MAX};
  expect_error(lk_nn_conv2d_size(&input, &oh, &ow), LK_EINVAL, "conv2d",
               "more bytes than a size_t counts", NULL);
  expect_error(lk_nn_conv2d_forward(nn, &input, out, buf, buf, NULL), LK_EINVAL,
               "conv2d", "more bytes than a size_t counts", NULL);
  /* a window of 2^32 values (avgpool's divisor, an int) */
  lk_nn_pool2d window = {.n = 1,
                         .c = 1,
                         .h = 1,
                         .w = 1,
                         .kh = 65536,
                         .kw = 65536,
                         .pad_h = 32768,
                         .pad_w = 32768};
  expect_error(lk_nn_pool2d_size(&window, &oh, &ow), LK_EINVAL, "pool2d",
               "window 65536 x 65536", "more values than an int counts", NULL);
  expect_error(lk_nn_avgpool2d_forward(nn, &window, out, buf), LK_EINVAL,
               "avgpool2d", "window 65536 x 65536", NULL);
  /* H + 2 pad past INT_MAX: the output's height in int */
  lk_nn_pool2d padded = {.n = 1,
                         .c = 1,
                         .h = INT_MAX / 4,
                         .w = 1,
                         .kh = INT_MAX,
                         .kw = 1,
                         .pad_h = (1 << 30) - 1};
  expect_error(lk_nn_pool2d_size(&padded, &oh, &ow), LK_EINVAL, "pool2d",
               "[1, 1, 536870911, 1]", "int32", NULL);
  assert_int_equal(oh, -1);
  /* planes of a batch of 2^31 x 2^31 */
  lk_nn_pool2d planes = {
      .n = INT_MAX, .c = INT_MAX, .h = 2, .w = 2, .kh = 2, .kw = 2};
  expect_error(lk_nn_maxpool2d_forward(nn, &planes, out, (int32_t *)buf, buf),
               LK_EINVAL, "maxpool2d", "more bytes than a size_t counts", NULL);
  /* flatten: 2^32 does not fit an int; four 2^24 wrap a long long to 0 */
  int big2[2] = {65536, 65536}, big4[4] = {1 << 24, 1 << 24, 1 << 24, 1 << 24};
  int fo[4] = {-1, -1, -1, -1}, fn = -1;
  expect_error(lk_nn_flatten(big2, 2, 0, 1, fo, &fn), LK_EINVAL, "flatten",
               "make 4294967296, more than an int holds", NULL);
  expect_error(lk_nn_flatten(big4, 4, 0, -1, fo, &fn), LK_EINVAL, "flatten",
               "more than an int holds", NULL);
  expect_error(lk_nn_flatten(big4, 4, 1, 3, fo, &fn), LK_EINVAL, "flatten",
               "dimensions 1 to 3", NULL);
  assert_int_equal(fn, -1);
  assert_int_equal(fo[0], -1);
  /* attention: att [B, NH, T, T] of 2^31 x 2^13 x 2^30 values */
  expect_error(
      lk_nn_attention_forward(nn, out, buf, buf, INT_MAX, 32768, 8192, 8192),
      LK_EINVAL, "attention", "more bytes than a size_t counts", NULL);
  /* batch norm: N C HW = 2^63 values */
  expect_error(lk_nn_batchnorm_forward(nn, out, buf, buf, buf, NULL, NULL, NULL,
                                       NULL, 1 << 21, 1 << 21, 1 << 21, true,
                                       0.1f, 1e-5f),
               LK_EINVAL, "batchnorm", "more bytes than a size_t counts", NULL);
  for (int i = 0; i < 64; i++)
    assert_true(out[i] == 0);
  lk_nn_free(nn);
}

/* A workspace over its limit is LK_ENOMEM naming the layer, and writes
 * nothing; raising the limit makes the same call work, and the workspace
 * then stays at its size. */
static void workspace_limit(void **state) {
  (void)state;
  lk_nn *nn = open_nn(2, 0);
  lk_nn_conv2d p = {.n = 4,
                    .c = 3,
                    .h = 16,
                    .w = 16,
                    .oc = 8,
                    .kh = 3,
                    .kw = 3,
                    .pad_h = 1,
                    .pad_w = 1};
  size_t ni = 4 * 3 * 16 * 16, nw = 8 * 3 * 9, no = 4 * 8 * 16 * 16;
  float *x = filled(ni, 1), *w = filled(nw, 2), *y = zeros(no);
  for (size_t i = 0; i < no; i++)
    y[i] = -7;
  lk_nn_set_workspace_limit(nn, 1000);
  expect_error(lk_nn_conv2d_forward(nn, &p, y, x, w, NULL), LK_ENOMEM, "conv2d",
               "limit of 1000", NULL);
  for (size_t i = 0; i < no; i++)
    assert_true(y[i] == -7);
  expect_error(lk_nn_conv2d_backward(nn, &p, y, y, NULL, y, x, w), LK_ENOMEM,
               "conv2d", NULL);
  lk_nn_set_workspace_limit(nn, (size_t)-1);
  OK(lk_nn_conv2d_forward(nn, &p, y, x, w, NULL));
  size_t size = lk_nn_workspace_size(nn);
  assert_true(size >= (size_t)27 * 256 * 4 * 2);
  OK(lk_nn_conv2d_forward(nn, &p, y, x, w, NULL));
  assert_int_equal(lk_nn_workspace_size(nn), size);
  free(x), free(w), free(y);
  lk_nn_free(nn);
}

/* ---- 6. dropout's masks, flatten's shapes -------------------------------- */

static void dropout_masks(void **state) {
  (void)state;
  size_t n = 100003;
  float *x = filled(n, 1), *y = zeros(n), *y2 = zeros(n);
  uint8_t *m = malloc(n), *m2 = malloc(n);
  lk_rng rng, before, advanced;
  lk_rng_seed(&rng, 7, 3);
  before = advanced = rng;
  lk_rng_u64(&advanced);
  lk_nn *nn1 = open_nn(1, 0), *nn3 = open_nn(3, 0);
  OK(lk_nn_dropout_forward(nn1, y, m, x, n, 0.3f, true, &rng));
  /* one draw a call, whatever n */
  assert_memory_equal(&rng, &advanced, sizeof rng);
  /* the same generator state gives the same mask at any thread count */
  lk_rng again = before;
  OK(lk_nn_dropout_forward(nn3, y2, m2, x, n, 0.3f, true, &again));
  assert_memory_equal(m, m2, n);
  assert_memory_equal(y, y2, n * sizeof *y);
  /* about 1 - p kept, scaled by 1 / (1 - p), the others zeroed */
  size_t kept = 0;
  float scale = 1.0f / (float)(1.0 - (double)0.3f);
  for (size_t i = 0; i < n; i++) {
    kept += m[i];
    assert_true(y[i] == (m[i] ? x[i] * scale : 0));
  }
  assert_true(fabs((double)kept / n - 0.7) < 0.01);
  /* the next call draws another mask */
  OK(lk_nn_dropout_forward(nn3, y2, m2, x, n, 0.3f, true, &again));
  assert_true(memcmp(m, m2, n) != 0);
  /* a mask as documented: block j from lk_rng_seed(r, draw, j), value i
   * kept when its 32-bit half is >= p 2^32 */
  lk_rng r = before;
  uint64_t seed = lk_rng_u64(&r);
  lk_rng_seed(&r, seed, 1);
  uint64_t wd = lk_rng_u64(&r);
  uint32_t thr = (uint32_t)ceil(0.3f * 4294967296.0);
  assert_int_equal(m[4096], (uint32_t)wd >= thr);
  assert_int_equal(m[4097], (uint32_t)(wd >> 32) >= thr);
  /* evaluation: the identity, and the generator untouched */
  lk_rng still = rng;
  OK(lk_nn_dropout_forward(nn1, y2, NULL, x, n, 0.3f, false, &still));
  assert_memory_equal(&still, &rng, sizeof rng);
  assert_memory_equal(y2, x, n * sizeof *x);
  float *dx = zeros(n);
  OK(lk_nn_dropout_backward(nn1, dx, x, NULL, n, 0.3f, false));
  assert_memory_equal(dx, x, n * sizeof *x);
  /* p = 1 drops everything, p = 0 keeps everything */
  OK(lk_nn_dropout_forward(nn1, y2, m2, x, n, 1, true, &rng));
  for (size_t i = 0; i < n; i++)
    assert_true(y2[i] == 0 && m2[i] == 0);
  OK(lk_nn_dropout_forward(nn1, y2, m2, x, n, 0, true, &rng));
  assert_memory_equal(y2, x, n * sizeof *x);
  free(x), free(y), free(y2), free(m), free(m2), free(dx);
  lk_nn_free(nn1);
  lk_nn_free(nn3);
}

static void flatten_shapes(void **state) {
  (void)state;
  int s[4] = {2, 3, 4, 5}, o[4], n;
  OK(lk_nn_flatten(s, 4, 1, -1, o, &n));
  assert_int_equal(n, 2);
  assert_int_equal(o[0], 2);
  assert_int_equal(o[1], 60);
  OK(lk_nn_flatten(s, 4, 0, -1, o, &n));
  assert_int_equal(n, 1);
  assert_int_equal(o[0], 120);
  OK(lk_nn_flatten(s, 4, 1, 2, s, &n)); /* in place */
  assert_int_equal(n, 3);
  assert_int_equal(s[0], 2);
  assert_int_equal(s[1], 12);
  assert_int_equal(s[2], 5);
}

static void context(void **state) {
  (void)state;
  lk_nn *nn = open_nn(0, 0);
  assert_true(lk_nn_threads(nn) >= 1);
#if defined(LK_HAVE_ONEDNN)
  const char *best = "onednn";
#elif defined(LK_HAVE_BLAS)
  const char *best = "openblas";
#else
  const char *best = "portable";
#endif
#ifdef LK_HAVE_BLAS
  const char *second = "openblas";
#else
  const char *second = "portable";
#endif
  assert_string_equal(lk_nn_backend(nn), best);
  lk_nn_free(nn);
  nn = open_nn(1, LK_NN_NO_ONEDNN);
  assert_string_equal(lk_nn_backend(nn), second);
  lk_nn_free(nn);
  /* LOOPKIT_GEMM takes a library out for every context; other values
   * change nothing */
  static const struct {
    const char *value, *want;
  } env[] = {{"openblas", NULL},
             {"portable", "portable"},
             {"onednn", ""},
             {"bogus", ""}};
  for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
    assert_int_equal(setenv("LOOPKIT_GEMM", env[i].value, 1), 0);
    nn = open_nn(1, 0);
    const char *want = !env[i].want   ? second
                       : *env[i].want ? env[i].want
                                      : best;
    assert_string_equal(lk_nn_backend(nn), want);
    lk_nn_free(nn);
  }
  assert_int_equal(unsetenv("LOOPKIT_GEMM"), 0);
  nn = open_nn(2, LK_NN_PORTABLE);
  assert_int_equal(lk_nn_threads(nn), 2);
  assert_string_equal(lk_nn_backend(nn), "portable");
  assert_string_equal(lk_nn_isa(nn), "base");
  assert_int_equal(lk_nn_workspace_size(nn), 0);
  lk_nn_free(nn);
  nn = open_nn(1, LK_NN_NO_BLAS);
  assert_string_equal(lk_nn_backend(nn), "portable");
  lk_nn_free(nn);
  lk_nn_free(NULL);
}

/* lk_nn_parallel: every task runs once, on a thread below the count, with
 * two contexts of one thread count sharing the pool; a call from inside a
 * task runs on the caller; bad arguments are refused. */
typedef struct par {
  lk_nn *nn;
  int threads, runs[64];
  _Atomic int bad_thread;
  int inner[64];
} par;

static void inner_task(void *ctx, int task, int thread) {
  (void)thread;
  ((int *)ctx)[task] += 1;
}

static void par_task(void *ctx, int task, int thread) {
  par *p = ctx;
  if (thread < 0 || thread >= p->threads)
    atomic_store(&p->bad_thread, 1);
  p->runs[task]++;
  if (task == 7) /* nested: the pool is busy, so it runs here */
    lk_nn_parallel(p->nn, 64, inner_task, p->inner);
}

static void parallel_tasks(void **state) {
  (void)state;
  lk_nn *a, *b;
  assert_int_equal(lk_nn_create(&a, 2, LK_NN_NO_BLAS), 0);
  assert_int_equal(lk_nn_create(&b, 2, LK_NN_NO_BLAS), 0);
  for (int round = 0; round < 2; round++) {
    par p = {.nn = round ? b : a, .threads = 2};
    assert_int_equal(lk_nn_parallel(p.nn, 64, par_task, &p), 0);
    for (int i = 0; i < 64; i++) {
      assert_int_equal(p.runs[i], 1);
      assert_int_equal(p.inner[i], 1);
    }
    assert_int_equal(atomic_load(&p.bad_thread), 0);
  }
  lk_nn_free(a); /* b keeps the shared pool running */
  par p = {.nn = b, .threads = 2};
  assert_int_equal(lk_nn_parallel(b, 64, par_task, &p), 0);
  assert_int_equal(p.runs[63], 1);
  assert_int_equal(lk_nn_parallel(b, 0, par_task, &p), 0);
  assert_int_equal(lk_nn_parallel(b, -1, par_task, &p), LK_EINVAL);
  assert_int_equal(lk_nn_parallel(b, 1, NULL, &p), LK_EINVAL);
  assert_int_equal(lk_nn_parallel(NULL, 1, par_task, &p), LK_EINVAL);
  lk_nn_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(context),
      cmocka_unit_test(against_torch),
      cmocka_unit_test(wrong_layers_fail),
      cmocka_unit_test(gemm_cases),
      cmocka_unit_test(bf16_gemm_cases),
      cmocka_unit_test(bf16_default),
      cmocka_unit_test(gradchecks),
      cmocka_unit_test(same_at_any_thread_count),
      cmocka_unit_test(pool_stress),
      cmocka_unit_test(isa_agree),
      cmocka_unit_test(errors),
      cmocka_unit_test(workspace_limit),
      cmocka_unit_test(dropout_masks),
      cmocka_unit_test(flatten_shapes),
      cmocka_unit_test(overflowing_shapes),
      cmocka_unit_test(parallel_tasks),
  };
  return cmocka_run_group_tests_name("nn", tests, load_refs, free_refs);
}
