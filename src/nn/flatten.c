/* flatten: torch.flatten's shape. On contiguous row-major memory the
 * values do not move, so this is all a network needs: the output is the
 * input's memory under the new shape, and the gradient likewise. */
#include <limits.h>

#include "nn_internal.h"

#define LAYER "flatten"

int lk_nn_flatten(const int *shape, int ndim, int start, int end, int *out,
                  int *out_ndim) {
  NN_CHECK(shape && out && out_ndim, LAYER,
           "shape, out and out_ndim are needed");
  NN_CHECK(ndim >= 1, LAYER, "ndim = %d; expected >= 1", ndim);
  int s = start < 0 ? start + ndim : start, e = end < 0 ? end + ndim : end;
  NN_CHECK(s >= 0 && s < ndim && e >= 0 && e < ndim && s <= e, LAYER,
           "dimensions %d to %d of a %d-dimensional shape", start, end, ndim);
  size_t merged = 1;
  for (int i = 0; i < ndim; i++)
    NN_CHECK(shape[i] >= 1, LAYER, "dimension %d is %d; expected >= 1", i,
             shape[i]);
  for (int i = s; i <= e; i++)
    merged = nn__mul(merged, (size_t)shape[i]);
  NN_CHECK(merged <= INT_MAX, LAYER,
           "dimensions %d to %d make %s%zu, more than an int holds", s, e,
           merged == SIZE_MAX ? "more than " : "", merged);
  /* left to right, so that OUT may be SHAPE */
  int k = 0;
  for (int i = 0; i < ndim; i++) {
    if (i > s && i <= e)
      continue;
    out[k++] = i == s ? (int)merged : shape[i];
  }
  *out_ndim = k;
  return 0;
}
