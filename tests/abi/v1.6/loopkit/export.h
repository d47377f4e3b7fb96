/* loopkit — symbol visibility. The library and plugins are built with
 * -fvisibility=hidden; only what carries these macros is exported. */
#ifndef LOOPKIT_EXPORT_H
#define LOOPKIT_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define LK_API __attribute__((visibility("default")))
#define LK_PLUGIN_EXPORT __attribute__((visibility("default")))
#define LK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define LK_API
#define LK_PLUGIN_EXPORT
#define LK_PRINTF(f, a)
#endif

/* A function kept for old programs whose use the compiler warns about
 * (define LK_NO_DEPRECATION_WARNINGS to silence it). */
#if (defined(__GNUC__) || defined(__clang__)) &&                               \
    !defined(LK_NO_DEPRECATION_WARNINGS)
#define LK_DEPRECATED(why) __attribute__((deprecated(why)))
#else
#define LK_DEPRECATED(why)
#endif

#endif
