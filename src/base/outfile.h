/* What the library adds to lk_output_open (host.h) for its own files:
 * outfile.c owns every file loopkit writes, and every temporary name. */
#ifndef LK_OUTFILE_H
#define LK_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

#include "internal.h"

/* 0 when PATH is not there or is a regular file; else the refusal
 * lk_output_open gives a link or a directory, given a character device
 * and a FIFO too: for a file that is read back. */
int lk__output_check_file(const char *path, const char *what);

/* Opens PATH to append to (metrics.csv, a log read back and rewritten):
 * created when it is not there; anything but a regular file refused as
 * lk_output_open refuses, a character device and a FIFO too. */
int lk__output_append(const char *path, const char *what, FILE **out);

/* Makes PATH another name of the file EXISTING (a hard link, made under a
 * temporary name and renamed over PATH): PATH is the old file or the new
 * one, never missing. */
int lk__output_link(const char *existing, const char *path);

/* Whether NAME, a directory entry, is a temporary file loopkit makes (or
 * made before: NAME.tmp-PID): what a killed run leaves behind. */
bool lk__output_is_temp(const char *name);

#endif
