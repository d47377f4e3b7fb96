/* The metrics.csv writer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"
#include "outfile.h"

#define MAX_COLUMNS 128

struct lk__metrics {
  char *path;
  FILE *f;
  size_t n_cols; /* after step, epoch, loss */
  char *cols[MAX_COLUMNS];
  uint64_t rows; /* data rows in the file */
  double row[MAX_COLUMNS];
  bool set[MAX_COLUMNS];
};

static int write_header(lk__metrics *m, FILE *f) {
  fputs("step,epoch,loss", f);
  for (size_t i = 0; i < m->n_cols; i++)
    fprintf(f, ",%s", m->cols[i]);
  fputc('\n', f);
  return ferror(f) ? LK_EIO : 0;
}

/* Reads the column names of an existing file's header. */
static int read_header(lk__metrics *m, FILE *f) {
  char line[8192];
  if (!fgets(line, sizeof line, f))
    return 0; /* empty file */
  line[strcspn(line, "\r\n")] = '\0';
  if (strncmp(line, "step,epoch,loss", 15) != 0)
    return lk__err(LK_EFORMAT, "%s: not a loopkit metrics file", m->path);
  char *save = NULL;
  char *tok = strtok_r(line + 15, ",", &save);
  for (; tok && m->n_cols < MAX_COLUMNS; tok = strtok_r(NULL, ",", &save))
    if (!(m->cols[m->n_cols++] = lk__strdup(tok)))
      return lk__err(LK_ENOMEM, "out of memory");
  return 1;
}

/* Rewrites the file with the current header: rows are padded with empty
 * cells from column PAD_FROM to the current width, and only the first KEEP
 * rows are kept (all when KEEP < 0). The file is replaced whole
 * (lk_output_open), so a crash leaves the old one or the new one. */
static int rewrite(lk__metrics *m, size_t pad_from, int64_t keep) {
  if (m->f)
    fclose(m->f);
  m->f = NULL;
  FILE *in = fopen(m->path, "r");
  if (!in)
    return lk__err(LK_EIO, "cannot read %s: %s", m->path, strerror(errno));
  lk_output *o;
  int rc = lk_output_open(m->path, "metrics", &o);
  if (rc != 0) {
    fclose(in);
    return rc;
  }
  FILE *out = lk_output_stream(o);
  rc = write_header(m, out);
  char line[65536];
  uint64_t rows = 0;
  if (rc == 0 && fgets(line, sizeof line, in)) { /* skip the old header */
    while ((keep < 0 || rows < (uint64_t)keep) &&
           fgets(line, sizeof line, in)) {
      line[strcspn(line, "\r\n")] = '\0';
      fputs(line, out);
      for (size_t i = pad_from; i < m->n_cols; i++)
        fputc(',', out);
      fputc('\n', out);
      rows++;
    }
  }
  fclose(in);
  int closed = lk_output_close(o, rc == 0);
  if (rc != 0)
    return lk__err(LK_EIO, "cannot rewrite %s", m->path);
  if (closed != 0)
    return closed;
  m->rows = rows;
  return lk__output_append(m->path, "metrics", &m->f);
}

/* Lines from F's position (after the header) to its end. */
static uint64_t count_rows(FILE *f) {
  uint64_t lines = 0;
  int c, last = '\n';
  while ((c = getc(f)) != EOF) {
    lines += c == '\n';
    last = c;
  }
  return lines + (last != '\n'); /* an unterminated last line counts */
}

int lk__metrics_open(const char *path, int64_t keep, lk__metrics **out) {
  lk__metrics *m = calloc(1, sizeof *m);
  if (!m || !(m->path = lk__strdup(path))) {
    free(m);
    return lk__err(LK_ENOMEM, "out of memory");
  }
  /* Not followed through a link, nor read from a FIFO that would never
   * end: what lk__output_append refuses to write, refused first. */
  int rc = lk__output_check_file(path, "metrics");
  if (rc != 0) {
    lk__metrics_close(m);
    return rc;
  }
  FILE *old = fopen(path, "r");
  bool have_header = false;
  if (old) {
    rc = read_header(m, old);
    have_header = rc == 1;
    if (have_header)
      m->rows = count_rows(old);
    fclose(old);
  }
  /* A resumed run drops what it redoes; a file with fewer rows than its
   * checkpoint logged is not that run's, or was cut: it is refused rather
   * than continued with a hole. */
  if (rc >= 0 && keep > 0 && (!have_header || m->rows < (uint64_t)keep))
    rc = lk__err(LK_EFORMAT,
                 "%s has %llu rows, but the checkpoint being resumed had "
                 "logged %lld: it is not that run's metrics.csv, or it was cut",
                 path, (unsigned long long)m->rows, (long long)keep);
  if (rc >= 0 && have_header && keep >= 0 && m->rows != (uint64_t)keep)
    rc = rewrite(m, m->n_cols, keep);
  if (rc >= 0 && !m->f)
    rc = lk__output_append(path, "metrics", &m->f);
  if (rc >= 0 && !have_header && write_header(m, m->f) != 0)
    rc = lk__err(LK_EIO, "cannot write %s", path);
  if (rc < 0) {
    lk__metrics_close(m);
    return rc;
  }
  fflush(m->f);
  *out = m;
  return 0;
}

uint64_t lk__metrics_rows(const lk__metrics *m) {
  return m->rows;
}

static long column(lk__metrics *m, const char *name) {
  for (size_t i = 0; i < m->n_cols; i++)
    if (strcmp(m->cols[i], name) == 0)
      return (long)i;
  return -1;
}

int lk__metrics_row(lk__metrics *m, uint64_t step, uint64_t epoch,
                    const double *loss, const lk_metric *metrics, size_t n) {
  size_t old_cols = m->n_cols;
  memset(m->set, 0, sizeof m->set);
  for (size_t i = 0; i < n; i++) {
    long c = column(m, metrics[i].name);
    if (c < 0) {
      if (m->n_cols == MAX_COLUMNS)
        return lk__err(LK_EINVAL, "more than %d metrics", MAX_COLUMNS);
      if (!(m->cols[m->n_cols] = lk__strdup(metrics[i].name)))
        return lk__err(LK_ENOMEM, "out of memory");
      c = (long)m->n_cols++;
    }
    m->row[c] = metrics[i].value;
    m->set[c] = true;
  }
  if (m->n_cols != old_cols) {
    int rc = rewrite(m, old_cols, -1);
    if (rc != 0)
      return rc;
  }
  fprintf(m->f, "%llu,%llu,", (unsigned long long)step,
          (unsigned long long)epoch);
  if (loss)
    fprintf(m->f, "%.17g", *loss);
  for (size_t i = 0; i < m->n_cols; i++) {
    fputc(',', m->f);
    if (m->set[i])
      fprintf(m->f, "%.17g", m->row[i]);
  }
  fputc('\n', m->f);
  m->rows++;
  /* Flushed each row: a killed run keeps every row it logged. */
  if (fflush(m->f) != 0 || ferror(m->f))
    return lk__err(LK_EIO, "cannot write %s: %s", m->path, strerror(errno));
  return 0;
}

void lk__metrics_close(lk__metrics *m) {
  if (!m)
    return;
  if (m->f)
    fclose(m->f);
  for (size_t i = 0; i < m->n_cols; i++)
    free(m->cols[i]);
  free(m->path);
  free(m);
}
