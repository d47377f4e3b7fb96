/* INI config files: syntax, storage and where each key came from.
 *
 * Which sections and keys are allowed is decided by the run, not here; this
 * file only reads lines, keeps the entries, and remembers "FILE:LINE" (or the
 * --set argument) for every entry so that later errors can point at it.
 *
 * Entries are kept grouped by section, sections in order of first
 * appearance and keys in file order within a section, so that lk__config_at
 * and lk__config_write agree and a written config reads back identically. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define MAX_LINE 4096
#define SHOWN 60 /* characters of an offending line quoted in a message */

/* One entry and its four strings in a single allocation, so that replacing
 * a value is one malloc and one free. */
typedef struct item {
  lk_config_entry pub;
  size_t sec;     /* index into lk_config.secs */
  bool from_file; /* a line of the file, not --set or lk_config_put */
  char text[];
} item;

typedef struct section_info {
  char *name; /* owns the block holding name and where */
  const char *where;
} section_info;

/* One --set applied, its strings in the same block; where the value it
 * replaced came from, so that lk__config_without_set can put it back as
 * it was (a file's relative path stays relative to the file). */
typedef struct override_rec {
  lk__config_override pub;
  const char *was_where; /* NULL when the key was absent */
  bool was_from_file;
  char text[];
} override_rec;

struct lk_config {
  char *path;
  char *dir;    /* the file's directory, absolute; NULL: the current one */
  item **items; /* pointers, so entries stay put when others are added */
  size_t n, cap;
  section_info *secs;
  size_t nsec, capsec;
  override_rec **sets; /* every --set, in order: what a run records */
  size_t nsets, capsets;
};

/* ---- helpers ------------------------------------------------------------- */

static bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

static bool is_control(unsigned char c) {
  return (c < 0x20 && c != '\t') || c == 0x7f;
}

/* Keys: [A-Za-z0-9_-]+. No '.', since --set splits SECTION.KEY at the
 * last one. */
static bool valid_name(const char *s) {
  if (!*s)
    return false;
  for (; *s; s++) {
    char c = *s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  }
  return true;
}

/* Section names: a name, or NAME.GROUP (an optimizer's parameter group,
 * [adamw.no_decay]): two names joined by one dot. */
static bool valid_section(const char *s) {
  const char *dot = strchr(s, '.');
  if (!dot)
    return valid_name(s);
  if (dot == s || strchr(dot + 1, '.'))
    return false;
  char head[256];
  size_t n = (size_t)(dot - s);
  if (n >= sizeof head)
    return false;
  memcpy(head, s, n);
  head[n] = '\0';
  return valid_name(head) && valid_name(dot + 1);
}

/* Why VALUE could not be written as "KEY = VALUE" and read back unchanged,
 * or NULL. Values from put and --set obey the file's rules so that
 * lk__config_write always produces a file that loads. */
static const char *value_problem(const char *key, const char *value) {
  size_t n = strlen(value);
  if (n == 0)
    return "missing value";
  if (strlen(key) + 3 + n > MAX_LINE)
    return "value too long for one line";
  if (is_blank(value[0]) || is_blank(value[n - 1]))
    return "value has leading or trailing white space";
  for (size_t i = 0; i < n; i++) {
    if (is_control((unsigned char)value[i]))
      return "value contains a control character";
    /* written after "= ", a '#' or ';' in front starts a comment too */
    if ((value[i] == '#' || value[i] == ';') &&
        (i == 0 || is_blank(value[i - 1])))
      return "value contains a comment ('#' or ';' after white space)";
  }
  return NULL;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return 0;
  size_t c = *cap ? *cap : 8, bytes;
  while (c < need)
    c = c > SIZE_MAX / 2 ? need : 2 * c;
  if (!lk_size_mul(c, elem, &bytes))
    return LK_ENOMEM;
  void *p = realloc(*arr, bytes);
  if (!p)
    return LK_ENOMEM;
  *arr = p;
  *cap = c;
  return 0;
}

static bool find_section(const lk_config *cfg, const char *name, size_t *idx) {
  for (size_t i = 0; i < cfg->nsec; i++)
    if (strcmp(cfg->secs[i].name, name) == 0) {
      *idx = i;
      return true;
    }
  return false;
}

static bool find_item(const lk_config *cfg, const char *section,
                      const char *key, size_t *idx) {
  for (size_t i = 0; i < cfg->n; i++)
    if (strcmp(cfg->items[i]->pub.key, key) == 0 &&
        strcmp(cfg->items[i]->pub.section, section) == 0) {
      *idx = i;
      return true;
    }
  return false;
}

static item *item_new(size_t sec, const char *section, const char *key,
                      const char *value, const char *where) {
  size_t ls = strlen(section) + 1, lk = strlen(key) + 1;
  size_t lv = strlen(value) + 1, lw = strlen(where) + 1;
  item *it = malloc(sizeof *it + ls + lk + lv + lw);
  if (!it)
    return NULL;
  char *p = it->text;
  it->pub.section = memcpy(p, section, ls);
  it->pub.key = memcpy(p += ls, key, lk);
  it->pub.value = memcpy(p += lk, value, lv);
  it->pub.where = memcpy(p += lv, where, lw);
  it->sec = sec;
  it->from_file = false;
  return it;
}

/* Adds SECTION if new. Reserves everything before changing anything, so a
 * failure leaves CFG as it was. */
static int add_section(lk_config *cfg, const char *name, const char *where,
                       size_t *idx) {
  if (find_section(cfg, name, idx))
    return 0;
  if (grow((void **)&cfg->secs, &cfg->capsec, cfg->nsec + 1,
           sizeof *cfg->secs) != 0)
    return lk__err(LK_ENOMEM, "out of memory");
  size_t ln = strlen(name) + 1, lw = strlen(where) + 1;
  char *block = malloc(ln + lw);
  if (!block)
    return lk__err(LK_ENOMEM, "out of memory");
  memcpy(block, name, ln);
  memcpy(block + ln, where, lw);
  cfg->secs[cfg->nsec] = (section_info){block, block + ln};
  *idx = cfg->nsec++;
  return 0;
}

/* Inserts a new entry after the last one of its section (or of the
 * sections before it). Callers check that the key is not there yet. */
static int add_item(lk_config *cfg, const char *section, const char *key,
                    const char *value, const char *where, bool from_file) {
  if (grow((void **)&cfg->items, &cfg->cap, cfg->n + 1, sizeof *cfg->items) !=
      0)
    return lk__err(LK_ENOMEM, "out of memory");
  size_t sec = cfg->nsec;
  bool new_sec = !find_section(cfg, section, &sec);
  item *it = item_new(sec, section, key, value, where);
  if (!it)
    return lk__err(LK_ENOMEM, "out of memory");
  it->from_file = from_file;
  if (new_sec) {
    int rc = add_section(cfg, section, where, &sec);
    if (rc != 0) {
      free(it);
      return rc;
    }
  }
  size_t at = cfg->n;
  while (at > 0 && cfg->items[at - 1]->sec > sec)
    at--;
  memmove(cfg->items + at + 1, cfg->items + at,
          (cfg->n - at) * sizeof *cfg->items);
  cfg->items[at] = it;
  cfg->n++;
  return 0;
}

/* Adds or replaces. The new strings are copied before the old entry is
 * freed, as WHERE (or any argument) may point into it. */
static int put_checked(lk_config *cfg, const char *section, const char *key,
                       const char *value, const char *where) {
  size_t i;
  if (!find_item(cfg, section, key, &i))
    return add_item(cfg, section, key, value, where, false);
  item *old = cfg->items[i];
  item *it = item_new(old->sec, section, key, value, where);
  if (!it)
    return lk__err(LK_ENOMEM, "out of memory");
  cfg->items[i] = it;
  free(old);
  return 0;
}

/* ---- paths ----------------------------------------------------------------
 *
 * A path in a config is relative to the file's directory, so that a config
 * works from wherever it is run; one given with --set is relative to the
 * current directory, as any path on a command line is. Both become
 * absolute here, so that the plugin opens, and every message shows, the
 * path actually tried. Within the value, symbolic links are not followed
 * and ".." is kept: the path is the one the user wrote, made absolute. */

/* BASE/REL with the "." components and repeated slashes of REL dropped. */
static char *join(const char *base, const char *rel) {
  size_t lb = strlen(base), lr = strlen(rel);
  char *out = malloc(lb + lr + 2);
  if (!out)
    return NULL;
  memcpy(out, base, lb);
  while (lb > 1 && out[lb - 1] == '/')
    lb--;
  size_t n = lb;
  for (const char *p = rel; *p;) {
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len && !(len == 1 && p[0] == '.')) {
      if (n == 0 || out[n - 1] != '/')
        out[n++] = '/';
      memcpy(out + n, p, len);
      n += len;
    }
    p += len + (end != NULL);
  }
  out[n] = '\0';
  return out;
}

/* The current directory, allocated, or NULL (errno set). */
static char *current_dir(void) {
  for (size_t cap = 256; cap <= 65536; cap *= 2) {
    char *buf = malloc(cap);
    if (!buf)
      return NULL;
    if (getcwd(buf, cap))
      return buf;
    free(buf);
    if (errno != ERANGE)
      return NULL;
  }
  errno = ENAMETOOLONG;
  return NULL;
}

/* The directory of the file NAME, absolute (the file itself may be a
 * symbolic link: its paths are relative to where its user sees it, the
 * link's directory). NULL (errno set) when the
 * current directory cannot be had (it was removed): the file's relative
 * paths then cannot be resolved, which lk__config_abspath reports if the
 * config has any. */
static char *dir_of(const char *name) {
  const char *slash = strrchr(name, '/');
  char *dir = slash ? malloc((size_t)(slash - name) + 2) : lk__strdup(".");
  if (!dir)
    return NULL;
  if (slash) {
    size_t len = slash == name ? 1 : (size_t)(slash - name);
    memcpy(dir, name, len);
    dir[len] = '\0';
  }
  /* The directory itself, as the system names it: "../proj" from
   * elsewhere is /path/proj, not /path/elsewhere/../proj. */
  char *real = realpath(dir, NULL);
  if (real) {
    free(dir);
    return real;
  }
  if (dir[0] == '/')
    return dir;
  char *cwd = current_dir();
  char *abs = cwd ? join(cwd, dir) : NULL;
  free(cwd);
  free(dir);
  return abs;
}

/* Removes SECTION.KEY if there; the section itself stays. */
static void remove_item(lk_config *cfg, const char *section, const char *key) {
  size_t i;
  if (!find_item(cfg, section, key, &i))
    return;
  free(cfg->items[i]);
  memmove(cfg->items + i, cfg->items + i + 1,
          (cfg->n - i - 1) * sizeof *cfg->items);
  cfg->n--;
}

/* Remembers one --set: the key, the value it replaced (NULL: none), the
 * new one (NULL: removed) and the argument as given. */
static int record_set(lk_config *cfg, const char *section, const char *key,
                      const item *was, const char *value, const char *arg) {
  if (grow((void **)&cfg->sets, &cfg->capsets, cfg->nsets + 1,
           sizeof *cfg->sets) != 0)
    return lk__err(LK_ENOMEM, "out of memory");
  const char *was_value = was ? was->pub.value : NULL;
  const char *was_where = was ? was->pub.where : NULL;
  size_t ls = strlen(section) + 1, lk = strlen(key) + 1;
  size_t lw = was ? strlen(was_value) + 1 : 0,
         lv = value ? strlen(value) + 1 : 0;
  size_t la = strlen(arg) + 1, lww = was ? strlen(was_where) + 1 : 0;
  override_rec *r = malloc(sizeof *r + ls + lk + lw + lv + la + lww);
  if (!r)
    return lk__err(LK_ENOMEM, "out of memory");
  char *p = r->text;
  r->pub.section = memcpy(p, section, ls);
  r->pub.key = memcpy(p += ls, key, lk);
  p += lk;
  r->pub.was = was ? memcpy(p, was_value, lw) : NULL;
  p += lw;
  r->pub.value = value ? memcpy(p, value, lv) : NULL;
  r->pub.arg = memcpy(p += lv, arg, la);
  r->was_where = was ? memcpy(p + la, was_where, lww) : NULL;
  r->was_from_file = was && was->from_file;
  cfg->sets[cfg->nsets++] = r;
  return 0;
}

/* Applies and records a checked --set; an empty VALUE removes the key. */
static int apply_set(lk_config *cfg, const char *section, const char *key,
                     const char *value, const char *arg, const char *where) {
  size_t i;
  const item *old = find_item(cfg, section, key, &i) ? cfg->items[i] : NULL;
  /* Recorded first: the old value is still there to copy, and a failure
   * to record leaves CFG as it was. */
  int rc = record_set(cfg, section, key, old, *value ? value : NULL, arg);
  if (rc != 0)
    return rc;
  if (!*value) {
    remove_item(cfg, section, key);
    return 0;
  }
  rc = put_checked(cfg, section, key, value, where);
  if (rc != 0)
    free(cfg->sets[--cfg->nsets]);
  return rc;
}

static int config_new(const char *path, lk_config **out) {
  lk_config *cfg = calloc(1, sizeof *cfg);
  if (!cfg || (path && !(cfg->path = lk__strdup(path)))) {
    free(cfg);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  /* Now, not when a path is resolved: what "the file's directory" means
   * must not change if the host changes its directory in between. */
  if (path && !(cfg->dir = dir_of(path)) && errno == ENOMEM) {
    lk_config_free(cfg);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  *out = cfg;
  return 0;
}

int lk__config_abspath(const lk_config *cfg, const lk_config_entry *e,
                       const char *value, char **out) {
  const item *it = e ? (const item *)(const void *)e : NULL;
  bool from_file = it && it->from_file;
  if (!*value || value[0] == '/') {
    *out = lk__strdup(value);
    return *out ? 0 : lk__err(LK_ENOMEM, "out of memory");
  }
  char *base = NULL;
  if (!from_file)
    base = current_dir();
  else if (cfg->dir)
    base = lk__strdup(cfg->dir);
  else
    errno = ENOENT; /* the current directory was gone when it was read */
  if (!base && errno != ENOMEM)
    return lk__err(LK_EIO,
                   "%s: cannot resolve the relative path \"%s\": the %s "
                   "directory: %s",
                   e ? e->where : "default", value,
                   from_file ? "config file's" : "current", strerror(errno));
  *out = base ? join(base, value) : NULL;
  free(base);
  return *out ? 0 : lk__err(LK_ENOMEM, "out of memory");
}

/* ---- parsing ------------------------------------------------------------- */

/* Cuts a comment: '#' or ';' at the start or after white space. */
static void strip_comment(char *s) {
  for (size_t i = 0; s[i]; i++)
    if ((s[i] == '#' || s[i] == ';') && (i == 0 || is_blank(s[i - 1]))) {
      s[i] = '\0';
      return;
    }
}

static char *trim(char *s) {
  while (is_blank(*s))
    s++;
  size_t n = strlen(s);
  while (n > 0 && is_blank(s[n - 1]))
    s[--n] = '\0';
  return s;
}

typedef struct parser {
  lk_config *cfg;
  const char *name;
  unsigned long line;
  size_t sec;
  bool in_section;
} parser;

/* Formats "NAME:LINE: what is wrong". */
#define PERR(p, ...)                                                           \
  lk__err_prefix(lk__err(LK_ECONFIG, __VA_ARGS__), "%s:%lu", (p)->name,        \
                 (p)->line)

static int parse_section(parser *ps, char *s) {
  size_t n = strlen(s);
  if (n < 2 || s[n - 1] != ']')
    return PERR(ps, "expected \"[section]\", got \"%.*s%s\"", SHOWN, s,
                n > SHOWN ? "..." : "");
  s[n - 1] = '\0';
  char *name = trim(s + 1);
  if (!*name)
    return PERR(ps, "empty section name; expected \"[section]\"");
  if (!valid_section(name))
    return PERR(ps,
                "invalid section name \"%.*s\": expected letters, digits, "
                "'_' or '-' (NAME.GROUP for a parameter group)",
                SHOWN, name);
  char *where = lk__asprintf("%s:%lu", ps->name, ps->line);
  if (!where)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = add_section(ps->cfg, name, where, &ps->sec);
  free(where);
  ps->in_section = rc == 0;
  return rc;
}

static int parse_assignment(parser *ps, char *s) {
  char *eq = strchr(s, '=');
  if (!eq)
    return PERR(ps,
                "expected \"key = value\", \"[section]\" or a comment, got "
                "\"%.*s%s\"",
                SHOWN, s, strlen(s) > SHOWN ? "..." : "");
  *eq = '\0';
  char *key = trim(s), *value = trim(eq + 1);
  if (!*key)
    return PERR(ps, "missing key before '='; expected \"key = value\"");
  if (!valid_name(key))
    return PERR(ps,
                "invalid key \"%.*s\": expected letters, digits, '_' or '-'",
                SHOWN, key);
  if (!*value)
    return PERR(ps, "missing value for key \"%s\"; expected \"key = value\"",
                key);
  if (!ps->in_section)
    return PERR(ps,
                "key \"%s\" before any section; expected a \"[section]\" "
                "line first",
                key);
  /* What lk__config_write cannot write back so that it reads the same: a
   * value that starts with '#' or ';' ("k =#v") or that makes the line
   * too long once spaced out as "k = v". */
  const char *bad = value_problem(key, value);
  if (bad)
    return PERR(ps, "key \"%s\": %s, once written as \"key = value\"", key,
                bad);
  lk_config *cfg = ps->cfg;
  const char *section = cfg->secs[ps->sec].name;
  size_t i;
  if (find_item(cfg, section, key, &i))
    return PERR(ps, "duplicate key \"%s\" in [%s], first set at %s", key,
                section, cfg->items[i]->pub.where);
  char *where = lk__asprintf("%s:%lu", ps->name, ps->line);
  if (!where)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = add_item(cfg, section, key, value, where, true);
  free(where);
  return rc;
}

/* One line, without its end of line, at most MAX_LINE bytes. */
static int parse_line(parser *ps, const char *text, size_t n) {
  char buf[MAX_LINE + 1];
  if (n > MAX_LINE)
    return PERR(ps, "line longer than %d characters", MAX_LINE);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c == '\0')
      return PERR(ps, "NUL byte; expected text");
    if (is_control(c))
      return PERR(ps, "control character 0x%02x at column %zu; expected text",
                  c, i + 1);
  }
  memcpy(buf, text, n);
  buf[n] = '\0';
  strip_comment(buf);
  char *s = trim(buf);
  if (!*s)
    return 0;
  if (*s == '[')
    return parse_section(ps, s);
  return parse_assignment(ps, s);
}

static int parse_text(lk_config *cfg, const char *name, const char *text,
                      size_t len) {
  parser ps = {cfg, name, 0, 0, false};
  const char *p = text, *end = text + len;
  if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
    p += 3; /* UTF-8 byte order mark, as some editors write */
  while (p < end) {
    ps.line++;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    if (le > p && le[-1] == '\r')
      le--;
    int rc = parse_line(&ps, p, (size_t)(le - p));
    if (rc != 0)
      return rc;
    p = nl ? nl + 1 : end;
  }
  return 0;
}

/* ---- public API ---------------------------------------------------------- */

int lk_config_new(lk_config **out) {
  if (!out)
    return lk__err(LK_EINVAL, "lk_config_new: out is NULL");
  return config_new(NULL, out);
}

int lk_config_parse(const char *name, const char *text, lk_config **out) {
  if (!name || !text || !out)
    return lk__err(LK_EINVAL, "lk_config_parse: NULL argument");
  lk_config *cfg = NULL;
  int rc = config_new(name, &cfg);
  if (rc == 0)
    rc = parse_text(cfg, name, text, strlen(text));
  if (rc != 0) {
    lk_config_free(cfg);
    return rc;
  }
  *out = cfg;
  return 0;
}

int lk_config_load(const char *path, lk_config **out) {
  if (!path || !out)
    return lk__err(LK_EINVAL, "lk_config_load: NULL argument");
  char *text = NULL;
  size_t len = 0;
  /* No config is megabytes long: anything bigger is the wrong file. */
  int rc =
      lk__read_file(path, "config", LK__CONFIG_MAX_BYTES, &text, &len, NULL);
  if (rc != 0)
    return rc;
  lk_config *cfg = NULL;
  rc = config_new(path, &cfg);
  if (rc == 0)
    rc = parse_text(cfg, path, text, len);
  free(text);
  if (rc != 0) {
    lk_config_free(cfg);
    return rc;
  }
  *out = cfg;
  return 0;
}

int lk_config_put(lk_config *cfg, const char *section, const char *key,
                  const char *value, const char *where) {
  if (!cfg || !section || !key || !value || !where)
    return lk__err(LK_EINVAL, "lk_config_put: NULL argument");
  if (!valid_section(section))
    return lk__err(LK_ECONFIG,
                   "%s: invalid section name \"%s\": expected letters, "
                   "digits, '_' or '-'",
                   where, section);
  if (!valid_name(key))
    return lk__err(LK_ECONFIG,
                   "%s: invalid key \"%s\": expected letters, digits, '_' or "
                   "'-'",
                   where, key);
  const char *bad = value_problem(key, value);
  if (bad)
    return lk__err(LK_ECONFIG, "%s: %s for %s.%s", where, bad, section, key);
  return put_checked(cfg, section, key, value, where);
}

int lk_config_set(lk_config *cfg, const char *assignment) {
  if (!cfg || !assignment)
    return lk__err(LK_EINVAL, "lk_config_set: NULL argument");
  const char *eq = strchr(assignment, '=');
  /* The last dot before '=': a section may be NAME.GROUP, a key has none. */
  const char *dot = NULL;
  for (const char *p = assignment; eq && p < eq; p++)
    if (*p == '.')
      dot = p;
  if (!dot)
    return lk__err(LK_ECONFIG, "--set \"%s\": expected SECTION.KEY=VALUE",
                   assignment);
  char *copy = lk__strdup(assignment);
  char *where = lk__asprintf("--set %s", assignment);
  if (!copy || !where) {
    free(copy);
    free(where);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  copy[dot - assignment] = '\0';
  copy[eq - assignment] = '\0';
  char *section = trim(copy);
  char *key = trim(copy + (dot - assignment) + 1);
  char *value = trim(copy + (eq - assignment) + 1);
  int rc = 0;
  const char *bad;
  if (!valid_section(section))
    rc = lk__err(LK_ECONFIG,
                 "--set \"%s\": %s section name \"%s\" (letters, digits, '_' "
                 "or '-'); expected SECTION.KEY=VALUE",
                 assignment, *section ? "invalid" : "missing", section);
  else if (!valid_name(key))
    rc = lk__err(LK_ECONFIG,
                 "--set \"%s\": %s key \"%s\" (letters, digits, '_' or '-'); "
                 "expected SECTION.KEY=VALUE",
                 assignment, *key ? "invalid" : "missing", key);
  else if (*value && (bad = value_problem(key, value)))
    rc = lk__err(LK_ECONFIG, "--set \"%s\": %s; expected SECTION.KEY=VALUE",
                 assignment, bad);
  else
    rc = apply_set(cfg, section, key, value, assignment, where);
  free(copy);
  free(where);
  return rc;
}

const lk_config_entry *lk_config_find(const lk_config *cfg, const char *section,
                                      const char *key) {
  size_t i;
  if (!cfg || !section || !key || !find_item(cfg, section, key, &i))
    return NULL;
  return &cfg->items[i]->pub;
}

size_t lk__config_count(const lk_config *cfg) {
  return cfg ? cfg->n : 0;
}

const lk_config_entry *lk__config_at(const lk_config *cfg, size_t i) {
  return cfg && i < cfg->n ? &cfg->items[i]->pub : NULL;
}

bool lk__config_has_section(const lk_config *cfg, const char *section) {
  size_t i;
  return cfg && section && find_section(cfg, section, &i);
}

const char *lk__config_section_where(const lk_config *cfg,
                                     const char *section) {
  size_t i;
  if (!cfg || !section || !find_section(cfg, section, &i))
    return NULL;
  return cfg->secs[i].where;
}

const char *lk__config_path(const lk_config *cfg) {
  return cfg ? cfg->path : NULL;
}

size_t lk__config_n_overrides(const lk_config *cfg) {
  return cfg ? cfg->nsets : 0;
}

const lk__config_override *lk__config_override_at(const lk_config *cfg,
                                                  size_t i) {
  return cfg && i < cfg->nsets ? &cfg->sets[i]->pub : NULL;
}

/* ---- a config without one --set ------------------------------------------ */

static bool same_key(const lk__config_override *o, const char *section,
                     const char *key) {
  return !strcmp(o->section, section) && !strcmp(o->key, key);
}

/* Copies every entry, section and --set of SRC (but those of SECTION.KEY)
 * into the empty DST, each as it is: its place, where it came from and
 * whether a file gave it. */
static int copy_into(lk_config *dst, const lk_config *src, const char *section,
                     const char *key) {
  int rc = 0;
  for (size_t s = 0; s < src->nsec && rc == 0; s++) {
    size_t idx;
    rc = add_section(dst, src->secs[s].name, src->secs[s].where, &idx);
  }
  if (rc == 0 &&
      grow((void **)&dst->items, &dst->cap, src->n, sizeof *dst->items) != 0)
    rc = lk__err(LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < src->n && rc == 0; i++) {
    const item *it = src->items[i];
    item *copy = item_new(it->sec, it->pub.section, it->pub.key, it->pub.value,
                          it->pub.where);
    if (!copy)
      return lk__err(LK_ENOMEM, "out of memory");
    copy->from_file = it->from_file;
    dst->items[dst->n++] = copy;
  }
  for (size_t i = 0; i < src->nsets && rc == 0; i++) {
    const override_rec *r = src->sets[i];
    if (same_key(&r->pub, section, key))
      continue;
    item was = {.pub = {.value = r->pub.was, .where = r->was_where},
                .from_file = r->was_from_file};
    rc = record_set(dst, r->pub.section, r->pub.key, r->pub.was ? &was : NULL,
                    r->pub.value, r->pub.arg);
  }
  return rc;
}

int lk__config_without_set(const lk_config *cfg, const char *section,
                           const char *key, lk_config **out) {
  const override_rec *first = NULL;
  for (size_t i = 0; i < cfg->nsets && !first; i++)
    if (same_key(&cfg->sets[i]->pub, section, key))
      first = cfg->sets[i];
  lk_config *c = calloc(1, sizeof *c);
  if (!c)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = 0;
  if ((cfg->path && !(c->path = lk__strdup(cfg->path))) ||
      (cfg->dir && !(c->dir = lk__strdup(cfg->dir))))
    rc = lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0)
    rc = copy_into(c, cfg, section, key);
  size_t i;
  bool there = rc == 0 && find_item(c, section, key, &i);
  if (rc == 0 && first && !first->pub.was) {
    remove_item(c, section, key); /* the --set added it */
  } else if (rc == 0 && first && there) {
    item *it = item_new(c->items[i]->sec, section, key, first->pub.was,
                        first->was_where);
    if (!it)
      rc = lk__err(LK_ENOMEM, "out of memory");
    else {
      it->from_file = first->was_from_file;
      free(c->items[i]);
      c->items[i] = it;
    }
  } else if (rc == 0 && first) { /* a later --set removed it */
    rc = add_item(c, section, key, first->pub.was, first->was_where,
                  first->was_from_file);
  }
  if (rc != 0) {
    lk_config_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

int lk__config_write(const lk_config *cfg, FILE *f) {
  if (!cfg || !f)
    return lk__err(LK_EINVAL, "lk__config_write: NULL argument");
  size_t i = 0;
  for (size_t s = 0; s < cfg->nsec; s++) {
    fprintf(f, "%s[%s]\n", s ? "\n" : "", cfg->secs[s].name);
    for (; i < cfg->n && cfg->items[i]->sec == s; i++)
      fprintf(f, "%s = %s\n", cfg->items[i]->pub.key, cfg->items[i]->pub.value);
  }
  /* fprintf's errors are sticky; one check after flushing catches them. */
  if (fflush(f) != 0 || ferror(f))
    return lk__err(LK_EIO, "cannot write config: %s", strerror(errno));
  return 0;
}

int lk__config_text(const lk_config *cfg, char **out, size_t *len) {
  size_t n = 0;
  *out = NULL;
  FILE *f = open_memstream(out, &n);
  if (!f)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = lk__config_write(cfg, f);
  if (fclose(f) != 0 && rc == 0)
    rc = lk__err(LK_ENOMEM, "out of memory");
  if (rc != 0) {
    free(*out);
    *out = NULL;
  }
  if (len)
    *len = n;
  return rc;
}

void lk_config_free(lk_config *cfg) {
  if (!cfg)
    return;
  for (size_t i = 0; i < cfg->n; i++)
    free(cfg->items[i]);
  for (size_t s = 0; s < cfg->nsec; s++)
    free(cfg->secs[s].name);
  for (size_t i = 0; i < cfg->nsets; i++)
    free(cfg->sets[i]);
  free(cfg->sets);
  free(cfg->items);
  free(cfg->secs);
  free(cfg->path);
  free(cfg->dir);
  free(cfg);
}
