/* loopkit — error codes.
 *
 * Every library function returns 0 or one of these negative codes and leaves
 * a message naming the culprit, readable with lk_last_error() on the same
 * thread until the next failing call. */
#ifndef LOOPKIT_ERROR_H
#define LOOPKIT_ERROR_H

#include "loopkit/export.h"

#ifdef __cplusplus
extern "C" {
#endif

enum lk_error_code {
  LK_OK = 0,
  LK_EINVAL = -1,       /* bad argument or value */
  LK_ENOMEM = -2,       /* out of memory */
  LK_EIO = -3,          /* file system error */
  LK_ENOTFOUND = -4,    /* plugin or file not found */
  LK_ELOAD = -5,        /* dlopen or descriptor failure */
  LK_EABI = -6,         /* plugin built for another ABI */
  LK_ECONFIG = -7,      /* bad config file or option */
  LK_EPLUGIN = -8,      /* a plugin reported a failure */
  LK_ENONFINITE = -9,   /* non-finite loss or parameter */
  LK_ESTATE = -10,      /* call out of order (consume twice, ...) */
  LK_EFORMAT = -11,     /* malformed or foreign checkpoint */
  LK_EKIND = -12,       /* plugin lacks the kind a role needs */
  LK_EINTERRUPTED = -13 /* stopped by lk_run_interrupt (a signal) */
};

/* A short fixed description of CODE. */
LK_API const char *lk_strerror(int code);

/* The message of the last failure on this thread ("" if none). */
LK_API const char *lk_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
