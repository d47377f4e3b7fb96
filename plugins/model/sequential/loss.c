/* sequential's losses (loss.h): a table by name, each entry the options it
 * takes, whether its targets are class labels and its computation on the
 * layer kit. cross_entropy without options is lk_nn_crossentropy, as the
 * plugin always computed it: the same bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loss.h"

/* out: a row of WIDTH values; y: the targets; *hits: rows (labels) or
 * values (bce_with_logits) predicted right, for acc. */
typedef int (*loss_fn)(const seq_loss *L, lk_nn *nn, const float *out,
                       const void *y, size_t rows, size_t width, float dloss,
                       float *dout, double *loss, size_t *hits);

typedef struct seq_loss_kind {
  const char *name;
  const char *options; /* " label_smoothing weight ": the options it takes */
  bool labels;         /* class labels i32 [B]; else f32 of the output */
  bool regression;     /* metrics mse and mae; else acc */
  loss_fn run;
} seq_loss_kind;

static int run_xent(const seq_loss *L, lk_nn *nn, const float *out,
                    const void *y, size_t rows, size_t width, float dloss,
                    float *dout, double *loss, size_t *hits) {
  int correct, rc;
  if (!L->weight && L->label_smoothing == 0)
    rc = lk_nn_crossentropy(nn, loss, dout, out, y, (int)rows, (int)width,
                            dloss, &correct);
  else
    rc = lk_nn_crossentropy_ex(nn, loss, dout, out, y, (int)rows, (int)width,
                               L->weight, L->label_smoothing, dloss, &correct);
  *hits = (size_t)correct;
  return rc;
}

static int run_nll(const seq_loss *L, lk_nn *nn, const float *out,
                   const void *y, size_t rows, size_t width, float dloss,
                   float *dout, double *loss, size_t *hits) {
  int correct;
  int rc = lk_nn_nll(nn, loss, dout, out, y, (int)rows, (int)width, L->weight,
                     dloss, &correct);
  *hits = (size_t)correct;
  return rc;
}

static int run_bce(const seq_loss *L, lk_nn *nn, const float *out,
                   const void *y, size_t rows, size_t width, float dloss,
                   float *dout, double *loss, size_t *hits) {
  bool all = L->n_pos_weight > 1; /* one for each of the last dimension */
  return lk_nn_bce_with_logits(nn, loss, dout, out, y, rows * width,
                               L->pos_weight, all ? L->last : 1, dloss, hits);
}

static int run_mse(const seq_loss *L, lk_nn *nn, const float *out,
                   const void *y, size_t rows, size_t width, float dloss,
                   float *dout, double *loss, size_t *hits) {
  (void)L, (void)hits;
  return lk_nn_mse(nn, loss, dout, out, y, rows * width, dloss);
}

static int run_l1(const seq_loss *L, lk_nn *nn, const float *out, const void *y,
                  size_t rows, size_t width, float dloss, float *dout,
                  double *loss, size_t *hits) {
  (void)L, (void)hits;
  return lk_nn_l1(nn, loss, dout, out, y, rows * width, dloss);
}

static int run_smooth_l1(const seq_loss *L, lk_nn *nn, const float *out,
                         const void *y, size_t rows, size_t width, float dloss,
                         float *dout, double *loss, size_t *hits) {
  (void)hits;
  return lk_nn_smooth_l1(nn, loss, dout, out, y, rows * width, L->beta, dloss);
}

static int run_huber(const seq_loss *L, lk_nn *nn, const float *out,
                     const void *y, size_t rows, size_t width, float dloss,
                     float *dout, double *loss, size_t *hits) {
  (void)hits;
  return lk_nn_huber(nn, loss, dout, out, y, rows * width, L->delta, dloss);
}

static const seq_loss_kind kinds[] = {
    {"cross_entropy", " label_smoothing weight ", true, false, run_xent},
    {"nll", " weight ", true, false, run_nll},
    {"bce_with_logits", " pos_weight ", false, false, run_bce},
    {"mse", " ", false, true, run_mse},
    {"l1", " ", false, true, run_l1},
    {"smooth_l1", " beta ", false, true, run_smooth_l1},
    {"huber", " delta ", false, true, run_huber},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* The loss options and their defaults (loss.h's SEQ_LOSS_OPTIONS); a
 * list's is empty. */
static const struct {
  const char *name;
  bool list;
  double def;
} loss_options[] = {{"weight", true, 0},
                    {"pos_weight", true, 0},
                    {"label_smoothing", false, 0},
                    {"beta", false, 1},
                    {"delta", false, 1}};
#define N_OPTIONS (sizeof loss_options / sizeof loss_options[0])

/* Whether the config gives option I a value other than its default: an
 * effective config.ini, which holds every default, runs again. */
static bool given(const lk_options *o, size_t i) {
  const char *name = loss_options[i].name;
  const char *where = lk_opt_where(o, name);
  size_t n = 0;
  if (!where || strcmp(where, "default") == 0)
    return false;
  if (loss_options[i].list)
    return lk_opt_doubles(o, name, &n) && n > 0;
  return lk_opt_double(o, name) != loss_options[i].def;
}

static bool takes(const seq_loss_kind *k, const char *option) {
  char pat[40];
  snprintf(pat, sizeof pat, " %s ", option);
  return strstr(k->options, pat) != NULL;
}

/* "cross_entropy or nll": the losses that take OPTION. */
static const char *takers(const char *option, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = 0;
  for (size_t i = 0; i < N_KINDS; i++)
    if (takes(&kinds[i], option) && used < len)
      used += (size_t)snprintf(buf + used, len - used, "%s%s",
                               used ? " or " : "", kinds[i].name);
  return buf;
}

/* A comma list option into floats. */
static int floats(lk_host *host, const lk_options *o, const char *name,
                  float **out, size_t *n) {
  const double *v = lk_opt_doubles(o, name, n);
  *out = NULL;
  if (!v || *n == 0)
    return 0;
  if (!(*out = malloc(*n * sizeof **out)))
    return lk_fail(host, LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < *n; i++)
    (*out)[i] = (float)v[i];
  return 0;
}

int seq_loss_init(lk_host *host, const lk_options *o, seq_loss *L) {
  *L = (seq_loss){.label_smoothing = (float)lk_opt_double(o, "label_smoothing"),
                  .beta = (float)lk_opt_double(o, "beta"),
                  .delta = (float)lk_opt_double(o, "delta")};
  const char *name = lk_opt_string(o, "loss");
  for (size_t i = 0; i < N_KINDS && !L->kind; i++)
    if (strcmp(kinds[i].name, name) == 0)
      L->kind = &kinds[i];
  if (!L->kind) /* the enum's choices refuse it first */
    return lk_fail(host, LK_ECONFIG, "loss = %s: no such loss", name);
  char buf[128];
  for (size_t i = 0; i < N_OPTIONS; i++)
    if (given(o, i) && !takes(L->kind, loss_options[i].name))
      return lk_fail(host, LK_ECONFIG,
                     "%s: %s is an option of loss = %s, not of loss = %s "
                     "(%s)",
                     lk_opt_where(o, loss_options[i].name),
                     loss_options[i].name,
                     takers(loss_options[i].name, buf, sizeof buf), name,
                     lk_opt_where(o, "loss"));
  int rc = floats(host, o, "weight", &L->weight, &L->n_weight);
  if (rc == 0)
    rc = floats(host, o, "pos_weight", &L->pos_weight, &L->n_pos_weight);
  return rc;
}

void seq_loss_free(seq_loss *L) {
  free(L->weight);
  free(L->pos_weight);
  L->weight = L->pos_weight = NULL;
}

bool seq_loss_labels(const seq_loss *L) {
  return L->kind->labels;
}

const char *seq_loss_name(const seq_loss *L) {
  return L->kind->name;
}

/* "f32 [3, 2]" */
static const char *text(lk_dtype dt, const size_t *d, size_t n, char *buf,
                        size_t len) {
  int used = snprintf(buf, len, "%s [",
                      dt == LK_I32   ? "i32"
                      : dt == LK_F32 ? "f32"
                                     : "non-f32");
  for (size_t i = 0; i < n && used > 0 && (size_t)used < len; i++)
    used +=
        snprintf(buf + used, len - (size_t)used, "%s%zu", i ? ", " : "", d[i]);
  if (used > 0 && (size_t)used < len)
    snprintf(buf + used, len - (size_t)used, "]");
  return buf;
}

const char *seq_loss_y_text(const lk_sample_shape *sh, char *buf, size_t len) {
  return text(sh->y_dtype, sh->y_shape, sh->y_ndim, buf, len);
}

/* Whether a target of sample shape Y [NY] fits an output OUT [N]: the same
 * shape, or one value each (a csv's target column for an output [1]). */
static bool fits(const size_t *y, size_t ny, const int *out, int n) {
  size_t ty = 1, to = 1;
  for (size_t i = 0; i < ny; i++)
    ty *= y[i];
  for (int i = 0; i < n; i++)
    to *= (size_t)out[i];
  if (ty == 1 && to == 1)
    return true;
  if (ny != (size_t)n)
    return false;
  for (int i = 0; i < n; i++)
    if (y[i] != (size_t)out[i])
      return false;
  return true;
}

int seq_loss_shape(lk_host *host, seq_loss *L, const lk_sample_shape *sh,
                   const int *out, int nd, size_t *width) {
  size_t o[LK_MAX_DIMS], w = 1;
  for (int i = 0; i < nd; i++)
    w *= (o[i] = (size_t)out[i]);
  char a[96], b[96];
  text(LK_F32, o, (size_t)nd, a, sizeof a);
  seq_loss_y_text(sh, b, sizeof b);
  if (sh->y_dtype != LK_F32 || !fits(sh->y_shape, sh->y_ndim, out, nd))
    return lk_fail(host, LK_ECONFIG,
                   "loss = %s takes f32 targets of the network's output "
                   "shape, %s a sample, but the data's targets are %s%s",
                   L->kind->name, a, b,
                   sh->y_dtype == LK_I32
                       ? " (class labels: csv's labels = float, or an npy "
                         "file of floats, gives f32 targets)"
                       : "");
  L->width = w;
  L->last = nd ? (size_t)out[nd - 1] : 1;
  if (L->n_pos_weight > 1 && L->n_pos_weight != L->last)
    return lk_fail(host, LK_ECONFIG,
                   "pos_weight has %zu values, but the network's output is "
                   "%s: give 1 value, or %zu: one for each of its last "
                   "dimension",
                   L->n_pos_weight, a, L->last);
  *width = w;
  return 0;
}

int seq_loss_classes(lk_host *host, const seq_loss *L, size_t classes) {
  if (L->weight && L->n_weight != classes)
    return lk_fail(host, LK_ECONFIG,
                   "weight has %zu values, but the network has %zu classes: "
                   "give one for each class",
                   L->n_weight, classes);
  return 0;
}

int seq_loss_check_y(lk_host *host, const seq_loss *L, const lk_batch *b) {
  const lk_tensor *y = &b->y;
  size_t numel = b->size;
  for (size_t i = 1; i < y->ndim; i++)
    numel *= y->shape[i];
  if (y->data && y->dtype == LK_F32 && y->ndim >= 1 && y->shape[0] == b->size &&
      numel == b->size * L->width)
    return 0;
  char got[96];
  return lk_fail(host, LK_EINVAL,
                 "y: loss = %s expected f32 [%zu, ...] targets of %zu values "
                 "a sample, got %s",
                 L->kind->name, b->size, L->width,
                 text(y->dtype, y->shape, y->ndim, got, sizeof got));
}

int seq_loss_run(lk_host *host, const seq_loss *L, lk_nn *nn, const float *out,
                 const void *y, size_t rows, size_t width, float dloss,
                 float *dout, double *loss, lk_step_result *res) {
  size_t hits = 0;
  const seq_loss_kind *k = L->kind;
  int rc = k->run(L, nn, out, y, rows, width, dloss, dout, loss, &hits);
  if (rc != 0)
    return lk_fail(host, LK_EPLUGIN, "%s: %s",
                   k->run == run_xent ? "cross-entropy" : k->name,
                   lk_last_error());
  if (!res)
    return 0;
  if (!k->regression) { /* a row a label, or every value a binary target */
    double n = (double)rows * (k->labels ? 1 : (double)width);
    return lk_result_metric(res, "acc", (double)hits / n);
  }
  double mse, mae;
  rc = lk_nn_mse(nn, &mse, NULL, out, y, rows * width, 1);
  if (rc == 0)
    rc = lk_nn_l1(nn, &mae, NULL, out, y, rows * width, 1);
  if (rc != 0)
    return lk_fail(host, LK_EPLUGIN, "metrics: %s", lk_last_error());
  rc = lk_result_metric(res, "mse", mse);
  return rc ? rc : lk_result_metric(res, "mae", mae);
}
