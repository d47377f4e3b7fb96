/* The loader: names refused before the file system is touched, the search
 * path, each way a shared object can fail to be a plugin, and the security
 * checks (who may write a plugin and its directories, relative search path
 * entries, the current directory, every symlink of a chain) and the bounds
 * on what the host reads from a descriptor. Runs with LOOPKIT_PLUGIN_PATH
 * and LK_BROKEN_DIR from the test environment. */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <loopkit/loopkit.h>

static char broken[4096];

static const char *broken_path(const char *name) {
  const char *dir = getenv("LK_BROKEN_DIR");
  snprintf(broken, sizeof broken, "%s/%s.so", dir ? dir : "tests/broken/.libs",
           name);
  return broken;
}

static void test_bad_names(void **state) {
  (void)state;
  const char *bad[] = {"", "a b", "x.so", "..", "sgd;rm", "tab\t"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lk_plugin *p = NULL;
    int rc = lk_plugin_open(bad[i], &p);
    assert_int_equal(rc, LK_EINVAL);
    assert_null(p);
    if (*bad[i])
      assert_non_null(strstr(lk_last_error(), "[A-Za-z0-9_-]+"));
  }
}

static void test_not_found_lists_paths(void **state) {
  (void)state;
  const char *saved = getenv("LOOPKIT_PLUGIN_PATH");
  char *copy = saved ? strdup(saved) : NULL;
  setenv("LOOPKIT_PLUGIN_PATH", "/nonexistent/one:/nonexistent/two", 1);
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("nosuchplugin", &p), LK_ENOTFOUND);
  const char *msg = lk_last_error();
  assert_non_null(strstr(msg, "plugin nosuchplugin not found"));
  assert_non_null(strstr(msg, "/nonexistent/one/nosuchplugin.so"));
  assert_non_null(strstr(msg, "/nonexistent/two/nosuchplugin.so"));
  assert_non_null(strstr(msg, lk_plugin_dir()));
  if (copy) {
    setenv("LOOPKIT_PLUGIN_PATH", copy, 1);
    free(copy);
  }
}

static void test_missing_descriptor(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  const char *path = broken_path("nodesc");
  assert_int_equal(lk_plugin_open(path, &p), LK_ELOAD);
  assert_non_null(strstr(lk_last_error(), "has no descriptor"));
  assert_non_null(strstr(lk_last_error(), LK_PLUGIN_SYMBOL));
  assert_non_null(strstr(lk_last_error(), path));
  /* dlopen is given /proc/self/fd/N; messages name the path */
  assert_null(strstr(lk_last_error(), "/proc/self/fd"));
}

static void test_abi_mismatch(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open(broken_path("badabi"), &p), LK_EABI);
  assert_non_null(strstr(lk_last_error(), "ABI 99.3"));
  assert_non_null(strstr(lk_last_error(), "ABI 1.7"));
  assert_int_equal(lk_plugin_open(broken_path("badsize"), &p), LK_EABI);
  assert_non_null(strstr(lk_last_error(), "descriptor size 8"));
}

/* A plugin built for an older minor version loads; what its minor did not
 * define reads as absent. */
static void test_older_minor_loads(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("abi10", &p), 0);
  assert_int_equal(lk_plugin_desc(p)->abi_version, 1u << 16);
  assert_null(lk_plugin_desc(p)->scheduler);
  char kinds[128];
  assert_string_equal(lk_plugin_kinds(p, kinds, sizeof kinds), "optimizer");
  lk_plugin_close(p);
}

static void test_undefined_symbol(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  const char *path = broken_path("undefsym");
  assert_int_equal(lk_plugin_open(path, &p), LK_ELOAD);
  /* dlerror's own text, copied */
  assert_non_null(strstr(lk_last_error(), "lk_no_such_function_anywhere"));
  assert_non_null(strstr(lk_last_error(), path));
  assert_null(strstr(lk_last_error(), "/proc/self/fd"));
}

/* Descriptors the host must refuse without following them (see
 * tests/broken): each message names the plugin, its path and the fault. */
static void test_malformed_descriptors(void **state) {
  (void)state;
  const char *cases[][2] = {
      {"unterminated", "option 3 has a name outside the plugin"},
      {"endofseg", "options table has no terminator: its segment ends after "
                   "4 entries, none with a NULL name"},
      {"outside", "summary is not a string in the plugin (it points outside "
                  "the plugin)"},
      {"badtype", "option 2 (beta) has an unknown type 99"},
      {"badoptname", "option 1 has an invalid name \"learning rate\": option "
                     "names are [A-Za-z0-9_]+"},
      {"manyopts", "options table has more than 256 options"},
      {"badops", "zero_grad ops entry zero_grad points outside any loaded "
                 "code"},
      {"opsoutside", "its step ops table is not in the plugin"},
  };
  for (int unsafe = 0; unsafe < 2; unsafe++) {
    /* not a trust check: LOOPKIT_ALLOW_UNSAFE_PLUGINS=1 changes nothing */
    if (unsafe)
      setenv("LOOPKIT_ALLOW_UNSAFE_PLUGINS", "1", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      lk_plugin *p = NULL;
      const char *path = broken_path(cases[i][0]);
      char want[16384];
      snprintf(want, sizeof want, "plugin %s (%s): %s", path, path,
               cases[i][1]);
      assert_int_equal(lk_plugin_open(path, &p), LK_ELOAD);
      assert_null(p);
      if (!strstr(lk_last_error(), want))
        fail_msg("message \"%s\" lacks \"%s\"", lk_last_error(), want);
    }
  }
  unsetenv("LOOPKIT_ALLOW_UNSAFE_PLUGINS");
}

/* dlopen knows objects by name: /proc/self/fd/N must never give a plugin
 * an object loaded earlier through a descriptor with the same number. */
static void test_descriptor_numbers_reused(void **state) {
  (void)state;
  lk_plugin *p1 = NULL, *p2 = NULL, *p3 = NULL;
  assert_int_equal(lk_plugin_open("probe", &p1), 0);
  char path[4096];
  snprintf(path, sizeof path, "%s", lk_plugin_path(p1));
  /* the same file again: one object, known by both descriptors' names */
  assert_int_equal(lk_plugin_open(path, &p2), 0);
  assert_ptr_equal(lk_plugin_desc(p1)->step, lk_plugin_desc(p2)->step);
  lk_plugin_close(p2); /* its number is free, the object still loaded */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(lk_plugin_open("tracecb", &p3), 0);
    assert_string_equal(lk_plugin_desc(p3)->name, "tracecb");
    lk_plugin_close(p3);
    assert_int_equal(lk_plugin_open("abi10", &p3), 0);
    assert_string_equal(lk_plugin_desc(p3)->name, "abi10");
    lk_plugin_close(p3);
  }
  assert_string_equal(lk_plugin_desc(p1)->name, "probe");
  lk_plugin_close(p1);
  /* and once every handle is closed, the numbers are free again */
  assert_int_equal(lk_plugin_open("tracecb", &p3), 0);
  assert_string_equal(lk_plugin_desc(p3)->name, "tracecb");
  lk_plugin_close(p3);
  assert_int_equal(lk_plugin_open("probe", &p1), 0);
  assert_string_equal(lk_plugin_desc(p1)->name, "probe");
  lk_plugin_close(p1);
}

static void test_missing_file_by_path(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("/nonexistent/x.so", &p), LK_ELOAD);
  assert_non_null(strstr(lk_last_error(), "/nonexistent/x.so"));
}

static void test_open_by_name(void **state) {
  (void)state;
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("probe", &p), 0);
  char kinds[128];
  assert_string_equal(lk_plugin_kinds(p, kinds, sizeof kinds),
                      "step,backward,zero_grad,optimizer,callback");
  assert_string_equal(lk_plugin_desc(p)->name, "probe");
  assert_non_null(strstr(lk_plugin_path(p), "/probe.so"));
  lk_plugin_close(p);
}

typedef struct seen {
  int probe, zero, total;
} seen;

static int count(void *user, const char *name, const char *path) {
  seen *s = user;
  (void)path;
  s->total++;
  s->probe += strcmp(name, "probe") == 0;
  s->zero += strcmp(name, "zero") == 0;
  return 0;
}

static void test_scan_first_wins(void **state) {
  (void)state;
  const char *path = getenv("LOOPKIT_PLUGIN_PATH");
  assert_non_null(path);
  char twice[8192];
  snprintf(twice, sizeof twice, "%s:%s", path, path);
  char *saved = strdup(path);
  setenv("LOOPKIT_PLUGIN_PATH", twice, 1);
  seen s = {0};
  assert_int_equal(lk_plugin_scan(count, &s), 0);
  assert_int_equal(s.probe, 1);
  assert_int_equal(s.zero, 1);
  assert_true(s.total >= 4);
  setenv("LOOPKIT_PLUGIN_PATH", saved, 1);
  free(saved);
}

/* ---- Security: each test gets a fresh directory under $TMPDIR (or /tmp,
 * sticky and root's) and the test environment back afterwards. ---- */

#define UNSAFE "LOOPKIT_ALLOW_UNSAFE_PLUGINS"

static char base[4096];  /* the test's directory, symlinks resolved */
static char *saved_path; /* LOOPKIT_PLUGIN_PATH as make check set it */
static char *saved_cwd;
static char probe_so[4096]; /* a working plugin to copy */

/* BASE/REL, in one of a few rotating buffers. */
static const char *at(const char *rel) {
  static char buf[8][4096];
  static int next;
  char *b = buf[next++ % 8];
  int n = snprintf(b, sizeof buf[0], "%s/%s", base, rel);
  assert_true(n > 0 && (size_t)n < sizeof buf[0]);
  return b;
}

static void make_dir(const char *rel, mode_t mode) {
  assert_int_equal(mkdir(at(rel), 0700), 0);
  assert_int_equal(chmod(at(rel), mode), 0); /* whatever the umask */
}

/* Copies the probe plugin to BASE/REL with MODE. */
static void copy_probe(const char *rel, mode_t mode) {
  FILE *in = fopen(probe_so, "rb"), *out = fopen(at(rel), "wb");
  assert_non_null(in);
  assert_non_null(out);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    assert_int_equal(fwrite(buf, 1, n, out), n);
  fclose(in);
  assert_int_equal(fclose(out), 0);
  assert_int_equal(chmod(at(rel), mode), 0);
}

static void set_path(const char *value) {
  assert_int_equal(setenv("LOOPKIT_PLUGIN_PATH", value, 1), 0);
}

/* Loads NAME and closes it; fails the test unless that worked. */
static void loads(const char *name) {
  lk_plugin *p = NULL;
  int rc = lk_plugin_open(name, &p);
  if (rc != 0)
    fail_msg("%s: %s", name, lk_last_error());
  assert_string_equal(lk_plugin_desc(p)->name, "probe");
  lk_plugin_close(p);
}

/* Refuses NAME with LK_ELOAD and a message containing WANT. */
static void refused(const char *name, const char *want) {
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open(name, &p), LK_ELOAD);
  assert_null(p);
  if (!strstr(lk_last_error(), want))
    fail_msg("message \"%s\" lacks \"%s\"", lk_last_error(), want);
  assert_non_null(strstr(lk_last_error(), UNSAFE "=1"));
}

static int security_setup(void **state) {
  (void)state;
  if (!*probe_so) {
    lk_plugin *p = NULL;
    if (lk_plugin_open("probe", &p) != 0)
      return -1;
    snprintf(probe_so, sizeof probe_so, "%s", lk_plugin_path(p));
    lk_plugin_close(p);
  }
  const char *tmp = getenv("TMPDIR");
  char templ[4096];
  snprintf(templ, sizeof templ, "%s/lk-loader.XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(templ) || !realpath(templ, base))
    return -1;
  const char *path = getenv("LOOPKIT_PLUGIN_PATH");
  saved_path = path ? strdup(path) : NULL;
  saved_cwd = getcwd(NULL, 0);
  unsetenv(UNSAFE);
  return saved_cwd ? 0 : -1;
}

static int remove_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static int security_teardown(void **state) {
  (void)state;
  unsetenv(UNSAFE);
  if (saved_path)
    setenv("LOOPKIT_PLUGIN_PATH", saved_path, 1);
  else
    unsetenv("LOOPKIT_PLUGIN_PATH");
  int rc = chdir(saved_cwd);
  free(saved_path);
  free(saved_cwd);
  saved_path = saved_cwd = NULL;
  return nftw(base, remove_one, 16, FTW_DEPTH | FTW_PHYS) || rc ? -1 : 0;
}

/* The baseline: a plugin in a directory only we can write loads, by path
 * and by name, from under a sticky /tmp. */
static void test_safe_plugin_loads(void **state) {
  (void)state;
  make_dir("ok", 0755);
  copy_probe("ok/probe.so", 0755);
  loads(at("ok/probe.so"));
  set_path(at("ok"));
  loads("probe");
  assert_int_equal(chmod(at("ok/probe.so"), 0500),
                   0); /* read-only for us: fine too */
  loads("probe");
}

static void test_world_writable_file(void **state) {
  (void)state;
  make_dir("ww", 0755);
  copy_probe("ww/probe.so", 0757);
  set_path(at("ww"));
  char want[8192];
  snprintf(want, sizeof want,
           "refusing plugin probe: %s is writable by others (mode 0757), so "
           "they could change its code; fix with chmod go-w %s, or set "
           "LOOPKIT_ALLOW_UNSAFE_PLUGINS=1",
           at("ww/probe.so"), at("ww/probe.so"));
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("probe", &p), LK_ELOAD);
  assert_string_equal(lk_last_error(), want);
  /* by path, the same: the path is named once */
  refused(at("ww/probe.so"), "it is writable by others (mode 0757)");
  assert_int_equal(chmod(at("ww/probe.so"), 0666), 0);
  refused("probe", "is writable by group and others (mode 0666)");
}

static void test_group_writable_file(void **state) {
  (void)state;
  make_dir("gw", 0755);
  copy_probe("gw/probe.so", 0775);
  set_path(at("gw"));
  refused("probe", "gw/probe.so is writable by group (mode 0775)");
  assert_int_equal(chmod(at("gw/probe.so"), 0755), 0);
  loads("probe");
}

/* The plugin's own directory: no write for group or others, even sticky. */
static void test_writable_directory(void **state) {
  (void)state;
  make_dir("wd", 0777);
  copy_probe("wd/probe.so", 0755);
  set_path(at("wd"));
  char want[8192];
  snprintf(want, sizeof want,
           "refusing plugin probe (%s): its directory %s is writable by "
           "group and others (mode 0777), so they could replace the plugin; "
           "fix with chmod go-w %s, or set LOOPKIT_ALLOW_UNSAFE_PLUGINS=1",
           at("wd/probe.so"), at("wd"), at("wd"));
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("probe", &p), LK_ELOAD);
  assert_string_equal(lk_last_error(), want);
  assert_int_equal(chmod(at("wd"), 01777), 0);
  refused(at("wd/probe.so"), "its directory");
  refused(at("wd/probe.so"), "(mode 1777)");
  assert_int_equal(chmod(at("wd"), 0775), 0);
  refused("probe", "is writable by group (mode 0775)");
  assert_int_equal(chmod(at("wd"), 0755), 0);
  loads("probe");
}

/* Directories above: refused when writable by others unless sticky. */
static void test_writable_ancestor(void **state) {
  (void)state;
  make_dir("up", 0757);
  make_dir("up/mid", 0755);
  make_dir("up/mid/in", 0755);
  copy_probe("up/mid/in/probe.so", 0755);
  set_path(at("up/mid/in"));
  char want[8192];
  snprintf(want, sizeof want,
           "directory %s above it is writable by others (mode 0757) without "
           "the sticky bit, so they could replace the plugin",
           at("up"));
  refused("probe", want);
  assert_int_equal(chmod(at("up"), 01777), 0); /* like /tmp */
  loads("probe");
  /* Above the plugin's own directory only world-writable matters. */
  assert_int_equal(chmod(at("up/mid"), 0775), 0);
  loads("probe");
}

/* Owner root or us; testable only as root (make check runs as root). */
static void test_owner(void **state) {
  (void)state;
  if (geteuid() != 0)
    skip();
  make_dir("own", 0755);
  copy_probe("own/probe.so", 0755);
  set_path(at("own"));
  assert_int_equal(chown(at("own/probe.so"), 65534, (gid_t)-1), 0);
  refused("probe", "own/probe.so is owned by uid 65534, not by root or you "
                   "(uid 0), so that user could change its code; fix with "
                   "chown");
  assert_int_equal(chown(at("own/probe.so"), 0, (gid_t)-1), 0);
  loads("probe");
  /* a group other than root's is fine: only write access matters */
  assert_int_equal(chown(at("own/probe.so"), 0, 65534), 0);
  loads("probe");
  assert_int_equal(chown(at("own"), 65534, (gid_t)-1), 0);
  refused("probe", "its directory");
  refused("probe", "own is owned by uid 65534");
  assert_int_equal(chown(at("own"), 0, (gid_t)-1), 0);
  /* Above the plugin's own directory, ownership is not checked: checkouts
   * live in directories owned in many ways. */
  assert_int_equal(chown(base, 65534, (gid_t)-1), 0);
  loads("probe");
  assert_int_equal(chown(base, 0, (gid_t)-1), 0);
}

static void test_relative_entries(void **state) {
  (void)state;
  make_dir("ok", 0755);
  copy_probe("ok/probe.so", 0755);
  const char *rel[][2] = {{"plugins", "\"plugins\""},
                          {"./plugins", "\"./plugins\""},
                          {".", "\".\""},
                          {"OK:%s", "\"OK\""},
                          {"%s:rel/dir", "\"rel/dir\""}};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    char value[8192], want[256];
    snprintf(value, sizeof value, rel[i][0], at("ok"));
    set_path(value);
    snprintf(want, sizeof want,
             "refusing LOOPKIT_PLUGIN_PATH entry %s: relative directories "
             "are not searched",
             rel[i][1]);
    /* refused even though probe is in an absolute entry */
    refused("probe", want);
    seen s = {0};
    assert_int_equal(lk_plugin_scan(count, &s), LK_ELOAD);
    assert_int_equal(s.total, 0);
    assert_non_null(strstr(lk_last_error(), want));
  }
}

static void test_empty_entries(void **state) {
  (void)state;
  make_dir("ok", 0755);
  copy_probe("ok/probe.so", 0755);
  const char *forms[] = {":%s", "%s:", "%s::%s", ":", "%s:%s:"};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    char value[8192], want[8400];
    snprintf(value, sizeof value, forms[i], at("ok"), at("ok"));
    set_path(value);
    snprintf(want, sizeof want,
             "refusing LOOPKIT_PLUGIN_PATH=\"%s\": it has an empty entry (a "
             "leading, trailing or doubled ':'), which means the current "
             "directory, and the current directory is never searched",
             value);
    refused("probe", want);
    seen s = {0};
    assert_int_equal(lk_plugin_scan(count, &s), LK_ELOAD);
    assert_int_equal(s.total, 0);
  }
  set_path(""); /* set but empty: no directories at all, not an error */
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("probe", &p), LK_ENOTFOUND);
}

static int count_cwdonly(void *user, const char *name, const char *path) {
  seen *s = user;
  (void)path;
  s->total += strcmp(name, "cwdonly") == 0;
  return 0;
}

/* NAME.so in the current directory is never found by name; a path to it
 * is an explicit choice and loads. */
static void test_cwd_not_searched(void **state) {
  (void)state;
  make_dir("cwd", 0755);
  copy_probe("cwd/cwdonly.so", 0755);
  assert_int_equal(chdir(at("cwd")), 0);
  lk_plugin *p = NULL;
  const char *values[] = {"/nonexistent", "", NULL};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    if (values[i])
      set_path(values[i]);
    else
      unsetenv("LOOPKIT_PLUGIN_PATH");
    assert_int_equal(lk_plugin_open("cwdonly", &p), LK_ENOTFOUND);
    assert_null(strstr(lk_last_error(), "./cwdonly.so"));
    assert_null(strstr(lk_last_error(), at("cwd/cwdonly.so")));
  }
  seen s = {0};
  assert_int_equal(lk_plugin_scan(count_cwdonly, &s), 0);
  assert_int_equal(s.total, 0);
  loads("./cwdonly.so");
}

static void test_symlinks(void **state) {
  (void)state;
  make_dir("ok", 0755);
  make_dir("ww", 0777);
  make_dir("links", 0755);
  make_dir("wlinks", 0777);
  copy_probe("ok/probe.so", 0755);
  copy_probe("ww/probe.so", 0755);
  copy_probe("ok/wfile.so", 0757);
  /* a safe link to a plugin in an unsafe directory */
  assert_int_equal(symlink(at("ww/probe.so"), at("links/a.so")), 0);
  refused(at("links/a.so"), "its directory");
  refused(at("links/a.so"), at("ww"));
  /* an unsafe link (its directory) to a safe plugin */
  assert_int_equal(symlink(at("ok/probe.so"), at("wlinks/b.so")), 0);
  refused(at("wlinks/b.so"), at("wlinks"));
  /* the file named is the link's target */
  assert_int_equal(symlink("../ok/wfile.so", at("links/probe.so")), 0);
  set_path(at("links"));
  char want[8192];
  snprintf(want, sizeof want, "refusing plugin probe: %s is writable by others",
           at("ok/wfile.so"));
  refused("probe", want);
  /* a safe link to a safe plugin loads */
  assert_int_equal(symlink("../ok/probe.so", at("links/c.so")), 0);
  loads(at("links/c.so"));
  /* a directory named like a plugin */
  make_dir("dir.so", 0755);
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open(at("dir.so"), &p), LK_ELOAD);
  assert_non_null(strstr(lk_last_error(), "not a regular file"));
}

/* Every symlink of a chain is checked, not only the path as given and the
 * file it leads to: a link in a link's target, a link to a directory. */
static void test_symlink_chain(void **state) {
  (void)state;
  make_dir("ok", 0755);
  make_dir("links", 0755);
  make_dir("mid", 0777);
  copy_probe("ok/probe.so", 0755);
  /* links/a.so -> mid/b.so -> ok/probe.so, and anyone can repoint b.so */
  assert_int_equal(symlink("../ok/probe.so", at("mid/b.so")), 0);
  assert_int_equal(symlink("../mid/b.so", at("links/a.so")), 0);
  char want[8192];
  snprintf(want, sizeof want,
           "refusing plugin %s: directory %s holding symlink %s is writable "
           "by group and others (mode 0777), so they could repoint the link; "
           "fix with chmod go-w %s, or set LOOPKIT_ALLOW_UNSAFE_PLUGINS=1",
           at("links/a.so"), at("mid"), at("mid/b.so"), at("mid"));
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open(at("links/a.so"), &p), LK_ELOAD);
  assert_string_equal(lk_last_error(), want);
  assert_int_equal(chmod(at("mid"), 0755), 0);
  loads(at("links/a.so"));

  /* A link to a directory, in a sticky world-writable one: refused like a
   * plugin's own directory there, and through another link too. */
  make_dir("wdir", 01777);
  assert_int_equal(symlink(at("ok"), at("wdir/d")), 0); /* absolute */
  assert_int_equal(symlink("../wdir/d", at("links/e")), 0);
  snprintf(want, sizeof want, "directory %s holding symlink %s is writable",
           at("wdir"), at("wdir/d"));
  refused(at("wdir/d/probe.so"), want);
  refused(at("links/e/probe.so"), want);
  assert_int_equal(chmod(at("wdir"), 0755), 0);
  loads(at("wdir/d/probe.so"));
  loads(at("links/e/probe.so"));
  /* ".." after a link leaves the link's target, as in the kernel */
  loads(at("links/e/../ok/probe.so"));

  /* A directory above a link: writable by others without the sticky bit */
  make_dir("up", 0757);
  make_dir("up/in", 0755);
  assert_int_equal(symlink("../../ok/probe.so", at("up/in/c.so")), 0);
  assert_int_equal(symlink("../up/in/c.so", at("links/f.so")), 0);
  snprintf(want, sizeof want,
           "directory %s above symlink %s is writable by others (mode 0757) "
           "without the sticky bit, so they could repoint the link",
           at("up"), at("up/in/c.so"));
  refused(at("links/f.so"), want);

  /* A loop ends as the kernel ends it, and a dangling link in a chain
   * names where the chain broke. */
  assert_int_equal(symlink("l2.so", at("links/l1.so")), 0);
  assert_int_equal(symlink("l1.so", at("links/l2.so")), 0);
  assert_int_equal(lk_plugin_open(at("links/l1.so"), &p), LK_ELOAD);
  assert_non_null(strstr(lk_last_error(), at("links/l1.so")));
  assert_non_null(strstr(lk_last_error(), "Too many levels of symbolic links"));
  assert_int_equal(symlink("../nowhere/x.so", at("links/dangling.so")), 0);
  assert_int_equal(lk_plugin_open(at("links/dangling.so"), &p), LK_ELOAD);
  snprintf(want, sizeof want, "from %s: %s: No such file or directory",
           at("links/dangling.so"), at("nowhere"));
  assert_non_null(strstr(lk_last_error(), want));
  /* a link to a file that is not a plugin at all is named by its path */
  FILE *f = fopen(at("ok/text.so"), "w");
  assert_non_null(f);
  fputs("not an ELF file\n", f);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(chmod(at("ok/text.so"), 0644), 0);
  assert_int_equal(symlink("../ok/text.so", at("links/text.so")), 0);
  assert_int_equal(lk_plugin_open(at("links/text.so"), &p), LK_ELOAD);
  assert_non_null(strstr(lk_last_error(), at("links/text.so")));
  assert_null(strstr(lk_last_error(), "/proc/self/fd"));
}

/* A symlink anyone but root and us owns is refused wherever it is in the
 * chain; testable only as root. */
static void test_symlink_owner(void **state) {
  (void)state;
  if (geteuid() != 0)
    skip();
  make_dir("ok", 0755);
  make_dir("links", 0755);
  make_dir("mid", 0755);
  copy_probe("ok/probe.so", 0755);
  assert_int_equal(symlink("../ok/probe.so", at("links/probe.so")), 0);
  assert_int_equal(lchown(at("links/probe.so"), 65534, (gid_t)-1), 0);
  char want[8192];
  snprintf(want, sizeof want,
           "refusing plugin %s: symlink %s is owned by uid 65534, not by root "
           "or you (uid 0), so that user could repoint it; fix with chown -h",
           at("links/probe.so"), at("links/probe.so"));
  refused(at("links/probe.so"), want);
  set_path(at("links"));
  snprintf(want, sizeof want,
           "refusing plugin probe (%s): symlink %s is owned by uid 65534",
           at("links/probe.so"), at("links/probe.so"));
  refused("probe", want);
  /* in the middle of the chain */
  assert_int_equal(symlink("../ok/probe.so", at("mid/b.so")), 0);
  assert_int_equal(lchown(at("mid/b.so"), 65534, (gid_t)-1), 0);
  assert_int_equal(symlink("../mid/b.so", at("links/c.so")), 0);
  snprintf(want, sizeof want, "symlink %s is owned by uid 65534",
           at("mid/b.so"));
  refused(at("links/c.so"), want);
  assert_int_equal(lchown(at("mid/b.so"), 0, (gid_t)-1), 0);
  loads(at("links/c.so"));
}

/* LOOPKIT_ALLOW_UNSAFE_PLUGINS=1, exactly, lets everything through. */
static void test_unsafe_override(void **state) {
  (void)state;
  make_dir("ww", 0777);
  copy_probe("ww/probe.so", 0777);
  make_dir("rel", 0755);
  copy_probe("rel/probe.so", 0755);
  copy_probe("cwdonly.so", 0755);
  assert_int_equal(chdir(base), 0);
  const char *not_one[] = {"0", "yes", "true", "", " 1", "1 ", "11"};
  for (size_t i = 0; i < sizeof not_one / sizeof not_one[0]; i++) {
    setenv(UNSAFE, not_one[i], 1);
    refused(at("ww/probe.so"), "writable by group and others");
  }
  setenv(UNSAFE, "1", 1);
  loads(at("ww/probe.so"));
  set_path(at("ww"));
  loads("probe");
  /* relative entries are searched, from the current directory */
  set_path("rel");
  lk_plugin *p = NULL;
  assert_int_equal(lk_plugin_open("probe", &p), 0);
  assert_string_equal(lk_plugin_path(p), "rel/probe.so");
  lk_plugin_close(p);
  /* an empty entry means the current directory, as in PATH */
  set_path(":/nonexistent");
  assert_int_equal(lk_plugin_open("cwdonly", &p), 0);
  assert_string_equal(lk_plugin_path(p), "./cwdonly.so");
  lk_plugin_close(p);
  unsetenv(UNSAFE);
  refused("cwdonly", "empty entry");
}

#define SECURITY(t)                                                            \
  cmocka_unit_test_setup_teardown(t, security_setup, security_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_names),
      cmocka_unit_test(test_not_found_lists_paths),
      cmocka_unit_test(test_missing_descriptor),
      cmocka_unit_test(test_abi_mismatch),
      cmocka_unit_test(test_older_minor_loads),
      cmocka_unit_test(test_undefined_symbol),
      cmocka_unit_test(test_malformed_descriptors),
      cmocka_unit_test(test_descriptor_numbers_reused),
      cmocka_unit_test(test_missing_file_by_path),
      cmocka_unit_test(test_open_by_name),
      cmocka_unit_test(test_scan_first_wins),
      SECURITY(test_safe_plugin_loads),
      SECURITY(test_world_writable_file),
      SECURITY(test_group_writable_file),
      SECURITY(test_writable_directory),
      SECURITY(test_writable_ancestor),
      SECURITY(test_owner),
      SECURITY(test_relative_entries),
      SECURITY(test_empty_entries),
      SECURITY(test_cwd_not_searched),
      SECURITY(test_symlinks),
      SECURITY(test_symlink_chain),
      SECURITY(test_symlink_owner),
      SECURITY(test_unsafe_override),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
