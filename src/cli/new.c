/* loopkit new NAME --kind KIND: a directory NAME/ to start a plugin from,
 * with NAME.c (a commented plugin of that kind that implements every one
 * of its entries), a Makefile that builds NAME.so with pkg-config loopkit
 * alone, NAME.ini, a config that trains with it and bundled plugins, a
 * README.md, and the data file the config reads if it reads one. The
 * files come from templates/ (new_templates.h).
 *
 * Nothing is ever overwritten: NAME must not exist, every file is created
 * with O_EXCL through a descriptor of the directory we made (so that
 * whatever is renamed into NAME's place meanwhile is not written into),
 * and a failure part-way removes what was created. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "new_templates.h"

/* Long enough for any real name, short enough that "NAME.momentum.x" and
 * the like stay far from the host's limits. */
#define NAME_MAX_LEN 64

static void usage(FILE *f) {
  fprintf(f,
          "usage: loopkit new NAME --kind KIND\n"
          "\n"
          "Writes a new directory NAME/ to start a plugin from:\n"
          "  NAME.c      a plugin of that kind, every entry implemented and\n"
          "              commented: what it gets, when it runs, who owns "
          "what\n"
          "  Makefile    builds NAME.so with nothing but pkg-config loopkit\n"
          "  NAME.ini    a config that trains with it and bundled plugins\n"
          "  README.md   how to build, train, inspect and go on\n"
          "  *.csv       the data that config reads, if it reads a file\n"
          "then: cd NAME && make && loopkit train NAME.ini\n"
          "\n"
          "KIND is one of:\n");
  for (const cli_new_kind *k = cli_new_kinds; k->kind; k++)
    fprintf(f, "  %-10s %s\n", k->kind, k->summary);
  fprintf(f,
          "\n"
          "NAME is a C identifier ([A-Za-z_][A-Za-z0-9_]*, at most %d "
          "characters):\n"
          "the plugin's name, its file and its config section. Nothing that\n"
          "exists is overwritten. Exit status: 0 written, 1 a file could not\n"
          "be written (nothing is left behind), 2 usage error.\n",
          NAME_MAX_LEN);
}

/* "step, optimizer, ...": every kind, for messages. */
static const char *kind_list(void) {
  static char list[256];
  size_t used = 0;
  for (const cli_new_kind *k = cli_new_kinds; k->kind; k++) {
    int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                     k->kind);
    if (w < 0 || (size_t)w >= sizeof list - used)
      break;
    used += (size_t)w;
  }
  return list;
}

static const cli_new_kind *find_kind(const char *name) {
  if (strcmp(name, "layer") == 0) /* as one says it: a layer, of kind layers */
    name = "layers";
  for (const cli_new_kind *k = cli_new_kinds; k->kind; k++)
    if (strcmp(k->kind, name) == 0)
      return k;
  return NULL;
}

/* A plugin name ([A-Za-z0-9_-]+) that is also a C identifier, as the
 * descriptor, the file and the section all carry it. */
static bool valid_name(const char *name) {
  size_t len = strlen(name);
  if (len == 0 || len > NAME_MAX_LEN ||
      !((name[0] >= 'a' && name[0] <= 'z') ||
        (name[0] >= 'A' && name[0] <= 'Z') || name[0] == '_'))
    return false;
  for (const char *p = name; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

/* What a template's @WORD@ marks stand for. */
typedef struct marks {
  const char *name, *kind, *summary;
} marks;

/* Puts TEXT out with every @NAME@, @KIND@ and @SUMMARY@ replaced. */
static void put_expanded(FILE *f, const char *text, const marks *m) {
  const struct {
    const char *mark, *value;
  } subs[] = {
      {"@NAME@", m->name}, {"@KIND@", m->kind}, {"@SUMMARY@", m->summary}};
  while (*text) {
    const char *at = strchr(text, '@');
    if (!at) {
      fputs(text, f);
      return;
    }
    fwrite(text, 1, (size_t)(at - text), f);
    size_t i = 0, n = sizeof subs / sizeof subs[0];
    while (i < n && strncmp(at, subs[i].mark, strlen(subs[i].mark)) != 0)
      i++;
    if (i < n) {
      fputs(subs[i].value, f);
      text = at + strlen(subs[i].mark);
    } else {
      fputc('@', f);
      text = at + 1;
    }
  }
}

/* A template's lines, expanded, in a new string of *LEN bytes (NULL: out
 * of memory). */
static char *expand_text(const cli_new_template *t, const marks *m,
                         size_t *len) {
  char *out = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&out, &size);
  if (!f)
    return NULL;
  for (const char *const *line = t->lines; *line; line++) {
    put_expanded(f, *line, m);
    fputc('\n', f);
  }
  if (fclose(f) != 0) {
    free(out);
    return NULL;
  }
  *len = size;
  return out;
}

/* One file to write: its name in the project (@NAME@ expanded) and the
 * template it is written from. */
typedef struct project_file {
  char name[NAME_MAX_LEN + 16];
  const cli_new_template *from;
} project_file;

enum { MAX_FILES = 5 };

/* The files of KIND's project for NAME, in the order they are written:
 * the largest, NAME.c, last, so that a failure part-way has usually
 * written something to take back. Their number, or -1 when a template is
 * missing (a build that lost one: named on stderr). *CONFIG gets the
 * config's template. */
static int project_files(const cli_new_kind *kind, const char *name,
                         project_file files[MAX_FILES],
                         const cli_new_template **config) {
  char ini[64], c[64];
  snprintf(ini, sizeof ini, "%s.ini", kind->kind);
  snprintf(c, sizeof c, "%s.c", kind->kind);
  const struct {
    const char *template, *suffix; /* the file is NAME + suffix, or as is */
    bool named;
  } plan[MAX_FILES] = {{"project.mk", "Makefile", false},
                       {"project.md", "README.md", false},
                       {ini, ".ini", true},
                       {kind->data, kind->data, false},
                       {c, ".c", true}};
  int n = 0;
  for (size_t i = 0; i < MAX_FILES; i++) {
    if (!plan[i].template)
      continue;
    const cli_new_template *t = cli_new_template_find(plan[i].template);
    if (!t) {
      cli_error("new: this loopkit was built without the template %s of "
                "kind %s",
                plan[i].template, kind->kind);
      return -1;
    }
    snprintf(files[n].name, sizeof files[n].name, "%s%s",
             plan[i].named ? name : "", plan[i].suffix);
    files[n++].from = t;
    if (plan[i].template == ini)
      *config = t;
  }
  return n;
}

/* Creates FILE in directory DFD, which must not hold it, with LEN bytes of
 * TEXT. On failure, errno says why and *CREATED whether the file exists
 * (partly written) for the caller to remove. */
static int write_new(int dfd, const char *file, const char *text, size_t len,
                     bool *created) {
  *created = false;
  int fd = openat(dfd, file,
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return -1;
  *created = true;
  while (len > 0) {
    ssize_t w = write(fd, text, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      int err = w < 0 ? errno : EIO;
      close(fd);
      errno = err;
      return -1;
    }
    text += w;
    len -= (size_t)w;
  }
  return close(fd);
}

/* Takes back what write_files made: the first N of FILES, in DFD, and the
 * directory DIR. */
static void remove_made(int dfd, const char *dir, const project_file *files,
                        size_t n) {
  for (size_t i = n; i-- > 0;)
    unlinkat(dfd, files[i].name, 0);
  close(dfd);
  rmdir(dir);
}

/* The directory NAME and the N FILES in it. */
static int write_files(const char *name, const project_file *files, size_t n,
                       const marks *m) {
  /* 0755, never group-writable whatever the umask (which only takes bits
   * away): loopkit refuses a plugin whose directory others can write, and
   * make puts NAME.so here. */
  if (mkdir(name, 0755) != 0) {
    if (errno == EEXIST) {
      cli_error("new: %s already exists; nothing was written (loopkit new "
                "never overwrites: choose another NAME, or remove %s)",
                name, name);
      return EXIT_USAGE;
    }
    cli_error("new: cannot create directory %s: %s", name, strerror(errno));
    return EXIT_FAILED;
  }
  int dfd = open(name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    cli_error("new: cannot use directory %s: %s", name, strerror(errno));
    rmdir(name);
    return EXIT_FAILED;
  }
  size_t n_made = 0;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    size_t len = 0;
    char *text = expand_text(files[i].from, m, &len);
    bool created = false;
    if (!text) {
      cli_error("new: out of memory");
      rc = EXIT_FAILED;
    } else if (write_new(dfd, files[i].name, text, len, &created) != 0) {
      cli_error("new: cannot write %s/%s: %s; nothing was left behind", name,
                files[i].name, strerror(errno));
      rc = EXIT_FAILED;
    }
    free(text);
    if (created)
      n_made = i + 1;
  }
  if (rc != 0)
    remove_made(dfd, name, files, n_made);
  else
    close(dfd);
  return rc;
}

/* S without the blanks around it, into BUF (cut to LEN - 1 bytes). */
static const char *trimmed(const char *s, size_t n, char *buf, size_t len) {
  while (n > 0 && (*s == ' ' || *s == '\t'))
    s++, n--;
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  if (n >= len)
    n = len - 1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  return buf;
}

/* The bundled plugin of CONFIG (a template's lines) that NAME would be
 * taken for, into BUF, or NULL: one that [plugins] names by a plain name
 * (a name with a '/' is a path: ./NAME.so), or zero, which a run loads as
 * zero_grad when [plugins] names none. The two would share the section
 * [NAME]. Read from the config itself, so that it holds for every
 * template as it is. */
static const char *clash(const cli_new_template *config, const char *name,
                         char *buf, size_t len) {
  bool in_plugins = false, zero_grad = false;
  for (const char *const *l = config->lines; *l; l++) {
    const char *line = *l, *end = line + strcspn(line, "#;");
    char key[64];
    trimmed(line, (size_t)(end - line), key, sizeof key);
    if (key[0] == '[') {
      in_plugins = strcmp(key, "[plugins]") == 0;
      continue;
    }
    const char *eq = memchr(line, '=', (size_t)(end - line));
    if (!in_plugins || !eq)
      continue;
    trimmed(line, (size_t)(eq - line), key, sizeof key);
    zero_grad = zero_grad || strcmp(key, "zero_grad") == 0;
    /* Values are comma lists (callbacks = a, b). */
    for (const char *v = eq + 1; v < end;) {
      size_t n = strcspn(v, ",#;");
      if (v + n > end)
        n = (size_t)(end - v);
      trimmed(v, n, buf, len);
      if (!strchr(buf, '/') && strcmp(buf, name) == 0)
        return buf;
      v += n + 1;
    }
  }
  if (!zero_grad && strcmp(name, "zero") == 0)
    return strcpy(buf, "zero");
  return NULL;
}

static void say_written(const char *name, const cli_new_kind *kind,
                        const project_file *files, size_t n) {
  printf("wrote %s/:", name);
  for (size_t i = 0; i < n; i++)
    printf(" %s", files[i].name);
  printf("\n%s.c is the %s to start from; build and train with it:\n"
         "  cd %s && make && loopkit train %s.ini\n",
         name, kind->kind, name, name);
}

int cli_new(int argc, char **argv) {
  const char *name = NULL, *kind_name = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    const char *value = NULL;
    if (!strcmp(a, "--kind")) {
      if (i + 1 >= argc) {
        cli_error("new: --kind needs a value; kinds: %s", kind_list());
        return EXIT_USAGE;
      }
      value = argv[++i];
    } else if (!strncmp(a, "--kind=", 7)) {
      value = a + 7;
    } else if (a[0] == '-' && a[1]) {
      cli_error("new: unknown option \"%s\"; usage: loopkit new NAME --kind "
                "KIND (see loopkit new --help)",
                a);
      return EXIT_USAGE;
    } else if (name) {
      cli_error("new: more than one NAME (\"%s\" and \"%s\")", name, a);
      return EXIT_USAGE;
    } else {
      name = a;
    }
    if (value && kind_name) {
      cli_error("new: --kind given twice (\"%s\" and \"%s\")", kind_name,
                value);
      return EXIT_USAGE;
    }
    if (value)
      kind_name = value;
  }
  if (!name) {
    cli_error("new: no NAME; usage: loopkit new NAME --kind KIND (see "
              "loopkit new --help)");
    return EXIT_USAGE;
  }
  if (!kind_name) {
    cli_error("new: --kind KIND is required; kinds: %s", kind_list());
    return EXIT_USAGE;
  }
  const cli_new_kind *kind = find_kind(kind_name);
  if (!kind) {
    cli_error("new: unknown kind \"%s\"; kinds: %s", kind_name, kind_list());
    return EXIT_USAGE;
  }
  if (!valid_name(name)) {
    cli_error("new: invalid NAME \"%s\": it must be a C identifier, "
              "[A-Za-z_][A-Za-z0-9_]*, of at most %d characters (it names "
              "the plugin, its file and its config section)",
              name, NAME_MAX_LEN);
    return EXIT_USAGE;
  }
  project_file files[MAX_FILES];
  const cli_new_template *config = NULL;
  int n = project_files(kind, name, files, &config);
  if (n < 0)
    return EXIT_FAILED;
  char taken[NAME_MAX_LEN + 1];
  if (clash(config, name, taken, sizeof taken)) {
    cli_error("new: NAME \"%s\" is taken: %s.ini also loads the bundled "
              "plugin %s, and the two would share the section [%s]; choose "
              "another NAME",
              name, name, taken, taken);
    return EXIT_USAGE;
  }
  marks m = {name, kind->kind, kind->summary};
  int rc = write_files(name, files, (size_t)n, &m);
  if (rc == 0)
    say_written(name, kind, files, (size_t)n);
  return rc;
}
