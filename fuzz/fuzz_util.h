/* What the fuzz targets share: a failed invariant that libFuzzer reports
 * as a crash, a reader of option bytes at the front of an input, and
 * in-memory files (memfd) that readers taking a path can open through
 * /proc/self/fd. Each target is one translation unit that includes this. */
#ifndef LOOPKIT_FUZZ_UTIL_H
#define LOOPKIT_FUZZ_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <loopkit/loopkit.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: print why and abort, which libFuzzer reports with
 * the input that caused it. */
#define FUZZ_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, " (last error: %s)\n", lk_last_error());                 \
      abort();                                                                 \
    }                                                                          \
  } while (0)

/* With FUZZ_VERBOSE set, each input's outcome: to see what a seed reaches
 * (fuzz_TARGET FILE...). */
static inline void fuzz_report(int rc) {
  static int verbose = -1;
  if (verbose < 0)
    verbose = getenv("FUZZ_VERBOSE") != NULL;
  if (verbose)
    fprintf(stderr, "fuzz: %s%s\n", rc ? "refused: " : "accepted",
            rc ? lk_last_error() : "");
}

/* Option bytes taken from the front of an input; zeros once it runs out,
 * so that every input, however short, is a valid one. */
typedef struct fuzz_in {
  const uint8_t *p;
  size_t n;
} fuzz_in;

static inline uint64_t fuzz_take(fuzz_in *in, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; i++) {
    uint64_t b = 0;
    if (in->n) {
      b = *in->p++;
      in->n--;
    }
    v |= b << (8 * i);
  }
  return v;
}

/* The next LEN bytes (fewer if the input ends first). */
static inline const uint8_t *fuzz_bytes(fuzz_in *in, size_t len, size_t *got) {
  const uint8_t *at = in->p;
  *got = len < in->n ? len : in->n;
  in->p += *got;
  in->n -= *got;
  return at;
}

/* An in-memory file: created once, rewritten for every input. */
typedef struct fuzz_file {
  int fd;
  char path[64];
} fuzz_file;

static inline void fuzz_file_open(fuzz_file *f, const char *name) {
  f->fd = memfd_create(name, MFD_CLOEXEC);
  if (f->fd < 0) {
    perror("memfd_create");
    abort();
  }
  snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

static inline void fuzz_file_set(fuzz_file *f, const void *data, size_t len) {
  const unsigned char *p = data;
  if (ftruncate(f->fd, 0) != 0) {
    perror("ftruncate");
    abort();
  }
  for (size_t done = 0; done < len;) {
    ssize_t w = pwrite(f->fd, p + done, len - done, (off_t)done);
    if (w <= 0) {
      perror("pwrite");
      abort();
    }
    done += (size_t)w;
  }
}

#endif
