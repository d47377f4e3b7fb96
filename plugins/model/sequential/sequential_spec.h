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
 * This file only splits the list: it turns the text into an array of
 * seq_layer and says what is wrong with it, naming the option, the
 * layer's index and its text. Sizes are checked against the data where the
 * network is built (sequential.c). */
#ifndef LK_SEQUENTIAL_SPEC_H
#define LK_SEQUENTIAL_SPEC_H

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/layer.h>
#include <loopkit/loopkit.h>

/* A layer of the network: its type's table and instance, and its text. */
typedef struct seq_layer {
  lk_layer l;       /* loopkit/layer.h */
  const char *text; /* the layer as written, TEXT_LEN bytes (messages) */
  int text_len;
  bool grad_in; /* a layer before this one has parameters */
  float *y;     /* [cap, out_numel]: the output (a view's: its input's) */
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
  size_t count = 0;
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
                     count, (int)(stop - p), p);
    }
    if (te == p) {
      return lk_fail(host, LK_ECONFIG,
                     "layers: layer %zu is empty (two commas in a row, or one "
                     "at an end)",
                     count);
    }
    s->text = p;
    s->text_len = (int)(te - p);
    if (lk_host_parse_layer(host, &s->l, p, (size_t)(te - p)) != 0)
      return lk_fail(host, LK_ECONFIG, "layers: layer %zu \"%.*s\": %s", count,
                     s->text_len, p, lk_last_error());
    *n = ++count;
    if (e == end)
      break;
    p = seq_skip(e + 1, end);
    if (p == end)
      return lk_fail(host, LK_ECONFIG,
                     "layers: layer %zu is empty (two commas in a row, or one "
                     "at an end)",
                     count);
  }
  return 0;
}

#endif
