/* gan: a generative adversarial network on a 2-D Gaussian, trained with
 * manual optimization and two optimizers. Build: make; run: see gan.ini.
 *
 * The generator is affine, G(z) = A z + b with z ~ N(0, I), so what it
 * produces is N(b, A A^T); the target is N(mean, diag(std^2)). The
 * discriminator is logistic over quadratic features,
 *   D(x) = sigmoid(w . (x1, x2, x1^2, x2^2, x1 x2) + c),
 * which is exactly rich enough to tell two Gaussians apart by their first
 * two moments, so the game's equilibrium is b = mean, A A^T = diag(std^2).
 *
 * Each training_step is one round of the game, as a Lightning module with
 * automatic_optimization = False writes it: the run has two optimizers,
 * each over its own network ([plugins] optimizer = disc:sgd, gen:adam with
 * [disc] params = discriminator.* and [gen] params = generator.*), and the
 * plugin drives each through its handle (lk_host_optimizer): zero its
 * gradients, compute them, step it. Each update is a step of the run, as
 * in Lightning: a round takes two, and without a data plugin max_steps of
 * them end the run. Gradients are computed here, by hand; nothing else
 * backpropagates. The discriminator's loss has an R1 penalty (option r1),
 * without which the game circles its equilibrium. Each optimizer touches
 * only its own parameters (weight decay included), which is checked after
 * every update. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#define N_FEAT 5 /* x1, x2, x1^2, x2^2, x1 x2 */
#define N_D (N_FEAT + 1)

typedef struct gan {
  lk_host *host;
  lk_optimizer *d_opt, *g_opt; /* found at the first step */
  const char *d_opt_name, *g_opt_name;
  size_t batch;
  double mean[2], std[2];
  double r1;               /* weight of the gradient penalty on real data */
  lk_tensor *a, *b;        /* generator: weight [2, 2], bias [2] */
  lk_tensor *w, *c;        /* discriminator: weight [5], bias [1] */
  double *real, *z, *fake; /* [batch, 2] each */
} gan;

static void destroy(void *self) {
  gan *g = self;
  free(g->real);
  free(g);
}

static int pair_option(lk_host *host, const lk_options *o, const char *name,
                       double out[2]) {
  size_t n = 0;
  const double *v = lk_opt_doubles(o, name, &n);
  if (!v || n != 2) /* a range says what each value may be, not how many */
    return lk_fail(host, LK_ECONFIG,
                   "option %s: give two values, x,y (%zu given)", name, n);
  out[0] = v[0];
  out[1] = v[1];
  return 0;
}

static int add_params(gan *g) {
  size_t two[2] = {2, 2}, feat = N_FEAT, one = 1;
  int rc =
      lk_host_add_param(g->host, "generator.weight", LK_F64, 2, two, &g->a);
  if (rc == 0)
    rc = lk_host_add_param(g->host, "generator.bias", LK_F64, 1, two, &g->b);
  if (rc == 0)
    rc = lk_host_add_param(g->host, "discriminator.weight", LK_F64, 1, &feat,
                           &g->w);
  if (rc == 0)
    rc = lk_host_add_param(g->host, "discriminator.bias", LK_F64, 1, &one,
                           &g->c);
  if (rc == 0) { /* G starts as the identity: N(0, I) */
    double *a = g->a->data;
    a[0] = a[3] = 1;
  }
  return rc;
}

static int create(lk_host *host, const lk_options *o, void **self) {
  gan *g = calloc(1, sizeof *g);
  if (!g)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  g->host = host;
  g->batch = (size_t)lk_opt_int(o, "batch_size");
  g->r1 = lk_opt_double(o, "r1");
  int rc = pair_option(host, o, "target_mean", g->mean);
  if (rc == 0)
    rc = pair_option(host, o, "target_std", g->std);
  if (rc == 0 && !(g->real = malloc(6 * g->batch * sizeof(double))))
    rc = lk_fail(host, LK_ENOMEM, "out of memory");
  if (rc == 0) {
    g->z = g->real + 2 * g->batch;
    g->fake = g->z + 2 * g->batch;
    rc = add_params(g);
  }
  g->d_opt_name = lk_opt_string(o, "d_optimizer");
  g->g_opt_name = lk_opt_string(o, "g_optimizer");
  if (rc != 0) {
    destroy(g);
    return rc;
  }
  *self = g;
  return 0;
}

static double softplus(double s) { /* log(1 + e^s), without overflow */
  return fmax(s, 0) + log1p(exp(-fabs(s)));
}

static double sigmoid(double s) {
  return s >= 0 ? 1 / (1 + exp(-s)) : exp(s) / (1 + exp(s));
}

static void features(const double *x, double f[N_FEAT]) {
  f[0] = x[0];
  f[1] = x[1];
  f[2] = x[0] * x[0];
  f[3] = x[1] * x[1];
  f[4] = x[0] * x[1];
}

static double logit(const gan *g, const double *x) {
  const double *w = g->w->data;
  double f[N_FEAT], s = *(const double *)g->c->data;
  features(x, f);
  for (int k = 0; k < N_FEAT; k++)
    s += w[k] * f[k];
  return s;
}

/* A fresh batch of real samples and of generator inputs, from the run's
 * generator only (a resumed run draws the same numbers). */
static void sample(gan *g) {
  lk_rng *rng = lk_host_rng(g->host);
  for (size_t i = 0; i < g->batch; i++)
    for (int d = 0; d < 2; d++)
      g->real[2 * i + d] = g->mean[d] + g->std[d] * lk_rng_normal(rng);
  for (size_t i = 0; i < 2 * g->batch; i++)
    g->z[i] = lk_rng_normal(rng);
}

static void generate(gan *g) {
  const double *a = g->a->data, *b = g->b->data;
  for (size_t i = 0; i < g->batch; i++) {
    const double *z = g->z + 2 * i;
    for (int d = 0; d < 2; d++)
      g->fake[2 * i + d] = a[2 * d] * z[0] + a[2 * d + 1] * z[1] + b[d];
  }
}

/* One sample's contribution to the discriminator's gradient: DS is the
 * loss's derivative with respect to its logit. */
static void d_grad(gan *g, const double *x, double ds) {
  double f[N_FEAT], *gw = g->w->grad;
  features(x, f);
  for (int k = 0; k < N_FEAT; k++)
    gw[k] += ds * f[k];
  *(double *)g->c->grad += ds;
}

/* The logit's gradient with respect to the input x. */
static void input_grad(const gan *g, const double *x, double u[2]) {
  const double *w = g->w->data;
  u[0] = w[0] + 2 * w[2] * x[0] + w[4] * x[1];
  u[1] = w[1] + 2 * w[3] * x[1] + w[4] * x[0];
}

/* Adds the gradient of (r1 / 2) |u|^2 / m for one real sample (the R1
 * penalty of Mescheder et al. 2018): without it the game circles its
 * equilibrium instead of converging to it. */
static void r1_grad(gan *g, const double *x, double m) {
  double u[2], k = g->r1 / m, *gw = g->w->grad;
  input_grad(g, x, u);
  gw[0] += k * u[0];
  gw[1] += k * u[1];
  gw[2] += k * u[0] * 2 * x[0];
  gw[3] += k * u[1] * 2 * x[1];
  gw[4] += k * (u[0] * x[1] + u[1] * x[0]);
}

/* Discriminator loss: -mean log D(real) - mean log(1 - D(fake)), plus the
 * penalty. Fills only the discriminator's gradients. */
static double d_backward(gan *g) {
  double loss = 0, m = (double)g->batch;
  for (size_t i = 0; i < g->batch; i++) {
    double sr = logit(g, g->real + 2 * i), sf = logit(g, g->fake + 2 * i);
    loss += softplus(-sr) + softplus(sf);
    d_grad(g, g->real + 2 * i, (sigmoid(sr) - 1) / m);
    d_grad(g, g->fake + 2 * i, sigmoid(sf) / m);
    if (g->r1 > 0)
      r1_grad(g, g->real + 2 * i, m);
  }
  return loss / m;
}

/* Generator loss, the non-saturating one: -mean log D(G(z)). Fills only
 * the generator's gradients, through D's input gradient and G = A z + b. */
static double g_backward(gan *g) {
  double *ga = g->a->grad, *gb = g->b->grad, loss = 0, m = (double)g->batch;
  for (size_t i = 0; i < g->batch; i++) {
    const double *x = g->fake + 2 * i, *z = g->z + 2 * i;
    double s = logit(g, x), ds = (sigmoid(s) - 1) / m, u[2];
    input_grad(g, x, u);
    double dx[2] = {ds * u[0], ds * u[1]};
    loss += softplus(-s);
    for (int d = 0; d < 2; d++) {
      ga[2 * d] += dx[d] * z[0];
      ga[2 * d + 1] += dx[d] * z[1];
      gb[d] += dx[d];
    }
  }
  return loss / m;
}

/* The parameters of the network an update must not move. */
typedef struct frozen {
  double v[N_D];
} frozen;

static void freeze(const lk_tensor *p, const lk_tensor *q, frozen *f) {
  memcpy(f->v, p->data, p->numel * sizeof(double));
  memcpy(f->v + p->numel, q->data, q->numel * sizeof(double));
}

static bool moved(const lk_tensor *p, const lk_tensor *q, const frozen *f) {
  return memcmp(p->data, f->v, p->numel * sizeof(double)) != 0 ||
         memcmp(q->data, f->v + p->numel, q->numel * sizeof(double)) != 0;
}

/* The run's optimizer named NAME ([plugins] optimizer = NAME:PLUGIN). */
static int find_optimizer(gan *g, const char *option, const char *name,
                          lk_optimizer **out) {
  size_t n = lk_host_optimizer_count(g->host);
  for (size_t i = 0; i < n; i++)
    if (strcmp(lk_optimizer_name(lk_host_optimizer(g->host, i)), name) == 0) {
      *out = lk_host_optimizer(g->host, i);
      return 0;
    }
  return lk_fail(g->host, LK_ECONFIG,
                 "option %s = %s: the run has no optimizer of that name "
                 "([plugins] optimizer = disc:sgd, gen:adam names two)",
                 option, name);
}

/* One player's update: its gradients zeroed, computed by BACKWARD, its
 * optimizer's step; the other's parameters OTHER_P and OTHER_Q must not
 * move. */
static int update(gan *g, lk_optimizer *opt, double (*backward)(gan *),
                  double *loss, const lk_tensor *other_p,
                  const lk_tensor *other_q) {
  frozen keep;
  int rc = lk_optimizer_zero_grad(opt);
  if (rc != 0)
    return rc;
  *loss = backward(g);
  freeze(other_p, other_q, &keep);
  if ((rc = lk_optimizer_step(opt, NULL, 0, NULL)) != 0)
    return rc;
  if (moved(other_p, other_q, &keep))
    return lk_fail(g->host, LK_ESTATE,
                   "optimizer %s moved parameters it does not step",
                   lk_optimizer_name(opt));
  return 0;
}

static int training_step(void *self, const lk_batch *batch,
                         lk_step_result *out) {
  gan *g = self;
  (void)batch; /* no data plugin: the samples are drawn here */
  int rc = 0;
  if (!g->d_opt)
    rc = find_optimizer(g, "d_optimizer", g->d_opt_name, &g->d_opt);
  if (rc == 0 && !g->g_opt)
    rc = find_optimizer(g, "g_optimizer", g->g_opt_name, &g->g_opt);
  if (rc != 0)
    return rc;
  sample(g);
  generate(g);
  /* The discriminator, then the generator against the updated one. */
  double d_loss, g_loss;
  rc = update(g, g->d_opt, d_backward, &d_loss, g->a, g->b);
  if (rc == 0)
    rc = update(g, g->g_opt, g_backward, &g_loss, g->w, g->c);
  if (rc != 0)
    return rc;

  /* What G produces now: mean b, standard deviations the norms of A's
   * rows (the square roots of diag(A A^T)). */
  const double *a = g->a->data, *b = g->b->data;
  out->has_loss = true;
  out->loss = d_loss; /* the discriminator's, as metrics.csv's loss */
  lk_result_metric(out, "d_loss", d_loss);
  lk_result_metric(out, "g_loss", g_loss);
  lk_result_metric(out, "g_mean_x", b[0]);
  lk_result_metric(out, "g_mean_y", b[1]);
  lk_result_metric(out, "g_std_x", hypot(a[0], a[1]));
  lk_result_metric(out, "g_std_y", hypot(a[2], a[3]));
  return 0;
}

static const lk_option options[] = {
    {"batch_size", LK_OPT_INT, "256", "real and generated samples per step",
     "[1, 1048576]"},
    {"target_mean", LK_OPT_DOUBLES, "2,-1", "mean of the real data, x,y", NULL},
    {"target_std", LK_OPT_DOUBLES, "0.5,1.5",
     "standard deviations of the real data, x,y", "(0, inf)"},
    {"r1", LK_OPT_DOUBLE, "1",
     "weight of the R1 gradient penalty on real data (0: none)", "[0, inf)"},
    {"d_optimizer", LK_OPT_STRING, "disc",
     "the name of the discriminator's optimizer in [plugins] optimizer",
     NULL},
    {"g_optimizer", LK_OPT_STRING, "gen",
     "the name of the generator's optimizer in [plugins] optimizer", NULL},
    {NULL, 0, NULL, NULL, NULL}};

static const lk_step_ops step_ops = {.training_step = training_step};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION,
    .size = sizeof(lk_descriptor),
    .name = "gan",
    .version = "1.0",
    .summary = "a GAN on a 2-D Gaussian: manual optimization, two optimizers",
    .options = options,
    .create = create,
    .destroy = destroy,
    .step = &step_ops};
