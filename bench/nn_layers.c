/* bench/nn_layers: where the time of the layer kit (loopkit/nn.h) goes, on
 * the layers of the two networks later work trains with it, at 1 and 2
 * threads:
 *
 * - the Fashion-MNIST CNN, batch 64: conv(1->32, 3x3, pad 1), ReLU,
 *   maxpool 2, conv(32->64, 3x3, pad 1), ReLU, maxpool 2, flatten,
 *   linear(3136->128), ReLU, linear(128->10), cross-entropy;
 * - nanoGPT's baby GPT, batch 12 x block 64 = 768 tokens: n_embd 128, 4
 *   heads, 4 layers, byte vocabulary 256, lm head tied to the token
 *   embedding. One block's layers are timed; the step total counts them
 *   4 times.
 *
 * Each row is one forward and one backward of the layer (every gradient
 * the network needs: no input gradient for the first conv or the
 * embeddings), the best of 5 timed blocks of repetitions, after a warm-up.
 * GFLOP/s counts 2 flops per multiply-add of the products the layer does
 * by definition (conv: 2 N OC K P per product; attention: the full T x T
 * for q k^T and att v, though the kit skips part of the masked triangle).
 * The step total is the sum of the rows: the network's compute without the
 * optimizer, the data or the framework, as samples or tokens per second.
 * torch's figures for the same networks (issue: oneDNN, 1.13, 1 thread:
 * 3550 samples/s and 14.3k tokens/s) are printed for scale, not measured
 * here.
 *
 * Last, the sgemm peak on a square product, and for a few products the
 * kit's two threads against OpenBLAS's own two (the choice src/nn/gemm.c
 * explains).
 *
 * OpenBLAS 0.3.21 (Debian 12) picks its Cooperlake (AVX-512) kernels on
 * this project's EPYC by itself; it ran its Haswell (AVX2) ones here only
 * because the machine's environment sets OPENBLAS_CORETYPE=Haswell, which
 * it obeys first. Unset (or SKYLAKEX), the sgemm ran at about 200 GFLOP/s
 * on one core instead of 100. The program says so when it applies.
 *
 *   bench/nn_layers [--quick] [--portable] [--bf16]
 *     --quick: shorter blocks, noisier; --portable: LK_NN_PORTABLE;
 *     --bf16: LK_NN_BF16, the products of bf16-mixed */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loopkit/loopkit.h>
#include <loopkit/nn.h>

#ifdef LK_HAVE_BLAS
#include <cblas.h>
#endif

static double block_s = 0.03; /* seconds a timed block lasts at least */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "bench/nn_layers: %s: %s\n", what, lk_last_error());
  exit(1);
}

#define CK(call)                                                               \
  do {                                                                         \
    if ((call) != 0)                                                           \
      die(#call);                                                              \
  } while (0)

static float *buf(size_t n, unsigned salt) {
  float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (!p)
    die("out of memory");
  uint32_t h = salt * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    h ^= h << 13, h ^= h >> 17, h ^= h << 5;
    p[i] = (float)((double)(h % 20001) / 10000.0 - 1.0) * 0.5f;
  }
  return p;
}

/* ---- layers -------------------------------------------------------------- */

typedef struct item item;
struct item {
  const char *name;
  char shape[64];
  double flops;
  int times; /* in the step */
  void (*run)(item *it, lk_nn *nn);
  /* what the layer works on */
  lk_nn_conv2d conv;
  lk_nn_pool2d pool;
  int N, C, OC, T, NH, V;
  size_t n;
  bool dinp;
  float *x, *w, *b, *y, *dy, *dx, *dw, *db, *s1, *s2;
  int32_t *idx;
};

static void run_conv(item *it, lk_nn *nn) {
  CK(lk_nn_conv2d_forward(nn, &it->conv, it->y, it->x, it->w, it->b));
  CK(lk_nn_conv2d_backward(nn, &it->conv, it->dinp ? it->dx : NULL, it->dw,
                           it->db, it->dy, it->x, it->w));
}
static void run_relu(item *it, lk_nn *nn) {
  CK(lk_nn_relu_forward(nn, it->y, it->x, it->n));
  CK(lk_nn_relu_backward(nn, it->dx, it->dy, it->y, it->n));
}
static void run_gelu(item *it, lk_nn *nn) {
  CK(lk_nn_gelu_forward(nn, it->y, it->x, it->n));
  CK(lk_nn_gelu_backward(nn, it->dx, it->dy, it->x, it->n));
}
static void run_maxpool(item *it, lk_nn *nn) {
  CK(lk_nn_maxpool2d_forward(nn, &it->pool, it->y, it->idx, it->x));
  CK(lk_nn_maxpool2d_backward(nn, &it->pool, it->dx, it->dy, it->idx));
}
static void run_linear(item *it, lk_nn *nn) {
  CK(lk_nn_linear_forward(nn, it->y, it->x, it->w, it->b, it->N, it->C,
                          it->OC));
  CK(lk_nn_linear_backward(nn, it->dx, it->dw, it->db, it->dy, it->x, it->w,
                           it->N, it->C, it->OC));
}
static void run_xent(item *it, lk_nn *nn) {
  double loss;
  CK(lk_nn_crossentropy(nn, &loss, it->dx, it->x, it->idx, it->N, it->V, 1,
                        NULL));
}
static void run_layernorm(item *it, lk_nn *nn) {
  CK(lk_nn_layernorm_forward(nn, it->y, it->s1, it->s2, it->x, it->w, it->b,
                             it->N, it->C, 1e-5f));
  CK(lk_nn_layernorm_backward(nn, it->dx, it->dw, it->db, it->dy, it->x, it->w,
                              it->s1, it->s2, it->N, it->C));
}
static void run_attention(item *it, lk_nn *nn) {
  int B = it->N / it->T;
  CK(lk_nn_attention_forward(nn, it->y, it->s1, it->x, B, it->T, it->C,
                             it->NH));
  CK(lk_nn_attention_backward(nn, it->dx, it->dy, it->x, it->s1, B, it->T,
                              it->C, it->NH));
}
static void run_residual(item *it, lk_nn *nn) {
  CK(lk_nn_residual_forward(nn, it->y, it->x, it->w, it->n));
  CK(lk_nn_residual_backward(nn, it->dx, it->dw, it->dy, it->n));
}
static void run_embedding(item *it, lk_nn *nn) {
  CK(lk_nn_embedding_forward(nn, it->y, it->idx, it->w, it->N, it->V, it->C));
  CK(lk_nn_embedding_backward(nn, it->dw, it->dy, it->idx, it->N, it->V,
                              it->C));
}

static item conv_item(const char *name, int n, int c, int hw, int oc,
                      bool dinp) {
  item it = {.name = name, .run = run_conv, .times = 1, .dinp = dinp};
  it.conv = (lk_nn_conv2d){.n = n,
                           .c = c,
                           .h = hw,
                           .w = hw,
                           .oc = oc,
                           .kh = 3,
                           .kw = 3,
                           .pad_h = 1,
                           .pad_w = 1};
  size_t ni = (size_t)n * c * hw * hw, no = (size_t)n * oc * hw * hw,
         nw = (size_t)oc * c * 9;
  it.x = buf(ni, 1), it.dx = buf(ni, 2), it.w = buf(nw, 3), it.dw = buf(nw, 4);
  it.b = buf((size_t)oc, 5), it.db = buf((size_t)oc, 6);
  it.y = buf(no, 7), it.dy = buf(no, 8);
  double one = 2.0 * n * oc * (c * 9.0) * hw * hw;
  it.flops = one * (dinp ? 3 : 2);
  snprintf(it.shape, sizeof it.shape, "%dx%dx%dx%d -> %d, 3x3 p1", n, c, hw, hw,
           oc);
  return it;
}

static item elementwise(const char *name, void (*run)(item *, lk_nn *),
                        size_t n, const char *shape) {
  item it = {.name = name, .run = run, .times = 1, .n = n};
  it.x = buf(n, 11), it.y = buf(n, 12), it.dy = buf(n, 13), it.dx = buf(n, 14);
  it.w = buf(n, 15), it.dw = buf(n, 16);
  snprintf(it.shape, sizeof it.shape, "%s", shape);
  return it;
}

static item maxpool_item(int n, int c, int hw) {
  item it = {.name = "maxpool 2", .run = run_maxpool, .times = 1};
  it.pool = (lk_nn_pool2d){.n = n, .c = c, .h = hw, .w = hw, .kh = 2, .kw = 2};
  size_t ni = (size_t)n * c * hw * hw, no = ni / 4;
  it.x = buf(ni, 21), it.dx = buf(ni, 22), it.y = buf(no, 23),
  it.dy = buf(no, 24);
  it.idx = calloc(no, sizeof *it.idx);
  snprintf(it.shape, sizeof it.shape, "%dx%dx%dx%d", n, c, hw, hw);
  return it;
}

static item linear_item(const char *name, int N, int C, int OC, int times) {
  item it = {.name = name,
             .run = run_linear,
             .times = times,
             .N = N,
             .C = C,
             .OC = OC};
  it.x = buf((size_t)N * C, 31), it.dx = buf((size_t)N * C, 32);
  it.w = buf((size_t)OC * C, 33), it.dw = buf((size_t)OC * C, 34);
  it.b = buf((size_t)OC, 35), it.db = buf((size_t)OC, 36);
  it.y = buf((size_t)N * OC, 37), it.dy = buf((size_t)N * OC, 38);
  it.flops = 6.0 * N * C * OC;
  snprintf(it.shape, sizeof it.shape, "%dx%d -> %d", N, C, OC);
  return it;
}

static item xent_item(int N, int V) {
  item it = {
      .name = "cross-entropy", .run = run_xent, .times = 1, .N = N, .V = V};
  it.x = buf((size_t)N * V, 41), it.dx = buf((size_t)N * V, 42);
  it.idx = malloc((size_t)N * sizeof *it.idx);
  for (int i = 0; i < N; i++)
    it.idx[i] = (i * 7) % V;
  snprintf(it.shape, sizeof it.shape, "%dx%d", N, V);
  return it;
}

static item layernorm_item(int N, int C, int times) {
  item it = {.name = "layernorm",
             .run = run_layernorm,
             .times = times,
             .N = N,
             .C = C};
  size_t n = (size_t)N * C;
  it.x = buf(n, 51), it.y = buf(n, 52), it.dy = buf(n, 53), it.dx = buf(n, 54);
  it.w = buf((size_t)C, 55), it.b = buf((size_t)C, 56);
  it.dw = buf((size_t)C, 57), it.db = buf((size_t)C, 58);
  it.s1 = buf((size_t)N, 59), it.s2 = buf((size_t)N, 60);
  snprintf(it.shape, sizeof it.shape, "%dx%d", N, C);
  return it;
}

static item attention_item(int B, int T, int C, int NH) {
  item it = {.name = "attention",
             .run = run_attention,
             .times = 4,
             .N = B * T,
             .T = T,
             .C = C,
             .NH = NH};
  size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
  it.x = buf(nq, 61), it.dx = buf(nq, 62), it.y = buf(no, 63),
  it.dy = buf(no, 64);
  it.s1 = buf((size_t)B * NH * T * T, 65);
  it.flops = 6.0 * 2 * B * NH * (double)T * T * (C / NH);
  snprintf(it.shape, sizeof it.shape, "B%d T%d C%d NH%d", B, T, C, NH);
  return it;
}

static item embedding_item(const char *name, int N, int V, int C) {
  item it = {
      .name = name, .run = run_embedding, .times = 1, .N = N, .V = V, .C = C};
  it.w = buf((size_t)V * C, 71), it.dw = buf((size_t)V * C, 72);
  it.y = buf((size_t)N * C, 73), it.dy = buf((size_t)N * C, 74);
  it.idx = malloc((size_t)N * sizeof *it.idx);
  for (int i = 0; i < N; i++)
    it.idx[i] = (i * 31) % V;
  snprintf(it.shape, sizeof it.shape, "%d of %dx%d", N, V, C);
  return it;
}

static void free_item(item *it) {
  float *b[] = {it->x,  it->w,  it->b,  it->y,  it->dy,
                it->dx, it->dw, it->db, it->s1, it->s2};
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
    free(b[i]);
  free(it->idx);
}

/* ---- timing -------------------------------------------------------------- */

/* Seconds per call of RUN: the best of 5 blocks of at least block_s. */
static double time_it(void (*run)(item *, lk_nn *), item *it, lk_nn *nn) {
  run(it, nn); /* warm-up: the workspace grows, pages are touched */
  run(it, nn);
  double t0 = now_s();
  run(it, nn);
  double one = now_s() - t0;
  long reps = one > 0 ? (long)(block_s / one) + 1 : 1000;
  double best = INFINITY;
  for (int b = 0; b < 5; b++) {
    t0 = now_s();
    for (long r = 0; r < reps; r++)
      run(it, nn);
    double t = (now_s() - t0) / (double)reps;
    best = t < best ? t : best;
  }
  return best;
}

static void table(const char *title, item *items, size_t n, lk_nn *nn1,
                  lk_nn *nn2, int per_step, const char *unit, double torch) {
  printf("\n%s\n", title);
  printf("  %-14s %-28s %5s %10s %8s %10s %8s %6s\n", "layer", "shape", "times",
         "1 thr us", "GFLOP/s", "2 thr us", "GFLOP/s", "x");
  double total[2] = {0, 0};
  for (size_t i = 0; i < n; i++) {
    double t1 = time_it(items[i].run, &items[i], nn1);
    double t2 = time_it(items[i].run, &items[i], nn2);
    total[0] += t1 * items[i].times;
    total[1] += t2 * items[i].times;
    char g1[16] = "", g2[16] = "";
    if (items[i].flops > 0) {
      snprintf(g1, sizeof g1, "%.1f", items[i].flops / t1 * 1e-9);
      snprintf(g2, sizeof g2, "%.1f", items[i].flops / t2 * 1e-9);
    }
    printf("  %-14s %-28s %5d %10.1f %8s %10.1f %8s %6.2f\n", items[i].name,
           items[i].shape, items[i].times, t1 * 1e6, g1, t2 * 1e6, g2, t1 / t2);
    fflush(stdout);
  }
  double flops = 0;
  for (size_t i = 0; i < n; i++)
    flops += items[i].flops * items[i].times;
  printf("  %-14s %-28s %5s %10.1f %8.1f %10.1f %8.1f %6.2f\n", "step", "", "",
         total[0] * 1e6, flops / total[0] * 1e-9, total[1] * 1e6,
         flops / total[1] * 1e-9, total[0] / total[1]);
  printf("  => %.0f %s/s on 1 thread, %.0f on 2 (torch 1.13, 1 thread: "
         "%.0f, from the issue; %.2fx and %.2fx of it)\n",
         per_step / total[0], unit, per_step / total[1], torch,
         per_step / total[0] / torch, per_step / total[1] / torch);
}

/* ---- products ------------------------------------------------------------ */

typedef struct gemm_args {
  int m, n, k;
  bool ta, tb;
  float *a, *b, *c;
} gemm_args;

static gemm_args *cur;
static void run_gemm(item *it, lk_nn *nn) {
  (void)it;
  gemm_args *g = cur;
  CK(lk_nn_sgemm(nn, g->ta, g->tb, g->m, g->n, g->k, 1, g->a,
                 g->ta ? g->m : g->k, g->b, g->tb ? g->k : g->n, 0, g->c,
                 g->n));
}
#ifdef LK_HAVE_BLAS
static void run_openblas(item *it, lk_nn *nn) {
  (void)it, (void)nn;
  gemm_args *g = cur;
  cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
              g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, 1, g->a,
              g->ta ? g->m : g->k, g->b, g->tb ? g->k : g->n, 0, g->c, g->n);
}
#endif

static void products(lk_nn *nn1, lk_nn *nn2) {
  static const int shapes[][5] = {
      {1536, 1536, 1536, 0, 0}, /* the peak */
      {64, 128, 3136, 0, 1},    {128, 3136, 64, 1, 0}, {64, 3136, 128, 0, 0},
      {64, 196, 288, 0, 0},     {768, 384, 128, 0, 1}, {768, 512, 128, 0, 1},
      {768, 128, 512, 0, 0},    {512, 128, 768, 1, 0}};
  printf("\nsgemm (%s): GFLOP/s, C = op(A) op(B), M x N x K\n",
         lk_nn_backend(nn1));
  printf("  %-22s %8s %8s %14s\n", "product", "kit 1", "kit 2", "OpenBLAS's 2");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    gemm_args g = {.m = shapes[s][0],
                   .n = shapes[s][1],
                   .k = shapes[s][2],
                   .ta = shapes[s][3],
                   .tb = shapes[s][4]};
    g.a = buf((size_t)g.m * g.k, 81), g.b = buf((size_t)g.k * g.n, 82);
    g.c = buf((size_t)g.m * g.n, 83);
    cur = &g;
    double f = 2.0 * g.m * g.n * g.k;
    double t1 = time_it(run_gemm, NULL, nn1), t2 = time_it(run_gemm, NULL, nn2);
    char ob[16] = "-";
#ifdef LK_HAVE_BLAS
    if (!strcmp(lk_nn_backend(nn1), "openblas")) {
      openblas_set_num_threads(2);
      snprintf(ob, sizeof ob, "%.1f",
               f / time_it(run_openblas, NULL, nn1) * 1e-9);
      openblas_set_num_threads(1);
    }
#endif
    char name[32];
    snprintf(name, sizeof name, "%s%s %dx%dx%d", g.ta ? "T" : "N",
             g.tb ? "T" : "N", g.m, g.n, g.k);
    printf("  %-22s %8.1f %8.1f %14s%s\n", name, f / t1 * 1e-9, f / t2 * 1e-9,
           ob, s == 0 ? "   <- the peak" : "");
    fflush(stdout);
    free(g.a), free(g.b), free(g.c);
  }
}

int main(int argc, char **argv) {
  bool portable = false, bf16 = false;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--quick"))
      block_s = 0.01;
    else if (!strcmp(argv[i], "--portable"))
      portable = true;
    else if (!strcmp(argv[i], "--bf16"))
      bf16 = true;
    else {
      fprintf(stderr,
              "usage: bench/nn_layers [--quick] [--portable] [--bf16]\n");
      return 2;
    }
  lk_nn *nn1, *nn2;
  unsigned flags = (portable ? LK_NN_PORTABLE : 0) | (bf16 ? LK_NN_BF16 : 0);
  CK(lk_nn_create(&nn1, 1, flags));
  CK(lk_nn_create(&nn2, 2, flags));
  printf("bench/nn_layers: one forward + backward per layer, best of 5 "
         "blocks; products by %s",
         lk_nn_backend(nn1));
#ifdef LK_HAVE_BLAS
  if (!strcmp(lk_nn_backend(nn1), "openblas"))
    printf(" (%s kernels)", openblas_get_corename());
#endif
  printf(", elementwise vectors %s\n", lk_nn_isa(nn1));
#if defined(LK_HAVE_BLAS) && defined(__x86_64__) &&                            \
    (defined(__GNUC__) || defined(__clang__))
  /* an AVX2 core named by OPENBLAS_CORETYPE on an AVX-512 CPU */
  if (!portable && __builtin_cpu_supports("avx512f") &&
      strcmp(openblas_get_corename(), "SkylakeX") &&
      strcmp(openblas_get_corename(), "Cooperlake") &&
      strcmp(openblas_get_corename(), "SapphireRapids"))
    printf("note: this CPU has AVX-512 that OpenBLAS does not use%s; "
           "OPENBLAS_CORETYPE=SKYLAKEX (or unset) selects its AVX-512 "
           "kernels (about 2x the sgemm on an AVX-512 EPYC)\n",
           getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE names another)"
                                       : "");
#endif

  item cnn[] = {
      conv_item("conv1", 64, 1, 28, 32, false),
      elementwise("relu", run_relu, (size_t)64 * 32 * 28 * 28, "64x32x28x28"),
      maxpool_item(64, 32, 28),
      conv_item("conv2", 64, 32, 14, 64, true),
      elementwise("relu", run_relu, (size_t)64 * 64 * 14 * 14, "64x64x14x14"),
      maxpool_item(64, 64, 14),
      linear_item("linear1", 64, 3136, 128, 1),
      elementwise("relu", run_relu, (size_t)64 * 128, "64x128"),
      linear_item("linear2", 64, 128, 10, 1),
      xent_item(64, 10)};
  size_t ncnn = sizeof cnn / sizeof cnn[0];
  table("Fashion-MNIST CNN, batch 64", cnn, ncnn, nn1, nn2, 64, "samples",
        3550);
  for (size_t i = 0; i < ncnn; i++)
    free_item(&cnn[i]);

  int B = 12, T = 64, C = 128, N = B * T;
  item gpt[] = {embedding_item("wte", N, 256, C),
                embedding_item("wpe", N, 64, C),
                layernorm_item(N, C, 9),
                linear_item("c_attn", N, C, 3 * C, 4),
                attention_item(B, T, C, 4),
                linear_item("attn c_proj", N, C, C, 4),
                elementwise("residual", run_residual, (size_t)N * C, "768x128"),
                linear_item("mlp c_fc", N, C, 4 * C, 4),
                elementwise("gelu", run_gelu, (size_t)N * 4 * C, "768x512"),
                linear_item("mlp c_proj", N, 4 * C, C, 4),
                linear_item("lm_head", N, C, 256, 1),
                xent_item(N, 256)};
  gpt[6].times = 9; /* the embeddings' sum and two a block */
  gpt[8].times = 4;
  gpt[2].times = 9; /* two a block and the final one */
  gpt[10].flops = 6.0 * N * C * 256;
  size_t ngpt = sizeof gpt / sizeof gpt[0];
  table("baby GPT (4 layers of n_embd 128, 4 heads), 12 x 64 tokens", gpt, ngpt,
        nn1, nn2, N, "tokens", 14300);
  for (size_t i = 0; i < ngpt; i++)
    free_item(&gpt[i]);

  products(nn1, nn2);
  lk_nn_free(nn1);
  lk_nn_free(nn2);
  return 0;
}
