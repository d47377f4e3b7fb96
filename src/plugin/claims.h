/* The config sections plugins read as their own (lk_host_section_value: a
 * network's block, sequential's [res64]): each section and key read, so
 * that the run accepts the section (an unknown one is refused), refuses a
 * key of it that nothing read, and config.ini records what was read. */
#ifndef LK_CLAIMS_H
#define LK_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct lk__claim {
  char *section, *key;
} lk__claim;

typedef struct lk__claims {
  lk__claim *v;
  size_t n, cap;
} lk__claims;

/* Records SECTION.KEY once. */
int lk__claims_add(lk__claims *c, const char *section, const char *key);
/* Whether a plugin read SECTION (KEY NULL: any key of it), or SECTION.KEY. */
bool lk__claimed(const lk__claims *c, const char *section, const char *key);
void lk__claims_free(lk__claims *c);

#endif
