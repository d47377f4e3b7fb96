/* Error codes and the per-thread message that names the culprit. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char message[2048];
/* Failures recorded so far on this thread (lk__err_mark, internal.h). */
_Thread_local uint64_t lk__err_recorded;

const char *lk_strerror(int code) {
  switch (code) {
  case LK_OK: return "success";
  case LK_EINVAL: return "invalid argument";
  case LK_ENOMEM: return "out of memory";
  case LK_EIO: return "input/output error";
  case LK_ENOTFOUND: return "not found";
  case LK_ELOAD: return "cannot load plugin";
  case LK_EABI: return "plugin ABI mismatch";
  case LK_ECONFIG: return "bad configuration";
  case LK_EPLUGIN: return "plugin failed";
  case LK_ENONFINITE: return "non-finite value";
  case LK_ESTATE: return "call out of order";
  case LK_EFORMAT: return "malformed file";
  case LK_EKIND: return "plugin lacks a kind";
  case LK_EINTERRUPTED: return "interrupted";
  default: return "unknown error";
  }
}

const char *lk_last_error(void) {
  return message;
}

/* Formats into a scratch buffer, then copies: an argument may be
 * lk_last_error() itself (lk_fail(host, code, "...: %s", lk_last_error())
 * adds to the message it reads), and vsnprintf into the buffer it reads
 * garbles it. */
int lk__verr(int code, const char *fmt, va_list ap) {
  char scratch[sizeof message];
  lk__err_recorded++;
  if (vsnprintf(scratch, sizeof scratch, fmt, ap) < 0)
    scratch[0] = '\0';
  memcpy(message, scratch, strlen(scratch) + 1);
  return code;
}

int lk__err(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lk__verr(code, fmt, ap);
  va_end(ap);
  return code;
}

/* A plugin's failure: the same message, whose plugin the host names when
 * it reports it (lk__entry_failed); HOST is not read. */
int lk_fail(lk_host *host, int code, const char *fmt, ...) {
  LK_UNUSED(host);
  va_list ap;
  va_start(ap, fmt);
  lk__verr(code < 0 ? code : LK_EPLUGIN, fmt, ap);
  va_end(ap);
  return code < 0 ? code : LK_EPLUGIN;
}

int lk__err_prefix(int code, const char *fmt, ...) {
  char prefix[1024], old[sizeof message];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, message, sizeof old);
  /* A message too long for the buffer is cut; the start names the culprit. */
  if (snprintf(message, sizeof message, "%s: %s", prefix, old) < 0)
    message[0] = '\0';
  return code;
}

int lk__entry_failed(int rc, uint64_t mark, const char *fmt, ...) {
  int code = rc < 0 ? rc : LK_EPLUGIN;
  if (lk__err_recorded == mark)
    lk__err(code,
            "failed with %d (%s) without saying why (it did not call lk_fail)",
            rc, lk_strerror(code));
  char prefix[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  return lk__err_prefix(code, "%s", prefix);
}
