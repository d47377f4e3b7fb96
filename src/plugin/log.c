/* Logging: the library prints nothing itself; every message goes to the
 * host's log function, the plugins' prefixed with their name. */
#include <stdio.h>

#include "env.h"

static void emit(const lk__env *env, lk_log_level level, const char *prefix,
                 const char *fmt, va_list ap) {
  char msg[4096];
  int n = prefix ? snprintf(msg, sizeof msg, "%s: ", prefix) : 0;
  if (n < 0 || (size_t)n >= sizeof msg)
    n = 0;
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  env->log.fn(env->log.user, level, msg);
}

void lk__log(const lk__env *env, lk_log_level level, const char *fmt, ...) {
  if (!env->log.fn || level > env->log.verbosity)
    return;
  va_list ap;
  va_start(ap, fmt);
  emit(env, level, NULL, fmt, ap);
  va_end(ap);
}

void lk_log(lk_host *host, lk_log_level level, const char *fmt, ...) {
  const lk__env *env = host->env;
  if (!env->log.fn || level > env->log.verbosity)
    return;
  va_list ap;
  va_start(ap, fmt);
  emit(env, level, host->inst->label, fmt, ap);
  va_end(ap);
}
