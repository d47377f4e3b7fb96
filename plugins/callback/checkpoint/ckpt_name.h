/* The checkpoint callback's file names: its filename option, a pattern as
 * Lightning's ModelCheckpoint takes, parsed once at create and rendered for
 * each kept checkpoint. "{epoch}-{val_loss:.4f}" is text with fields in
 * braces: {epoch} (the epoch), {step} (the optimizer steps taken) or any
 * metrics.csv column ({val_loss}, {loss}, {accuracy}), each with an
 * optional format after a colon: [0][WIDTH][.PRECISION] and d for epoch
 * and step, f, e or g for a metric (a metric without one is %g). As
 * Lightning does by default (auto_insert_metric_name), a field is written
 * NAME=VALUE; ".ckpt" is appended. The metric fields' values are kept with
 * each kept checkpoint, so that the same name can be rendered again to
 * delete it, in a resumed run too. Static inline: the plugin exports its
 * descriptor only. */
#ifndef LOOPKIT_CKPT_NAME_H
#define LOOPKIT_CKPT_NAME_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <loopkit/loopkit.h>

#define CKPT_NAME_PIECES 32 /* text runs and fields */
#define CKPT_NAME_METRICS 8 /* distinct metric fields */

enum { PIECE_TEXT, PIECE_EPOCH, PIECE_STEP, PIECE_METRIC };

typedef struct ckpt_piece {
  int kind;
  char text[64];   /* the text, or the field's name */
  char format[24]; /* the printf conversion of a field */
  size_t metric;   /* a metric field's index in ckpt_name.metrics */
} ckpt_piece;

typedef struct ckpt_name {
  ckpt_piece pieces[CKPT_NAME_PIECES];
  size_t n;
  char metrics[CKPT_NAME_METRICS][64]; /* the metric fields' names */
  size_t n_metrics;
  bool insert_names; /* auto_insert_metric_name */
} ckpt_name;

/* FIELD's format spec SPEC ("" when none) as a printf conversion. */
static inline int ckpt_name_format(lk_host *host, ckpt_piece *p,
                                   const char *spec) {
  bool integer = p->kind != PIECE_METRIC;
  const char *s = spec;
  bool zero = *s == '0';
  s += zero;
  unsigned width = 0, prec = 0;
  bool has_prec = false;
  while (*s >= '0' && *s <= '9' && width < 100)
    width = width * 10 + (unsigned)(*s++ - '0');
  if (*s == '.') {
    has_prec = true;
    for (s++; *s >= '0' && *s <= '9' && prec < 100; s++)
      prec = prec * 10 + (unsigned)(*s - '0');
  }
  char conv = *spec ? *s++ : (integer ? 'd' : 'g');
  bool ok = !*s && width <= 64 && prec <= 17 &&
            (integer ? conv == 'd' && !has_prec
                     : conv == 'f' || conv == 'e' || conv == 'g');
  if (!ok)
    return lk_fail(host, LK_ECONFIG,
                   "option filename: field {%s:%s}: the format is "
                   "[0][WIDTH][.PRECISION] then %s",
                   p->text, spec,
                   integer ? "d (epoch and step are whole numbers)"
                           : "f, e or g (as in {val_loss:.4f})");
  if (integer)
    snprintf(p->format, sizeof p->format, "%%%s%ullu", zero ? "0" : "", width);
  else if (has_prec)
    snprintf(p->format, sizeof p->format, "%%%s%u.%u%c", zero ? "0" : "", width,
             prec, conv);
  else
    snprintf(p->format, sizeof p->format, "%%%s%u%c", zero ? "0" : "", width,
             conv);
  return 0;
}

static inline bool ckpt_name_char(char c, bool field) {
  if (field)
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
  return c > 0x20 && c < 0x7f && c != '/' && c != '{' && c != '}';
}

/* One field, "NAME" or "NAME:SPEC", of LEN bytes at F. */
static inline int ckpt_name_field(ckpt_name *n, lk_host *host, const char *f,
                                  size_t len) {
  ckpt_piece *p = &n->pieces[n->n];
  const char *colon = memchr(f, ':', len);
  size_t name_len = colon ? (size_t)(colon - f) : len;
  char spec[24] = "";
  if (name_len == 0 || name_len >= sizeof p->text ||
      (colon && len - name_len - 1 >= sizeof spec))
    return lk_fail(host, LK_ECONFIG,
                   "option filename: field {%.*s}: name a metric, epoch or "
                   "step (at most 63 characters), as in {epoch}",
                   (int)len, f);
  memcpy(p->text, f, name_len);
  p->text[name_len] = '\0';
  for (size_t i = 0; i < name_len; i++)
    if (!ckpt_name_char(p->text[i], true))
      return lk_fail(host, LK_ECONFIG,
                     "option filename: field {%s}: a metric name is letters, "
                     "digits, _, - and .",
                     p->text);
  if (colon)
    memcpy(spec, colon + 1, len - name_len - 1);
  p->kind = !strcmp(p->text, "epoch")  ? PIECE_EPOCH
            : !strcmp(p->text, "step") ? PIECE_STEP
                                       : PIECE_METRIC;
  if (p->kind == PIECE_METRIC) {
    size_t m = 0;
    while (m < n->n_metrics && strcmp(n->metrics[m], p->text))
      m++;
    if (m == CKPT_NAME_METRICS)
      return lk_fail(host, LK_ECONFIG,
                     "option filename: more than %d metric fields",
                     CKPT_NAME_METRICS);
    if (m == n->n_metrics)
      memcpy(n->metrics[n->n_metrics++], p->text, sizeof p->text);
    p->metric = m;
  }
  int rc = ckpt_name_format(host, p, spec);
  n->n += rc == 0;
  return rc;
}

static inline int ckpt_name_parse(ckpt_name *n, lk_host *host,
                                  const char *pattern, bool insert_names) {
  memset(n, 0, sizeof *n);
  n->insert_names = insert_names;
  if (!pattern || !*pattern || !strcmp(pattern, "best") ||
      !strcmp(pattern, "last"))
    return lk_fail(host, LK_ECONFIG,
                   "option filename = \"%s\": give a pattern such as "
                   "{epoch}-{step} (best and last are the callback's and the "
                   "loop's own)",
                   pattern ? pattern : "");
  for (const char *s = pattern; *s;) {
    if (n->n == CKPT_NAME_PIECES)
      return lk_fail(host, LK_ECONFIG,
                     "option filename = %s: more than %d pieces", pattern,
                     CKPT_NAME_PIECES);
    if (*s == '{') {
      const char *end = strchr(s, '}');
      if (!end)
        return lk_fail(host, LK_ECONFIG,
                       "option filename = %s: a { without its }", pattern);
      int rc = ckpt_name_field(n, host, s + 1, (size_t)(end - s - 1));
      if (rc != 0)
        return rc;
      s = end + 1;
      continue;
    }
    ckpt_piece *p = &n->pieces[n->n++];
    p->kind = PIECE_TEXT;
    size_t len = 0;
    for (; *s && *s != '{' && len + 1 < sizeof p->text; s++) {
      if (!ckpt_name_char(*s, false))
        return lk_fail(host, LK_ECONFIG,
                       "option filename = %s: '%c' cannot be in a file name "
                       "(no /, spaces, control characters or a lone }; "
                       "dirpath sets the directory)",
                       pattern,
                       *s == '}' || (*s > 0x20 && *s < 0x7f) ? *s : '?');
      p->text[len++] = *s;
    }
    p->text[len] = '\0';
  }
  return 0;
}

/* The file name for EPOCH, STEP and the metric fields' VALUES, with
 * ".ckpt"; false when it does not fit in LEN. */
static inline bool ckpt_name_render(const ckpt_name *n, uint64_t epoch,
                                    uint64_t step, const double *values,
                                    char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n->n; i++) {
    const ckpt_piece *p = &n->pieces[i];
    int w = 0;
    if (p->kind != PIECE_TEXT && n->insert_names)
      w = snprintf(buf + used, len - used, "%s=", p->text);
    if (w < 0 || (size_t)w >= len - used)
      return false;
    used += (size_t)w;
    if (p->kind == PIECE_TEXT)
      w = snprintf(buf + used, len - used, "%s", p->text);
    else if (p->kind == PIECE_METRIC)
      w = snprintf(buf + used, len - used, p->format, values[p->metric]);
    else
      w = snprintf(buf + used, len - used, p->format,
                   (unsigned long long)(p->kind == PIECE_EPOCH ? epoch : step));
    if (w < 0 || (size_t)w >= len - used)
      return false;
    used += (size_t)w;
  }
  return snprintf(buf + used, len - used, ".ckpt") < (int)(len - used);
}

#endif
