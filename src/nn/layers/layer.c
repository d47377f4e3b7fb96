/* The layer interface's generic part (loopkit/layer.h): the registry of
 * the built-in tables (list.h, one line a layer), the parser of one
 * layer's text against its type's argument table, and an instance's life
 * (infer, bind, reserve, free). Nothing here knows a layer by name. */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "layers.h"

#define LK_LAYER_ENTRY(id) extern const lk_layer_type lk__layer_##id;
#include "list.h"
#undef LK_LAYER_ENTRY

static const lk_layer_type *const builtin[] = {
#define LK_LAYER_ENTRY(id) &lk__layer_##id,
#include "list.h"
#undef LK_LAYER_ENTRY
};

#define N_BUILTIN (sizeof builtin / sizeof *builtin)

/* The layers of several inputs, a network's joins (sequential's
 * add(@NAME), cat(@NAME)): found by name, not listed by lk_layer_at,
 * which lists the layers of a chain. */
extern const lk_layer_type lk__layer_add, lk__layer_cat;
static const lk_layer_type *const joins[] = {&lk__layer_add, &lk__layer_cat};
#define N_JOINS (sizeof joins / sizeof *joins)

size_t lk_layer_count(void) {
  return N_BUILTIN;
}

const lk_layer_type *lk_layer_at(size_t i) {
  return i < N_BUILTIN ? builtin[i] : NULL;
}

static bool word_is(const char *p, const char *end, const char *word) {
  size_t n = (size_t)(end - p);
  return strlen(word) == n && strncasecmp(p, word, n) == 0;
}

const lk_layer_type *lk_layer_find(const char *name, size_t len) {
  for (size_t i = 0; name && i < N_BUILTIN; i++)
    if (word_is(name, name + len, builtin[i]->name))
      return builtin[i];
  for (size_t i = 0; name && i < N_JOINS; i++)
    if (word_is(name, name + len, joins[i]->name))
      return joins[i];
  return NULL;
}

int lk_layer_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = lk__verr(code, fmt, ap);
  va_end(ap);
  return rc;
}

int lk_layer_arg_index(const lk_layer_type *type, const char *name) {
  for (int i = 0;
       type && i < LK_LAYER_MAX_ARGS && type->args && type->args[i].name; i++)
    if (!strcmp(type->args[i].name, name))
      return i;
  return -1;
}

const char *lk_layer_shape_text(const lk_layer_shape *s, char *buf,
                                size_t len) {
  int used = snprintf(buf, len, "[");
  for (int i = 0; i < s->ndim && used > 0 && (size_t)used < len; i++)
    used += snprintf(buf + used, len - (size_t)used, "%s%d", i ? ", " : "",
                     s->d[i]);
  if (used > 0 && (size_t)used < len)
    snprintf(buf + used, len - (size_t)used, "]");
  return buf;
}

/* ---- one argument's value ------------------------------------------------ */

static const char *skip(const char *p, const char *end) {
  while (p < end && isspace((unsigned char)*p))
    p++;
  return p;
}

static const char *trim_end(const char *p, const char *end) {
  while (end > p && isspace((unsigned char)end[-1]))
    end--;
  return end;
}

/* The end of the item that starts at P: the first comma outside
 * parentheses, or END. */
static const char *item_end(const char *p, const char *end) {
  int depth = 0;
  for (; p < end; p++) {
    if (*p == '(')
      depth++;
    else if (*p == ')')
      depth--;
    else if (*p == ',' && depth == 0)
      return p;
  }
  return p;
}

/* A whole number in [LO, HI] from [P, END), all of it. */
static bool whole(const char *p, const char *end, double lo, double hi,
                  int *out) {
  char buf[32], *stop;
  size_t n = (size_t)(end - p);
  if (n == 0 || n >= sizeof buf)
    return false;
  memcpy(buf, p, n);
  buf[n] = '\0';
  long v = strtol(buf, &stop, 10);
  if (*stop || (double)v < lo || (double)v > hi)
    return false;
  *out = (int)v;
  return true;
}

static bool real(const char *p, const char *end, double *out) {
  char buf[64], *stop;
  size_t n = (size_t)(end - p);
  if (n == 0 || n >= sizeof buf)
    return false;
  memcpy(buf, p, n);
  buf[n] = '\0';
  double v = strtod(buf, &stop);
  if (*stop || !isfinite(v))
    return false;
  *out = v;
  return true;
}

/* "in [1, 16777216]" for a whole number or a pair's */
static void range_text(const lk_layer_arg *a, double lo, char *buf,
                       size_t len) {
  snprintf(buf, len, " in [%.17g, %.17g]", lo, a->max);
}

/* PAIR: each part parses in [min(0, MIN), MAX], then must be >= MIN. */
static bool pair(const lk_layer_arg *a, const char *p, const char *end,
                 lk_layer_value *v) {
  double lo = a->min < 0 ? a->min : 0;
  if (p < end && *p == '(' && end[-1] == ')') {
    const char *q = p + 1, *e = end - 1,
               *comma = memchr(q, ',', (size_t)(e - q));
    return comma &&
           whole(skip(q, comma), trim_end(q, comma), lo, a->max, &v->i) &&
           whole(skip(comma + 1, e), trim_end(comma + 1, e), lo, a->max, &v->j);
  }
  if (!whole(p, end, lo, a->max, &v->i))
    return false;
  v->j = v->i;
  return true;
}

/* A real's range, "must be > 0", "must be in [0, 1)", or NULL when R is
 * in it. */
static const char *real_range(const lk_layer_arg *a, double r, char *buf,
                              size_t len) {
  bool lo_open = a->flags & LK_LAYER_ARG_MIN_OPEN,
       hi_open = a->flags & LK_LAYER_ARG_MAX_OPEN;
  bool ok = (lo_open ? r > a->min : r >= a->min) &&
            (hi_open ? r < a->max : r <= a->max);
  if (ok)
    return NULL;
  if (isinf(a->max))
    snprintf(buf, len, "must be %s %.17g", lo_open ? ">" : ">=", a->min);
  else
    snprintf(buf, len, "must be in %c%.17g, %.17g%c", lo_open ? '(' : '[',
             a->min, a->max, hi_open ? ')' : ']');
  return buf;
}

/* WORD: one of A's choices ("a|b"), quoted or not. */
static int word(const lk_layer_arg *a, const char *p, const char *end,
                lk_layer_value *v) {
  if (end - p >= 2 && (*p == '\'' || *p == '"') && end[-1] == *p)
    p++, end--;
  if (p == end || (size_t)(end - p) >= sizeof v->word)
    return lk__err(LK_ECONFIG, "%s = %.*s: expected a word", a->name,
                   (int)(end - p), p);
  for (const char *c = a->choices; c && *c;) {
    const char *bar = strchr(c, '|');
    const char *ce = bar ? bar : c + strlen(c);
    if ((size_t)(ce - c) == (size_t)(end - p) &&
        !strncasecmp(c, p, (size_t)(end - p)))
      break;
    if (!bar) {
      char list[128] = "";
      for (const char *d = a->choices; *d; d++) {
        size_t u = strlen(list);
        if (u + 4 < sizeof list)
          snprintf(list + u, sizeof list - u, "%s",
                   *d == '|' ? "', '" : (char[]){*d, 0});
      }
      return lk__err(LK_ECONFIG, "%s = %.*s: only '%s' is implemented (%s)",
                     a->name, (int)(end - p), p, list, a->help);
    }
    c = bar + 1;
  }
  memcpy(v->word, p, (size_t)(end - p));
  v->word[end - p] = '\0';
  return 0;
}

/* The value of argument A from [P, END) (trimmed) into V. */
static int value(const lk_layer_arg *a, const char *p, const char *end,
                 lk_layer_value *v) {
  static const char *const expected[] = {[LK_LAYER_INT] = "a whole number",
                                         [LK_LAYER_PAIR] =
                                             "a whole number or a pair (a, b)",
                                         [LK_LAYER_BOOL] = "true or false",
                                         [LK_LAYER_REAL] = "a number",
                                         [LK_LAYER_WORD] = "a word"};
  char range[96] = "";
  bool ok = true;
  switch (a->type) {
  case LK_LAYER_INT:
    ok = whole(p, end, a->min, a->max, &v->i);
    range_text(a, a->min, range, sizeof range);
    break;
  case LK_LAYER_PAIR:
    ok = pair(a, p, end, v);
    range_text(a, a->min, range, sizeof range);
    break;
  case LK_LAYER_BOOL:
    v->i = word_is(p, end, "true");
    ok = v->i || word_is(p, end, "false");
    break;
  case LK_LAYER_REAL: ok = real(p, end, &v->r); break;
  case LK_LAYER_WORD: return word(a, p, end, v);
  }
  if (!ok)
    return lk__err(LK_ECONFIG, "%s = %.*s: expected %s%s", a->name,
                   (int)(end - p), p, expected[a->type], range);
  const char *bad = NULL;
  if (a->type == LK_LAYER_REAL)
    bad = real_range(a, v->r, range, sizeof range);
  else if (a->type == LK_LAYER_PAIR && (v->i < a->min || v->j < a->min)) {
    snprintf(range, sizeof range, "must be >= %.17g", a->min);
    bad = range;
  }
  if (bad)
    return lk__err(LK_ECONFIG, "%s = %.*s: %s", a->name, (int)(end - p), p,
                   bad);
  return 0;
}

/* ---- a layer's arguments ------------------------------------------------- */

static int n_args(const lk_layer_type *t) {
  int n = 0;
  while (t->args && n < LK_LAYER_MAX_ARGS && t->args[n].name)
    n++;
  return n;
}

/* "out_channels, kernel_size" */
static void arg_names(const lk_layer_type *t, char *buf, size_t len) {
  buf[0] = '\0';
  for (int i = 0; i < n_args(t); i++) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", i ? ", " : "", t->args[i].name);
  }
  if (!buf[0])
    snprintf(buf, len, "none");
}

/* Which argument the item [P, VE) names: by keyword (*V after the '='),
 * else the next positional one (*POSITION counts them). */
static int which(const lk_layer_type *t, const char *p, const char *ve,
                 const char **v, bool *keywords, int *position) {
  const char *eq = memchr(p, '=', (size_t)(ve - p));
  if (eq) {
    const char *ne = trim_end(p, eq);
    for (int i = 0; i < n_args(t); i++)
      if (word_is(p, ne, t->args[i].name)) {
        *keywords = true;
        *v = skip(eq + 1, ve);
        return i;
      }
    char names[160];
    arg_names(t, names, sizeof names);
    return lk__err(LK_ECONFIG, "%s takes no argument %.*s (it takes: %s)",
                   t->name, (int)(ne - p), p, names);
  }
  if (*keywords)
    return lk__err(LK_ECONFIG,
                   "positional argument %.*s after a keyword argument",
                   (int)(ve - p), p);
  if (ve == p)
    return lk__err(LK_ECONFIG, "an empty argument");
  int seen = 0;
  for (int i = 0; i < n_args(t); i++)
    if ((t->args[i].flags & LK_LAYER_ARG_POSITIONAL) && seen++ == *position) {
      (*position)++;
      *v = p;
      return i;
    }
  return lk__err(LK_ECONFIG,
                 "%s takes %d positional argument%s, got another: %.*s",
                 t->name, seen, seen == 1 ? "" : "s", (int)(ve - p), p);
}

/* The defaults of what was not given; a required argument missing. */
static int defaults(const lk_layer_type *t, lk_layer_value *values) {
  for (int i = 0; i < n_args(t); i++) {
    const lk_layer_arg *a = &t->args[i];
    if (values[i].given)
      continue;
    if (a->flags & LK_LAYER_ARG_REQUIRED)
      return lk__err(LK_ECONFIG, "%s needs %s", t->name, a->name);
    if (!a->def)
      continue;
    int rc = value(a, a->def, a->def + strlen(a->def), &values[i]);
    if (rc != 0)
      return lk__err_prefix(rc, "%s: the default of %s", t->name, a->name);
    values[i].set = true;
  }
  return 0;
}

int lk_layer_parse_args(const lk_layer_type *t, const char *args, size_t len,
                        lk_layer_value *values) {
  if (!t || !values || (!args && len))
    return lk__err(LK_EINVAL, "lk_layer_parse_args: NULL argument");
  memset(values, 0, LK_LAYER_MAX_ARGS * sizeof *values);
  const char *end = args + len, *p = skip(args, end);
  bool keywords = false;
  int position = 0;
  while (p < end) { /* "relu()" has none */
    const char *e = item_end(p, end), *ve = trim_end(p, e), *v = NULL;
    int i = which(t, p, ve, &v, &keywords, &position);
    if (i < 0)
      return i;
    if (values[i].given)
      return lk__err(LK_ECONFIG, "%s given twice", t->args[i].name);
    int rc = value(&t->args[i], v, ve, &values[i]);
    if (rc != 0)
      return rc;
    values[i].given = values[i].set = true;
    if (e == end)
      break;
    p = skip(e + 1, end);
  }
  return defaults(t, values);
}

/* The type named at the start of [P, END), the rest in *REST. */
static const lk_layer_type *named(const char *p, const char *end,
                                  const char **rest) {
  const char *e = p;
  while (e < end && (isalnum((unsigned char)*e) || *e == '_'))
    e++;
  *rest = e;
  const lk_layer_type *t = lk_layer_find(p, (size_t)(e - p));
  if (t)
    return t;
  char known[1024] = ""; /* every built-in name, and the joins */
  for (size_t i = 0; i < N_BUILTIN; i++) {
    size_t used = strlen(known);
    snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
             builtin[i]->name);
  }
  for (size_t i = 0; i < N_JOINS; i++) {
    size_t used = strlen(known);
    snprintf(known + used, sizeof known - used, ", %s(@NAME)", joins[i]->name);
  }
  lk__err(LK_ECONFIG, "unknown layer %.*s; expected one of %s", (int)(e - p), p,
          known);
  return NULL;
}

/* The arguments after the name, [Q, END), of type T into L. */
static int parse_rest(lk_layer *l, const lk_layer_type *t, const char *q,
                      const char *end) {
  q = skip(q, end);
  int rc;
  if (q == end)
    rc = lk_layer_parse_args(t, end, 0, l->args);
  else if (*q != '(' || end[-1] != ')')
    rc = lk__err(LK_ECONFIG, "expected %s or %s(ARGUMENTS) with nothing after",
                 t->name, t->name);
  else
    rc = lk_layer_parse_args(t, q + 1, (size_t)(end - 1 - (q + 1)), l->args);
  if (rc != 0)
    return rc;
  if (t->state_size && !(l->state = calloc(1, t->state_size)))
    return lk__err(LK_ENOMEM, "out of memory");
  l->type = t;
  return 0;
}

int lk_layer_parse(lk_layer *l, const char *text, size_t len) {
  if (!l || !text)
    return lk__err(LK_EINVAL, "lk_layer_parse: NULL argument");
  memset(l, 0, sizeof *l);
  const char *end = trim_end(text, text + len), *rest;
  const lk_layer_type *t = named(skip(text, end), end, &rest);
  if (!t)
    return LK_ECONFIG;
  return parse_rest(l, t, rest, end);
}

int lk_layer_parse_as(lk_layer *l, const lk_layer_type *type, const char *text,
                      size_t len) {
  if (!l || !type || !type->name || !text)
    return lk__err(LK_EINVAL, "lk_layer_parse_as: NULL argument");
  memset(l, 0, sizeof *l);
  const char *end = trim_end(text, text + len), *p = skip(text, end), *e = p;
  while (e < end && (isalnum((unsigned char)*e) || *e == '_'))
    e++;
  if (!word_is(p, e, type->name))
    return lk__err(LK_EINVAL, "lk_layer_parse_as: \"%.*s\" is not a %s",
                   (int)(e - p), p, type->name);
  return parse_rest(l, type, e, end);
}

/* ---- an instance's life -------------------------------------------------- */

static bool numel(const lk_layer_shape *s, size_t *out) {
  size_t t = 1;
  for (int i = 0; i < s->ndim; i++) {
    if (s->d[i] < 0 || (s->d[i] && t > SIZE_MAX / (size_t)s->d[i]))
      return false;
    t *= (size_t)s->d[i];
  }
  *out = t;
  return true;
}

int lk_layer_infer(lk_layer *l, int n_in, const lk_layer_shape *in) {
  if (!l || !l->type || !in || n_in < 1 || n_in > LK_LAYER_MAX_INPUTS)
    return lk__err(LK_EINVAL, "lk_layer_infer: bad arguments");
  const lk_layer_type *t = l->type;
  int lo = t->min_inputs ? t->min_inputs : 1,
      hi = t->max_inputs ? t->max_inputs : 1;
  if (n_in < lo || n_in > hi)
    return lk__err(LK_ECONFIG, "%d inputs; %s takes %d to %d", n_in, t->name,
                   lo, hi);
  l->n_in = n_in;
  l->in = in[0];
  l->out = in[0];
  if (!numel(&l->in, &l->in_numel))
    return lk__err(LK_ECONFIG, "input: too large");
  int rc = t->infer ? t->infer(l, n_in, in, &l->out) : 0;
  if (rc != 0)
    return rc;
  if (!numel(&l->out, &l->out_numel))
    return lk__err(LK_ECONFIG, "output: too large");
  return 0;
}

int lk_layer_bind(lk_layer *l) {
  return l && l->type && l->type->bind ? l->type->bind(l) : 0;
}

int lk_layer_reserve(lk_layer *l, size_t n) {
  if (!l || !l->type)
    return lk__err(LK_EINVAL, "lk_layer_reserve: no layer");
  if (n <= l->cap)
    return 0;
  int rc = l->type->reserve ? l->type->reserve(l, n) : 0;
  if (rc == 0)
    l->cap = n;
  return rc;
}

void lk_layer_free(lk_layer *l) {
  if (!l)
    return;
  if (l->type && l->type->release && l->state)
    l->type->release(l);
  free(l->state);
  l->state = NULL;
  l->cap = 0;
}
