/* The precision of the kit's products: a context's own (LK_NN_BF16,
 * LK_NN_F32), else the process's default, which a precision plugin sets
 * (bf16-mixed). Apart from context.c and gemm.c, so that the product
 * reads it without the two depending on each other. */
#include <stdatomic.h>

#include "nn_internal.h"

/* The process's default precision of products: bf16 while anyone holds
 * it (lk_nn_bf16_acquire), for every context created without LK_NN_BF16
 * or LK_NN_F32. Read at each product, not at create: a run creates its
 * models before its precision plugin (the kinds' creation order), and the
 * plugin's choice must reach the contexts the models already have. */
static _Atomic int bf16_users;

int lk_nn_bf16_acquire(void) {
  if (!nn__bf16_engine())
    return lk__err(LK_EINVAL, "bf16 products: %s", NN_NO_BF16_ENGINE);
  atomic_fetch_add(&bf16_users, 1);
  return 0;
}

void lk_nn_bf16_release(void) {
  int n = atomic_load(&bf16_users);
  while (n > 0 && !atomic_compare_exchange_weak(&bf16_users, &n, n - 1))
    ;
}

const char *lk_nn_bf16_engine(void) {
  return nn__bf16_engine();
}

bool nn__bf16(const lk_nn *nn) {
  if (nn->precision)
    return nn->precision == LK_NN_BF16;
  return atomic_load_explicit(&bf16_users, memory_order_relaxed) > 0;
}

const char *lk_nn_products(const lk_nn *nn) {
  return nn && nn__bf16(nn) ? "bf16" : "f32";
}
