/* Profiling wrappers: one libffi closure per wrapped entry. Each signature
 * has its own handler, which calls the real function with the arguments
 * libffi hands it: a direct call, where ffi_call would cost more than the
 * profiler's clock reads. */
#include <ffi.h>
#include <stdlib.h>

#include "profile.h"

#define MAX_ARGS 5

/* The wrapped function, as its own type. */
typedef union entry {
  void (*any)(void);
  lk_closure_fn closure;
  int (*step)(void *, const lk_batch *, lk_step_result *);
  int (*zero_grad)(void *, lk_tensor *const *, size_t);
  int (*backward)(void *, const lk_batch *, double);
  int (*optimizer)(void *, lk_tensor *const *, size_t, lk_closure_fn);
  int (*data_epoch)(void *, lk_split, uint64_t, size_t *);
  int (*data_batch)(void *, lk_split, size_t, lk_batch *);
  int (*scheduler)(void *, lk_interval, const lk_metric *, size_t);
  int (*phase)(lk_run *);
  int (*evaluate)(lk_run *, lk_split, bool *, lk_step_result *);
  int (*logger)(void *, uint64_t, uint64_t, const lk_metric *, size_t);
} entry;

struct lk__profiled {
  ffi_cif cif;
  ffi_type *args[MAX_ARGS];
  ffi_closure *closure;
  entry real;
  const lk_profiler_ops *ops;
  void *self;
  int id;
};

/* Argument I of A, of type T. */
#define ARG(T, i) (*(T *)a[i])

static void on_closure(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  (void)a;
  p->ops->start(p->self, p->id);
  *(double *)ret = p->real.closure();
  p->ops->stop(p->self, p->id);
}

/* Integer results are returned through an ffi_arg-sized slot. */
static void on_step(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.step(ARG(void *, 0), ARG(const lk_batch *, 1),
                        ARG(lk_step_result *, 2));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

static void on_zero_grad(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.zero_grad(ARG(void *, 0), ARG(lk_tensor *const *, 1),
                             ARG(size_t, 2));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

static void on_backward(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.backward(ARG(void *, 0), ARG(const lk_batch *, 1),
                            ARG(double, 2));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

static void on_optimizer(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.optimizer(ARG(void *, 0), ARG(lk_tensor *const *, 1),
                             ARG(size_t, 2), ARG(lk_closure_fn, 3));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

static void on_data_epoch(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.data_epoch(ARG(void *, 0), (lk_split)ARG(int, 1),
                              ARG(uint64_t, 2), ARG(size_t *, 3));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

static void on_data_batch(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.data_batch(ARG(void *, 0), (lk_split)ARG(int, 1),
                              ARG(size_t, 2), ARG(lk_batch *, 3));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

static void on_scheduler(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.scheduler(ARG(void *, 0), (lk_interval)ARG(int, 1),
                             ARG(const lk_metric *, 2), ARG(size_t, 3));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

static void on_phase(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.phase(ARG(lk_run *, 0));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

static void on_evaluate(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.evaluate(ARG(lk_run *, 0), (lk_split)ARG(int, 1),
                            ARG(bool *, 2), ARG(lk_step_result *, 3));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

static void on_logger(ffi_cif *cif, void *ret, void **a, void *user) {
  const lk__profiled *p = user;
  (void)cif;
  p->ops->start(p->self, p->id);
  int rc = p->real.logger(ARG(void *, 0), ARG(uint64_t, 1), ARG(uint64_t, 2),
                          ARG(const lk_metric *, 3), ARG(size_t, 4));
  p->ops->stop(p->self, p->id);
  *(ffi_sarg *)ret = rc;
}

typedef void (*handler_fn)(ffi_cif *, void *, void **, void *);

static ffi_type *size_type(void) {
  return sizeof(size_t) == 8 ? &ffi_type_uint64 : &ffi_type_uint32;
}

/* Fills P's argument types for SIG; returns the count, the return type in
 * *RET and the handler in *HANDLER. Enums (lk_split, lk_interval) are
 * ints. */
static unsigned describe(lk__profiled *p, lk__signature sig, ffi_type **ret,
                         handler_fn *handler) {
  static const handler_fn handlers[] = {[LK__SIG_CLOSURE] = on_closure,
                                        [LK__SIG_STEP] = on_step,
                                        [LK__SIG_ZERO_GRAD] = on_zero_grad,
                                        [LK__SIG_BACKWARD] = on_backward,
                                        [LK__SIG_OPTIMIZER] = on_optimizer,
                                        [LK__SIG_DATA_EPOCH] = on_data_epoch,
                                        [LK__SIG_DATA_BATCH] = on_data_batch,
                                        [LK__SIG_SCHEDULER] = on_scheduler,
                                        [LK__SIG_PHASE] = on_phase,
                                        [LK__SIG_EVALUATE] = on_evaluate,
                                        [LK__SIG_LOGGER] = on_logger};
  ffi_type **a = p->args;
  *handler = handlers[sig];
  *ret = &ffi_type_sint;
  a[0] = &ffi_type_pointer;
  switch (sig) {
  case LK__SIG_CLOSURE: *ret = &ffi_type_double; return 0;
  case LK__SIG_STEP: a[1] = a[2] = &ffi_type_pointer; return 3;
  case LK__SIG_ZERO_GRAD:
    a[1] = &ffi_type_pointer;
    a[2] = size_type();
    return 3;
  case LK__SIG_BACKWARD:
    a[1] = &ffi_type_pointer;
    a[2] = &ffi_type_double;
    return 3;
  case LK__SIG_OPTIMIZER:
    a[1] = &ffi_type_pointer;
    a[2] = size_type();
    a[3] = &ffi_type_pointer;
    return 4;
  case LK__SIG_DATA_EPOCH:
    a[1] = &ffi_type_sint;
    a[2] = &ffi_type_uint64;
    a[3] = &ffi_type_pointer;
    return 4;
  case LK__SIG_DATA_BATCH:
    a[1] = &ffi_type_sint;
    a[2] = size_type();
    a[3] = &ffi_type_pointer;
    return 4;
  case LK__SIG_SCHEDULER:
    a[1] = &ffi_type_sint;
    a[2] = &ffi_type_pointer;
    a[3] = size_type();
    return 4;
  case LK__SIG_PHASE: return 1;
  case LK__SIG_EVALUATE:
    a[1] = &ffi_type_sint;
    a[2] = a[3] = &ffi_type_pointer;
    return 4;
  case LK__SIG_LOGGER:
    a[1] = a[2] = &ffi_type_uint64;
    a[3] = &ffi_type_pointer;
    a[4] = size_type();
    return 5;
  }
  return 0;
}

int lk__profile_wrap(lk__signature sig, void (*real)(void),
                     const lk_profiler_ops *ops, void *self, int id,
                     lk__profiled **out, void **fn) {
  *out = NULL;
  lk__profiled *p = calloc(1, sizeof *p);
  if (!p)
    return lk__err(LK_ENOMEM, "out of memory");
  p->real.any = real;
  p->ops = ops;
  p->self = self;
  p->id = id;
  ffi_type *ret;
  handler_fn handler;
  unsigned n = describe(p, sig, &ret, &handler);
  void *code = NULL;
  if (ffi_prep_cif(&p->cif, FFI_DEFAULT_ABI, n, ret, p->args) != FFI_OK ||
      !(p->closure = ffi_closure_alloc(sizeof(ffi_closure), &code)) ||
      ffi_prep_closure_loc(p->closure, &p->cif, handler, p, code) != FFI_OK) {
    lk__profiled_free(p);
    return lk__err(LK_ENOMEM, "cannot make a profiling wrapper (libffi)");
  }
  *out = p;
  *fn = code;
  return 0;
}

void lk__profiled_free(lk__profiled *p) {
  if (!p)
    return;
  if (p->closure)
    ffi_closure_free(p->closure);
  free(p);
}
