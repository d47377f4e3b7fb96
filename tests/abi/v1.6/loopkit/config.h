/* loopkit — INI config files.
 *
 * [section], key = value, comments from '#' or ';' (at a line's start, or
 * after white space). Every entry remembers where it came from (file:line or
 * the --set argument) so that errors can name it. */
#ifndef LOOPKIT_CONFIG_H
#define LOOPKIT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "loopkit/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lk_config lk_config;

/* One key. where is "FILE:LINE" or "--set SECTION.KEY=VALUE". */
typedef struct lk_config_entry {
  const char *section;
  const char *key;
  const char *value;
  const char *where;
} lk_config_entry;

/* Parses PATH. Errors name PATH:LINE (LK_ECONFIG) or the I/O failure. */
LK_API int lk_config_load(const char *path, lk_config **out);

/* Parses TEXT as if it were the file NAME (tests, embedding). */
LK_API int lk_config_parse(const char *name, const char *text, lk_config **out);

/* An empty config (for programs that build one with lk_config_put). */
LK_API int lk_config_new(lk_config **out);

/* Applies one --set argument, "SECTION.KEY=VALUE"; a key that exists is
 * replaced, a new one added. An empty VALUE ("SECTION.KEY=") removes the
 * key, so that its default applies. Every --set is remembered, in order,
 * with the value it replaced (a run records them). */
LK_API int lk_config_set(lk_config *cfg, const char *assignment);

/* Adds or replaces a key; WHERE is remembered for messages. */
LK_API int lk_config_put(lk_config *cfg, const char *section, const char *key,
                         const char *value, const char *where);

/* The entry for SECTION.KEY, or NULL. */
LK_API const lk_config_entry *
lk_config_find(const lk_config *cfg, const char *section, const char *key);

LK_API void lk_config_free(lk_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
