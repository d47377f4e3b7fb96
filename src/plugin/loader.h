/* Finding and opening plugins (plugin/): what the loader and the search
 * path give the rest of the library. */
#ifndef LK_LOADER_H
#define LK_LOADER_H

#include "internal.h"

/* searchpath.c: the plugin search path. EACH is called with every
 * directory, in search order, and where it comes from (for messages); a
 * non-zero return stops the walk and is returned. LOOPKIT_PLUGIN_PATH's
 * entries are checked first (absolute, none empty) unless unsafe plugins
 * are allowed (LK__UNSAFE_ENV=1, exactly). */
#define LK__UNSAFE_ENV "LOOPKIT_ALLOW_UNSAFE_PLUGINS"
typedef int (*lk__dir_fn)(void *user, const char *dir, const char *source);
int lk__search_dirs(lk__dir_fn each, void *user);
bool lk__unsafe_plugins(void);

/* loader.c: the ABI minor version a plugin was built for; entries an ops
 * table gained after it must not be read. */
unsigned lk__plugin_minor(const lk_plugin *p);
/* The host's copy of P's descriptor (the ABI guard, kinds.h): what P's
 * minor does not define reads as NULL, fields and ops entries alike. The
 * host reads P through it, never through lk_plugin_desc. */
const lk_descriptor *lk__plugin_host_desc(const lk_plugin *p);

#endif
