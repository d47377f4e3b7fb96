/* The plugin search path: which directories a plugin name is looked up in,
 * in which order, and where each comes from.
 *
 * 1. Each directory of LOOPKIT_PLUGIN_PATH (colon separated, every entry
 *    absolute unless LOOPKIT_ALLOW_UNSAFE_PLUGINS=1), and right after an
 *    entry D its libtool subdirectory D/.libs when there is one: libtool
 *    builds a plugins/NAME.la next to plugins/.libs/NAME.so, so
 *    LOOPKIT_PLUGIN_PATH=$PWD/plugins in a build tree finds what was built.
 * 2. For the loopkit program of a build tree only (not installed yet), the
 *    plugins of that build tree. The build directory is compiled in, and
 *    used only when /proc/self/exe really lies in it (both resolved): an
 *    installed program, which libtool relinked and copied elsewhere, never
 *    looks there.
 * 3. The installed plugin directory: $(pkglibdir) as it lies next to the
 *    libloopkit.so this process loaded (LIBDIR/loopkit), when there is one,
 *    so that an installed tree works wherever it lands (make install
 *    prefix=DIR on a tree configured for another prefix, a copied tree);
 *    else $(pkglibdir) as configured (compiled in).
 *
 * Nothing here opens a plugin: loader.c checks every file it finds
 * (owner, mode, every directory up to /, symbolic links) the same way,
 * whichever directory it came from. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loader.h"

#ifndef LK_PLUGINDIR
#define LK_PLUGINDIR "/usr/local/lib/loopkit"
#endif
#ifndef LK_PLUGINDIR_NAME /* $(pkglibdir) within $(libdir) */
#define LK_PLUGINDIR_NAME "loopkit"
#endif

static char installed[PATH_MAX];
static pthread_once_t installed_once = PTHREAD_ONCE_INIT;

static bool is_dir(const char *path);

/* LIBDIR/loopkit beside the libloopkit.so this code is in, if it is a
 * directory; else the configured one. */
static void find_installed(void) {
  Dl_info info;
  char lib[PATH_MAX];
  snprintf(installed, sizeof installed, "%s", LK_PLUGINDIR);
  if (!dladdr((void *)find_installed, &info) || !info.dli_fname ||
      !realpath(info.dli_fname, lib))
    return;
  char *slash = strrchr(lib, '/');
  if (!slash)
    return;
  *slash = '\0';
  char dir[PATH_MAX];
  int n = snprintf(dir, sizeof dir, "%s/" LK_PLUGINDIR_NAME, lib);
  if (n > 0 && (size_t)n < sizeof dir && is_dir(dir))
    memcpy(installed, dir, (size_t)n + 1);
}

const char *lk_plugin_dir(void) {
  pthread_once(&installed_once, find_installed);
  return installed;
}

bool lk__unsafe_plugins(void) {
  const char *v = getenv(LK__UNSAFE_ENV);
  return v && strcmp(v, "1") == 0;
}

/* The search path's entries must be absolute: a relative one (or an empty
 * one, which means ".") would find what the current directory holds. */
static int check_search_path(const char *env) {
  for (const char *p = env;;) {
    const char *end = strchr(p, ':');
    int len = (int)(end ? (size_t)(end - p) : strlen(p));
    if (len == 0)
      return lk__err(LK_ELOAD,
                     "refusing LOOPKIT_PLUGIN_PATH=\"%s\": it has an empty "
                     "entry (a leading, trailing or doubled ':'), which "
                     "means the current directory, and the current directory "
                     "is never searched; remove it, or set " LK__UNSAFE_ENV
                     "=1",
                     env);
    if (*p != '/')
      return lk__err(LK_ELOAD,
                     "refusing LOOPKIT_PLUGIN_PATH entry \"%.*s\": relative "
                     "directories are not searched, as what they hold "
                     "depends on the current directory; use an absolute "
                     "directory, or set " LK__UNSAFE_ENV "=1",
                     len, p);
    if (!end)
      return 0;
    p = end + 1;
  }
}

/* The build tree's plugin directory when this process runs the loopkit
 * program of that build tree, else NULL. */
static const char *build_tree_dir(void) {
#if defined(LK_BUILD_EXEDIR) && defined(LK_BUILD_PLUGINDIR)
  char exe[PATH_MAX], built[PATH_MAX];
  if (!realpath("/proc/self/exe", exe) || !realpath(LK_BUILD_EXEDIR, built))
    return NULL;
  char *slash = strrchr(exe, '/');
  if (!slash)
    return NULL;
  *slash = '\0';
  return strcmp(exe, built) == 0 ? LK_BUILD_PLUGINDIR : NULL;
#else
  return NULL;
#endif
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

/* Entry D of LOOPKIT_PLUGIN_PATH, then D/.libs if it is a directory. */
static int env_entry(lk__dir_fn each, void *user, const char *d) {
  int rc = each(user, d, "LOOPKIT_PLUGIN_PATH");
  if (rc != 0 || ends_with(d, "/.libs") || strcmp(d, ".libs") == 0)
    return rc;
  char *libs = lk__asprintf("%s/.libs", d);
  if (!libs)
    return lk__err(LK_ENOMEM, "out of memory");
  if (is_dir(libs))
    rc = each(user, libs, "LOOPKIT_PLUGIN_PATH, libtool's .libs of the entry");
  free(libs);
  return rc;
}

int lk__search_dirs(lk__dir_fn each, void *user) {
  const char *env = getenv("LOOPKIT_PLUGIN_PATH");
  if (env && !*env)
    env = NULL; /* set but empty: no directories, not the current one */
  int rc = env && !lk__unsafe_plugins() ? check_search_path(env) : 0;
  if (rc != 0)
    return rc;
  char *copy = env ? lk__strdup(env) : NULL;
  if (env && !copy)
    return lk__err(LK_ENOMEM, "out of memory");
  bool build_listed = false;
  const char *build = build_tree_dir();
  for (char *d = copy; d && rc == 0;) {
    char *end = strchr(d, ':');
    if (end)
      *end = '\0';
    /* Only reached when unsafe: an empty entry means ".", as in PATH. */
    const char *dir = *d ? d : ".";
    build_listed |= build && strcmp(dir, build) == 0;
    rc = env_entry(each, user, dir);
    d = end ? end + 1 : NULL;
  }
  free(copy);
  if (rc == 0 && build && !build_listed)
    rc = each(user, build, "the build tree this loopkit runs from");
  return rc == 0 ? each(user, lk_plugin_dir(), "the installed plugin directory")
                 : rc;
}

/* ---- lk_plugin_search_dirs: the path as loopkit plugins explains it ---- */

typedef struct explain {
  int (*each)(void *user, const char *dir, const char *source,
              const char *skipped);
  void *user;
} explain;

/* Why DIR gives no plugin (into BUF), or NULL when it holds a NAME.so. */
static const char *why_empty(const char *dir, char *buf, size_t len) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT)
      return "no such directory";
    if (errno == ENOTDIR)
      return "not a directory";
    snprintf(buf, len, "cannot read it: %s", strerror(errno));
    return buf;
  }
  bool any = false;
  for (struct dirent *e; !any && (e = readdir(d));)
    any = strlen(e->d_name) > 3 && ends_with(e->d_name, ".so");
  closedir(d);
  if (any)
    return NULL;
  LK_UNUSED(buf);
  LK_UNUSED(len);
  return "holds no NAME.so file";
}

static int explain_dir(void *user, const char *dir, const char *source) {
  explain *x = user;
  char buf[256];
  return x->each(x->user, dir, source, why_empty(dir, buf, sizeof buf));
}

int lk_plugin_search_dirs(int (*each)(void *user, const char *dir,
                                      const char *source, const char *skipped),
                          void *user) {
  if (!each)
    return lk__err(LK_EINVAL, "lk_plugin_search_dirs: EACH is NULL");
  explain x = {each, user};
  return lk__search_dirs(explain_dir, &x);
}
