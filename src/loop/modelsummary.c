/* lk_run_model_summary: the model's layers with their parameters,
 * buffers and output shapes, and the totals, as Lightning's ModelSummary
 * gives them (run.h). The layers are what the model declared
 * (lk_host_add_layer); a tensor owned by none of them is summarised under
 * its name's first part, as torch names a top-level module. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"

/* The length of the row key of tensor NAME for a model that declared no
 * layer owning it: its first part, and the second when that is an index
 * ("h.0.attn.c_attn.weight" -> "h.0", "wte.weight" -> "wte"). */
static size_t key_len(const char *name) {
  const char *dot = strchr(name, '.');
  if (!dot)
    return strlen(name);
  const char *p = dot + 1;
  while (*p >= '0' && *p <= '9')
    p++;
  if (p > dot + 1 && (*p == '.' || *p == '\0'))
    return (size_t)(p - name);
  return (size_t)(dot - name);
}

/* Whether row name KEY [LEN] owns tensor NAME: NAME is KEY or KEY.* */
static bool owns(const char *key, size_t len, const char *name) {
  return strncmp(name, key, len) == 0 &&
         (name[len] == '\0' || name[len] == '.');
}

/* Room for the rows and the names of the undeclared ones, in one block
 * (rows first), so that freeing the rows frees all. */
typedef struct arena {
  char *next; /* where the next name goes: room enough for every tensor's */
} arena;

/* The row of S that owns tensor NAME, made when no row does. */
static lk_model_summary_row *row_of(lk_model_summary *s, const char *name,
                                    arena *a) {
  lk_model_summary_row *best = NULL;
  size_t best_len = 0;
  for (size_t i = 0; i < s->n_rows; i++) {
    size_t len = strlen(s->rows[i].name);
    if (owns(s->rows[i].name, len, name) && len >= best_len &&
        (i < s->declared || !best)) {
      best = &s->rows[i];
      best_len = len;
    }
  }
  if (best)
    return best;
  size_t len = key_len(name);
  char *key = a->next;
  memcpy(key, name, len);
  key[len] = '\0';
  a->next += len + 1;
  lk_model_summary_row *r = &s->rows[s->n_rows++];
  *r = (lk_model_summary_row){.name = key, .type = "-"};
  return r;
}

/* Counts tensor T into S, under its row (the model's NAME for it). */
static void count(lk_model_summary *s, const lk_tensor *t, const char *name,
                  bool param, arena *a) {
  lk_model_summary_row *r = row_of(s, name, a);
  size_t bytes = t->numel * lk_dtype_size(t->dtype);
  if (param) {
    r->params += t->numel;
    s->params += t->numel;
    s->param_bytes += bytes;
  } else {
    r->buffers += t->numel;
    s->buffers += t->numel;
    s->buffer_bytes += bytes;
  }
}

/* What an optimizer steps (every parameter when none is configured). */
static size_t trainable(const lk_run *run, size_t all) {
  if (run->optim.n == 0)
    return all;
  size_t n = 0;
  for (size_t i = 0; i < run->optim.n; i++)
    for (size_t k = 0; k < run->optim.opt[i].n_params; k++)
      n += run->optim.opt[i].params[k]->numel;
  return n;
}

/* Whether state I of TS is one of the model's buffers. */
static bool model_buffer(const lk_run *run, const lk__tensors *ts, size_t i) {
  return (lk__tensors_state_flags(ts, i) & LK__BUFFER) &&
         lk__model_state(run, ts->states[i]->name);
}

int lk_run_model_summary(lk_run *run, lk_model_summary *out) {
  if (!run || !out)
    return lk__err(LK_EINVAL, "lk_run_model_summary: NULL run or summary");
  memset(out, 0, sizeof *out);
  const lk__tensors *ts = &run->env.tensors;
  const lk__model_layers *ls = &run->env.layers;
  /* At most a row per layer and one per tensor, and a name per tensor. */
  size_t cap = ls->n + ts->n_params + ts->n_states + 1, names = 0;
  for (size_t i = 0; i < ts->n_params; i++)
    names += strlen(ts->params[i]->name) + 1;
  for (size_t i = 0; i < ts->n_states; i++)
    names += strlen(ts->states[i]->name) + 1;
  out->rows = malloc(cap * sizeof *out->rows + names);
  if (!out->rows)
    return lk__err(LK_ENOMEM, "out of memory");
  arena a = {(char *)(out->rows + cap)};
  for (size_t i = 0; i < ls->n; i++) {
    const lk__model_layer *l = &ls->v[i];
    lk_model_summary_row *r = &out->rows[i];
    *r = (lk_model_summary_row){
        .name = l->name, .type = l->type, .ndim = l->ndim};
    memcpy(r->out, l->out, sizeof r->out);
    size_t numel = l->ndim ? 1 : 0;
    for (size_t d = 0; d < l->ndim; d++)
      numel *= l->out[d];
    out->activations += numel;
  }
  out->n_rows = out->declared = ls->n;
  for (size_t i = 0; i < ts->n_params; i++)
    count(out, ts->params[i], ts->params[i]->name, true, &a);
  for (size_t i = 0; i < ts->n_states; i++)
    if (model_buffer(run, ts, i))
      count(out, ts->states[i], lk__buffer_name(ts->states[i]), false, &a);
  out->trainable = trainable(run, out->params);
  return 0;
}

void lk_model_summary_free(lk_model_summary *s) {
  if (!s)
    return;
  free(s->rows);
  memset(s, 0, sizeof *s);
}

/* N with thousands separated: "1,199,882". */
static const char *grouped(size_t n, char *buf, size_t len) {
  char digits[32];
  int k = snprintf(digits, sizeof digits, "%zu", n), used = 0;
  for (int i = 0; i < k && (size_t)used + 2 < len; i++) {
    if (i && (k - i) % 3 == 0)
      buf[used++] = ',';
    buf[used++] = digits[i];
  }
  buf[used] = '\0';
  return buf;
}

/* BYTES as "4.6 MiB". */
static const char *sized(size_t bytes, char *buf, size_t len) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
  return buf;
}

const char *lk_model_summary_totals(const lk_model_summary *s, char *buf,
                                    size_t len) {
  char p[32], t[32], pb[24], b[32], a[32], ab[24], trained[64];
  if (s->trainable == s->params)
    snprintf(trained, sizeof trained, "all trainable");
  else
    snprintf(trained, sizeof trained, "%s trainable",
             grouped(s->trainable, t, sizeof t));
  int n =
      snprintf(buf, len, "%s parameter%s (%s, %s), %s buffer value%s",
               grouped(s->params, p, sizeof p), s->params == 1 ? "" : "s",
               trained, sized(s->param_bytes, pb, sizeof pb),
               grouped(s->buffers, b, sizeof b), s->buffers == 1 ? "" : "s");
  if (n >= 0 && (size_t)n < len && s->activations)
    snprintf(buf + n, len - (size_t)n, ", activations %s values (%s) a sample",
             grouped(s->activations, a, sizeof a),
             sized(s->activations * sizeof(float), ab, sizeof ab));
  return buf;
}
