/* The layer syntax of the sequential plugin: one option, torch-like,
 *
 *   layers = conv2d(32, 3, padding=1), relu, maxpool2d(2), flatten,
 *            linear(10)
 *
 * a comma list of layers, each a name (torch's class name, any case) with
 * optional arguments in parentheses, positional then keyword, named as
 * torch's constructors name them. The first argument of torch's
 * constructors, the size of the input (in_channels, in_features,
 * num_features, normalized_shape), is inferred from the layer before: it
 * may be given by keyword only, and is then checked. Values are whole
 * numbers, decimals, true/false, a pair (3, 5) where torch takes an int or
 * a tuple, or a word (gelu's approximate).
 *
 * This file only parses: it turns the text into an array of seq_spec and
 * says what is wrong with it, naming the option, the layer's index and its
 * text. Sizes are checked against the data where the network is built
 * (sequential.c). */
#ifndef LK_SEQUENTIAL_SPEC_H
#define LK_SEQUENTIAL_SPEC_H

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <loopkit/loopkit.h>

typedef enum seq_kind {
  SEQ_CONV2D,
  SEQ_MAXPOOL2D,
  SEQ_AVGPOOL2D,
  SEQ_BATCHNORM2D,
  SEQ_BATCHNORM1D,
  SEQ_LAYERNORM,
  SEQ_RELU,
  SEQ_GELU,
  SEQ_TANH,
  SEQ_SIGMOID,
  SEQ_DROPOUT,
  SEQ_FLATTEN,
  SEQ_LINEAR,
  SEQ_EMBEDDING,
  SEQ_KINDS
} seq_kind;

/* The arguments of every kind, in one struct; each kind reads its own. */
typedef struct seq_spec {
  seq_kind kind;
  const char *text; /* the layer as written, TEXT_LEN bytes (for messages) */
  int text_len;
  int in;                 /* the inferred first argument, 0: not given */
  int out;                /* out_channels, out_features, embedding_dim */
  int vocab;              /* embedding's num_embeddings */
  int kh, kw;             /* kernel_size */
  int sh, sw;             /* stride; 0: the default (1, or the pool's size) */
  int ph, pw;             /* padding */
  bool bias;              /* conv2d, linear; affine for the norms */
  double eps, momentum;   /* the norms */
  double p;               /* dropout */
  int start_dim, end_dim; /* flatten, torch's dims (0 is the batch) */
} seq_spec;

/* An argument a kind takes: its name, what it holds, and whether it may
 * be given by position (in the order of the table). */
typedef enum seq_arg_type {
  SEQ_INT,  /* a whole number */
  SEQ_PAIR, /* a whole number, or a pair (a, b) */
  SEQ_BOOL,
  SEQ_REAL,
  SEQ_WORD
} seq_arg_type;

typedef struct seq_arg {
  const char *name;
  seq_arg_type type;
  bool positional;
  bool required;
} seq_arg;

#define SEQ_MAX_ARGS 6

typedef struct seq_kind_info {
  const char *name; /* lower case; matched without regard to case */
  seq_arg args[SEQ_MAX_ARGS];
} seq_kind_info;

/* clang-format off */
static const seq_kind_info seq_kinds[SEQ_KINDS] = {
  [SEQ_CONV2D] = {"conv2d", {{"out_channels", SEQ_INT, true, true},
                             {"kernel_size", SEQ_PAIR, true, true},
                             {"stride", SEQ_PAIR, true, false},
                             {"padding", SEQ_PAIR, true, false},
                             {"bias", SEQ_BOOL, false, false},
                             {"in_channels", SEQ_INT, false, false}}},
  [SEQ_MAXPOOL2D] = {"maxpool2d", {{"kernel_size", SEQ_PAIR, true, true},
                                   {"stride", SEQ_PAIR, true, false},
                                   {"padding", SEQ_PAIR, true, false}}},
  [SEQ_AVGPOOL2D] = {"avgpool2d", {{"kernel_size", SEQ_PAIR, true, true},
                                   {"stride", SEQ_PAIR, true, false},
                                   {"padding", SEQ_PAIR, true, false}}},
  [SEQ_BATCHNORM2D] = {"batchnorm2d", {{"eps", SEQ_REAL, true, false},
                                       {"momentum", SEQ_REAL, true, false},
                                       {"affine", SEQ_BOOL, true, false},
                                       {"num_features", SEQ_INT, false, false}}},
  [SEQ_BATCHNORM1D] = {"batchnorm1d", {{"eps", SEQ_REAL, true, false},
                                       {"momentum", SEQ_REAL, true, false},
                                       {"affine", SEQ_BOOL, true, false},
                                       {"num_features", SEQ_INT, false, false}}},
  [SEQ_LAYERNORM] = {"layernorm", {{"eps", SEQ_REAL, true, false},
                                   {"elementwise_affine", SEQ_BOOL, true, false},
                                   {"normalized_shape", SEQ_INT, false, false}}},
  [SEQ_RELU] = {"relu", {{NULL, 0, false, false}}},
  [SEQ_GELU] = {"gelu", {{"approximate", SEQ_WORD, true, false}}},
  [SEQ_TANH] = {"tanh", {{NULL, 0, false, false}}},
  [SEQ_SIGMOID] = {"sigmoid", {{NULL, 0, false, false}}},
  [SEQ_DROPOUT] = {"dropout", {{"p", SEQ_REAL, true, false}}},
  [SEQ_FLATTEN] = {"flatten", {{"start_dim", SEQ_INT, true, false},
                               {"end_dim", SEQ_INT, true, false}}},
  [SEQ_LINEAR] = {"linear", {{"out_features", SEQ_INT, true, true},
                             {"bias", SEQ_BOOL, true, false},
                             {"in_features", SEQ_INT, false, false}}},
  [SEQ_EMBEDDING] = {"embedding", {{"num_embeddings", SEQ_INT, true, true},
                                   {"embedding_dim", SEQ_INT, true, true}}},
};
/* clang-format on */

/* Every message starts "layers: layer I "TEXT": ". */
#define SEQ_FAIL(host, spec, index, fmt, ...)                                  \
  lk_fail(host, LK_ECONFIG, "layers: layer %zu \"%.*s\": " fmt, (index),       \
          (spec)->text_len, (spec)->text, __VA_ARGS__)

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

/* [P, END) as a string in BUF [LEN]: false when empty or too long. */
static inline bool seq_token(const char *p, const char *end, char *buf,
                             size_t len) {
  size_t n = (size_t)(end - p);
  if (n == 0 || n >= len)
    return false;
  memcpy(buf, p, n);
  buf[n] = '\0';
  return true;
}

/* A whole number in [lo, hi] from [P, END), all of it. */
static inline bool seq_int(const char *p, const char *end, long lo, long hi,
                           int *out) {
  char buf[32], *stop;
  if (!seq_token(p, end, buf, sizeof buf))
    return false;
  long v = strtol(buf, &stop, 10);
  if (*stop || v < lo || v > hi)
    return false;
  *out = (int)v;
  return true;
}

static inline bool seq_real(const char *p, const char *end, double *out) {
  char buf[64], *stop;
  if (!seq_token(p, end, buf, sizeof buf))
    return false;
  double v = strtod(buf, &stop);
  if (*stop || !isfinite(v))
    return false;
  *out = v;
  return true;
}

static inline bool seq_word_is(const char *p, const char *end,
                               const char *word) {
  size_t n = (size_t)(end - p);
  return strlen(word) == n && strncasecmp(p, word, n) == 0;
}

/* The value of argument A of layer S from [P, END) (trimmed). */
static inline int seq_set(lk_host *host, seq_spec *s, size_t index,
                          const seq_arg *a, const char *p, const char *end) {
  int x = 0, y = 0;
  double r = 0;
  bool ok = true;
  switch (a->type) {
  case SEQ_INT:
    /* flatten's dims may count from the end; sizes are >= 1 */
    ok = s->kind == SEQ_FLATTEN ? seq_int(p, end, -8, 8, &x)
                                : seq_int(p, end, 1, 16777216, &x);
    break;
  case SEQ_PAIR:
    if (p < end && *p == '(' && end[-1] == ')') {
      const char *q = p + 1, *e = end - 1, *comma = memchr(q, ',', e - q);
      ok = comma &&
           seq_int(seq_skip(q, comma), seq_trim_end(q, comma), 0, 16777216,
                   &x) &&
           seq_int(seq_skip(comma + 1, e), seq_trim_end(comma + 1, e), 0,
                   16777216, &y);
    } else {
      ok = seq_int(p, end, 0, 16777216, &x);
      y = x;
    }
    break;
  case SEQ_BOOL:
    if (seq_word_is(p, end, "true"))
      x = 1;
    else if (!seq_word_is(p, end, "false"))
      ok = false;
    break;
  case SEQ_REAL: ok = seq_real(p, end, &r); break;
  case SEQ_WORD:
    if (end - p >= 2 && (*p == '\'' || *p == '"') && end[-1] == *p)
      p++, end--;
    ok = p < end;
    break;
  }
  static const char *const expected[] = {[SEQ_INT] = "a whole number",
                                         [SEQ_PAIR] =
                                             "a whole number or a pair (a, b)",
                                         [SEQ_BOOL] = "true or false",
                                         [SEQ_REAL] = "a number",
                                         [SEQ_WORD] = "a word"};
  if (!ok)
    return SEQ_FAIL(host, s, index, "%s = %.*s: expected %s%s", a->name,
                    (int)(end - p), p, expected[a->type],
                    a->type == SEQ_INT && s->kind == SEQ_FLATTEN ? " in [-8, 8]"
                    : a->type == SEQ_INT || a->type == SEQ_PAIR
                        ? " in [1, 16777216]"
                        : "");
  const char *n = a->name;
  if (!strcmp(n, "out_channels") || !strcmp(n, "out_features") ||
      !strcmp(n, "embedding_dim"))
    s->out = x;
  else if (!strcmp(n, "num_embeddings"))
    s->vocab = x;
  else if (!strcmp(n, "in_channels") || !strcmp(n, "in_features") ||
           !strcmp(n, "num_features") || !strcmp(n, "normalized_shape"))
    s->in = x;
  else if (!strcmp(n, "kernel_size")) {
    if (x < 1 || y < 1)
      return SEQ_FAIL(host, s, index, "kernel_size = %.*s: must be >= 1",
                      (int)(end - p), p);
    s->kh = x, s->kw = y;
  } else if (!strcmp(n, "stride")) {
    if (x < 1 || y < 1)
      return SEQ_FAIL(host, s, index, "stride = %.*s: must be >= 1",
                      (int)(end - p), p);
    s->sh = x, s->sw = y;
  } else if (!strcmp(n, "padding"))
    s->ph = x, s->pw = y;
  else if (!strcmp(n, "bias") || !strcmp(n, "affine") ||
           !strcmp(n, "elementwise_affine"))
    s->bias = x;
  else if (!strcmp(n, "eps")) {
    if (!(r > 0))
      return SEQ_FAIL(host, s, index, "eps = %.*s: must be > 0", (int)(end - p),
                      p);
    s->eps = r;
  } else if (!strcmp(n, "momentum")) {
    if (!(r >= 0 && r <= 1))
      return SEQ_FAIL(host, s, index, "momentum = %.*s: must be in [0, 1]",
                      (int)(end - p), p);
    s->momentum = r;
  } else if (!strcmp(n, "p")) {
    if (!(r >= 0 && r < 1))
      return SEQ_FAIL(host, s, index, "p = %.*s: must be in [0, 1)",
                      (int)(end - p), p);
    s->p = r;
  } else if (!strcmp(n, "start_dim"))
    s->start_dim = x;
  else if (!strcmp(n, "end_dim"))
    s->end_dim = x;
  else if (!strcmp(n, "approximate") && !seq_word_is(p, end, "tanh"))
    return SEQ_FAIL(host, s, index,
                    "approximate = %.*s: only 'tanh' is implemented "
                    "(0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))",
                    (int)(end - p), p);
  return 0;
}

/* The names a kind accepts, for messages: "out_channels, kernel_size". */
static inline void seq_arg_names(const seq_kind_info *k, char *buf,
                                 size_t len) {
  buf[0] = '\0';
  for (int i = 0; i < SEQ_MAX_ARGS && k->args[i].name; i++) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", i ? ", " : "", k->args[i].name);
  }
  if (!buf[0])
    snprintf(buf, len, "none");
}

/* The arguments of layer S, the text between its parentheses [P, END). */
static inline int seq_args(lk_host *host, seq_spec *s, size_t index,
                           const char *p, const char *end) {
  const seq_kind_info *k = &seq_kinds[s->kind];
  bool given[SEQ_MAX_ARGS] = {false}, keywords = false;
  int position = 0;
  char names[160];
  p = seq_skip(p, end);
  if (p == end)
    goto check; /* "relu()" */
  for (;;) {
    bool bad = false;
    const char *e = seq_item_end(p, end, &bad), *v = p;
    const char *ve = seq_trim_end(p, e), *eq = memchr(p, '=', ve - p);
    const seq_arg *a = NULL;
    int ai = -1;
    if (eq) {
      const char *ne = seq_trim_end(p, eq);
      for (int i = 0; i < SEQ_MAX_ARGS && k->args[i].name; i++)
        if (seq_word_is(p, ne, k->args[i].name))
          a = &k->args[i], ai = i;
      if (!a) {
        seq_arg_names(k, names, sizeof names);
        return SEQ_FAIL(host, s, index,
                        "%s takes no argument %.*s (it takes: %s)", k->name,
                        (int)(ne - p), p, names);
      }
      keywords = true;
      v = seq_skip(eq + 1, ve);
    } else {
      if (keywords)
        return SEQ_FAIL(host, s, index,
                        "positional argument %.*s after a keyword argument",
                        (int)(ve - p), p);
      if (ve == p)
        return SEQ_FAIL(host, s, index, "an empty argument%s", "");
      int i = 0, seen = 0;
      for (; i < SEQ_MAX_ARGS && k->args[i].name; i++)
        if (k->args[i].positional && seen++ == position)
          break;
      if (i == SEQ_MAX_ARGS || !k->args[i].name)
        return SEQ_FAIL(host, s, index,
                        "%s takes %d positional argument%s, got another: %.*s",
                        k->name, seen, seen == 1 ? "" : "s", (int)(ve - p), p);
      a = &k->args[i], ai = i;
      position++;
    }
    if (given[ai])
      return SEQ_FAIL(host, s, index, "%s given twice", a->name);
    given[ai] = true;
    int rc = seq_set(host, s, index, a, v, ve);
    if (rc != 0)
      return rc;
    if (e == end)
      break;
    p = seq_skip(e + 1, end);
  }
check:
  for (int i = 0; i < SEQ_MAX_ARGS && k->args[i].name; i++)
    if (k->args[i].required && !given[i])
      return SEQ_FAIL(host, s, index, "%s needs %s", k->name, k->args[i].name);
  return 0;
}

/* One layer from [P, END) (trimmed, not empty). */
static inline int seq_parse_layer(lk_host *host, seq_spec *s, size_t index,
                                  const char *p, const char *end) {
  *s = (seq_spec){.text = p,
                  .text_len = (int)(end - p),
                  .bias = true,
                  .eps = 1e-5,
                  .momentum = 0.1,
                  .p = 0.5,
                  .start_dim = 1,
                  .end_dim = -1};
  const char *name_end = p;
  while (name_end < end &&
         (isalnum((unsigned char)*name_end) || *name_end == '_'))
    name_end++;
  int kind = -1;
  for (int i = 0; i < SEQ_KINDS; i++)
    if (seq_word_is(p, name_end, seq_kinds[i].name))
      kind = i;
  if (kind < 0) {
    char known[256];
    known[0] = '\0';
    for (int i = 0; i < SEQ_KINDS; i++) {
      size_t used = strlen(known);
      snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
               seq_kinds[i].name);
    }
    return SEQ_FAIL(host, s, index, "unknown layer %.*s; expected one of %s",
                    (int)(name_end - p), p, known);
  }
  s->kind = (seq_kind)kind;
  const char *q = seq_skip(name_end, end);
  if (q == end)
    return seq_args(host, s, index, end, end);
  if (*q != '(' || end[-1] != ')')
    return SEQ_FAIL(host, s, index,
                    "expected %s or %s(ARGUMENTS) with nothing after",
                    seq_kinds[kind].name, seq_kinds[kind].name);
  return seq_args(host, s, index, q + 1, end - 1);
}

/* Parses TEXT into *OUT (N layers, freed by the caller; the specs point
 * into TEXT, which must outlive them). */
static inline int seq_parse(lk_host *host, const char *text, seq_spec **out,
                            size_t *n) {
  const char *p = text, *end = text + strlen(text);
  size_t cap = 1;
  for (const char *c = text; *c; c++)
    cap += *c == ',';
  seq_spec *specs = calloc(cap, sizeof *specs);
  if (!specs)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  size_t count = 0;
  p = seq_skip(p, end);
  if (p == end) {
    free(specs);
    return lk_fail(host, LK_ECONFIG,
                   "layers: no layers (expected e.g. \"flatten, linear(10)\")");
  }
  for (;;) {
    bool bad = false;
    const char *e = seq_item_end(p, end, &bad), *te = seq_trim_end(p, e);
    seq_spec *s = &specs[count];
    if (bad || (e < end && *e == ')')) {
      free(specs);
      const char *stop = e < end && *e == ')' ? e + 1 : te;
      return lk_fail(host, LK_ECONFIG,
                     "layers: layer %zu \"%.*s\": unbalanced parentheses",
                     count, (int)(stop - p), p);
    }
    if (te == p) {
      free(specs);
      return lk_fail(host, LK_ECONFIG,
                     "layers: layer %zu is empty (two commas in a row, or one "
                     "at an end)",
                     count);
    }
    int rc = seq_parse_layer(host, s, count, p, te);
    if (rc != 0) {
      free(specs);
      return rc;
    }
    count++;
    if (e == end)
      break;
    p = seq_skip(e + 1, end);
    if (p == end) {
      free(specs);
      return lk_fail(host, LK_ECONFIG,
                     "layers: layer %zu is empty (two commas in a row, or one "
                     "at an end)",
                     count);
    }
  }
  *out = specs;
  *n = count;
  return 0;
}

#endif
