/* FMA_CLONES: compile a function twice, for CPUs with the FMA instruction
 * and for the others, and pick at load time (an ifunc). The optimizers call
 * fma() per element to round as torch does; without the instruction each
 * call goes through libm, which made sgd's update most of a batch-1 step. */
#ifndef LK_FMA_CLONES_H
#define LK_FMA_CLONES_H

#if defined(__x86_64__) && defined(__linux__) &&                               \
    (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 6))
#define FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define FMA_CLONES
#endif

#endif
