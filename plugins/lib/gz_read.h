/* Reading files that may be gzip-compressed, for the data plugins (idx,
 * text): zlib reads a plain file as it is, so one reader serves both. A
 * compressed stream that ends early is a short read, not an error; a
 * damaged one is LK_EFORMAT naming the file. Built once into
 * plugins/lib/libgzread.la (gz_read.c), which brings zlib. */
#ifndef LOOPKIT_PLUGINS_GZ_READ_H
#define LOOPKIT_PLUGINS_GZ_READ_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <loopkit/loopkit.h>

/* Reads up to LEN bytes; *GOT says how many came. The caller reports a
 * short read as a truncated file, with the sizes. */
int gz_read_up_to(lk_host *host, gzFile f, const char *path, void *buf,
                  size_t len, size_t *got);

/* Opens PATH (a regular file: lk_open_input, whose messages say WHAT) for
 * reading through zlib; *GZ says whether it is compressed. */
int gz_open(lk_host *host, const char *path, const char *what, gzFile *out,
            bool *gz);

/* The whole (uncompressed) content of PATH into a new *OUT of *LEN bytes,
 * refused past MAX bytes (a gzip bomb, or the wrong file). */
int gz_slurp(lk_host *host, const char *path, const char *what, size_t max,
             unsigned char **out, size_t *len);

#endif
