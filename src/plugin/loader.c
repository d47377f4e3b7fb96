/* Finding and opening plugins: the search path, the security checks, dlopen,
 * and the descriptor checks that come before any plugin code runs. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "kinds.h"
#include "layertypes.h"
#include "loader.h"
#include "options.h"

struct lk_plugin {
  void *handle;
  char *path;
  int fd;         /* the file dlopen loaded, as /proc/self/fd/FD */
  struct stat st; /* what fd is */
  /* A zero-padded copy: fields past the plugin's own size read as NULL
   * (lk_plugin_desc: the plugin's own ops tables). */
  lk_descriptor desc;
  /* The host's copy, the ABI guard (kinds.h): the fields the plugin's
   * minor defines, zero past them, its ops tables in OPS, each with the
   * entries that minor defines, NULL past them (lk__plugin_host_desc). */
  lk_descriptor host;
  lk__ops_copy ops;
  /* A layers plugin's tables (since ABI 1.6), checked, the host's copies:
   * zero past each table's size, and the reserved fields zero. */
  lk_layer_type *layers;
  size_t n_layers;
};

/* ---- What the host reads from a descriptor ----
 *
 * The descriptor is data the host reads before any plugin code runs (and
 * `loopkit plugins` reads it for every plugin on the path), so a malformed
 * one must be refused, not followed: every pointer in it must point into
 * the plugin object's own loaded segments (its PT_LOAD program headers, as
 * dl_iterate_phdr reports them), readable ones for data and executable
 * ones for functions; every string must end with a NUL inside its segment;
 * the options table must end (name NULL) inside its segment and within
 * LK_MAX_OPTIONS entries. That turns the slips a compiler lets through (a
 * table without its terminator, a string of another library or of the
 * heap, a number where a pointer goes) into a message instead of a crash.
 * It does not make a hostile plugin safe: its code runs anyway. */

#define LK_MAX_OPTIONS 256
#define LK_MAX_SEGMENTS                                                        \
  16 /* a shared object has 4 or so; past 16, a                                \
        pointer into one is refused */

typedef struct segment {
  uintptr_t lo, hi; /* [lo, hi) */
  bool read, exec;
} segment;

typedef struct segments {
  const void *dynamic; /* the object's l_ld: how it is recognised */
  size_t n;
  segment s[LK_MAX_SEGMENTS];
} segments;

static int collect(struct dl_phdr_info *info, size_t size, void *user) {
  segments *ss = user;
  (void)size;
  bool found = false;
  for (size_t i = 0; i < info->dlpi_phnum && !found; i++)
    found = info->dlpi_phdr[i].p_type == PT_DYNAMIC &&
            (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) ==
                ss->dynamic;
  if (!found)
    return 0;
  for (size_t i = 0; i < info->dlpi_phnum && ss->n < LK_MAX_SEGMENTS; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    ss->s[ss->n++] = (segment){lo, lo + ph->p_memsz, (ph->p_flags & PF_R) != 0,
                               (ph->p_flags & PF_X) != 0};
  }
  return 1;
}

/* The loaded segments of the object HANDLE opened. */
static int find_segments(void *handle, segments *ss, const char *name,
                         const char *path) {
  struct link_map *lm = NULL;
  ss->n = 0;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
    return lk__err(LK_ELOAD, "cannot load plugin %s from %s: dlinfo failed",
                   name, path);
  ss->dynamic = lm->l_ld;
  if (!dl_iterate_phdr(collect, ss) || ss->n == 0)
    return lk__err(LK_ELOAD,
                   "cannot load plugin %s from %s: its loaded segments are "
                   "not to be found",
                   name, path);
  return 0;
}

/* The segment holding [P, P + LEN), readable (or executable with EXEC). */
static const segment *segment_of(const segments *ss, const void *p, size_t len,
                                 bool exec) {
  uintptr_t a = (uintptr_t)p;
  for (size_t i = 0; i < ss->n; i++) {
    const segment *g = &ss->s[i];
    if ((exec ? g->exec : g->read) && a >= g->lo && a < g->hi &&
        g->hi - a >= len)
      return g;
  }
  return NULL;
}

typedef enum { STR_OK, STR_OUTSIDE, STR_UNTERMINATED } str_check;

static str_check check_string(const segments *ss, const char *s) {
  const segment *g = segment_of(ss, s, 1, false);
  if (!g)
    return STR_OUTSIDE;
  return memchr(s, '\0', g->hi - (uintptr_t)s) ? STR_OK : STR_UNTERMINATED;
}

/* [A-Za-z0-9_]+, and '-' too with DASH. */
static bool valid_chars(const char *s, bool dash) {
  if (!*s)
    return false;
  for (const char *p = s; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || (dash && c == '-')))
      return false;
  }
  return true;
}

static bool valid_name(const char *name) {
  return valid_chars(name, true);
}

/* S, at most 64 characters of it, with anything but printable ASCII shown
 * as '?': a message must not carry a plugin's control characters. */
static const char *printable(char *buf, size_t len, const char *s) {
  size_t i = 0;
  for (; s[i] && i < 64 && i + 1 < len; i++)
    buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  buf[i] = '\0';
  return buf;
}

/* A string field of the descriptor (FIELD names it); NULL is fine. */
static int check_desc_string(const segments *ss, const char *s,
                             const char *field, const char *name,
                             const char *path) {
  str_check c = s ? check_string(ss, s) : STR_OK;
  if (c == STR_OK)
    return 0;
  return lk__err(LK_ELOAD,
                 "plugin %s (%s): %s is not a string in the plugin (%s)", name,
                 path, field,
                 c == STR_OUTSIDE ? "it points outside the plugin"
                                  : "no NUL before the end of its segment");
}

/* A string field of option number K (1-based; SHOWN is " (NAME)" once the
 * name is known to be good). */
static int check_option_string(const segments *ss, const char *s,
                               const char *field, size_t k, const char *shown,
                               const char *name, const char *path) {
  str_check c = s ? check_string(ss, s) : STR_OK;
  if (c == STR_OK)
    return 0;
  return lk__err(LK_ELOAD, "plugin %s (%s): option %zu%s has a %s %s", name,
                 path, k, shown, field,
                 c == STR_OUTSIDE
                     ? "outside the plugin"
                     : "with no NUL before the end of its segment");
}

_Static_assert(sizeof(lk_option_type) == sizeof(int), "type is read as an int");

static int check_option(const segments *ss, const lk_option *o, size_t k,
                        unsigned minor, const char *name, const char *path) {
  int rc = check_option_string(ss, o->name, "name", k, "", name, path);
  if (rc != 0)
    return rc;
  char buf[80], shown[96];
  if (!valid_chars(o->name, false))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): option %zu has an invalid name \"%s\": "
                   "option names are [A-Za-z0-9_]+",
                   name, path, k, printable(buf, sizeof buf, o->name));
  snprintf(shown, sizeof shown, " (%s)", printable(buf, sizeof buf, o->name));
  int type;
  memcpy(&type, &o->type, sizeof type); /* any value, not just the enum's */
  int last = lk__abi_has(minor, LK__ABI_OPT_PATHS)  ? LK_OPT_PATHS
             : lk__abi_has(minor, LK__ABI_OPT_PATH) ? LK_OPT_PATH
                                                    : LK_OPT_DOUBLES;
  if (type < LK_OPT_INT || type > last)
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): option %zu%s has an unknown type %d "
                   "(LK_OPT_INT to %s are %d to %d)",
                   name, path, k, shown, type,
                   last == LK_OPT_PATHS  ? "LK_OPT_PATHS"
                   : last == LK_OPT_PATH ? "LK_OPT_PATH"
                                         : "LK_OPT_DOUBLES",
                   LK_OPT_INT, last);
  if ((rc = check_option_string(ss, o->def, "default", k, shown, name, path)) !=
          0 ||
      (rc = check_option_string(ss, o->help, "help", k, shown, name, path)) !=
          0 ||
      (rc = check_option_string(ss, o->choices, "choices", k, shown, name,
                                path)) != 0)
    return rc;
  if (type == LK_OPT_ENUM && !o->choices)
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): option %zu%s is an LK_OPT_ENUM without "
                   "choices",
                   name, path, k, shown);
  /* Since ABI 1.4 a number's choices are its range. */
  lk__range r;
  if (lk__abi_has(minor, LK__ABI_OPT_RANGE) && o->choices &&
      (type == LK_OPT_INT || type == LK_OPT_DOUBLE || type == LK_OPT_DOUBLES) &&
      lk__option_range(o, &r) != 0)
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): option %zu%s declares the range \"%s\", "
                   "which is not an interval such as [0, inf) or (0, 1]",
                   name, path, k, shown,
                   printable(buf, sizeof buf, o->choices));
  return 0;
}

/* The options table, walked no further than the end of its segment. */
static int check_options(const segments *ss, const lk_option *o, unsigned minor,
                         const char *name, const char *path) {
  if (!o)
    return 0;
  const segment *g =
      (uintptr_t)o % _Alignof(lk_option) ? NULL : segment_of(ss, o, 1, false);
  if (!g)
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): options table is not in the plugin (it "
                   "points outside the plugin, or is misaligned)",
                   name, path);
  size_t fit = (g->hi - (uintptr_t)o) / sizeof *o;
  for (size_t i = 0;; i++) {
    if (i == fit)
      return lk__err(LK_ELOAD,
                     "plugin %s (%s): options table has no terminator: its "
                     "segment ends after %zu entries, none with a NULL name",
                     name, path, i);
    if (!o[i].name)
      return 0;
    if (i == LK_MAX_OPTIONS)
      return lk__err(LK_ELOAD,
                     "plugin %s (%s): options table has more than %d options "
                     "(or no terminator)",
                     name, path, LK_MAX_OPTIONS);
    int rc = check_option(ss, &o[i], i + 1, minor, name, path);
    if (rc != 0)
      return rc;
  }
}

typedef void (*any_fn)(void);
_Static_assert(sizeof(any_fn) == sizeof(uintptr_t), "function pointers");

/* Whether FN is in an executable segment of any loaded object. */
static int code_of_any(struct dl_phdr_info *info, size_t size, void *user) {
  uintptr_t fn = *(const uintptr_t *)user;
  (void)size;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && fn >= lo &&
        fn < lo + ph->p_memsz)
      return 1;
  }
  return 0;
}

/* A function pointer of the descriptor: code of the plugin, or of a
 * library it uses (.destroy = free is fine); never data, the heap or an
 * unmapped address. */
static bool in_code(const segments *ss, uintptr_t fn) {
  return !fn || segment_of(ss, (const void *)fn, 1, true) ||
         dl_iterate_phdr(code_of_any, &fn) != 0;
}

/* create, destroy and every ops table of D (the host's copy), for ABI
 * minor MINOR. */
static int check_functions(const segments *ss, const lk_descriptor *d,
                           unsigned minor, const char *name, const char *path) {
  uintptr_t fn;
  memcpy(&fn, &d->create, sizeof fn);
  if (!in_code(ss, fn))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): create points outside any loaded code",
                   name, path);
  memcpy(&fn, &d->destroy, sizeof fn);
  if (!in_code(ss, fn))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): destroy points outside any loaded code",
                   name, path);
  memcpy(&fn, &d->check_state, sizeof fn); /* NULL before 1.4 */
  if (!in_code(ss, fn))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): check_state points outside any loaded "
                   "code",
                   name, path);
  for (size_t k = 0; k < LK__N_KINDS; k++) {
    const lk__kind *kind = &lk__kinds[k];
    const char *ops = lk__kind_ops(d, kind); /* NULL: newer than minor */
    if (!ops)
      continue;
    size_t n = lk__abi_entries((lk__kind_id)k, minor);
    if ((uintptr_t)ops % _Alignof(any_fn) ||
        !segment_of(ss, ops, n * sizeof(any_fn), false))
      return lk__err(LK_ELOAD,
                     "plugin %s (%s): its %s ops table is not in the plugin "
                     "(it points outside the plugin, runs past the end of "
                     "its segment, or is misaligned)",
                     name, path, kind->name);
    for (size_t i = 0; i < n && k != LK__KIND_LAYERS; i++) { /* data */
      memcpy(&fn, ops + i * sizeof(any_fn), sizeof fn);
      if (!in_code(ss, fn))
        return lk__err(LK_ELOAD,
                       "plugin %s (%s): %s ops entry %s points outside any "
                       "loaded code",
                       name, path, kind->name, kind->entries[i].name);
    }
  }
  return 0;
}

/* Checks the descriptor D that dlsym found in the plugin (SS its segments)
 * and fills COPY, zero-padded past the plugin's size, and HOST with what
 * the plugin's minor defines, zero past it. */
static int check_descriptor(const segments *ss, const void *d,
                            lk_descriptor *copy, lk_descriptor *host,
                            const char *name, const char *path) {
  /* Only the version and size can be read before they are checked. */
  size_t head = offsetof(lk_descriptor, size) + sizeof copy->size;
  if ((uintptr_t)d % _Alignof(lk_descriptor) || !segment_of(ss, d, head, false))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): its %s is not in the plugin (dlsym found "
                   "it in another object, or misaligned)",
                   name, path, LK_PLUGIN_SYMBOL);
  uint32_t version, size;
  memcpy(&version, (const char *)d + offsetof(lk_descriptor, abi_version),
         sizeof version);
  memcpy(&size, (const char *)d + offsetof(lk_descriptor, size), sizeof size);
  uint32_t major = version >> 16, minor = version & 0xffff;
  if (major != LK_ABI_MAJOR || minor > LK_ABI_MINOR)
    return lk__err(LK_EABI,
                   "plugin %s (%s) was built for loopkit plugin ABI %u.%u; "
                   "this loopkit has ABI %d.%d: rebuild the plugin",
                   name, path, major, minor, LK_ABI_MAJOR, LK_ABI_MINOR);
  size_t defined = lk__abi_desc_size(minor);
  if (size < defined)
    return lk__err(LK_EABI,
                   "plugin %s (%s): descriptor size %u is smaller than ABI "
                   "%u.%u's %zu",
                   name, path, size, major, minor, defined);
  size_t len = size < sizeof *copy ? size : sizeof *copy;
  if (!segment_of(ss, d, len, false))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): descriptor of size %u runs past the end "
                   "of its segment",
                   name, path, size);
  memset(copy, 0, sizeof *copy);
  memcpy(copy, d, len);
  memset(host, 0, sizeof *host);
  memcpy(host, d, defined); /* what a later minor added stays NULL */
  int rc;
  if (!copy->name)
    return lk__err(LK_ELOAD, "plugin %s (%s): descriptor has no valid name",
                   name, path);
  if ((rc = check_desc_string(ss, copy->name, "name", name, path)) != 0)
    return rc;
  if (!valid_name(copy->name))
    return lk__err(LK_ELOAD, "plugin %s (%s): descriptor has no valid name",
                   name, path);
  if ((rc = check_desc_string(ss, copy->version, "version", name, path)) != 0 ||
      (rc = check_desc_string(ss, copy->summary, "summary", name, path)) != 0 ||
      (rc = check_options(ss, copy->options, minor, name, path)) != 0)
    return rc;
  return check_functions(ss, host, minor, name, path);
}

/* ---- A layers plugin's tables ----
 *
 * A layer table is data the host reads and code it calls: each one is
 * checked as the descriptor is (every pointer into the plugin, strings
 * ending inside their segment, functions in code) and then for what it
 * says (layertypes.c), before the host takes its own copy. */

/* The strings of argument A (K-th of layer I). */
static int check_arg_strings(const segments *ss, const lk_layer_arg *a,
                             size_t k, size_t i, const char *name,
                             const char *path) {
  const char *const fields[] = {"name", "default", "choices", "help"};
  const char *const values[] = {a->name, a->def, a->choices, a->help};
  for (size_t f = 0; f < 4; f++)
    if (values[f] && check_string(ss, values[f]) != STR_OK)
      return lk__err(LK_ELOAD,
                     "plugin %s (%s): layer %zu: argument %zu's %s is not a "
                     "string in the plugin",
                     name, path, i, k, fields[f]);
  return 0;
}

/* Layer I's argument table: inside the plugin, ended by a NULL name within
 * LK_LAYER_MAX_ARGS entries (or exactly that many). */
static int check_layer_args(const segments *ss, const lk_layer_arg *args,
                            size_t i, const char *name, const char *path) {
  if (!args)
    return 0;
  if ((uintptr_t)args % _Alignof(lk_layer_arg) ||
      !segment_of(ss, args, sizeof *args, false))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): layer %zu: args is not in the plugin (it "
                   "points outside the plugin, or is misaligned)",
                   name, path, i);
  for (size_t k = 0; k < LK_LAYER_MAX_ARGS; k++) {
    if (!segment_of(ss, &args[k], sizeof *args, false))
      return lk__err(LK_ELOAD,
                     "plugin %s (%s): layer %zu: args has no terminator "
                     "before the end of its segment",
                     name, path, i);
    if (!args[k].name)
      return 0;
    int rc = check_arg_strings(ss, &args[k], k, i, name, path);
    if (rc != 0)
      return rc;
  }
  return 0;
}

/* Layer I's functions: code, or NULL. */
static int check_layer_code(const segments *ss, const lk_layer_type *t,
                            size_t i, const char *name, const char *path) {
  const struct {
    const char *field;
    size_t at;
  } fns[] = {{"infer", offsetof(lk_layer_type, infer)},
             {"tensors", offsetof(lk_layer_type, tensors)},
             {"init", offsetof(lk_layer_type, init)},
             {"bind", offsetof(lk_layer_type, bind)},
             {"fuse_prev", offsetof(lk_layer_type, fuse_prev)},
             {"reserve", offsetof(lk_layer_type, reserve)},
             {"release", offsetof(lk_layer_type, release)},
             {"forward", offsetof(lk_layer_type, forward)},
             {"backward", offsetof(lk_layer_type, backward)},
             {"onnx", offsetof(lk_layer_type, onnx)}};
  for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
    uintptr_t fn;
    memcpy(&fn, (const char *)t + fns[f].at, sizeof fn);
    if (!in_code(ss, fn))
      return lk__err(LK_ELOAD,
                     "plugin %s (%s): layer %zu: %s points outside any "
                     "loaded code",
                     name, path, i, fns[f].field);
  }
  return 0;
}

/* Layer I, the table at T in the plugin, into the host's COPY. */
static int check_layer(const segments *ss, const lk_layer_type *t,
                       lk_layer_type *copy, size_t i, const char *name,
                       const char *path) {
  uint32_t size;
  if ((uintptr_t)t % _Alignof(lk_layer_type) ||
      !segment_of(ss, t, sizeof size, false))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): layer %zu: its table is not in the plugin "
                   "(it points outside the plugin, or is misaligned)",
                   name, path, i);
  memcpy(&size, t, sizeof size);
  if (size < LK__LAYER_TYPE_MIN_SIZE)
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): layer %zu: size %u is smaller than a "
                   "layer table's %zu (set .size = LK_LAYER_TYPE_SIZE)",
                   name, path, i, size, (size_t)LK__LAYER_TYPE_MIN_SIZE);
  size_t len = size < sizeof *copy ? size : sizeof *copy;
  if (!segment_of(ss, t, len, false))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): layer %zu: table of size %u runs past "
                   "the end of its segment",
                   name, path, i, size);
  memset(copy, 0, sizeof *copy);
  memcpy(copy, t, len);
  memset(copy->reserved, 0, sizeof copy->reserved);
  int rc;
  if ((copy->name && check_string(ss, copy->name) != STR_OK) ||
      (copy->summary && check_string(ss, copy->summary) != STR_OK))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): layer %zu: its name or summary is not a "
                   "string in the plugin",
                   name, path, i);
  if ((rc = check_layer_args(ss, copy->args, i, name, path)) != 0 ||
      (rc = check_layer_code(ss, copy, i, name, path)) != 0)
    return rc;
  if ((rc = lk__layer_type_check(copy)) != 0) {
    char buf[80];
    return lk__err_prefix(rc, "plugin %s (%s): layer %zu (%s)", name, path, i,
                          copy->name ? printable(buf, sizeof buf, copy->name)
                                     : "no name");
  }
  return 0;
}

/* The layer tables of P's layers ops (the host's copy of its descriptor),
 * NULL-terminated within LK_LAYERS_MAX, checked and copied into P. */
static int check_layers(const segments *ss, lk_plugin *p, const char *name,
                        const char *path) {
  const lk_layers_ops *ops = p->host.layers;
  const lk_layer_type *const *types = ops ? ops->types : NULL;
  if (!ops)
    return 0;
  if (!types || (uintptr_t)types % _Alignof(void *))
    return lk__err(LK_ELOAD,
                   "plugin %s (%s): its layers ops table has no types "
                   "(a NULL-terminated array of const lk_layer_type *)",
                   name, path);
  size_t n = 0;
  for (;; n++) {
    if (!segment_of(ss, &types[n], sizeof *types, false))
      return lk__err(LK_ELOAD,
                     "plugin %s (%s): its layer types are not in the plugin, "
                     "or have no NULL terminator before the end of their "
                     "segment",
                     name, path);
    if (!types[n])
      break;
    if (n == LK_LAYERS_MAX)
      return lk__err(LK_ELOAD,
                     "plugin %s (%s): more than %d layer types (or no NULL "
                     "terminator)",
                     name, path, LK_LAYERS_MAX);
  }
  if (n && !(p->layers = calloc(n, sizeof *p->layers)))
    return lk__err(LK_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    int rc = check_layer(ss, types[i], &p->layers[i], i, name, path);
    if (rc != 0)
      return rc;
  }
  p->n_layers = n;
  return 0;
}

/* ---- Plugin security ----
 *
 * Loading a plugin runs its code with our rights, so, like OpenSSH's
 * StrictModes and sudo's plugin checks, a file is loaded only when nobody but
 * root and the effective user (geteuid) can change what gets loaded:
 *
 *  1. the file is a regular file owned by root or the effective user and
 *     not writable by group or others;
 *  2. its directory is owned by root or the effective user and not writable
 *     by group or others, sticky bit or not;
 *  3. no directory above it, up to /, is writable by others without the
 *     sticky bit (/tmp, 1777, is fine: there nobody can rename or remove
 *     what they do not own). Ownership and group write are not checked
 *     above the plugin's own directory: checkouts and build trees live in
 *     directories that CI systems and shared machines own in many ways, and
 *     the issue to guard against is a stranger swapping the file, which
 *     rules 1 and 2 and the world-writable check already stop;
 *  4. every symbolic link on the way to it is owned by root or the
 *     effective user, and rules 2 and 3 hold for the directory holding the
 *     link and those above it: whoever owns a link, or can write where it
 *     lives, can repoint it.
 *
 * For rule 4 the path is resolved here one component at a time, as the
 * kernel resolves it, following at most LK_MAX_LINKS links (the kernel's
 * ELOOP limit): every link of the chain is seen, the ones in a link's
 * target and in the directories on the way included, so a link that a
 * stranger owns or could replace anywhere in the chain is refused. The file
 * the walk ends at is then opened (O_NOFOLLOW), rule 1 is checked on the
 * open descriptor with fstat, which must be the inode the walk reached,
 * and dlopen is given /proc/self/fd/N: what gets loaded is the inode that
 * was checked, whatever the path names by then. (Checking the path and
 * then handing the path to dlopen let a stranger who owned a link in the
 * chain swap it in between.) Between the walk and the open, only those the
 * rules trust can change the path (and, as rule 3 allows, the owners of
 * the directories above), and the inode opened must still be the one the
 * walk reached.
 * Group-writable is refused even for a user's private group (umask 002):
 * who else is in a group cannot be told cheaply and reliably.
 *
 * The search path holds absolute directories only: a relative entry, or an
 * empty one (which means the current directory, as in PATH), would make
 * what loads depend on where loopkit runs. The current directory is never
 * searched otherwise; a path with a '/' is the user's explicit choice.
 *
 * LOOPKIT_ALLOW_UNSAFE_PLUGINS=1 (exactly "1") turns every check off; the
 * plugin is still loaded through its open descriptor, and its descriptor
 * still checked (above). */

#define LK_UNSAFE_ENV LK__UNSAFE_ENV
#define LK_MAX_LINKS 40

static bool allow_unsafe(void) {
  return lk__unsafe_plugins();
}

static const char *writers(mode_t m) {
  if ((m & S_IWGRP) && (m & S_IWOTH))
    return "group and others";
  return m & S_IWGRP ? "group" : "others";
}

/* Rule 2 (OWN) or 3 for directory DIR; WHO names the plugin and its path.
 * LINK, when not NULL, is the symbolic link the directory holds (OWN) or
 * is above (rule 4). */
static int check_dir(const char *who, const char *dir, bool own,
                     const char *link) {
  struct stat st;
  if (stat(dir, &st) != 0)
    return lk__err(LK_ELOAD,
                   "cannot load plugin %s: cannot check directory %s: %s", who,
                   dir, strerror(errno));
  /* "its directory D", "directory D above it", "directory D holding
   * symlink L", "directory D above symlink L" */
  const char *what = own && !link ? "its directory" : "directory";
  const char *where = own ? (link ? " holding symlink " : "")
                          : (link ? " above symlink " : " above it");
  const char *ln = link ? link : "";
  const char *harm = link ? "repoint the link" : "replace the plugin";
  uid_t me = geteuid();
  if (!own) { /* rule 3 */
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
      return lk__err(LK_ELOAD,
                     "refusing plugin %s: %s %s%s%s is writable by others "
                     "(mode %04o) without the sticky bit, so they could %s; "
                     "fix with chmod o-w %s, or set " LK_UNSAFE_ENV "=1",
                     who, what, dir, where, ln, (unsigned)(st.st_mode & 07777),
                     harm, dir);
    return 0;
  }
  if (st.st_uid != 0 && st.st_uid != me)
    return lk__err(LK_ELOAD,
                   "refusing plugin %s: %s %s%s%s is owned by uid %lu, not by "
                   "root or you (uid %lu), so that user could %s; fix with "
                   "chown, or set " LK_UNSAFE_ENV "=1",
                   who, what, dir, where, ln, (unsigned long)st.st_uid,
                   (unsigned long)me, harm);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return lk__err(
        LK_ELOAD,
        "refusing plugin %s: %s %s%s%s is writable by %s (mode "
        "%04o), so they could %s; fix with chmod go-w %s, or set " LK_UNSAFE_ENV
        "=1",
        who, what, dir, where, ln, writers(st.st_mode),
        (unsigned)(st.st_mode & 07777), harm, dir);
  return 0;
}

/* Rules 2 and 3 for every directory holding FILE, an absolute path; LINK
 * as for check_dir. */
static int check_dirs(const char *who, const char *file, const char *link) {
  char *dir = lk__strdup(file);
  if (!dir)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = 0;
  for (bool own = true; rc == 0; own = false) {
    char *slash = strrchr(dir, '/');
    if (!slash || (slash == dir && dir[1] == '\0'))
      break; /* "/" was the last one checked */
    slash[slash == dir] = '\0';
    rc = check_dir(who, dir, own, link);
  }
  free(dir);
  return rc;
}

/* PATH made absolute without resolving anything, or NULL (errno set). */
static char *absolute(const char *path) {
  if (path[0] == '/')
    return lk__strdup(path);
  char *cwd = getcwd(NULL, 0);
  char *abs = cwd ? lk__asprintf("%s/%s", cwd, path) : NULL;
  free(cwd);
  return abs;
}

/* Rule 4 for the symbolic link LINK (ST its lstat). */
static int check_link(const char *who, const char *link,
                      const struct stat *st) {
  uid_t me = geteuid();
  if (st->st_uid != 0 && st->st_uid != me)
    return lk__err(LK_ELOAD,
                   "refusing plugin %s: symlink %s is owned by uid %lu, not "
                   "by root or you (uid %lu), so that user could repoint it; "
                   "fix with chown -h, or set " LK_UNSAFE_ENV "=1",
                   who, link, (unsigned long)st->st_uid, (unsigned long)me);
  return check_dirs(who, link, link);
}

/* The end of walk: DONE (PATH_MAX bytes) resolved through LINKS links,
 * or the errno ERR that stopped it; the path in *REAL, its status in
 * *ST. */
static int walked(const char *name, const char *path, char *done, int links,
                  int err, char **real, struct stat *st) {
  if (err == 0 && !*done)
    snprintf(done, PATH_MAX, "/");
  /* Again, for a path that ends in "." or "..". */
  if (err == 0 && lstat(done, st) != 0)
    err = errno;
  if (err != 0) /* in a chain, the component that failed is named too */
    return links ? lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s: %s",
                           name, path, done, strerror(err))
                 : lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name,
                           path, strerror(err));
  if (!(*real = lk__strdup(done)))
    return lk__err(LK_ENOMEM, "out of memory");
  return 0;
}

/* Resolves PATH (plugin NAME; WHO names both) as the kernel would, checking
 * each symbolic link on the way (rule 4). On success *REAL is the file it
 * leads to, absolute and free of links, and *ST that file's lstat. */
static int walk(const char *name, const char *path, const char *who,
                char **real, struct stat *st) {
  char done[PATH_MAX]; /* resolved so far, free of links; "" is "/" */
  char target[PATH_MAX];
  size_t len = 0;
  int links = 0, rc = 0, err = 0;
  done[0] = '\0';
  char *rest = absolute(path); /* what is left to resolve */
  if (!rest)
    return lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name, path,
                   strerror(errno));
  const char *p = rest;
  while (rc == 0 && err == 0) {
    while (*p == '/')
      p++;
    if (!*p)
      break;
    const char *end = p + strcspn(p, "/");
    size_t n = (size_t)(end - p);
    if (n == 1 && p[0] == '.') {
      p = end;
      continue;
    }
    if (n == 2 && p[0] == '.' && p[1] == '.') { /* done has no links */
      char *slash = strrchr(done, '/');
      len = slash ? (size_t)(slash - done) : 0;
      done[len] = '\0';
      p = end;
      continue;
    }
    size_t parent = len;
    if (len + 1 + n >= sizeof done) {
      err = ENAMETOOLONG;
      break;
    }
    done[len] = '/';
    memcpy(done + len + 1, p, n);
    len += 1 + n;
    done[len] = '\0';
    if (lstat(done, st) != 0) {
      err = errno;
      break;
    }
    if (!S_ISLNK(st->st_mode)) {
      if (*end == '/' && !S_ISDIR(st->st_mode))
        err = ENOTDIR;
      p = end;
      continue;
    }
    if (++links > LK_MAX_LINKS) {
      err = ELOOP;
      break;
    }
    if ((rc = check_link(who, done, st)) != 0)
      break;
    ssize_t got = readlink(done, target, sizeof target);
    if (got <= 0 || (size_t)got == sizeof target) {
      err = got < 0 ? errno : got ? ENAMETOOLONG : ENOENT;
      break;
    }
    target[got] = '\0';
    /* The link's target, then what came after the link. */
    char *next = lk__asprintf("%s%s", target, end);
    if (!next) {
      rc = lk__err(LK_ENOMEM, "out of memory");
      break;
    }
    len = target[0] == '/' ? 0 : parent;
    done[len] = '\0';
    free(rest);
    p = rest = next;
  }
  free(rest);
  return rc != 0 ? rc : walked(name, path, done, links, err, real, st);
}

/* Rule 1 on FD, the file the walk reached at REAL (WALKED: its lstat);
 * *ST is what FD is. */
static int check_file(const char *name, const char *path, const char *real,
                      int fd, const struct stat *walked, struct stat *st) {
  if (fstat(fd, st) != 0)
    return lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name, path,
                   strerror(errno));
  if (!S_ISREG(st->st_mode))
    return lk__err(LK_ELOAD,
                   "cannot load plugin %s from %s: not a regular file", name,
                   path);
  if (st->st_dev != walked->st_dev || st->st_ino != walked->st_ino)
    return lk__err(LK_ELOAD,
                   "refusing plugin %s: %s was replaced while it was being "
                   "checked; try again",
                   name, real);
  /* Named as the file that loads; "it" when that is the name itself. */
  const char *subject = strcmp(name, real) == 0 ? "it" : real;
  uid_t me = geteuid();
  if (st->st_uid != 0 && st->st_uid != me)
    return lk__err(LK_ELOAD,
                   "refusing plugin %s: %s is owned by uid %lu, not by root "
                   "or you (uid %lu), so that user could change its code; "
                   "fix with chown, or set " LK_UNSAFE_ENV "=1",
                   name, subject, (unsigned long)st->st_uid, (unsigned long)me);
  if (st->st_mode & (S_IWGRP | S_IWOTH))
    return lk__err(LK_ELOAD,
                   "refusing plugin %s: %s is writable by %s (mode %04o), so "
                   "they could change its code; fix with chmod go-w %s, or "
                   "set " LK_UNSAFE_ENV "=1",
                   name, subject, writers(st->st_mode),
                   (unsigned)(st->st_mode & 07777), real);
  return 0;
}

#define LK_OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK) /* no FIFO waits */

/* Opens plugin NAME at PATH after the checks above: *FD is the file to
 * load and *ST what it is. */
static int open_checked(const char *name, const char *path, int *fd,
                        struct stat *st) {
  *fd = -1;
  if (allow_unsafe()) { /* the path as given, symlinks and all */
    int f = -1, err = 0;
    if (stat(path, st) != 0 ||
        (S_ISREG(st->st_mode) &&
         ((f = open(path, LK_OPEN_FLAGS)) < 0 || fstat(f, st) != 0)))
      err = errno;
    if (err == 0 && S_ISREG(st->st_mode)) {
      *fd = f;
      return 0;
    }
    if (f >= 0)
      close(f);
    return lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name, path,
                   err ? strerror(err) : "not a regular file");
  }
  char *who = strcmp(name, path) == 0 ? lk__strdup(path)
                                      : lk__asprintf("%s (%s)", name, path);
  if (!who)
    return lk__err(LK_ENOMEM, "out of memory");
  char *real = NULL;
  struct stat walked;
  int f = -1, rc = walk(name, path, who, &real, &walked);
  if (rc == 0 && !S_ISREG(walked.st_mode))
    rc = lk__err(LK_ELOAD, "cannot load plugin %s from %s: not a regular file",
                 name, path);
  if (rc == 0 && (f = open(real, LK_OPEN_FLAGS | O_NOFOLLOW)) < 0)
    rc = lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name, path,
                 strerror(errno));
  if (rc == 0)
    rc = check_file(name, path, real, f, &walked, st);
  if (rc == 0)
    rc = check_dirs(who, real, NULL);
  if (rc != 0 && f >= 0)
    close(f);
  free(real);
  free(who);
  *fd = rc == 0 ? f : -1;
  return rc;
}

/* ---- Loading what was checked ----
 *
 * dlopen takes a name, so the open file goes to it as /proc/self/fd/N. One
 * catch: dlopen knows a loaded object by every name it was opened under,
 * and given a name it knows it returns that object without opening
 * anything. Once descriptor N is closed and its number reused for another
 * file, "/proc/self/fd/N" would still name the first object as long as it
 * stays loaded (another handle on it, or an object that cannot be
 * unloaded), and the second plugin would silently be the first. So each
 * name is pinned to the file (device and inode) it was given for, for as
 * long as an object may answer to it, and a file whose descriptor number
 * is pinned to another file is loaded through a duplicate with a number
 * that is free. A file's pins go when dlopen (RTLD_NOLOAD) says no object
 * of it is loaded any more; each plugin keeps its descriptor open so that
 * this question is asked about the right file. One lock covers choosing a
 * name, dlopen, dlclose and the pins. Only this loader opens objects as
 * /proc/self/fd/N in our process. */

typedef struct pin {
  int fd;
  dev_t dev;
  ino_t ino;
} pin;

/* Recursive where it can be: a plugin's constructors and destructors run
 * under it, and may open or close plugins. */
#ifdef PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP
static pthread_mutex_t pin_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
#else
static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
#endif
static pin *pins;
static size_t n_pins, cap_pins;

static bool same_file(const pin *p, const struct stat *st) {
  return p->dev == st->st_dev && p->ino == st->st_ino;
}

/* With the lock held: whether FD's name is pinned to a file other than ST
 * (ELSEWHERE) or to ST itself. */
static bool pinned(int fd, const struct stat *st, bool elsewhere) {
  for (size_t i = 0; i < n_pins; i++)
    if (pins[i].fd == fd && same_file(&pins[i], st) != elsewhere)
      return true;
  return false;
}

static int add_pin(int fd, const struct stat *st) {
  if (pinned(fd, st, false))
    return 0;
  if (n_pins == cap_pins) {
    size_t nc = cap_pins ? 2 * cap_pins : 8;
    pin *grown = realloc(pins, nc * sizeof *grown);
    if (!grown)
      return lk__err(LK_ENOMEM, "out of memory");
    pins = grown;
    cap_pins = nc;
  }
  pins[n_pins++] = (pin){fd, st->st_dev, st->st_ino};
  return 0;
}

static void fd_name(char *buf, size_t len, int fd) {
  snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* With the lock held: drops the pins of ST, open as FD, once no object of
 * it is loaded. */
static void unpin_if_unloaded(int fd, const struct stat *st) {
  char name[32];
  fd_name(name, sizeof name, fd);
  void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  dlerror();
  if (h) {
    dlclose(h);
    return;
  }
  size_t kept = 0;
  for (size_t i = 0; i < n_pins; i++)
    if (!same_file(&pins[i], st))
      pins[kept++] = pins[i];
  n_pins = kept;
  if (n_pins == 0) {
    free(pins);
    pins = NULL;
    cap_pins = 0;
  }
}

/* MSG (dlerror's text) with NAME, the /proc/self/fd/N dlopen was given,
 * replaced by PATH: messages name the file the user named. */
static void scrub(char *out, size_t len, const char *msg, const char *name,
                  const char *path) {
  size_t used = 0, n = strlen(name);
  for (const char *m = msg; *m && used + 1 < len;) {
    if (strncmp(m, name, n) == 0 && !(m[n] >= '0' && m[n] <= '9')) {
      int w = snprintf(out + used, len - used, "%s", path);
      used = w < 0 || (size_t)w >= len - used ? len - 1 : used + (size_t)w;
      m += n;
    } else {
      out[used++] = *m++;
    }
  }
  out[used] = '\0';
}

/* dlopens plugin NAME (at PATH), open as *FD and checked (ST), through
 * /proc/self/fd; *FD may become a duplicate with another number. */
static int load(const char *name, const char *path, int *fd,
                const struct stat *st, void **out) {
  *out = NULL;
  pthread_mutex_lock(&pin_lock);
  int rc = 0, use = *fd;
  while (rc == 0 && pinned(use, st, true)) {
    int next = fcntl(*fd, F_DUPFD_CLOEXEC, use + 1);
    int err = errno;
    if (use != *fd)
      close(use);
    use = next;
    if (next < 0)
      rc = lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name, path,
                   strerror(err));
  }
  if (rc == 0 && use != *fd) {
    close(*fd);
    *fd = use;
  }
  if (rc == 0)
    rc = add_pin(*fd, st);
  if (rc == 0) {
    char fdname[32];
    fd_name(fdname, sizeof fdname, *fd);
    dlerror();
    *out = dlopen(fdname, RTLD_NOW | RTLD_LOCAL);
    if (!*out) {
      char why[1024];
      const char *e = dlerror(); /* copied at once: the next call clears it */
      scrub(why, sizeof why, e ? e : "unknown dlopen error", fdname, path);
      if (access(fdname, F_OK) != 0)
        snprintf(why, sizeof why,
                 "%s is missing (plugins are loaded through /proc/self/fd: "
                 "is /proc mounted?)",
                 fdname);
      rc = lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name, path,
                   why);
      unpin_if_unloaded(*fd, st);
    }
  }
  pthread_mutex_unlock(&pin_lock);
  return rc;
}

/* Undoes load (HANDLE may be NULL) and closes FD. */
static void unload(void *handle, int fd, const struct stat *st) {
  pthread_mutex_lock(&pin_lock);
  if (handle)
    dlclose(handle);
  unpin_if_unloaded(fd, st);
  pthread_mutex_unlock(&pin_lock);
  close(fd);
}

static int open_path(const char *name, const char *path, lk_plugin **out) {
  int fd;
  struct stat st;
  int rc = open_checked(name, path, &fd, &st);
  if (rc != 0)
    return rc;
  void *h = NULL;
  if ((rc = load(name, path, &fd, &st, &h)) != 0) {
    close(fd);
    return rc;
  }
  dlerror();
  const void *d = dlsym(h, LK_PLUGIN_SYMBOL);
  if (!d) {
    char why[1024], fdname[32];
    const char *e = dlerror();
    fd_name(fdname, sizeof fdname, fd);
    scrub(why, sizeof why, e ? e : "null", fdname, path);
    rc = lk__err(LK_ELOAD,
                 "plugin %s (%s) has no descriptor: symbol %s not found "
                 "(%s)",
                 name, path, LK_PLUGIN_SYMBOL, why);
  }
  segments ss;
  lk_plugin *p = rc == 0 ? calloc(1, sizeof *p) : NULL;
  if (rc == 0 && (!p || !(p->path = lk__strdup(path))))
    rc = lk__err(LK_ENOMEM, "out of memory");
  if (rc == 0)
    rc = find_segments(h, &ss, name, path);
  if (rc == 0)
    rc = check_descriptor(&ss, d, &p->desc, &p->host, name, path);
  if (rc == 0)
    lk__abi_copy_ops(&p->host, lk__abi_minor(&p->host), &p->ops);
  if (rc == 0)
    rc = check_layers(&ss, p, name, path);
  if (rc != 0) {
    if (p) {
      free(p->path);
      free(p->layers);
    }
    free(p);
    unload(h, fd, &st);
    return rc;
  }
  p->handle = h;
  p->fd = fd;
  p->st = st;
  *out = p;
  return 0;
}

typedef struct search {
  const char *name;
  char tried[1536];
  size_t used;
  char *found;
} search;

static int try_dir(void *user, const char *dir, const char *source) {
  search *s = user;
  LK_UNUSED(source);
  char *path = lk__asprintf("%s/%s.so", dir, s->name);
  if (!path)
    return lk__err(LK_ENOMEM, "out of memory");
  if (access(path, F_OK) == 0) {
    s->found = path;
    return 1; /* stop */
  }
  int w = snprintf(s->tried + s->used, sizeof s->tried - s->used, "%s%s",
                   s->used ? ", " : "", path);
  if (w > 0 && (size_t)w < sizeof s->tried - s->used)
    s->used += (size_t)w;
  free(path);
  return 0;
}

int lk_plugin_open(const char *name, lk_plugin **out) {
  if (!name || !*name)
    return lk__err(LK_EINVAL, "empty plugin name");
  if (strchr(name, '/'))
    return open_path(name, name, out);
  if (!valid_name(name))
    return lk__err(LK_EINVAL,
                   "invalid plugin name \"%s\": names are [A-Za-z0-9_-]+ (or "
                   "a path containing '/')",
                   name);
  search s = {.name = name};
  int rc = lk__search_dirs(try_dir, &s);
  if (rc < 0)
    return rc;
  if (!s.found)
    return lk__err(LK_ENOTFOUND,
                   "plugin %s not found; tried: %s (set LOOPKIT_PLUGIN_PATH "
                   "or give a path)",
                   name, s.tried);
  rc = open_path(name, s.found, out);
  free(s.found);
  return rc;
}

void lk_plugin_close(lk_plugin *p) {
  if (!p)
    return;
  unload(p->handle, p->fd, &p->st);
  free(p->path);
  free(p->layers);
  free(p);
}

const lk_descriptor *lk_plugin_desc(const lk_plugin *p) {
  return &p->desc;
}

const lk_descriptor *lk__plugin_host_desc(const lk_plugin *p) {
  return &p->host;
}

const char *lk_plugin_path(const lk_plugin *p) {
  return p->path;
}

const lk_layer_type *lk_plugin_layer(const lk_plugin *p, size_t i) {
  return p && i < p->n_layers ? &p->layers[i] : NULL;
}

unsigned lk__plugin_minor(const lk_plugin *p) {
  return lk__abi_minor(&p->desc);
}

const char *lk_plugin_kinds(const lk_plugin *p, char *buf, size_t len) {
  return lk__kind_list(&p->host, buf, len);
}

typedef struct scan {
  int (*each)(void *user, const char *name, const char *path);
  void *user;
  char **seen;
  size_t n_seen;
} scan;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool seen_before(scan *s, const char *name) {
  for (size_t i = 0; i < s->n_seen; i++)
    if (strcmp(s->seen[i], name) == 0)
      return true;
  return false;
}

static int scan_dir(void *user, const char *dir, const char *source) {
  scan *s = user;
  LK_UNUSED(source);
  DIR *d = opendir(dir);
  if (!d)
    return 0; /* a missing directory on the path is not an error */
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *e;
  while ((e = readdir(d)) && rc == 0) {
    size_t len = strlen(e->d_name);
    if (len <= 3 || strcmp(e->d_name + len - 3, ".so") != 0)
      continue;
    char *base = lk__strdup(e->d_name);
    if (!base) {
      rc = lk__err(LK_ENOMEM, "out of memory");
      break;
    }
    base[len - 3] = '\0';
    if (!valid_name(base) || seen_before(s, base)) {
      free(base);
      continue;
    }
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 16;
      char **nn = realloc(names, nc * sizeof *nn);
      if (!nn) {
        free(base);
        rc = lk__err(LK_ENOMEM, "out of memory");
        break;
      }
      names = nn;
      cap = nc;
    }
    names[n++] = base;
  }
  closedir(d);
  if (n)
    qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    if (rc == 0) {
      char **ns = realloc(s->seen, (s->n_seen + 1) * sizeof *ns);
      char *path = lk__asprintf("%s/%s.so", dir, names[i]);
      if (ns)
        s->seen = ns;
      if (!ns || !path) {
        free(path);
        rc = lk__err(LK_ENOMEM, "out of memory");
      } else {
        s->seen[s->n_seen++] = names[i];
        names[i] = NULL;
        rc = s->each(s->user, s->seen[s->n_seen - 1], path);
        free(path);
      }
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int lk_plugin_scan(int (*each)(void *user, const char *name, const char *path),
                   void *user) {
  scan s = {.each = each, .user = user};
  int rc = lk__search_dirs(scan_dir, &s);
  for (size_t i = 0; i < s.n_seen; i++)
    free(s.seen[i]);
  free(s.seen);
  return rc;
}
