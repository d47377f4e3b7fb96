/* Plugin options: validation against the declared schema (types, enum
 * choices, numeric ranges), typed getters. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "options.h"

typedef struct option_value {
  const lk_option *decl;
  char *text; /* as given, or the default */
  int64_t i;
  double d;
  bool b;
  double *list;
  size_t list_len;
  char *where;  /* the config's FILE:LINE or --set, or "default" */
  bool is_auto; /* "auto", for the host to resolve before create (auto.c) */
} option_value;

struct lk_options {
  size_t n;
  option_value *values;
};

const char *lk_option_type_name(lk_option_type type) {
  switch (type) {
  case LK_OPT_INT: return "int";
  case LK_OPT_DOUBLE: return "double";
  case LK_OPT_BOOL: return "bool";
  case LK_OPT_STRING: return "string";
  case LK_OPT_ENUM: return "enum";
  case LK_OPT_DOUBLES: return "doubles";
  case LK_OPT_PATH: return "path";
  case LK_OPT_PATHS: return "paths";
  }
  return "?";
}

static bool enum_has(const char *choices, const char *v) {
  size_t len = strlen(v);
  const char *p = choices;
  while (p && *p) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n == len && strncmp(p, v, n) == 0)
      return true;
    p = bar ? bar + 1 : NULL;
  }
  return false;
}

/* ---- ranges --------------------------------------------------------------
 *
 * A numeric option (int, double, doubles) of a plugin of ABI 1.4 or later
 * may declare its range in choices, in interval notation: "[0, inf)",
 * "(0, 1]", "[1, 16777216]". The host refuses a value outside it before
 * create, so plugins need not repeat the checks. A double is finite unless
 * its range closes on an infinite bound: "(0, inf]" accepts inf. */

int lk__range_parse(const char *text, lk__range *r) {
  char open, close, tail;
  char lo[64], hi[64];
  if (!text ||
      sscanf(text, " %c %63[^, ] , %63[^])] %c %c", &open, lo, hi, &close,
             &tail) != 4 ||
      (open != '[' && open != '(') || (close != ']' && close != ')'))
    return LK_EINVAL;
  r->lo_closed = open == '[';
  r->hi_closed = close == ']';
  if (!strcmp(lo, "-inf"))
    r->lo = -INFINITY;
  else if (lk__parse_double(lo, &r->lo) != 0 || !isfinite(r->lo))
    return LK_EINVAL;
  if (!strcmp(hi, "inf"))
    r->hi = INFINITY;
  else if (lk__parse_double(hi, &r->hi) != 0 || !isfinite(r->hi))
    return LK_EINVAL;
  return r->lo <= r->hi ? 0 : LK_EINVAL;
}

bool lk__range_has(const lk__range *r, double v) {
  if (isnan(v))
    return false;
  bool lo = r->lo_closed ? v >= r->lo : v > r->lo;
  bool hi = r->hi_closed ? v <= r->hi : v < r->hi;
  return lo && hi;
}

/* "must be >= 0", "must be > 0 and < 1": the range in words. */
void lk__range_text(const lk__range *r, char *buf, size_t len) {
  char a[48] = "", b[48] = "";
  if (r->lo > -INFINITY)
    snprintf(a, sizeof a, "%s %.17g", r->lo_closed ? ">=" : ">", r->lo);
  if (r->hi < INFINITY)
    snprintf(b, sizeof b, "%s %.17g", r->hi_closed ? "<=" : "<", r->hi);
  snprintf(buf, len, "%s%s%s%s", *a || *b ? "" : "any number", a,
           *a && *b ? " and " : "", b);
}

/* An integer option whose choices end with AUTO_SUFFIX also takes the
 * word auto: a value the host knows better than the config (auto.c). */
#define AUTO_SUFFIX " or auto"

bool lk__option_takes_auto(const lk_option *o) {
  size_t n = o->choices ? strlen(o->choices) : 0, s = strlen(AUTO_SUFFIX);
  return o->type == LK_OPT_INT && n > s &&
         strcmp(o->choices + n - s, AUTO_SUFFIX) == 0;
}

int lk__option_range(const lk_option *o, lk__range *r) {
  if (!lk__option_takes_auto(o))
    return lk__range_parse(o->choices, r);
  char range[128];
  size_t n = strlen(o->choices) - strlen(AUTO_SUFFIX);
  if (n >= sizeof range)
    return LK_EINVAL;
  memcpy(range, o->choices, n);
  range[n] = '\0';
  return lk__range_parse(range, r);
}

/* The range an option declares, or false: none (or a plugin older than
 * ABI 1.4, whose choices mean nothing for a number). */
static bool range_of(const lk_descriptor *desc, const lk_option *o,
                     lk__range *r) {
  if (!lk__abi_has(lk__abi_minor(desc), LK__ABI_OPT_RANGE) || !o->choices ||
      (o->type != LK_OPT_INT && o->type != LK_OPT_DOUBLE &&
       o->type != LK_OPT_DOUBLES))
    return false;
  return lk__option_range(o, r) == 0;
}

/* Doubles are finite unless the range takes an infinity, and within it.
 * The message follows "option NAME = VALUE: " (WHAT names a list's
 * element). */
static int check_number(const lk__range *r, bool has_range, double v,
                        const char *what) {
  bool inf_ok = has_range && ((r->lo == -INFINITY && r->lo_closed) ||
                              (r->hi == INFINITY && r->hi_closed));
  if (isnan(v) || (isinf(v) && !inf_ok))
    return lk__err(LK_ECONFIG, "%smust be a finite number", what);
  if (has_range && !lk__range_has(r, v)) {
    char words[128];
    lk__range_text(r, words, sizeof words);
    return lk__err(LK_ECONFIG, "%smust be %s", what, words);
  }
  return 0;
}

/* An empty TEXT (only a default can be: a config has no empty values) is
 * the empty list. */
static int parse_list(const char *text, double **out, size_t *len) {
  if (!*text) {
    *out = NULL;
    *len = 0;
    return 0;
  }
  size_t cap = 1;
  for (const char *p = text; *p; p++)
    cap += *p == ',';
  double *v = calloc(cap, sizeof *v);
  char *copy = lk__strdup(text);
  if (!v || !copy) {
    free(v);
    free(copy);
    return LK_ENOMEM;
  }
  size_t n = 0;
  char *save = NULL;
  int rc = 0;
  for (char *tok = strtok_r(copy, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ' || *tok == '\t')
      tok++;
    if (lk__parse_double(tok, &v[n]) != 0) {
      rc = LK_EINVAL;
      break;
    }
    n++;
  }
  free(copy);
  if (rc == 0 && n != cap)
    rc = LK_EINVAL; /* empty element: "1,,2" or a trailing comma */
  if (rc != 0) {
    free(v);
    return rc;
  }
  *out = v;
  *len = n;
  return 0;
}

/* Parses TEXT into V according to V->decl; on error the message says what
 * was expected (the caller adds where and which option). *RANGE says that
 * the value is a number of the right type outside what the option takes:
 * the caller then names it with its value. */
static int parse_value(const lk_descriptor *desc, option_value *v,
                       const char *text, bool *range) {
  *range = false;
  const lk_option *o = v->decl;
  lk__range r;
  bool ranged = range_of(desc, o, &r);
  char what[64];
  v->text = lk__strdup(text);
  if (!v->text)
    return lk__err(LK_ENOMEM, "out of memory");
  switch (o->type) {
  case LK_OPT_INT:
    if (strcmp(text, "auto") == 0 && lk__option_takes_auto(o)) {
      v->is_auto = true; /* a number before create, or an error */
      v->i = 0;
      break;
    }
    if (lk__parse_int(text, &v->i) != 0)
      return lk__err(LK_ECONFIG, "expected an integer%s, got \"%s\"",
                     lk__option_takes_auto(o) ? " or auto" : "", text);
    if (ranged && !lk__range_has(&r, (double)v->i)) {
      char words[128];
      lk__range_text(&r, words, sizeof words);
      *range = true;
      return lk__err(LK_ECONFIG, "must be %s", words);
    }
    break;
  case LK_OPT_DOUBLE:
    if (lk__parse_double(text, &v->d) != 0)
      return lk__err(LK_ECONFIG, "expected a number, got \"%s\"", text);
    if (lk__abi_has(lk__abi_minor(desc), LK__ABI_OPT_RANGE) &&
        (*range = check_number(&r, ranged, v->d, "") != 0))
      return LK_ECONFIG;
    break;
  case LK_OPT_BOOL:
    if (lk__parse_bool(text, &v->b) != 0)
      return lk__err(LK_ECONFIG, "expected true or false, got \"%s\"", text);
    break;
  case LK_OPT_STRING:
  case LK_OPT_PATH:
  case LK_OPT_PATHS: break; /* made absolute by the caller */
  case LK_OPT_ENUM:
    if (!enum_has(o->choices ? o->choices : "", text))
      return lk__err(LK_ECONFIG, "expected one of %s, got \"%s\"",
                     o->choices ? o->choices : "(none)", text);
    break;
  case LK_OPT_DOUBLES:
    if (parse_list(text, &v->list, &v->list_len) != 0)
      return lk__err(LK_ECONFIG, "expected a comma list of numbers, got \"%s\"",
                     text);
    for (size_t i = 0;
         lk__abi_has(lk__abi_minor(desc), LK__ABI_OPT_RANGE) && i < v->list_len;
         i++) {
      snprintf(what, sizeof what, "value %zu ", i + 1);
      if ((*range = check_number(&r, ranged, v->list[i], what) != 0))
        return LK_ECONFIG;
    }
    break;
  default:
    return lk__err(LK_ECONFIG, "declared with unknown type %d", (int)o->type);
  }
  return 0;
}

static size_t count_options(const lk_option *o) {
  size_t n = 0;
  while (o && o[n].name)
    n++;
  return n;
}

bool lk__option_names(const lk_option *options, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (const lk_option *o = options; o && o->name; o++) {
    int w = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", o->name);
    if (w < 0 || (size_t)w >= len - used)
      break;
    used += (size_t)w;
  }
  return used > 0;
}

static void list_accepted(const lk_descriptor *desc, char *buf, size_t len) {
  if (!lk__option_names(desc->options, buf, len))
    snprintf(buf, len, "(none: the plugin has no options)");
}

static bool is_host_key(const char *const *host_keys, const char *key) {
  for (; host_keys && *host_keys; host_keys++)
    if (!strcmp(*host_keys, key))
      return true;
  return false;
}

/* LK_OPT_PATHS: each item of the comma list VALUE made absolute (as E's
 * LK_OPT_PATH would be), trimmed, joined with commas into *OUT. */
static int paths_abs(const lk_config *cfg, const lk_config_entry *e,
                     const char *value, char **out) {
  size_t cap = 1, used = 0;
  char *joined = malloc(cap), *copy = lk__strdup(value), *save = NULL;
  int rc = joined && copy ? 0 : lk__err(LK_ENOMEM, "out of memory");
  if (joined)
    joined[0] = '\0';
  for (char *t = rc ? NULL : strtok_r(copy, ",", &save); t && rc == 0;
       t = strtok_r(NULL, ",", &save)) {
    while (*t == ' ' || *t == '\t')
      t++;
    char *end = t + strlen(t);
    while (end > t && (end[-1] == ' ' || end[-1] == '\t'))
      *--end = '\0';
    char *abs = NULL;
    if (!*t || (rc = lk__config_abspath(cfg, e, t, &abs)) != 0) {
      if (!*t)
        rc = lk__err(LK_ECONFIG, "\"%s\": an empty item in a list of paths",
                     value);
      break;
    }
    size_t len = strlen(abs);
    char *grown = realloc(joined, cap + len + 1);
    if (!grown) {
      free(abs);
      rc = lk__err(LK_ENOMEM, "out of memory");
      break;
    }
    joined = grown;
    cap += len + 1;
    used += (size_t)sprintf(joined + used, "%s%s", used ? "," : "", abs);
    free(abs);
  }
  free(copy);
  if (rc != 0) {
    free(joined);
    return rc;
  }
  *out = joined;
  return 0;
}

int lk__options_parse(const lk_descriptor *desc, const char *section,
                      const lk_config *cfg, lk_options **out) {
  return lk__options_parse_in(desc, section, NULL, NULL, cfg, out);
}

/* Every key of SECTION in CFG must be one of DESC's N options, or a key
 * HOST_KEYS gives the host; WHO names the instance. */
static int check_keys(const lk_descriptor *desc, size_t n, const char *section,
                      const char *const *host_keys, const lk_config *cfg,
                      const char *who) {
  for (size_t i = 0; i < lk__config_count(cfg); i++) {
    const lk_config_entry *e = lk__config_at(cfg, i);
    if (strcmp(e->section, section) != 0 || is_host_key(host_keys, e->key))
      continue;
    bool known = false;
    for (size_t k = 0; k < n; k++)
      known = known || strcmp(desc->options[k].name, e->key) == 0;
    if (!known) {
      char acc[1024];
      list_accepted(desc, acc, sizeof acc);
      return lk__err(LK_ECONFIG,
                     "%s: unknown option \"%s\" for plugin %s; accepted: %s",
                     e->where, e->key, who, acc);
    }
  }
  return 0;
}

int lk__options_parse_in(const lk_descriptor *desc, const char *section,
                         const char *base, const char *const *host_keys,
                         const lk_config *cfg, lk_options **out) {
  lk_options *opts = calloc(1, sizeof *opts);
  size_t n = count_options(desc->options);
  if (!opts || (n && !(opts->values = calloc(n, sizeof *opts->values)))) {
    free(opts);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  opts->n = n;
  int rc = 0;
  /* The instance as messages name it: SECTION:PLUGIN when they differ. */
  char who[160];
  snprintf(who, sizeof who, "%s%s%s",
           strcmp(section, desc->name) ? section : "",
           strcmp(section, desc->name) ? ":" : "", desc->name);
  if (cfg)
    rc = check_keys(desc, n, section, host_keys, cfg, who);
  for (size_t k = 0; k < n && rc == 0; k++) {
    const lk_option *o = &desc->options[k];
    option_value *v = &opts->values[k];
    v->decl = o;
    const lk_config_entry *e =
        cfg ? lk_config_find(cfg, section, o->name) : NULL;
    if (!e && cfg && base)
      e = lk_config_find(cfg, base, o->name);
    bool range;
    char *abs = NULL;
    if (o->type == LK_OPT_PATH && (e || o->def) &&
        (rc = lk__config_abspath(cfg, e, e ? e->value : o->def, &abs)) != 0)
      break;
    if (o->type == LK_OPT_PATHS && (e || o->def) &&
        (rc = paths_abs(cfg, e, e ? e->value : o->def, &abs)) != 0)
      break;
    if (!(v->where = lk__strdup(e ? e->where : "default"))) {
      free(abs);
      rc = lk__err(LK_ENOMEM, "out of memory");
      break;
    }
    if (e) {
      rc = parse_value(desc, v, abs ? abs : e->value, &range);
      if (rc != 0 && range)
        rc = lk__err_prefix(rc, "%s: option %s.%s = %s", e->where, e->section,
                            o->name, e->value);
      else if (rc != 0)
        rc = lk__err_prefix(rc, "%s: option %s.%s", e->where, e->section,
                            o->name);
    } else if (o->def) {
      rc = parse_value(desc, v, abs ? abs : o->def, &range);
      if (rc != 0)
        rc = lk__err_prefix(rc, "plugin %s: default of option %s%s%s", who,
                            o->name, range ? " = " : "", range ? o->def : "");
    } else {
      rc = lk__err(LK_ECONFIG,
                   "plugin %s: missing required option \"%s\" (%s: %s); set "
                   "it under [%s]",
                   who, o->name, lk_option_type_name(o->type),
                   o->help ? o->help : "", section);
    }
    free(abs);
  }
  if (rc != 0) {
    lk__options_free(opts);
    return rc;
  }
  *out = opts;
  return 0;
}

int lk__options_replace(const lk_descriptor *desc, lk_options *opts,
                        const char *name, const char *text, const char *where) {
  for (size_t k = 0; k < opts->n; k++) {
    option_value *v = &opts->values[k];
    if (strcmp(v->decl->name, name) != 0)
      continue;
    option_value fresh = {.decl = v->decl, .where = lk__strdup(where)};
    bool range;
    int rc = fresh.where ? parse_value(desc, &fresh, text, &range)
                         : lk__err(LK_ENOMEM, "out of memory");
    if (rc != 0) {
      free(fresh.text);
      free(fresh.list);
      free(fresh.where);
      return lk__err_prefix(rc, "%s: option %s", where, name);
    }
    free(v->text);
    free(v->list);
    free(v->where);
    *v = fresh;
    return 0;
  }
  return lk__err(LK_EINVAL, "%s: no option %s to set", where, name);
}

int lk__options_export(const lk_options *opts, const char *section,
                       lk_config *cfg) {
  for (size_t k = 0; k < opts->n; k++) {
    const option_value *v = &opts->values[k];
    if (!*v->text)
      continue; /* INI has no empty values: an empty default stays implicit */
    const lk_config_entry *e = lk_config_find(cfg, section, v->decl->name);
    int rc = lk_config_put(cfg, section, v->decl->name, v->text,
                           e ? e->where : "default");
    if (rc != 0)
      return rc;
  }
  return 0;
}

size_t lk__options_count(const lk_options *opts) {
  return opts ? opts->n : 0;
}

const lk_option *lk__options_decl(const lk_options *opts, size_t k) {
  return k < lk__options_count(opts) ? opts->values[k].decl : NULL;
}

bool lk__options_is_auto(const lk_options *opts, size_t k) {
  return k < lk__options_count(opts) && opts->values[k].is_auto;
}

void lk__options_free(lk_options *opts) {
  if (!opts)
    return;
  for (size_t k = 0; k < opts->n; k++) {
    free(opts->values[k].text);
    free(opts->values[k].list);
    free(opts->values[k].where);
  }
  free(opts->values);
  free(opts);
}

static const option_value *find(const lk_options *opts, const char *name) {
  for (size_t k = 0; opts && k < opts->n; k++)
    if (strcmp(opts->values[k].decl->name, name) == 0)
      return &opts->values[k];
  return NULL;
}

/* Getters: the values were validated before create, so an undeclared name
 * is a plugin bug; it reads as zero. */
int64_t lk_opt_int(const lk_options *opts, const char *name) {
  const option_value *v = find(opts, name);
  return v ? v->i : 0;
}

double lk_opt_double(const lk_options *opts, const char *name) {
  const option_value *v = find(opts, name);
  if (v && v->decl->type == LK_OPT_INT)
    return (double)v->i;
  return v ? v->d : 0.0;
}

bool lk_opt_bool(const lk_options *opts, const char *name) {
  const option_value *v = find(opts, name);
  return v ? v->b : false;
}

const char *lk_opt_string(const lk_options *opts, const char *name) {
  const option_value *v = find(opts, name);
  return v ? v->text : NULL;
}

const double *lk_opt_doubles(const lk_options *opts, const char *name,
                             size_t *n) {
  const option_value *v = find(opts, name);
  *n = v ? v->list_len : 0;
  return v ? v->list : NULL;
}

const char *lk_opt_where(const lk_options *opts, const char *name) {
  const option_value *v = find(opts, name);
  return v ? v->where : NULL;
}
