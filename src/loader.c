/* Finding and opening plugins: the search path, the security checks, dlopen,
 * and the descriptor checks that come before any plugin code runs. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#ifndef LK_PLUGINDIR
#define LK_PLUGINDIR "/usr/local/lib/loopkit"
#endif

struct lk_plugin {
  void *handle;
  char *path;
  /* A zero-padded copy: fields past the plugin's own size read as NULL. */
  lk_descriptor desc;
};

/* The size of the descriptor as each minor version of ABI 1 defines it. */
static const size_t desc_size[] = {
    offsetof(lk_descriptor, callback) + sizeof(void *),  /* 1.0 */
    offsetof(lk_descriptor, scheduler) + sizeof(void *), /* 1.1 */
    offsetof(lk_descriptor, scheduler) + sizeof(void *), /* 1.2: new hooks */
    offsetof(lk_descriptor, precision) + sizeof(void *), /* 1.3 */
    offsetof(lk_descriptor, check_state) + sizeof(void *), /* 1.4 */
};

const char *lk_plugin_dir(void) {
  return LK_PLUGINDIR;
}

static bool valid_name(const char *name) {
  if (!*name)
    return false;
  for (const char *p = name; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  }
  return true;
}

static int check_descriptor(const lk_descriptor *d, const char *name,
                            const char *path) {
  uint32_t major = d->abi_version >> 16, minor = d->abi_version & 0xffff;
  _Static_assert(sizeof desc_size / sizeof desc_size[0] == LK_ABI_MINOR + 1,
                 "every minor version needs its descriptor size");
  if (major != LK_ABI_MAJOR || minor > LK_ABI_MINOR)
    return lk__err(LK_EABI,
                   "plugin %s (%s) was built for loopkit plugin ABI %u.%u; "
                   "this loopkit has ABI %d.%d: rebuild the plugin",
                   name, path, major, minor, LK_ABI_MAJOR, LK_ABI_MINOR);
  if (d->size < desc_size[minor])
    return lk__err(LK_EABI,
                   "plugin %s (%s): descriptor size %u is smaller than ABI "
                   "%u.%u's %zu",
                   name, path, d->size, major, minor, desc_size[minor]);
  if (!d->name || !valid_name(d->name))
    return lk__err(LK_ELOAD, "plugin %s (%s): descriptor has no valid name",
                   name, path);
  for (const lk_option *o = d->options; o && o->name; o++)
    if (o->type < LK_OPT_INT || o->type > LK_OPT_DOUBLES ||
        (o->type == LK_OPT_ENUM && !o->choices))
      return lk__err(LK_ELOAD, "plugin %s (%s): option %s is ill-declared",
                     name, path, o->name);
  return 0;
}

/* ---- Plugin security ----
 *
 * Loading a plugin runs its code with our rights, so, like OpenSSH's
 * StrictModes and sudo's plugin checks, a file is loaded only when nobody but
 * root and the effective user (geteuid) can change what gets loaded:
 *
 *  1. the file, symlinks followed as dlopen follows them, is a regular file
 *     owned by root or the effective user and not writable by group or
 *     others;
 *  2. its directory is owned by root or the effective user and not writable
 *     by group or others, sticky bit or not;
 *  3. no directory above it, up to /, is writable by others without the
 *     sticky bit (/tmp, 1777, is fine: there nobody can rename or remove
 *     what they do not own). Ownership and group write are not checked
 *     above the plugin's own directory: checkouts and build trees live in
 *     directories that CI systems and shared machines own in many ways, and
 *     the issue to guard against is a stranger swapping the file, which
 *     rules 1 and 2 and the world-writable check already stop.
 *
 * Rules 2 and 3 apply to the directories of the resolved path and, when the
 * path as given goes through symlinks, to the directories of that path too
 * (whoever can write where a link lives can repoint it). A link inside a
 * link's target is not followed step by step: the resolved path covers it.
 * Group-writable is refused even for a user's private group (umask 002):
 * who else is in a group cannot be told cheaply and reliably.
 *
 * The search path holds absolute directories only: a relative entry, or an
 * empty one (which means the current directory, as in PATH), would make
 * what loads depend on where loopkit runs. The current directory is never
 * searched otherwise; a path with a '/' is the user's explicit choice.
 *
 * LOOPKIT_ALLOW_UNSAFE_PLUGINS=1 (exactly "1") turns every check off.
 *
 * The checks and dlopen are separate calls, not one race-free open: the
 * checks pass only when no one but root and the owner can write anywhere on
 * the path, so only they could swap the file in between. */

#define LK_UNSAFE_ENV "LOOPKIT_ALLOW_UNSAFE_PLUGINS"

static bool allow_unsafe(void) {
  const char *v = getenv(LK_UNSAFE_ENV);
  return v && strcmp(v, "1") == 0;
}

static const char *writers(mode_t m) {
  if ((m & S_IWGRP) && (m & S_IWOTH))
    return "group and others";
  return m & S_IWGRP ? "group" : "others";
}

/* Rule 2 (OWN) or 3 for directory DIR; WHO names the plugin and its path. */
static int check_dir(const char *who, const char *dir, bool own) {
  struct stat st;
  if (stat(dir, &st) != 0)
    return lk__err(LK_ELOAD,
                   "cannot load plugin %s: cannot check directory %s: %s", who,
                   dir, strerror(errno));
  const char *what = own ? "its directory" : "directory";
  const char *where = own ? "" : " above it";
  uid_t me = geteuid();
  if (!own) { /* rule 3 */
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
      return lk__err(LK_ELOAD,
                     "refusing plugin %s: directory %s above it is writable "
                     "by others (mode %04o) without the sticky bit, so they "
                     "could replace the plugin; fix with chmod o-w %s, or "
                     "set " LK_UNSAFE_ENV "=1",
                     who, dir, (unsigned)(st.st_mode & 07777), dir);
    return 0;
  }
  if (st.st_uid != 0 && st.st_uid != me)
    return lk__err(LK_ELOAD,
                   "refusing plugin %s: %s %s%s is owned by uid %lu, not by "
                   "root or you (uid %lu), so that user could replace the "
                   "plugin; fix with chown, or set " LK_UNSAFE_ENV "=1",
                   who, what, dir, where, (unsigned long)st.st_uid,
                   (unsigned long)me);
  mode_t w = st.st_mode & (S_IWGRP | S_IWOTH);
  if (w && (own || !(st.st_mode & S_ISVTX)))
    return lk__err(LK_ELOAD,
                   "refusing plugin %s: %s %s%s is writable by %s (mode "
                   "%04o)%s, so they could replace the plugin; fix with "
                   "chmod go-w %s, or set " LK_UNSAFE_ENV "=1",
                   who, what, dir, where, writers(st.st_mode),
                   (unsigned)(st.st_mode & 07777),
                   own ? "" : " without the sticky bit", dir);
  return 0;
}

/* Rules 2 and 3 for every directory holding FILE, an absolute path. */
static int check_dirs(const char *who, const char *file) {
  char *dir = lk__strdup(file);
  if (!dir)
    return lk__err(LK_ENOMEM, "out of memory");
  int rc = 0;
  for (bool own = true; rc == 0; own = false) {
    char *slash = strrchr(dir, '/');
    if (!slash || (slash == dir && dir[1] == '\0'))
      break; /* "/" was the last one checked */
    slash[slash == dir] = '\0';
    rc = check_dir(who, dir, own);
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

/* Rule 1 for the resolved file REAL of plugin NAME. */
static int check_file(const char *name, const char *path, const char *real) {
  struct stat st;
  if (stat(real, &st) != 0)
    return lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name, path,
                   strerror(errno));
  if (!S_ISREG(st.st_mode))
    return lk__err(LK_ELOAD,
                   "cannot load plugin %s from %s: not a regular file", name,
                   path);
  /* Named as the file that loads; "it" when that is the name itself. */
  const char *subject = strcmp(name, real) == 0 ? "it" : real;
  uid_t me = geteuid();
  if (st.st_uid != 0 && st.st_uid != me)
    return lk__err(LK_ELOAD,
                   "refusing plugin %s: %s is owned by uid %lu, not by root "
                   "or you (uid %lu), so that user could change its code; "
                   "fix with chown, or set " LK_UNSAFE_ENV "=1",
                   name, subject, (unsigned long)st.st_uid, (unsigned long)me);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return lk__err(LK_ELOAD,
                   "refusing plugin %s: %s is writable by %s (mode %04o), so "
                   "they could change its code; fix with chmod go-w %s, or "
                   "set " LK_UNSAFE_ENV "=1",
                   name, subject, writers(st.st_mode),
                   (unsigned)(st.st_mode & 07777), real);
  return 0;
}

/* All three rules for plugin NAME at PATH, before dlopen. */
static int check_trusted(const char *name, const char *path) {
  if (allow_unsafe())
    return 0;
  char *real = realpath(path, NULL);
  if (!real)
    return lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name, path,
                   strerror(errno));
  char *given = absolute(path);
  int rc = given ? 0
                 : lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name,
                           path, strerror(errno));
  char *who = NULL;
  if (rc == 0)
    rc = check_file(name, path, real);
  if (rc == 0) {
    who = strcmp(name, path) == 0 ? lk__strdup(path)
                                  : lk__asprintf("%s (%s)", name, path);
    if (!who)
      rc = lk__err(LK_ENOMEM, "out of memory");
  }
  if (rc == 0)
    rc = check_dirs(who, real);
  if (rc == 0 && strcmp(given, real) != 0)
    rc = check_dirs(who, given);
  free(who);
  free(given);
  free(real);
  return rc;
}

/* The search path's entries must be absolute (see above). */
static int check_search_path(const char *env) {
  for (const char *p = env;;) {
    const char *end = strchr(p, ':');
    int len = (int)(end ? (size_t)(end - p) : strlen(p));
    if (len == 0)
      return lk__err(LK_ELOAD,
                     "refusing LOOPKIT_PLUGIN_PATH=\"%s\": it has an empty "
                     "entry (a leading, trailing or doubled ':'), which "
                     "means the current directory, and the current directory "
                     "is never searched; remove it, or set " LK_UNSAFE_ENV "=1",
                     env);
    if (*p != '/')
      return lk__err(LK_ELOAD,
                     "refusing LOOPKIT_PLUGIN_PATH entry \"%.*s\": relative "
                     "directories are not searched, as what they hold "
                     "depends on the current directory; use an absolute "
                     "directory, or set " LK_UNSAFE_ENV "=1",
                     len, p);
    if (!end)
      return 0;
    p = end + 1;
  }
}

static int open_path(const char *name, const char *path, lk_plugin **out) {
  int rc = check_trusted(name, path);
  if (rc != 0)
    return rc;
  dlerror();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror(); /* copied at once: the next call clears it */
    return lk__err(LK_ELOAD, "cannot load plugin %s from %s: %s", name, path,
                   why ? why : "unknown dlopen error");
  }
  dlerror();
  const lk_descriptor *d = dlsym(h, LK_PLUGIN_SYMBOL);
  if (!d) {
    const char *why = dlerror();
    rc = lk__err(LK_ELOAD,
                 "plugin %s (%s) has no descriptor: symbol %s not found "
                 "(%s)",
                 name, path, LK_PLUGIN_SYMBOL, why ? why : "null");
    dlclose(h);
    return rc;
  }
  rc = check_descriptor(d, name, path);
  lk_plugin *p = rc == 0 ? calloc(1, sizeof *p) : NULL;
  if (rc == 0 && (!p || !(p->path = lk__strdup(path))))
    rc = lk__err(LK_ENOMEM, "out of memory");
  if (rc != 0) {
    if (p)
      free(p);
    dlclose(h);
    return rc;
  }
  p->handle = h;
  memcpy(&p->desc, d, d->size < sizeof p->desc ? d->size : sizeof p->desc);
  *out = p;
  return 0;
}

/* Calls EACH with every directory of the search path, in order. */
static int each_dir(int (*each)(void *user, const char *dir), void *user) {
  const char *env = getenv("LOOPKIT_PLUGIN_PATH");
  if (env && !*env)
    env = NULL; /* set but empty: no directories, not the current one */
  bool unsafe = allow_unsafe();
  int rc = env && !unsafe ? check_search_path(env) : 0;
  if (rc != 0)
    return rc;
  char *copy = env ? lk__strdup(env) : NULL;
  if (env && !copy)
    return lk__err(LK_ENOMEM, "out of memory");
  for (char *d = copy; d && rc == 0;) {
    char *end = strchr(d, ':');
    if (end)
      *end = '\0';
    /* Only reached when unsafe: an empty entry means ".", as in PATH. */
    rc = each(user, *d ? d : ".");
    d = end ? end + 1 : NULL;
  }
  free(copy);
  return rc == 0 ? each(user, LK_PLUGINDIR) : rc;
}

typedef struct search {
  const char *name;
  char tried[1536];
  size_t used;
  char *found;
} search;

static int try_dir(void *user, const char *dir) {
  search *s = user;
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
  int rc = each_dir(try_dir, &s);
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
  dlclose(p->handle);
  free(p->path);
  free(p);
}

const lk_descriptor *lk_plugin_desc(const lk_plugin *p) {
  return &p->desc;
}

const char *lk_plugin_path(const lk_plugin *p) {
  return p->path;
}

unsigned lk__plugin_minor(const lk_plugin *p) {
  return p->desc.abi_version & 0xffff;
}

const char *lk_plugin_kinds(const lk_plugin *p, char *buf, size_t len) {
  const lk_descriptor *d = &p->desc;
  const struct {
    const void *ops;
    const char *name;
  } kinds[] = {{d->step, "step"},           {d->backward, "backward"},
               {d->zero_grad, "zero_grad"}, {d->optimizer, "optimizer"},
               {d->profiler, "profiler"},   {d->data, "data"},
               {d->strategy, "strategy"},   {d->callback, "callback"},
               {d->scheduler, "scheduler"}, {d->precision, "precision"}};
  size_t used = 0;
  if (len)
    buf[0] = '\0';
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    if (!kinds[i].ops)
      continue;
    int w = snprintf(buf + used, len - used, "%s%s", used ? "," : "",
                     kinds[i].name);
    if (w < 0 || (size_t)w >= len - used)
      break;
    used += (size_t)w;
  }
  return buf;
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

static int scan_dir(void *user, const char *dir) {
  scan *s = user;
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
  int rc = each_dir(scan_dir, &s);
  for (size_t i = 0; i < s.n_seen; i++)
    free(s.seen[i]);
  free(s.seen);
  return rc;
}
