/* The one routine every file loopkit writes goes through (src/base/outfile.c):
 * an existing file replaced only when the write is kept, never touched
 * otherwise; temporary names random, never reused, recognised as
 * leftovers; modes from the umask or the file replaced; a FIFO written
 * through; links, directories and sockets refused; appends and hard links
 * of the run directory. The CLI side (each command, each kind of path, the
 * links another user plants) is tests/cli/outputs.sh. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "../src/base/outfile.h"

typedef struct fixture {
  char dir[64];
  char path[128]; /* DIR/out */
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  if (!fx)
    return -1;
  snprintf(fx->dir, sizeof fx->dir, "/tmp/lk-test-outfile-XXXXXX");
  if (!mkdtemp(fx->dir)) {
    free(fx);
    return -1;
  }
  snprintf(fx->path, sizeof fx->path, "%s/out", fx->dir);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  DIR *d = opendir(fx->dir);
  struct dirent *e;
  char p[512];
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", fx->dir, e->d_name);
      if (unlink(p) != 0)
        rmdir(p);
    }
  if (d)
    closedir(d);
  rmdir(fx->dir);
  free(fx);
  return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* PATH's content (at most 255 bytes) into a static buffer. */
static const char *content(const char *path) {
  static char buf[256];
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* The names in DIR but "." and "..", as one string "a b c " (sorted by
 * nothing: the caller looks for one). */
static size_t names(const char *dir, char *out, size_t size) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  size_t n = 0;
  struct dirent *e;
  out[0] = '\0';
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      strncat(out, e->d_name, size - strlen(out) - 2);
      strcat(out, " ");
      n++;
    }
  closedir(d);
  return n;
}

static void assert_contains(const char *haystack, const char *needle) {
  if (!strstr(haystack, needle))
    fail_msg("\"%s\" does not contain \"%s\"", haystack, needle);
}

static void write_text(const char *path, const char *text, bool keep) {
  lk_output *o;
  assert_int_equal(lk_output_open(path, "test output", &o), 0);
  assert_true(fputs(text, lk_output_stream(o)) >= 0);
  assert_int_equal(lk_output_close(o, keep), 0);
}

/* ---- replacing a regular file -------------------------------------------- */

static void kept_replaces_dropped_leaves(void **state) {
  fixture *fx = *state;
  char list[512];
  write_text(fx->path, "first\n", true); /* new */
  assert_string_equal(content(fx->path), "first\n");
  write_text(fx->path, "second\n", true); /* replaced */
  assert_string_equal(content(fx->path), "second\n");
  write_text(fx->path, "dropped\n", false); /* a failed write */
  assert_string_equal(content(fx->path), "second\n");
  assert_int_equal(names(fx->dir, list, sizeof list), 1);
  assert_string_equal(list, "out ");
  char other[160];
  snprintf(other, sizeof other, "%s/never", fx->dir);
  write_text(other, "dropped\n", false); /* nothing is left of a new one */
  assert_int_equal(access(other, F_OK), -1);
  assert_int_equal(names(fx->dir, list, sizeof list), 1);
}

/* While a file is written its temporary is there, under a name of six
 * random letters and digits that a second writer does not get, and that a
 * run directory's cleanup recognises. */
static void temporary_names(void **state) {
  fixture *fx = *state;
  lk_output *a, *b;
  assert_int_equal(lk_output_open(fx->path, NULL, &a), 0);
  assert_int_equal(lk_output_open(fx->path, NULL, &b), 0);
  char list[512], *tok, *save = NULL;
  assert_int_equal(names(fx->dir, list, sizeof list), 2);
  char seen[2][64] = {"", ""};
  int k = 0;
  for (tok = strtok_r(list, " ", &save); tok;
       tok = strtok_r(NULL, " ", &save)) {
    assert_int_equal(strlen(tok), strlen("out.tmp-") + 6);
    assert_memory_equal(tok, "out.tmp-", 8);
    for (const char *p = tok + 8; *p; p++)
      assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "abcdefghijklmnopqrstuvwxyz0123456789",
                             *p));
    assert_true(lk__output_is_temp(tok));
    snprintf(seen[k++], sizeof seen[0], "%s", tok);
  }
  assert_string_not_equal(seen[0], seen[1]);
  assert_int_equal(lk_output_close(a, false), 0);
  assert_int_equal(lk_output_close(b, true), 0);
  assert_int_equal(names(fx->dir, list, sizeof list), 1);
}

static void leftovers_recognised(void **state) {
  (void)state;
  assert_true(lk__output_is_temp("metrics.csv.tmp-4242")); /* before 0.1 */
  assert_true(lk__output_is_temp("curves.png.tmp-4242-1"));
  assert_true(lk__output_is_temp("last.ckpt.tmp-aB3dE9"));
  assert_true(lk__output_is_temp("x.tmp-1.tmp-Zz09aa"));
  assert_false(lk__output_is_temp("x.tmp-"));
  assert_false(lk__output_is_temp("x.tmp-a.b"));
  assert_false(lk__output_is_temp("best.tmp-1.ckpt"));
  assert_false(lk__output_is_temp("x.tmpAbcdef"));
  assert_false(lk__output_is_temp("step-3.ckpt"));
}

/* A new file is 0666 less the umask, as fopen makes it; a replaced one
 * keeps its mode, bits the umask would take included. */
static void modes(void **state) {
  fixture *fx = *state;
  mode_t was = umask(077);
  struct stat st;
  write_text(fx->path, "a\n", true);
  assert_int_equal(stat(fx->path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  assert_int_equal(unlink(fx->path), 0);
  umask(022);
  write_text(fx->path, "a\n", true);
  assert_int_equal(stat(fx->path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0644);
  assert_int_equal(chmod(fx->path, 0664), 0);
  write_text(fx->path, "b\n", true);
  assert_int_equal(stat(fx->path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0664);
  umask(was);
}

/* ---- what is not a regular file ------------------------------------------ */

static void fifo_written_through(void **state) {
  fixture *fx = *state;
  assert_int_equal(mkfifo(fx->path, 0600), 0);
  /* A reader first, so that the writer's open does not wait. */
  int r = open(fx->path, O_RDONLY | O_NONBLOCK);
  assert_true(r >= 0);
  write_text(fx->path, "through\n", true);
  char buf[32] = "";
  assert_int_equal(read(r, buf, sizeof buf - 1), 8);
  assert_string_equal(buf, "through\n");
  close(r);
  struct stat st;
  assert_int_equal(lstat(fx->path, &st), 0);
  assert_true(S_ISFIFO(st.st_mode));
  char list[256];
  assert_int_equal(names(fx->dir, list, sizeof list), 1);
}

static void refused(void **state) {
  fixture *fx = *state;
  lk_output *o = (lk_output *)1;
  char target[160], path[160], list[512];
  snprintf(target, sizeof target, "%s/target", fx->dir);
  put(target, "mine\n");
  assert_int_equal(symlink("target", fx->path), 0);
  assert_int_equal(lk_output_open(fx->path, "test output", &o), LK_EINVAL);
  assert_null(o);
  assert_contains(lk_last_error(), "test output ");
  assert_contains(lk_last_error(), "/out is a symbolic link (to target)");
  assert_string_equal(content(target), "mine\n");
  snprintf(path, sizeof path, "%s/dir", fx->dir);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(lk_output_open(path, NULL, &o), LK_EINVAL);
  assert_contains(lk_last_error(), "/dir is a directory");
  snprintf(path, sizeof path, "%s/dir/", fx->dir);
  assert_int_equal(lk_output_open(path, NULL, &o), LK_EINVAL);
  snprintf(path, sizeof path, "%s/sock", fx->dir);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  assert_true(strlen(path) < sizeof sa.sun_path);
  memcpy(sa.sun_path, path, strlen(path) + 1);
  assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(lk_output_open(path, NULL, &o), LK_EINVAL);
  assert_contains(lk_last_error(), "/sock is a socket");
  close(s);
  assert_int_equal(lk_output_open("", NULL, &o), LK_EINVAL);
  assert_int_equal(lk_output_open(NULL, NULL, &o), LK_EINVAL);
  assert_int_equal(lk_output_close(NULL, true), 0);
  /* nothing was made: the link, its target, the directory, the socket */
  assert_int_equal(names(fx->dir, list, sizeof list), 4);
}

/* ---- the run directory's appends and links --------------------------------
 */

static void append(void **state) {
  fixture *fx = *state;
  FILE *f;
  assert_int_equal(lk__output_append(fx->path, "metrics", &f), 0);
  fputs("a\n", f);
  fclose(f);
  assert_int_equal(lk__output_append(fx->path, "metrics", &f), 0);
  fputs("b\n", f);
  fclose(f);
  assert_string_equal(content(fx->path), "a\nb\n");
  char path[160];
  snprintf(path, sizeof path, "%s/link", fx->dir);
  assert_int_equal(symlink("out", path), 0);
  assert_int_equal(lk__output_append(path, "metrics", &f), LK_EINVAL);
  assert_contains(lk_last_error(), "metrics ");
  assert_contains(lk_last_error(), "/link is a symbolic link");
  snprintf(path, sizeof path, "%s/fifo", fx->dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_int_equal(lk__output_append(path, NULL, &f), LK_EINVAL);
  assert_contains(lk_last_error(), "/fifo is a FIFO");
  assert_int_equal(lk__output_check_file(path, NULL), LK_EINVAL);
  assert_int_equal(lk__output_check_file(fx->path, NULL), 0);
  snprintf(path, sizeof path, "%s/none", fx->dir);
  assert_int_equal(lk__output_check_file(path, NULL), 0);
  assert_string_equal(content(fx->path), "a\nb\n");
}

static void hard_link(void **state) {
  fixture *fx = *state;
  char a[160], b[160], list[512];
  snprintf(a, sizeof a, "%s/step-1.ckpt", fx->dir);
  snprintf(b, sizeof b, "%s/last.ckpt", fx->dir);
  put(a, "one\n");
  put(b, "old\n");
  assert_int_equal(lk__output_link(a, b), 0);
  struct stat sa, sb;
  assert_int_equal(stat(a, &sa), 0);
  assert_int_equal(stat(b, &sb), 0);
  assert_true(sa.st_ino == sb.st_ino && sa.st_dev == sb.st_dev);
  assert_int_equal(names(fx->dir, list, sizeof list), 2);
  snprintf(a, sizeof a, "%s/missing", fx->dir);
  assert_int_equal(lk__output_link(a, b), LK_EIO);
  assert_contains(lk_last_error(), "/missing");
  assert_string_equal(content(b), "one\n");
  assert_int_equal(names(fx->dir, list, sizeof list), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(kept_replaces_dropped_leaves, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(temporary_names, setup, teardown),
      cmocka_unit_test(leftovers_recognised),
      cmocka_unit_test_setup_teardown(modes, setup, teardown),
      cmocka_unit_test_setup_teardown(fifo_written_through, setup, teardown),
      cmocka_unit_test_setup_teardown(refused, setup, teardown),
      cmocka_unit_test_setup_teardown(append, setup, teardown),
      cmocka_unit_test_setup_teardown(hard_link, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
