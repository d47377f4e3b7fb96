/* The layer syntax of the sequential plugin: one option, torch-like,
 *
 *   layers = conv2d(32, 3, padding=1), relu, maxpool2d(2), flatten,
 *            linear(10)
 *
 * a comma list of layers, each a name (torch's class name, any case) with
 * optional arguments in parentheses, positional then keyword, named as
 * torch's constructors name them (loopkit/layer.h: each layer type's table
 * of arguments, which lk_host_parse_layer reads one layer with, the
 * built-ins and the layer plugins of [plugins] layers alike). The first
 * argument of torch's constructors, the size of the input (in_channels,
 * in_features, num_features, normalized_shape), is inferred from the layer
 * before: it may be given by keyword only, and is then checked.
 *
 * Networks that branch, in the same line:
 *
 *   @NAME         marks the current tensor as NAME (no index: no layer)
 *   add(@NAME)    the marked tensor added to the current one (one shape)
 *   cat(@NAME)    the current tensor and the marked one along dimension 1
 *                 (a sample's first: channels), the current first
 *   SECTION       a section's name: its own layers list as a nested block,
 *                 fresh parameters each use, named as torch names a
 *                 nested nn.Sequential ("3.1.weight"); its marks are its
 *                 own (graph.c expands it)
 *
 *   [res64]
 *   layers = @in, conv2d(64, 3, padding=1, bias=false), batchnorm2d, relu,
 *            conv2d(64, 3, padding=1, bias=false), batchnorm2d, add(@in),
 *            relu
 *   [sequential]
 *   layers = conv2d(64, 3, padding=1), batchnorm2d, relu, res64, res64,
 *            maxpool2d(2), flatten, linear(10)
 *
 * This file only splits the list: it turns the text into an array of
 * seq_layer (a layer, a mark or a block's section, seq_item) and says
 * what is wrong with it, naming the option, the layer's index and its
 * text. Sizes are checked against the data where the
 * network is built (sequential.c). */
#ifndef LK_SEQUENTIAL_SPEC_H
#define LK_SEQUENTIAL_SPEC_H

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/layer.h>
#include <loopkit/loopkit.h>

/* What an item of the list is. */
typedef enum seq_item {
  SEQ_LAYER, /* a layer: lk_layer_parse's text, or a join, add(@NAME) */
  SEQ_MARK,  /* @NAME: names the current tensor */
  SEQ_BLOCK  /* a section's name: its own layers list, nested */
} seq_item;

/* A layer of the network: its type's table and instance, and its text;
 * as seq_parse gives it, an item of one list; in the network (graph.c), a
 * node of the graph in execution order. */
typedef struct seq_layer {
  lk_layer l;       /* loopkit/layer.h */
  const char *text; /* the layer as written, TEXT_LEN bytes (messages) */
  int text_len;
  bool grad_in; /* a layer before this one has parameters */
  float *y;     /* [cap, out_numel]: the output (a view's: its input's) */
  seq_item item;
  const char *ref; /* @NAME's NAME, REF_LEN bytes: a mark's, a join's input */
  int ref_len;
  const char *block, *block_where; /* a block's: its section's layers */
  /* the node (graph.c) */
  char name[48];  /* torch's prefix of its tensors: "3", "3.1" */
  char desc[128]; /* its type, or its text and block, for messages */
  int in[2];      /* the nodes it takes, the current one first; -1: data */
  int uses;       /* the nodes that take its output */
  bool need;      /* a gradient is wanted at its output */
  float *g;       /* a graph's backward: dL/dy [cap, out_numel] (a node
                     that passes its input: its input's) */
} seq_layer;

static inline const char *seq_skip(const char *p, const char *end) {
  while (p < end && isspace((unsigned char)*p))
    p++;
  return p;
}

static inline const char *seq_trim_end(const char *p, const char *end) {
  while (end > p && isspace((unsigned char)end[-1]))
    end--;
  return end;
}

/* The end of the item that starts at P: the first comma outside
 * parentheses, or END. *BAD is set when the parentheses do not balance. */
static inline const char *seq_item_end(const char *p, const char *end,
                                       bool *bad) {
  int depth = 0;
  for (; p < end; p++) {
    if (*p == '(')
      depth++;
    else if (*p == ')' && --depth < 0)
      break;
    else if (*p == ',' && depth == 0)
      return p;
  }
  *bad = depth != 0;
  return p;
}

static inline bool seq_ident(const char *p, const char *end) {
  if (p == end)
    return false;
  for (; p < end; p++)
    if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
      return false;
  return true;
}

/* Item S, [P, TE), when it is no plain layer: @NAME (a mark), a join
 * (add(@NAME), cat(@NAME): the type's text apart, into TYPE_END), or a
 * section's name with a layers key (a block). 1 when it was one, 0 when
 * it is a plain layer, or a negative code with the message set. */
static inline int seq_special(lk_host *host, seq_layer *s, const char *p,
                              const char *te, const char **type_end) {
  *type_end = te;
  if (*p == '@') {
    s->item = SEQ_MARK;
    s->ref = p + 1;
    s->ref_len = (int)(te - p - 1);
    if (!seq_ident(p + 1, te))
      return lk_fail(host, LK_ECONFIG,
                     "\"%.*s\": @NAME marks the current tensor: a name of "
                     "letters, digits, _ and -, and nothing else",
                     (int)(te - p), p);
    return 1;
  }
  const char *open = memchr(p, '(', (size_t)(te - p));
  if (open) {
    const char *a = seq_skip(open + 1, te), *e = a;
    if (a == te || *a != '@')
      return 0;
    while (e < te && *e != ')' && *e != ',')
      e++;
    s->ref = a + 1;
    s->ref_len = (int)(seq_trim_end(a, e) - a - 1);
    if (!seq_ident(s->ref, s->ref + s->ref_len) || e == te || *e != ')' ||
        seq_skip(e + 1, te) != te)
      return lk_fail(host, LK_ECONFIG,
                     "\"%.*s\": a join takes one marked tensor and nothing "
                     "else: add(@NAME) or cat(@NAME)",
                     (int)(te - p), p);
    *type_end = seq_trim_end(p, open);
    return 0;
  }
  char word[64];
  if (!seq_ident(p, te) || te - p >= (int)sizeof word)
    return 0;
  memcpy(word, p, (size_t)(te - p));
  word[te - p] = 0;
  const char *value = NULL, *where = NULL;
  if (lk_host_section_value(host, word, "layers", &value, &where) != 0)
    return 0; /* no such section: a layer's name */
  const lk_layer_type *clash = lk_host_find_layer(host, p, (size_t)(te - p));
  if (clash)
    return lk_fail(host, LK_ECONFIG,
                   "\"%s\" is both the layer type %s and the section [%s] "
                   "(%s) with a layers list: rename the section",
                   word, clash->name, word, where);
  s->item = SEQ_BLOCK;
  s->block = value;
  s->block_where = where;
  return 1;
}

/* Parses TEXT into *OUT (N layers, freed by the caller, each with
 * lk_layer_free, then the array; their texts point into TEXT, which must
 * outlive them). On failure *OUT holds what was parsed, N of them. */
static inline int seq_parse(lk_host *host, const char *text, seq_layer **out,
                            size_t *n) {
  const char *p = text, *end = text + strlen(text);
  size_t cap = 1;
  for (const char *c = text; *c; c++)
    cap += *c == ',';
  seq_layer *specs = calloc(cap, sizeof *specs);
  if (!specs)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  *out = specs;
  *n = 0;
  size_t count = 0, index = 0;
  p = seq_skip(p, end);
  if (p == end)
    return lk_fail(host, LK_ECONFIG,
                   "layers: no layers (expected e.g. \"flatten, linear(10)\")");
  for (;;) {
    bool bad = false;
    const char *e = seq_item_end(p, end, &bad), *te = seq_trim_end(p, e);
    seq_layer *s = &specs[count];
    if (bad || (e < end && *e == ')')) {
      const char *stop = e < end && *e == ')' ? e + 1 : te;
      return lk_fail(host, LK_ECONFIG,
                     "layers: layer %zu \"%.*s\": unbalanced parentheses",
                     index, (int)(stop - p), p);
    }
    if (te == p) {
      return lk_fail(host, LK_ECONFIG,
                     "layers: layer %zu is empty (two commas in a row, or one "
                     "at an end)",
                     index);
    }
    s->text = p;
    s->text_len = (int)(te - p);
    const char *type_end = te;
    int special = seq_special(host, s, p, te, &type_end);
    if (special < 0)
      return lk_fail(host, LK_ECONFIG, "layers: layer %zu: %s", index,
                     lk_last_error());
    if (!special &&
        lk_host_parse_layer(host, &s->l, p, (size_t)(type_end - p)) != 0)
      return lk_fail(host, LK_ECONFIG, "layers: layer %zu \"%.*s\": %s", index,
                     s->text_len, p, lk_last_error());
    index += s->item != SEQ_MARK; /* a mark is no layer: torch has none */
    *n = ++count;
    if (e == end)
      break;
    p = seq_skip(e + 1, end);
    if (p == end)
      return lk_fail(host, LK_ECONFIG,
                     "layers: layer %zu is empty (two commas in a row, or one "
                     "at an end)",
                     index);
  }
  return 0;
}

#endif
