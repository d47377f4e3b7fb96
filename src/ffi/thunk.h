/* A thunk: a libffi closure of type double (*)(void) that calls HANDLER
 * with USER. The closure, its composition wrappers and bind all use it. */
#ifndef LK_THUNK_H
#define LK_THUNK_H

#include <ffi.h>

#include "internal.h"

typedef void (*lk__thunk_handler)(ffi_cif *cif, void *ret, void **args,
                                  void *user);

typedef struct lk__thunk {
  ffi_closure *ffi;
  ffi_cif cif;
  lk_closure_fn fn;
} lk__thunk;

/* Fills T; on failure T holds nothing to free and the message names WHO. */
int lk__thunk_init(lk__thunk *t, lk__thunk_handler handler, void *user,
                   const char *who);
void lk__thunk_free(lk__thunk *t);

#endif
