/* The progress bar of loopkit train on a terminal: one line per epoch,
 * redrawn in place with a carriage return. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cli_log_stderr(void *user, lk_log_level level, const char *msg) {
  (void)user;
  const char *tag = level == LK_LOG_ERROR  ? "error: "
                    : level == LK_LOG_WARN ? "warning: "
                                           : "";
  fprintf(stderr, "%s%s\n", tag, msg);
}

void cli_progress_log(void *bar, lk_log_level level, const char *msg) {
  cli_bar *b = bar;
  if (b->drawn)
    fputs("\r\033[K", stderr); /* back to the start, clear the line */
  b->drawn = false;
  cli_log_stderr(NULL, level, msg);
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int columns(void) {
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
    return ws.ws_col;
  return 80;
}

/* "01:02" or "1:02:03"; "--:--" when unknown. */
static void clock_text(char *buf, size_t len, double s) {
  if (!isfinite(s) || s < 0) {
    snprintf(buf, len, "--:--");
    return;
  }
  unsigned long t = (unsigned long)(s + 0.5);
  if (t >= 3600)
    snprintf(buf, len, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
  else
    snprintf(buf, len, "%02lu:%02lu", t / 60, t % 60);
}

/* Redraws at every whole percent, at most every 50 ms in between, and
 * always at the epoch's end: a fast loop is not slowed by its terminal. */
static bool due(cli_bar *b, const lk_progress *p, bool last, int percent) {
  double t = seconds();
  if (!last && percent == b->percent && t - b->last_draw < 0.05)
    return false;
  b->percent = percent;
  b->last_draw = t;
  return true;
}

void cli_progress(void *bar, const lk_progress *p) {
  cli_bar *b = bar;
  bool last = p->n_batches > 0 && p->batch >= p->n_batches;
  int percent = p->n_batches ? (int)(100 * p->batch / p->n_batches) : 0;
  if (!due(b, p, last, percent))
    return;
  char head[64], tail[160], elapsed[24], eta[24];
  /* Epochs count from 0 as in the log and metrics.csv; like Lightning's
   * bar, the number after the slash is the last epoch's: "epoch 9/9". */
  if (p->max_epochs > 0)
    snprintf(head, sizeof head, "epoch %llu/%lld", (unsigned long long)p->epoch,
             (long long)p->max_epochs - 1);
  else if (p->max_epochs < 0) /* no epoch limit: max_steps ends the run */
    snprintf(head, sizeof head, "epoch %llu", (unsigned long long)p->epoch);
  else
    snprintf(head, sizeof head, "steps");
  clock_text(elapsed, sizeof elapsed, p->elapsed);
  clock_text(eta, sizeof eta, last ? 0 : p->eta);
  snprintf(tail, sizeof tail, " %llu/%llu loss %.4g %.0f %s/s %s<%s",
           (unsigned long long)p->batch, (unsigned long long)p->n_batches,
           p->loss, p->per_second, p->max_epochs != 0 ? "samples" : "steps",
           elapsed, eta);
  int width = columns() - (int)strlen(head) - (int)strlen(tail) - 4;
  if (width > 40)
    width = 40;
  fprintf(stderr, "\r%s", head);
  if (width >= 10 && p->n_batches > 0) {
    int full = (int)((double)width * (double)p->batch / (double)p->n_batches);
    fputs(" [", stderr);
    for (int i = 0; i < width; i++)
      fputc(i < full ? '#' : '.', stderr);
    fputc(']', stderr);
  }
  fprintf(stderr, "%s\033[K", tail);
  b->drawn = !last;
  if (last)
    fputc('\n', stderr);
  fflush(stderr);
}
