/* GRU: torch.nn.GRU(input_size, hidden_size, num_layers, bias,
 * batch_first=True, dropout, bidirectional) on a sequence [T, C], its
 * output the whole sequence [T, H] ([T, 2H] bidirectional), from zero
 * states; torch's parameter names (weight_ih_l0, ..._reverse) and init
 * (rnn.c). */
#include "rnn.h"

static int infer(lk_layer *l, int n_in, const lk_layer_shape *in,
                 lk_layer_shape *out) {
  rnn_state *s = l->state;
  s->gates = 3;
  s->forward = lk_nn_gru_forward;
  s->backward = lk_nn_gru_backward;
  return lk__rnn_infer(l, n_in, in, out);
}

const lk_layer_type lk__layer_gru = {
    .size = LK_LAYER_TYPE_SIZE,
    .name = "gru",
    .summary = "gated recurrent unit over a sequence [T, C]",
    .args = lk__rnn_args,
    .flags = LK_LAYER_TRAIN_DIFFERS,
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(rnn_state),
    .infer = infer,
    .tensors = lk__rnn_tensors,
    .init = lk__rnn_init,
    .reserve = lk__rnn_reserve,
    .release = lk__rnn_release,
    .forward = lk__rnn_forward,
    .backward = lk__rnn_backward,
    .onnx = lk__rnn_onnx};
