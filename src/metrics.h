/* metrics.csv: a header row, then one row per logged step; columns step,
 * epoch, loss first, then every metric in order of first appearance. */
#ifndef LK_METRICS_H
#define LK_METRICS_H

#include "internal.h"

typedef struct lk__metrics lk__metrics;

/* Opens PATH for appending; an existing file's header gives the columns
 * (a resumed run continues it). */
int lk__metrics_open(const char *path, lk__metrics **out);

/* Appends a row. LOSS may be NULL (an empty cell). A metric never seen
 * before adds a column: the file is rewritten with the wider header and
 * the earlier rows padded, so the CSV stays rectangular. */
int lk__metrics_row(lk__metrics *m, uint64_t step, uint64_t epoch,
                    const double *loss, const lk_metric *metrics, size_t n);

void lk__metrics_close(lk__metrics *m);

#endif
