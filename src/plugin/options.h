/* A plugin instance's options: the config section checked against the
 * plugin's declarations and parsed into typed values. */
#ifndef LK_OPTIONS_H
#define LK_OPTIONS_H

#include "internal.h"

/* Parses section SECTION of CFG (may be NULL: defaults only) against the
 * options PLUGIN declares. Errors name FILE:LINE, the option and what is
 * accepted. */
int lk__options_parse(const lk_descriptor *desc, const char *section,
                      const lk_config *cfg, lk_options **out);
/* The same, an option SECTION does not give taken from section BASE (NULL:
 * none), as a parameter group inherits its optimizer's options; the keys
 * of HOST_KEYS (NULL-terminated; NULL: none) are the host's and are not
 * looked at. */
int lk__options_parse_in(const lk_descriptor *desc, const char *section,
                         const char *base, const char *const *host_keys,
                         const lk_config *cfg, lk_options **out);

/* Replaces the value of option NAME of OPTS (declared by DESC) with TEXT,
 * checked as a config's would be; WHERE says where it comes from (for
 * lk_opt_where and messages). */
int lk__options_replace(const lk_descriptor *desc, lk_options *opts,
                        const char *name, const char *text, const char *where);

/* Writes every option's value (given or default) into section SECTION of
 * CFG, for the effective config of a run. */
int lk__options_export(const lk_options *opts, const char *section,
                       lk_config *cfg);

void lk__options_free(lk_options *opts);

/* The options of OPTS, by position: their declarations, and whether a
 * value is the word auto, which the host resolves before create
 * (auto.c). */
size_t lk__options_count(const lk_options *opts);
const lk_option *lk__options_decl(const lk_options *opts, size_t k);
bool lk__options_is_auto(const lk_options *opts, size_t k);
/* Whether option O takes auto: an integer whose choices (its range) end
 * with " or auto", e.g. "[1, inf) or auto". */
bool lk__option_takes_auto(const lk_option *o);

/* A numeric option's range, from its choices: "[0, inf)", "(0, 1]". */
typedef struct lk__range {
  double lo, hi; /* -inf and inf for an open end */
  bool lo_closed, hi_closed;
} lk__range;
int lk__range_parse(const char *text, lk__range *r);
bool lk__range_has(const lk__range *r, double v);
void lk__range_text(const lk__range *r, char *buf, size_t len);
/* The range option O's choices declare, " or auto" left aside. */
int lk__option_range(const lk_option *o, lk__range *r);

/* "a, b, c": the names of OPTIONS, for "accepted: ..." messages. False
 * when there are none. */
bool lk__option_names(const lk_option *options, char *buf, size_t len);

#endif
