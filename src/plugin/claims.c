/* The config sections plugins read as their own (claims.h). */
#include <stdlib.h>
#include <string.h>

#include "claims.h"
#include "internal.h"

bool lk__claimed(const lk__claims *c, const char *section, const char *key) {
  for (size_t i = 0; i < c->n; i++)
    if (!strcmp(c->v[i].section, section) &&
        (!key || !strcmp(c->v[i].key, key)))
      return true;
  return false;
}

int lk__claims_add(lk__claims *c, const char *section, const char *key) {
  if (lk__claimed(c, section, key))
    return 0;
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 8;
    lk__claim *v = realloc(c->v, cap * sizeof *v);
    if (!v)
      return lk__err(LK_ENOMEM, "out of memory");
    c->v = v;
    c->cap = cap;
  }
  lk__claim *e = &c->v[c->n];
  e->section = strdup(section);
  e->key = strdup(key);
  if (!e->section || !e->key) {
    free(e->section);
    free(e->key);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  c->n++;
  return 0;
}

void lk__claims_free(lk__claims *c) {
  for (size_t i = 0; i < c->n; i++) {
    free(c->v[i].section);
    free(c->v[i].key);
  }
  free(c->v);
  memset(c, 0, sizeof *c);
}
