/* The kit's bf16 product: C = alpha op(A) op(B) + beta C with the operands
 * rounded to bf16 (round to nearest even) and the sums in f32, on the
 * AVX512-BF16 instruction VDPBF16PS (two bf16 products added into an f32
 * lane per instruction, twice sgemm's work per instruction). It serves the
 * contexts whose products are bf16 (LK_NN_BF16, the bf16-mixed precision
 * plugin); gemm.c calls it from nn__gemm1 on one thread, on the same fixed
 * tiles of C as the f32 products.
 *
 * Why the kit's own kernel rather than oneDNN's bf16 matmul primitive: the
 * operands arrive in f32 and must be rounded anyway; packing them is where
 * the rounding happens, fused (a separate conversion pass would read and
 * write every operand once more); and the order of every sum is fixed here
 * by the code, not by a library's choice of kernel for a shape or an ISA.
 *
 * The order of the sums, which makes the results independent of how C is
 * tiled and of the thread count: an element of C is beta C (or nothing
 * when beta = 0) plus, for each block of KC values of k in order, alpha
 * times that block's sum, which one lane of one register accumulates
 * pair by pair (VDPBF16PS: acc + a0 b0 + a1 b1, its own rounding, DAZ and
 * FTZ). Padding (odd k, the edges of a tile) adds exact zeros.
 *
 * The blocking is the usual one: a KC x NC block of B packed as pairs of
 * k interleaved (one 32-bit word per pair and column, NR columns a
 * panel), an MC x KC block of A rounded into rows of pairs; the kernel
 * keeps MR x NR sums in 24 registers, broadcasting A's pairs from the rows
 * and loading B's panel. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __clang__
#pragma clang attribute push(                                                  \
    __attribute__((                                                            \
        target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16"))),    \
    apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")
#endif

#define MR 12
#define NR 32
#define KC 512 /* values of k in a block: it sets the order of the sums */
#define KP (KC / 2)
#define MC 96  /* a multiple of MR */
#define NC 512 /* a multiple of NR */

/* 32 bf16 of LO (low half) and HI, each rounded to nearest even. */
static inline __m512i round2(__m512 lo, __m512 hi) {
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* Interleaves the two halves of a round2 (LO row, HI row): pair j is
 * (lo[j], hi[j]), the low half first. */
static inline __m512i interleave(__m512i v) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11,
                                       26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                       5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, v);
}

static inline __mmask16 first(int n) {
  return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* 16 values at P (LEN of them, the rest 0). None is read when LEN <= 0:
 * P may then lie past the matrix, and a masked load whose lanes are all
 * off still costs a fault-suppression assist on AMD's CPUs where the
 * address is not mapped (measured on this project's EPYC: the first
 * conv's weight gradient, 9 columns of B padded to 32, ran 10x slower
 * than f32 while every padding row was loaded that way). */
static inline __m512 load16(const float *p, int len) {
  if (len >= 16)
    return _mm512_loadu_ps(p);
  if (len <= 0)
    return _mm512_setzero_ps();
  return _mm512_maskz_loadu_ps(first(len), p);
}

/* R[i][j] becomes R[j][i], 16 x 16 32-bit words (one pair of bf16 each):
 * words, then pairs of words within 128-bit lanes, then the lanes. */
static inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int g = 0; g < 16; g += 4) {
    t[g] = _mm512_unpacklo_epi32(r[g], r[g + 1]);
    t[g + 1] = _mm512_unpackhi_epi32(r[g], r[g + 1]);
    t[g + 2] = _mm512_unpacklo_epi32(r[g + 2], r[g + 3]);
    t[g + 3] = _mm512_unpackhi_epi32(r[g + 2], r[g + 3]);
    r[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    r[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    r[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    r[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; c++) {
    t[c] = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
    t[8 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
  }
  for (int c = 0; c < 8; c++) {
    r[c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0xdd);
  }
}

/* B's block [kc, nc] (op applied) into panels [nc/NR][KPP][NR] of pairs
 * (kp = kc rounded up, halved; KPP >= kp), zero beyond kc and nc. */
static void pack_b(bool tb, const float *b, int ldb, int kc, int nc, int kpp,
                   uint32_t *bp) {
  int kp = (kc + 1) / 2;
  for (int j0 = 0; j0 < nc; j0 += NR) {
    uint32_t *tail = bp + (size_t)j0 * (size_t)kpp + (size_t)kp * NR;
    memset(tail, 0, (size_t)(kpp - kp) * NR * sizeof *tail);
    uint32_t *panel = bp + (size_t)j0 * (size_t)kpp;
    int w = nc - j0 < NR ? nc - j0 : NR;
    if (!tb) { /* B[k][n]: a pair is two rows, NR columns at a time */
      for (int p = 0; p < kp; p++) {
        const float *r0 = b + (size_t)(2 * p) * (size_t)ldb + j0;
        const float *r1 = r0 + ldb;
        bool two = 2 * p + 1 < kc;
        for (int j = 0; j < NR; j += 16) {
          __m512 lo = load16(r0 + j, w - j);
          __m512 hi = two ? load16(r1 + j, w - j) : _mm512_setzero_ps();
          _mm512_storeu_si512(panel + (size_t)p * NR + j,
                              interleave(round2(lo, hi)));
        }
      }
    } else { /* B stored [n][k]: a pair is adjacent in a row; 16 columns
                by 16 pairs at a time, transposed */
      for (int j = 0; j < NR; j += 16)
        for (int p = 0; p < kp; p += 16) {
          __m512i r[16];
          for (int t = 0; t < 16; t++) {
            const float *row = b + (size_t)(j0 + j + t) * (size_t)ldb + 2 * p;
            int len = j + t < w ? kc - 2 * p : 0;
            r[t] = round2(load16(row, len), load16(row + 16, len - 16));
          }
          transpose16(r);
          int m = kp - p < 16 ? kp - p : 16;
          for (int t = 0; t < m; t++)
            _mm512_storeu_si512(panel + (size_t)(p + t) * NR + j, r[t]);
        }
    }
  }
}

/* A's block [mc, kc] (op applied) into rows of KPP pairs (kpp >= kp),
 * MCP rows (mc rounded up to MR), zero beyond kc and mc. */
static void pack_a(bool ta, const float *a, int lda, int mc, int kc, int kpp,
                   int mr, uint32_t *ap) {
  int kp = (kc + 1) / 2, mcp = (mc + mr - 1) / mr * mr;
  if (kpp > kp)
    for (int i = 0; i < mc; i++)
      memset(ap + (size_t)i * (size_t)kpp + (size_t)kp, 0,
             (size_t)(kpp - kp) * sizeof *ap);
  if (!ta) { /* A[m][k]: each row is its pairs already */
    for (int i = 0; i < mc; i++) {
      const float *row = a + (size_t)i * (size_t)lda;
      uint32_t *out = ap + (size_t)i * (size_t)kpp;
      for (int p = 0; p < kp; p += 16) {
        int len = kc - 2 * p;
        __m512i v = round2(load16(row + 2 * p, len),
                           load16(row + 2 * p + 16, len - 16));
        int m = kp - p < 16 ? kp - p : 16;
        _mm512_mask_storeu_epi32(out + p, first(m), v);
      }
    }
  } else { /* A stored [k][m]: a pair is two rows; 16 pairs by 16 rows of
              the block at a time, transposed */
    for (int i = 0; i < mc; i += 16)
      for (int p = 0; p < kp; p += 16) {
        __m512i r[16];
        for (int t = 0; t < 16; t++) {
          int pt = p + t;
          if (pt >= kp) {
            r[t] = _mm512_setzero_si512();
            continue;
          }
          const float *r0 = a + (size_t)(2 * pt) * (size_t)lda + i;
          __m512 lo = load16(r0, mc - i);
          __m512 hi =
              2 * pt + 1 < kc ? load16(r0 + lda, mc - i) : _mm512_setzero_ps();
          r[t] = interleave(round2(lo, hi));
        }
        transpose16(r);
        int h = mc - i < 16 ? mc - i : 16, m = kpp - p < 16 ? kpp - p : 16;
        for (int t = 0; t < h; t++)
          _mm512_mask_storeu_epi32(ap + (size_t)(i + t) * (size_t)kpp + p,
                                   first(m), r[t]);
      }
  }
  memset(ap + (size_t)mc * (size_t)kpp, 0,
         (size_t)(mcp - mc) * (size_t)kpp * sizeof *ap);
}

/* One row of C's block: C[0, w) = (store ? BIAS or 0 : C) + alpha * (V0,
 * V1). The bias is added as a C holding it would be: the same bits as
 * filling C with it and adding into C. */
static inline void put_row(float *ci, __m512 v0, __m512 v1, float alpha, int w,
                           bool store, const float *bias) {
  __m512 s = _mm512_set1_ps(alpha);
  __mmask16 m0 = first(w), m1 = first(w - 16 > 0 ? w - 16 : 0);
  v0 = _mm512_mul_ps(v0, s);
  v1 = _mm512_mul_ps(v1, s);
  const float *in = store ? bias : ci;
  if (in)
    v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, in));
  _mm512_mask_storeu_ps(ci, m0, v0);
  if (w <= 16) /* nothing of the second half: no access past C (load16) */
    return;
  if (in)
    v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, in + 16));
  _mm512_mask_storeu_ps(ci + 16, m1, v1);
}

/* C [h, w] = (store ? BIAS or 0 : C) + alpha * (A's MR rows of pairs) (B's
 * panel), over KP pairs. */
static void kernel(int kp, const uint32_t *a, const uint32_t *b, float alpha,
                   float *c, int ldc, int h, int w, bool store,
                   const float *bias) {
  __m512 acc[MR][2];
  for (int i = 0; i < MR; i++)
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const size_t lda = (size_t)kp;
  for (int p = 0; p < kp; p++, b += NR) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#define ROW(i)                                                                 \
  do {                                                                         \
    __m512bh ai =                                                              \
        (__m512bh)_mm512_set1_epi32((int)a[(size_t)(i)*lda + (size_t)p]);      \
    acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);                           \
    acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);                           \
  } while (0)
    ROW(0);
    ROW(1);
    ROW(2);
    ROW(3);
    ROW(4);
    ROW(5);
    ROW(6);
    ROW(7);
    ROW(8);
    ROW(9);
    ROW(10);
    ROW(11);
#undef ROW
  }
  for (int i = 0; i < h; i++)
    put_row(c + (size_t)i * (size_t)ldc, acc[i][0], acc[i][1], alpha, w, store,
            bias);
}

/* AMX: the tiles' shape, one for all eight: 16 rows of 64 bytes (C: 16 x
 * 16 f32; A: 16 rows x 16 pairs; B: 16 pairs x 16 columns, which is the
 * panels' layout). Loaded at each product: the configuration belongs to
 * the thread, and other code on it may change it. */
typedef struct tilecfg {
  uint8_t palette, start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tilecfg;

static void amx_config(void) {
  tilecfg t;
  memset(&t, 0, sizeof t);
  t.palette = 1;
  for (int i = 0; i < 8; i++) {
    t.colsb[i] = 64;
    t.rows[i] = 16;
  }
  _tile_loadconfig(&t);
}

#define MR_AMX 32

/* As kernel, on the AMX tiles: C [h, w] (h <= 32, w <= 32) from 32 rows
 * of A's pairs and B's panel, over KPP pairs (a multiple of 16), each
 * element's sum in one C tile's lane, 16 pairs per instruction. */
static void amx_kernel(int kpp, const uint32_t *a, const uint32_t *b,
                       float alpha, float *c, int ldc, int h, int w, bool store,
                       const float *bias) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const size_t sa = (size_t)kpp * sizeof *a, sb = NR * sizeof *b;
  const uint32_t *a1 = a + 16 * (size_t)kpp;
  for (int p = 0; p < kpp; p += 16) {
    _tile_loadd(4, a + p, sa);
    _tile_loadd(5, a1 + p, sa);
    _tile_loadd(6, b + (size_t)p * NR, sb);
    _tile_loadd(7, b + (size_t)p * NR + 16, sb);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _Alignas(64) float out[32][32];
  _tile_stored(0, &out[0][0], sizeof out[0]);
  _tile_stored(1, &out[0][16], sizeof out[0]);
  _tile_stored(2, &out[16][0], sizeof out[0]);
  _tile_stored(3, &out[16][16], sizeof out[0]);
  for (int i = 0; i < h; i++)
    put_row(c + (size_t)i * (size_t)ldc, _mm512_load_ps(out[i]),
            _mm512_load_ps(out[i] + 16), alpha, w, store, bias);
}

/* The packed blocks, one set per thread, made once at the thread's first
 * product and kept: a product runs on the thread that calls it, and a
 * batch must not allocate. Freed when the thread ends. */
typedef struct bufs {
  uint32_t b[KP * NC];
  uint32_t a[MC * KP];
} bufs;

static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static int bufs_key_rc = -1;

static void bufs_key_make(void) {
  bufs_key_rc = pthread_key_create(&bufs_key, free);
}

static bufs *thread_bufs(void) {
  pthread_once(&bufs_once, bufs_key_make);
  if (bufs_key_rc != 0)
    return NULL;
  bufs *p = pthread_getspecific(bufs_key);
  if (!p) {
    p = aligned_alloc(64, sizeof *p);
    if (p && pthread_setspecific(bufs_key, p) != 0) {
      free(p);
      p = NULL;
    }
  }
  return p;
}

enum { ENGINE_NONE, ENGINE_AVX512, ENGINE_AMX };
static int engine(void);

bool nn__bf16_gemm(bool ta, bool tb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta,
                   float *c, int ldc, const float *bias) {
  int e = engine();
  bufs *buf = e != ENGINE_NONE ? thread_bufs() : NULL;
  if (!buf)
    return false;
  bool amx = e == ENGINE_AMX;
  int mr = amx ? MR_AMX : MR;
  if (beta != 0 && beta != 1)
    for (int i = 0; i < m; i++) {
      float *ci = c + (size_t)i * (size_t)ldc;
      for (int j = 0; j < n; j++)
        ci[j] *= beta;
    }
  if (amx)
    amx_config();
  for (int jc = 0; jc < n; jc += NC) {
    int nc = n - jc < NC ? n - jc : NC;
    for (int pc = 0; pc < k; pc += KC) {
      int kc = k - pc < KC ? k - pc : KC, kp = (kc + 1) / 2;
      int kpp = amx ? (kp + 15) / 16 * 16 : kp; /* AMX: whole tiles of k */
      bool store = pc == 0 && beta == 0;        /* BLAS: C is not read */
      pack_b(tb,
             tb ? b + (size_t)jc * (size_t)ldb + (size_t)pc
                : b + (size_t)pc * (size_t)ldb + (size_t)jc,
             ldb, kc, nc, kpp, buf->b);
      for (int ic = 0; ic < m; ic += MC) {
        int mc = m - ic < MC ? m - ic : MC;
        pack_a(ta,
               ta ? a + (size_t)pc * (size_t)lda + (size_t)ic
                  : a + (size_t)ic * (size_t)lda + (size_t)pc,
               lda, mc, kc, kpp, mr, buf->a);
        for (int jr = 0; jr < nc; jr += NR)
          for (int ir = 0; ir < mc; ir += mr) {
            const uint32_t *ap = buf->a + (size_t)ir * (size_t)kpp,
                           *bp = buf->b + (size_t)jr * (size_t)kpp;
            float *cb = c + (size_t)(ic + ir) * (size_t)ldc + (size_t)(jc + jr);
            int h = mc - ir < mr ? mc - ir : mr,
                w = nc - jr < NR ? nc - jr : NR;
            const float *bb = bias ? bias + jc + jr : NULL;
            if (amx)
              amx_kernel(kpp, ap, bp, alpha, cb, ldc, h, w, store, bb);
            else
              kernel(kpp, ap, bp, alpha, cb, ldc, h, w, store, bb);
          }
      }
    }
  }
  if (amx)
    _tile_release();
  return true;
}

#ifdef __clang__
#pragma clang attribute pop
#endif

/* What the CPU and the kernel offer: AVX512-BF16 (CPUID 7.1 EAX bit 5,
 * with AVX-512 F, BW, VL and the OS saving zmm state), AMX (CPUID 7.0 EDX
 * bits 22 and 24, the OS saving tile state, and the process allowed to use
 * it: Linux asks for it with arch_prctl). Valgrind reports neither. */
static int hw_engine;
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static void hw_probe(void) {
  unsigned a, b, c, d;
  hw_engine = ENGINE_NONE;
  if (!__get_cpuid_count(1, 0, &a, &b, &c, &d) || !(c & (1u << 27)))
    return; /* no OSXSAVE: no xgetbv */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  uint64_t xcr0 = ((uint64_t)hi << 32) | lo;
  if ((xcr0 & 0xe6) != 0xe6) /* SSE, AVX, opmask, zmm state */
    return;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
    return;
  bool avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31));
  bool amx = (d & (1u << 22)) && (d & (1u << 24)) &&
             (xcr0 & (3ull << 17)) == (3ull << 17);
  unsigned a1, b1, c1, d1;
  bool bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
  if (!avx512)
    return;
  if (amx &&
      syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0)
    hw_engine = ENGINE_AMX;
  else if (bf16)
    hw_engine = ENGINE_AVX512;
}

/* The engine products use: the best the CPU has, or what LOOPKIT_BF16
 * says ("avx512_bf16": not AMX, for comparisons; "none": behave as a CPU
 * without either, for the tests of the refusal). */
static int engine(void) {
  pthread_once(&hw_once, hw_probe);
  const char *v = getenv("LOOPKIT_BF16");
  if (v && !strcmp(v, "none"))
    return ENGINE_NONE;
  if (v && !strcmp(v, "avx512_bf16") && hw_engine == ENGINE_AMX) {
    unsigned a, b, c, d; /* AMX CPUs have AVX512-BF16 too, but check */
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)))
      return ENGINE_AVX512;
    return ENGINE_NONE;
  }
  return hw_engine;
}

const char *nn__bf16_engine(void) {
  switch (engine()) {
  case ENGINE_AMX: return "amx_bf16";
  case ENGINE_AVX512: return "avx512_bf16";
  default: return NULL;
  }
}

#else /* not x86-64 */
bool nn__bf16_gemm(bool ta, bool tb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta,
                   float *c, int ldc, const float *bias) {
  (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a,
      (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc, (void)bias;
  return false;
}

const char *nn__bf16_engine(void) {
  return NULL;
}
#endif
