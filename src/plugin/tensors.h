/* The parameters and the state of a run: allocated and owned by the host,
 * named, checkpointed. Plugins add them during create only. */
#ifndef LK_TENSORS_H
#define LK_TENSORS_H

#include "internal.h"

typedef struct lk__tensors {
  lk_tensor **params;
  const void **owners; /* n_params: the instance that added each (NULL:
                          borrowed), for lk_host_load_params */
  size_t n_params;
  lk_tensor **states;
  size_t n_states;
  unsigned *state_flags; /* n_flags (<= n_states; beyond: 0): LK__BUFFER for
                            a module buffer, with lk_host_add_buffer's flags */
  size_t n_flags;
  bool sealed;   /* creation is over: no more tensors */
  bool borrowed; /* the params are the caller's (lk_optimizer_open) */
} lk__tensors;

/* Adds a zero-filled tensor (a parameter with its gradient, or a state)
 * named NAME (a state: WHO.NAME). WHO names the plugin in messages; OWNER
 * (its instance) is recorded with a parameter. */
int lk__tensors_add(lk__tensors *t, const char *who, const void *owner,
                    const char *name, lk_dtype dtype, size_t ndim,
                    const size_t *shape, bool param, lk_tensor **out);

/* A state that is a module buffer (lk_host_add_buffer): exported and
 * loaded with the parameters, under its name without the "PLUGIN."
 * prefix. Its lk_host_add_buffer flags are in the bits below it. */
#define LK__BUFFER 0x100u

/* Marks state I as a buffer with lk_host_add_buffer's FLAGS. */
int lk__tensors_mark_buffer(lk__tensors *t, size_t i, unsigned flags);
/* State I's flags: LK__BUFFER | its buffer flags, or 0 for plain state. */
unsigned lk__tensors_state_flags(const lk__tensors *t, size_t i);
/* The name buffer B (a state named PLUGIN.NAME) has in a safetensors file:
 * NAME. */
const char *lk__buffer_name(const lk_tensor *b);

/* The owner recorded for parameter I (NULL if none). */
const void *lk__tensors_owner(const lk__tensors *t, size_t i);

void lk__tensors_free(lk__tensors *t);

#endif
