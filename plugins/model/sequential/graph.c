/* sequential's network as a graph (graph.h): the layers list parsed
 * (sequential_spec.h), each block (a section's name used as a layer)
 * expanded in place from its section's own layers list, with fresh layers
 * named as torch names a nested nn.Sequential's ("3.1"), marks (@NAME)
 * resolved to the node they name, in the list they are made in, and every
 * node given the node(s) it takes. A block that uses itself, directly or
 * through others, is refused naming the chain. */
#include <stdio.h>

#include "graph.h"

#define SEQ_MAX_DEPTH 16 /* blocks within blocks */
#define SEQ_MAX_MARKS 64 /* marks in one list */

/* The marks of one list: a block's are its own. */
typedef struct seq_scope {
  const char *name[SEQ_MAX_MARKS];
  int len[SEQ_MAX_MARKS], node[SEQ_MAX_MARKS], n;
} seq_scope;

/* The sections being expanded, innermost first: the model's own at the
 * root. */
typedef struct seq_frame {
  const char *section;
  const struct seq_frame *up;
} seq_frame;

static int mark(lk_host *host, seq_scope *sc, const seq_layer *s, int node) {
  for (int k = 0; k < sc->n; k++)
    if (sc->len[k] == s->ref_len && !memcmp(sc->name[k], s->ref, sc->len[k])) {
      sc->node[k] = node; /* marked again: the latest */
      return 0;
    }
  if (sc->n == SEQ_MAX_MARKS)
    return lk_fail(host, LK_ECONFIG, "layers: \"%.*s\": more than %d marks",
                   s->text_len, s->text, SEQ_MAX_MARKS);
  sc->name[sc->n] = s->ref;
  sc->len[sc->n] = s->ref_len;
  sc->node[sc->n++] = node;
  return 0;
}

/* The marked names of SC, "@a, @b", or "none". */
static const char *marked(const seq_scope *sc, char *buf, size_t len) {
  size_t used = 0;
  snprintf(buf, len, "none");
  for (int k = 0; k < sc->n && used < len; k++) {
    int w = snprintf(buf + used, len - used, "%s@%.*s", k ? ", " : "",
                     sc->len[k], sc->name[k]);
    used += w > 0 ? (size_t)w : 0;
  }
  return buf;
}

static seq_layer *push(seq *m) {
  if (m->n_layers == m->cap_layers) {
    size_t cap = m->cap_layers ? 2 * m->cap_layers : 16;
    seq_layer *v = realloc(m->layers, cap * sizeof *v);
    if (!v)
      return NULL;
    m->layers = v;
    m->cap_layers = cap;
  }
  seq_layer *d = &m->layers[m->n_layers++];
  memset(d, 0, sizeof *d);
  return d;
}

/* Item S of a list, a layer, made node NAME, taking *CUR (and a join the
 * tensor its @NAME marks); *CUR is then it. BLOCK: the section of the
 * list, NULL for the model's own. */
static int node(seq *m, seq_layer *s, const char *name, const char *block,
                const seq_scope *sc, int *cur) {
  const lk_layer_type *t = s->l.type;
  int hi = t->max_inputs ? t->max_inputs : 1, other = -1, k = 0;
  if (s->ref && hi < 2)
    return lk_fail(m->host, LK_ECONFIG,
                   "layers: layer %s \"%.*s\": %s takes one input, the "
                   "current tensor: no @NAME",
                   name, s->text_len, s->text, t->name);
  if (!s->ref && hi > 1)
    return lk_fail(m->host, LK_ECONFIG,
                   "layers: layer %s \"%.*s\": %s joins a marked tensor to "
                   "the current one: %s(@NAME)",
                   name, s->text_len, s->text, t->name, t->name);
  for (; s->ref && k < sc->n; k++)
    if (sc->len[k] == s->ref_len && !memcmp(sc->name[k], s->ref, sc->len[k]))
      break;
  char names[256];
  if (s->ref && k == sc->n)
    return lk_fail(m->host, LK_ECONFIG,
                   "layers: layer %s \"%.*s\": no tensor marked @%.*s before "
                   "it in this list (marked: %s)",
                   name, s->text_len, s->text, s->ref_len, s->ref,
                   marked(sc, names, sizeof names));
  if (s->ref)
    other = sc->node[k];
  seq_layer *d = push(m);
  if (!d)
    return lk_fail(m->host, LK_ENOMEM, "out of memory");
  *d = *s;
  memset(&s->l, 0, sizeof s->l); /* the node owns it now */
  snprintf(d->name, sizeof d->name, "%s", name);
  if (block || s->ref)
    snprintf(d->desc, sizeof d->desc, "%s \"%.*s\"%s%s%s", t->name, d->text_len,
             d->text, block ? " in block [" : "", block ? block : "",
             block ? "]" : "");
  else
    snprintf(d->desc, sizeof d->desc, "%s", t->name);
  d->in[0] = *cur;
  d->in[1] = other;
  m->graph |= s->ref != NULL;
  *cur = (int)m->n_layers - 1;
  return 0;
}

static int expand(seq *m, const char *text, const char *prefix,
                  const seq_frame *up, int depth, int *cur);

/* Item S, the name of a section with a layers list, expanded as node NAME:
 * a block of nodes NAME.0, NAME.1, ... */
static int block(seq *m, const seq_layer *s, const char *name,
                 const seq_frame *up, int depth, int *cur) {
  char section[64], chain[512] = "";
  snprintf(section, sizeof section, "%.*s", s->text_len, s->text);
  bool again = false;
  for (const seq_frame *f = up; f; f = f->up)
    again |= !strcmp(f->section, section);
  if (again || depth >= SEQ_MAX_DEPTH) {
    /* the chain, outermost first: walk it once per level */
    int n = 0;
    for (const seq_frame *f = up; f; f = f->up)
      n++;
    for (int i = n - 1; i >= 0; i--) {
      const seq_frame *f = up;
      for (int j = 0; j < i; j++)
        f = f->up;
      size_t used = strlen(chain);
      snprintf(chain + used, sizeof chain - used, "%s -> ", f->section);
    }
    size_t used = strlen(chain);
    snprintf(chain + used, sizeof chain - used, "%s", section);
    return lk_fail(m->host, LK_ECONFIG,
                   "layers: layer %s \"%.*s\": block [%s] %s: %s", name,
                   s->text_len, s->text, section,
                   again ? "uses itself" : "nests too deep", chain);
  }
  char *copy = strdup(s->block), **texts = NULL;
  if (copy)
    texts = realloc(m->texts, (m->n_texts + 1) * sizeof *texts);
  if (!texts) {
    free(copy);
    return lk_fail(m->host, LK_ENOMEM, "out of memory");
  }
  m->texts = texts;
  m->texts[m->n_texts++] = copy;
  seq_frame f = {section, up};
  char inner[64];
  snprintf(inner, sizeof inner, "%s.", name);
  int rc = expand(m, copy, inner, &f, depth + 1, cur);
  if (rc != 0)
    return lk_fail(
        m->host, rc, "layers: layer %s \"%.*s\": block [%s] (%s): %s", name,
        s->text_len, s->text, section, s->block_where, lk_last_error());
  return 0;
}

/* The list TEXT, its nodes named PREFIX then their index, taking *CUR. */
static int expand(seq *m, const char *text, const char *prefix,
                  const seq_frame *up, int depth, int *cur) {
  seq_layer *items = NULL;
  size_t n = 0, index = 0;
  seq_scope sc = {.n = 0};
  int rc = seq_parse(m->host, text, &items, &n);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    seq_layer *s = &items[i];
    char name[48];
    if (s->item == SEQ_MARK) {
      rc = mark(m->host, &sc, s, *cur);
      continue;
    }
    snprintf(name, sizeof name, "%s%zu", prefix, index++);
    if (strlen(name) + 32 >= sizeof name)
      rc = lk_fail(m->host, LK_ECONFIG, "layers: layer %s: nested too deep",
                   name);
    else if (s->item == SEQ_BLOCK)
      rc = block(m, s, name, up, depth, cur);
    else
      rc = node(m, s, name, up->up ? up->section : NULL, &sc, cur);
  }
  for (size_t i = 0; items && i < n; i++)
    lk_layer_free(&items[i].l);
  free(items);
  return rc;
}

int seq_graph_expand(seq *m) {
  seq_frame root = {lk_host_name(m->host), NULL};
  int cur = -1;
  return expand(m, m->text, "", &root, 0, &cur);
}

bool seq_has_params(const lk_layer *l) {
  lk_layer_tensor t[LK_LAYER_MAX_TENSORS];
  int n = l->type->tensors ? l->type->tensors(l, t) : 0;
  for (int k = 0; k < n; k++)
    if (t[k].flags & LK_LAYER_PARAM)
      return true;
  return false;
}

void seq_graph_link(seq *m) {
  for (size_t i = 0; i < m->n_layers; i++) {
    seq_layer *sl = &m->layers[i];
    sl->need = seq_has_params(&sl->l);
    for (int k = 0; k < (sl->ref ? 2 : 1); k++)
      if (sl->in[k] >= 0) {
        m->layers[sl->in[k]].uses++;
        sl->need |= m->layers[sl->in[k]].need;
      }
  }
}
