/* Plugin options: validation against the declared schema, typed getters. */
#include <stdlib.h>
#include <string.h>

#include "options.h"

typedef struct option_value {
  const lk_option *decl;
  char *text; /* as given, or the default */
  int64_t i;
  double d;
  bool b;
  double *list;
  size_t list_len;
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

static int parse_list(const char *text, double **out, size_t *len) {
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
 * was expected (the caller adds where and which option). */
static int parse_value(option_value *v, const char *text) {
  const lk_option *o = v->decl;
  v->text = lk__strdup(text);
  if (!v->text)
    return lk__err(LK_ENOMEM, "out of memory");
  switch (o->type) {
  case LK_OPT_INT:
    if (lk__parse_int(text, &v->i) != 0)
      return lk__err(LK_ECONFIG, "expected an integer, got \"%s\"", text);
    break;
  case LK_OPT_DOUBLE:
    if (lk__parse_double(text, &v->d) != 0)
      return lk__err(LK_ECONFIG, "expected a number, got \"%s\"", text);
    break;
  case LK_OPT_BOOL:
    if (lk__parse_bool(text, &v->b) != 0)
      return lk__err(LK_ECONFIG, "expected true or false, got \"%s\"", text);
    break;
  case LK_OPT_STRING: break;
  case LK_OPT_ENUM:
    if (!enum_has(o->choices ? o->choices : "", text))
      return lk__err(LK_ECONFIG, "expected one of %s, got \"%s\"",
                     o->choices ? o->choices : "(none)", text);
    break;
  case LK_OPT_DOUBLES:
    if (parse_list(text, &v->list, &v->list_len) != 0)
      return lk__err(LK_ECONFIG, "expected a comma list of numbers, got \"%s\"",
                     text);
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

int lk__options_parse(const lk_descriptor *desc, const char *section,
                      const lk_config *cfg, lk_options **out) {
  lk_options *opts = calloc(1, sizeof *opts);
  size_t n = count_options(desc->options);
  if (!opts || (n && !(opts->values = calloc(n, sizeof *opts->values)))) {
    free(opts);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  opts->n = n;
  int rc = 0;
  /* Every key of the section must be declared. */
  for (size_t i = 0; cfg && i < lk_config_count(cfg) && rc == 0; i++) {
    const lk_config_entry *e = lk_config_at(cfg, i);
    if (strcmp(e->section, section) != 0)
      continue;
    bool known = false;
    for (size_t k = 0; k < n; k++)
      known = known || strcmp(desc->options[k].name, e->key) == 0;
    if (!known) {
      char acc[1024];
      list_accepted(desc, acc, sizeof acc);
      rc = lk__err(LK_ECONFIG,
                   "%s: unknown option \"%s\" for plugin %s; accepted: %s",
                   e->where, e->key, desc->name, acc);
    }
  }
  for (size_t k = 0; k < n && rc == 0; k++) {
    const lk_option *o = &desc->options[k];
    option_value *v = &opts->values[k];
    v->decl = o;
    const lk_config_entry *e =
        cfg ? lk_config_find(cfg, section, o->name) : NULL;
    if (e) {
      rc = parse_value(v, e->value);
      if (rc != 0)
        rc = lk__err_prefix(rc, "%s: option %s.%s", e->where, section, o->name);
    } else if (o->def) {
      rc = parse_value(v, o->def);
      if (rc != 0)
        rc = lk__err_prefix(rc, "plugin %s: default of option %s", desc->name,
                            o->name);
    } else {
      rc = lk__err(LK_ECONFIG,
                   "plugin %s: missing required option \"%s\" (%s: %s); set "
                   "it under [%s]",
                   desc->name, o->name, lk_option_type_name(o->type),
                   o->help ? o->help : "", section);
    }
  }
  if (rc != 0) {
    lk__options_free(opts);
    return rc;
  }
  *out = opts;
  return 0;
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

void lk__options_free(lk_options *opts) {
  if (!opts)
    return;
  for (size_t k = 0; k < opts->n; k++) {
    free(opts->values[k].text);
    free(opts->values[k].list);
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
