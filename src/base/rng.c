/* The run's random generator: xoshiro256** seeded through splitmix64.
 * Its four words are the whole state, so a checkpoint can carry it. */
#include <math.h>

#include "internal.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

/* Different streams of one seed are independent sequences (a data plugin's
 * shuffle can use the epoch as its stream). */
void lk_rng_seed(lk_rng *rng, uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL);
  for (int i = 0; i < 4; i++)
    rng->s[i] = splitmix64(&x);
}

uint64_t lk_rng_u64(lk_rng *rng) {
  uint64_t *s = rng->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double lk_rng_uniform(lk_rng *rng) {
  return (double)(lk_rng_u64(rng) >> 11) * 0x1.0p-53;
}

/* Box-Muller without a cached second value, so the state stays four words. */
double lk_rng_normal(lk_rng *rng) {
  double u1 = 1.0 - lk_rng_uniform(rng); /* (0, 1] */
  double u2 = lk_rng_uniform(rng);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
