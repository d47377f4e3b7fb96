/* loopkit new NAME --kind KIND: a directory NAME/ to start a plugin from,
 * with NAME.c (a commented plugin of that kind that implements every one
 * of its entries), a Makefile that builds NAME.so with pkg-config loopkit
 * alone, and NAME.ini, a config that trains with it and bundled plugins.
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
          "  data.csv    the data that config reads (step and callback "
          "only)\n"
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

/* Puts TEXT out with every "@NAME@" replaced by NAME. */
static void put_expanded(FILE *f, const char *text, const char *name) {
  static const char mark[] = "@NAME@";
  for (const char *at; (at = strstr(text, mark)); text = at + sizeof mark - 1) {
    fwrite(text, 1, (size_t)(at - text), f);
    fputs(name, f);
  }
  fputs(text, f);
}

/* FILE's name or text for plugin NAME, in a new string (NULL: out of
 * memory). */
static char *expand(const cli_new_file *file, bool text, const char *name,
                    size_t *len) {
  char *out = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&out, &size);
  if (!f)
    return NULL;
  if (!text) {
    put_expanded(f, file->name, name);
  } else if (file->lines) {
    for (const char *const *line = file->lines; *line; line++) {
      put_expanded(f, *line, name);
      fputc('\n', f);
    }
  } else {
    file->write(f);
  }
  if (fclose(f) != 0) {
    free(out);
    return NULL;
  }
  if (len)
    *len = size;
  return out;
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

/* Takes back what write_files made: the N files named in MADE, in DFD, and
 * the directory DIR. */
static void remove_made(int dfd, const char *dir, char **made, size_t n) {
  for (size_t i = n; i-- > 0;)
    unlinkat(dfd, made[i], 0);
  close(dfd);
  rmdir(dir);
}

/* The directory NAME and every file of KIND in it. */
static int write_files(const char *name, const cli_new_kind *kind) {
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
  char *made[8]; /* more than any kind has files */
  size_t n_made = 0;
  int rc = 0;
  for (const cli_new_file *f = kind->files; f->name && rc == 0; f++) {
    size_t len = 0;
    char *file = expand(f, false, name, NULL);
    char *text = file ? expand(f, true, name, &len) : NULL;
    bool created = false;
    if (!text) {
      cli_error("new: out of memory");
      rc = EXIT_FAILED;
    } else if (write_new(dfd, file, text, len, &created) != 0) {
      cli_error("new: cannot write %s/%s: %s; nothing was left behind", name,
                file, strerror(errno));
      rc = EXIT_FAILED;
    }
    free(text);
    if (created && n_made < sizeof made / sizeof made[0])
      made[n_made++] = file;
    else
      free(file);
  }
  if (rc != 0)
    remove_made(dfd, name, made, n_made);
  else
    close(dfd);
  for (size_t i = 0; i < n_made; i++)
    free(made[i]);
  return rc;
}

/* The plugin of KIND's config that NAME would be taken for, or NULL. */
static const char *clash(const cli_new_kind *kind, const char *name) {
  for (const char *const *u = kind->uses; *u; u++)
    if (strcmp(*u, name) == 0)
      return *u;
  return NULL;
}

static void say_written(const char *name, const cli_new_kind *kind) {
  printf("wrote %s/:", name);
  for (const cli_new_file *f = kind->files; f->name; f++) {
    char *file = expand(f, false, name, NULL);
    printf(" %s", file ? file : f->name);
    free(file);
  }
  printf("\n%s.c is a %s plugin to start from; build and train with it:\n"
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
  const char *taken = clash(kind, name);
  if (taken) {
    cli_error("new: NAME \"%s\" is taken: %s.ini also loads the bundled "
              "plugin %s, and the two would share the section [%s]; choose "
              "another NAME",
              name, name, taken, taken);
    return EXIT_USAGE;
  }
  int rc = write_files(name, kind);
  if (rc == 0)
    say_written(name, kind);
  return rc;
}
