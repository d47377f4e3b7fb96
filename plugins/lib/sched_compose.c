/* sched_compose.c: the children of the composite schedulers
 * (sched_compose.h says what), built once into
 * plugins/lib/libplugincommon.la. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <loopkit/loopkit.h>

#include "sched_compose.h"

int compose_names(lk_host *host, const lk_options *o, const char *name,
                  char ***out, size_t *n) {
  const char *text = lk_opt_string(o, name);
  size_t len = strlen(text), items = 1;
  for (const char *p = text; *p; p++)
    items += *p == ',';
  char **list = malloc(items * sizeof *list + len + 1);
  if (!list)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  char *copy = (char *)(list + items);
  memcpy(copy, text, len + 1);
  size_t k = 0;
  for (char *item = copy; item; k++) {
    char *comma = strchr(item, ',');
    if (comma)
      *comma = '\0';
    while (*item == ' ' || *item == '\t')
      item++;
    char *end = item + strlen(item);
    while (end > item && (end[-1] == ' ' || end[-1] == '\t'))
      *--end = '\0';
    if (!*item) {
      free(list);
      return lk_fail(host, LK_ECONFIG,
                     "%s: option %s.%s = %s: item %zu is empty; list the "
                     "schedulers as NAME:PLUGIN, comma separated (e.g. "
                     "warm:linear_warmup, main:cosine)",
                     lk_opt_where(o, name), lk_host_name(host), name, text,
                     k + 1);
    }
    list[k] = item;
    item = comma ? comma + 1 : NULL;
  }
  *out = list;
  *n = items;
  return 0;
}

int compose_children(lk_host *host, char *const *names, size_t n,
                     lk_scheduler ***out) {
  lk_scheduler **children = calloc(n, sizeof *children);
  int rc = children ? 0 : lk_fail(host, LK_ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = lk_host_scheduler_new(host, names[i], &children[i]);
  if (rc != 0) {
    free(children);
    return rc;
  }
  *out = children;
  return 0;
}

bool compose_last_epoch(const lk_scheduler *child, double *out,
                        const lk_tensor **t) {
  const lk_tensor *e = lk_scheduler_state(child, "last_epoch");
  if (!e || e->numel != 1 || (e->dtype != LK_F64 && e->dtype != LK_F32))
    return false;
  *out = e->dtype == LK_F64 ? *(const double *)e->data
                            : (double)*(const float *)e->data;
  *t = e;
  return true;
}
