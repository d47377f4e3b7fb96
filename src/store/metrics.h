/* metrics.csv: a header row, then one row per logged step; columns step,
 * epoch, loss first, then every metric in order of first appearance. */
#ifndef LK_METRICS_H
#define LK_METRICS_H

#include "internal.h"

typedef struct lk__metrics lk__metrics;

/* Opens PATH for appending; an existing file's header gives the columns
 * (a resumed run continues it). KEEP >= 0 keeps only the first KEEP rows:
 * those a resumed run's checkpoint had seen (a killed run may have logged
 * more, which the resumed run logs again). */
int lk__metrics_open(const char *path, int64_t keep, lk__metrics **out);

/* Data rows in the file so far. */
uint64_t lk__metrics_rows(const lk__metrics *m);

/* Appends a row. LOSS may be NULL (an empty cell). A metric never seen
 * before adds a column: the file is rewritten with the wider header and
 * the earlier rows padded, so the CSV stays rectangular. */
int lk__metrics_row(lk__metrics *m, uint64_t step, uint64_t epoch,
                    const double *loss, const lk_metric *metrics, size_t n);

void lk__metrics_close(lk__metrics *m);

#endif
