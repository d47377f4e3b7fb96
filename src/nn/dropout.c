/* Inverted dropout, as nn.Dropout: out = inp * mask / (1 - p).
 *   inp, out, mask, dout, dinp [n]
 * The mask is drawn so that it depends on the generator's state alone:
 * one lk_rng_u64 per training call seeds a stream per BLOCK values
 * (lk_rng_seed(r, seed, block)), and the tasks are runs of whole blocks.
 * The thread count, and where a block's values fall in a task, change
 * nothing; the generator advances the same whatever n is, so a run resumed
 * from a checkpoint (which saves the generator) draws the same masks.
 * The scale is torch's: 1.0f / (float)(1 - p), times the input. */
#include <math.h>
#include <string.h>

#include "loopkit/host.h"
#include "nn_internal.h"

#define LAYER "dropout"
#define BLOCK 4096 /* values per stream */
#define BLOCKS_PER_TASK 4

typedef struct job {
  size_t n;
  int parts;
  uint64_t seed, threshold; /* kept: a 32-bit draw >= threshold */
  float scale;
  float *out;
  uint8_t *mask;
  const uint8_t *cmask;
  const float *inp, *dout;
} job;

static size_t blocks(size_t n) {
  return (n + BLOCK - 1) / BLOCK;
}

static void draw_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t b0, b1;
  nn__range(blocks(j->n), j->parts, task, &b0, &b1);
  for (size_t b = b0; b < b1; b++) {
    lk_rng r;
    lk_rng_seed(&r, j->seed, b);
    size_t lo = b * BLOCK, hi = lo + BLOCK < j->n ? lo + BLOCK : j->n;
    for (size_t i = lo; i < hi; i += 2) {
      uint64_t w = lk_rng_u64(&r);
      uint8_t k0 = (w & 0xffffffffu) >= j->threshold,
              k1 = (w >> 32) >= j->threshold;
      j->mask[i] = k0;
      j->out[i] = k0 ? j->inp[i] * j->scale : 0;
      if (i + 1 < hi) {
        j->mask[i + 1] = k1;
        j->out[i + 1] = k1 ? j->inp[i + 1] * j->scale : 0;
      }
    }
  }
}

static void apply_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range16(j->n, j->parts, task, &lo, &hi);
  for (size_t i = lo; i < hi; i++)
    j->out[i] = j->cmask[i] ? j->inp[i] * j->scale : 0;
}

/* dinp += dout * mask * scale (out is dinp, inp is dout). */
static void backward_task(void *ctx, int task, int thread) {
  (void)thread;
  const job *j = ctx;
  size_t lo, hi;
  nn__range16(j->n, j->parts, task, &lo, &hi);
  if (!j->cmask) {
    for (size_t i = lo; i < hi; i++)
      j->out[i] += j->dout[i];
    return;
  }
  for (size_t i = lo; i < hi; i++)
    j->out[i] += j->cmask[i] ? j->dout[i] * j->scale : 0;
}

static int check(size_t n, float p) {
  NN_CHECK(n >= 1, LAYER, "n = 0 values; expected >= 1");
  NN_CHECK(p >= 0 && p <= 1, LAYER, "p is %g; expected 0 <= p <= 1", (double)p);
  return 0;
}

static float scale_of(float p) {
  return p < 1 ? 1.0f / (float)(1.0 - (double)p) : 0;
}

int lk_nn_dropout_forward(lk_nn *nn, float *out, uint8_t *mask,
                          const float *inp, size_t n, float p, bool training,
                          lk_rng *rng) {
  NN_CHECK(nn && out && inp, LAYER, "forward needs the context, out and inp");
  int rc = check(n, p);
  if (rc < 0)
    return rc;
  if (!training) {
    if (out != inp)
      memmove(out, inp, n * sizeof *out);
    return 0;
  }
  NN_CHECK(mask && rng, LAYER, "training needs mask and rng");
  job j = {.n = n,
           .out = out,
           .mask = mask,
           .inp = inp,
           .scale = scale_of(p),
           .threshold = (uint64_t)ceil((double)p * 4294967296.0),
           .seed = lk_rng_u64(rng)};
  j.parts = nn__parts(blocks(n), BLOCKS_PER_TASK);
  nn__run(nn, j.parts, draw_task, &j);
  return 0;
}

int lk_nn_dropout_apply(lk_nn *nn, float *out, const uint8_t *mask,
                        const float *inp, size_t n, float p) {
  NN_CHECK(nn && out && mask && inp, LAYER,
           "apply needs the context, out, mask and inp");
  int rc = check(n, p);
  if (rc < 0)
    return rc;
  job j = {.n = n,
           .out = out,
           .cmask = mask,
           .inp = inp,
           .scale = scale_of(p),
           .parts = nn__parts(n, BLOCK * BLOCKS_PER_TASK)};
  nn__run(nn, j.parts, apply_task, &j);
  return 0;
}

int lk_nn_dropout_backward(lk_nn *nn, float *dinp, const float *dout,
                           const uint8_t *mask, size_t n, float p,
                           bool training) {
  NN_CHECK(nn && dout, LAYER, "backward needs the context and dout");
  int rc = check(n, p);
  if (rc < 0 || !dinp)
    return rc;
  NN_CHECK(!training || mask, LAYER, "training needs mask");
  job j = {.n = n,
           .out = dinp,
           .cmask = training ? mask : NULL,
           .dout = dout,
           .scale = scale_of(p),
           .parts = nn__parts(n, BLOCK * BLOCKS_PER_TASK)};
  nn__run(nn, j.parts, backward_task, &j);
  return 0;
}
