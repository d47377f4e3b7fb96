/* libffi thunks of type double (*)(void). */
#include <string.h>

#include "thunk.h"

int lk__thunk_init(lk__thunk *t, lk__thunk_handler handler, void *user,
                   const char *who) {
  void *code = NULL;
  t->ffi = ffi_closure_alloc(sizeof(ffi_closure), &code);
  if (!t->ffi)
    return lk__err(LK_ENOMEM, "%s: ffi_closure_alloc failed", who);
  if (ffi_prep_cif(&t->cif, FFI_DEFAULT_ABI, 0, &ffi_type_double, NULL) !=
          FFI_OK ||
      ffi_prep_closure_loc(t->ffi, &t->cif, handler, user, code) != FFI_OK) {
    ffi_closure_free(t->ffi);
    t->ffi = NULL;
    return lk__err(LK_EINVAL, "%s: libffi could not prepare the closure", who);
  }
  /* ISO C forbids converting void * to a function pointer; libffi hands
   * back the executable address as data. */
  memcpy(&t->fn, &code, sizeof t->fn);
  return 0;
}

void lk__thunk_free(lk__thunk *t) {
  if (t->ffi)
    ffi_closure_free(t->ffi);
  t->ffi = NULL;
}
