/* What every command says on stderr (cli.h): its own file, so that the
 * commands and main do not depend on each other through it. */
#include <stdarg.h>
#include <stdio.h>

#include "cli.h"

void cli_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("loopkit: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}
