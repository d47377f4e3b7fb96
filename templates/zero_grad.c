/* @NAME@: sets every parameter's gradient to zero, and says once how much
 * it zeroes. A loopkit plugin of kind zero_grad, written by `loopkit new`.
 *
 * Try it:   make && loopkit train @NAME@.ini
 * @NAME@.ini minimises the bundled rosenbrock function with the bundled
 * sgd and this zero_grad: the run's log shows the line this plugin logs,
 * and x ends at the minimum (1, 1), exactly where it ends with the bundled
 * zero_grad (`loopkit dump RUN_DIR/checkpoints/last.ckpt`). Without
 * zeroing, backward would keep adding to the old gradients and the run
 * would diverge.
 *
 * A plugin that keeps nothing may leave create NULL (self is then NULL);
 * this one keeps a flag and a count for its log line. It has no state to
 * resume. */
#include "preamble.h"

typedef struct zeroer {
  lk_host *host;
  bool verbose;
  uint64_t calls;
} zeroer;

static void destroy(void *self) {
  free(self);
}

static int create(lk_host *host, const lk_options *opts, void **self) {
  zeroer *z = calloc(1, sizeof *z);
  if (!z)
    return lk_fail(host, LK_ENOMEM, "out of memory");
  z->host = host;
  z->verbose = lk_opt_bool(opts, "verbose");
  *self = z;
  return 0;
}

/* zero_grad: PARAMS are the run's parameters; their gradients (grad, numel
 * elements of dtype, owned by the host) collect what backward ADDS. The
 * loop calls this inside the closure, after training_step and before
 * backward, on the first batch of each accumulation window only: with
 * [loop] accumulate_grad_batches = N the gradients of N batches add up
 * before one optimizer step. */
static int zero_grad(void *self, lk_tensor *const *params, size_t n) {
  zeroer *z = self;
  size_t values = 0;
  for (size_t i = 0; i < n; i++) {
    lk_tensor *p = params[i];
    if (!p->grad)
      continue;
    /* All-zero bytes are +0.0 in IEEE 754, f32 and f64 alike. */
    memset(p->grad, 0, p->numel * lk_dtype_size(p->dtype));
    values += p->numel;
  }
  if (z->verbose && z->calls == 0)
    lk_log(z->host, LK_LOG_INFO,
           "zeroing %zu gradient values in %zu tensors before each "
           "accumulation window",
           values, n);
  z->calls++;
  return 0;
}

static const lk_option options[] = {{"verbose", LK_OPT_BOOL, "true",
                                     "log what is zeroed, on the first call",
                                     NULL},
                                    {NULL, 0, NULL, NULL, NULL}};

static const lk_zero_grad_ops zero_grad_ops = {.zero_grad = zero_grad};

LK_PLUGIN_EXPORT const lk_descriptor lk_plugin_descriptor = {
    .abi_version = LK_ABI_VERSION, /* the ABI this file was compiled for */
    .size = sizeof(lk_descriptor),
    .name = "@NAME@", /* its [section] in a config */
    .version = "0.1",
    .summary = "sets every parameter's gradient to zero",
    .options = options,
    .create = create,
    .destroy = destroy,
    .zero_grad = &zero_grad_ops,
};
