/* Progress of a training epoch: for a host's progress bar (lk_progress_fn)
 * or, without one, a log line every log_every_n_steps optimizer steps. */
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "loop.h"

double lk__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void lk__meter_start(lk_run *run, uint64_t first, uint64_t n_batches) {
  lk__meter *m = &run->meter;
  m->t0 = lk__now();
  m->first = first;
  m->n_batches = n_batches;
  m->samples = 0;
  m->last_loss = NAN;
}

/* "1:02:03" or "02:03". */
static void clock_text(char *buf, size_t len, double seconds) {
  if (!isfinite(seconds) || seconds < 0) {
    snprintf(buf, len, "?");
    return;
  }
  unsigned long s = (unsigned long)(seconds + 0.5);
  if (s >= 3600)
    snprintf(buf, len, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
  else
    snprintf(buf, len, "%02lu:%02lu", s / 60, s % 60);
}

static void fill(const lk_run *run, lk_progress *out) {
  const lk__meter *m = &run->meter;
  const lk__progress *p = &run->state.progress;
  bool epochs = m->n_batches > 0;
  uint64_t done = epochs ? p->batch : p->global_step;
  uint64_t total = epochs                    ? m->n_batches
                   : run->loop.max_steps > 0 ? (uint64_t)run->loop.max_steps
                                             : 0;
  uint64_t here = done > m->first ? done - m->first : 0; /* this process */
  double elapsed = lk__now() - m->t0;
  *out = (lk_progress){
      .epoch = p->epoch,
      .max_epochs = lk__role(run, LK__KIND_DATA) ? run->loop.max_epochs : 0,
      .batch = done,
      .n_batches = total,
      .global_step = p->global_step,
      .loss = m->last_loss,
      .per_second =
          elapsed > 0 ? (double)(epochs ? m->samples : here) / elapsed : NAN,
      .elapsed = elapsed,
      .eta = here > 0 && total >= done
                 ? elapsed / (double)here * (double)(total - done)
                 : NAN,
      .epoch_done = epochs && done >= total,
  };
}

static void log_line(lk_run *run, const lk_progress *pr) {
  char elapsed[32], eta[32], where[64];
  clock_text(elapsed, sizeof elapsed, pr->elapsed);
  clock_text(eta, sizeof eta, pr->eta);
  if (lk__role(run, LK__KIND_DATA))
    snprintf(where, sizeof where, "epoch %llu batch %llu/%llu",
             (unsigned long long)pr->epoch, (unsigned long long)pr->batch,
             (unsigned long long)pr->n_batches);
  else
    snprintf(where, sizeof where, "step %llu/%llu",
             (unsigned long long)pr->batch, (unsigned long long)pr->n_batches);
  char step[48] = "";
  if (lk__role(run, LK__KIND_DATA))
    snprintf(step, sizeof step, ", step %llu",
             (unsigned long long)pr->global_step);
  lk__log(&run->env, LK_LOG_INFO,
          "%s%s: loss %.6g, %.1f %s/s, %s elapsed, ETA %s", where, step,
          pr->loss, pr->per_second,
          lk__role(run, LK__KIND_DATA) ? "samples" : "steps", elapsed, eta);
}

void lk__meter_batch(lk_run *run, const lk_batch *batch, uint64_t step_before) {
  lk__meter *m = &run->meter;
  if (batch)
    m->samples += batch->size;
  if (run->state.has_last_loss)
    m->last_loss = run->state.last_loss;
  lk_progress pr;
  if (run->opts.progress) {
    fill(run, &pr);
    run->opts.progress(run->opts.progress_user, &pr);
    return;
  }
  uint64_t step = run->state.progress.global_step;
  if (step != step_before && step % (uint64_t)run->loop.log_every == 0 &&
      run->env.log.fn && run->env.log.verbosity >= LK_LOG_INFO) {
    fill(run, &pr);
    log_line(run, &pr);
  }
}
