/* loopkit/layer.h: one layer interface. A layer type is one table,
 * lk_layer_type: its name (torch's class name, matched in any case), its
 * arguments as a table (as a plugin's options: name, type, default, range,
 * help), its shape inference from its input shapes, the parameters and
 * buffers it declares (named as torch's module names them, relative to the
 * layer: "weight", "bias", "running_mean") and torch's default init of
 * them, its forward and backward on the layer kit (loopkit/nn.h), what it
 * keeps between the two, and whether it behaves differently in training
 * and evaluation.
 *
 * The built-in tables live in libloopkit (src/nn/layers/, one file per
 * layer, one registration line each in src/nn/layers/list.h); any model
 * finds them by name with lk_layer_find. Since ABI 1.6 a plugin of kind
 * layers (loopkit/plugin.h) gives more, which a model finds with
 * lk_host_find_layer (or parses with lk_host_parse_layer), built-ins and
 * plugins' alike. A consumer (sequential) uses an
 * instance, lk_layer, in this order:
 *
 *   lk_layer_parse     the text "conv2d(32, 3, padding=1)": type and args
 *   lk_layer_infer     the output shape from the input shape(s)
 *   type->tensors      the parameters and buffers to make; the consumer
 *                      makes them (lk_host_add_param, ...) and sets l->t[]
 *   lk_layer_bind      the buffers' initial values, what the layer keeps
 *   type->init         torch's default init of the parameters (unless the
 *                      parameters come from a file), from the run's
 *                      generator in declaration order
 *   lk_layer_reserve   the memory a batch of N needs between forward and
 *                      backward (the consumer owns the outputs)
 *   type->forward, type->backward, per batch
 *   lk_layer_free
 *
 * The struct is append-only: a table says its own size (LK_LAYER_TYPE_SIZE
 * when built against this header), and a field past that size reads as
 * NULL or 0, so that a table compiled against an older header keeps
 * working. Failures return a negative LK_E* code with the message set
 * (lk_layer_fail); a consumer adds where (the layer's index and text). */
#ifndef LOOPKIT_LAYER_H
#define LOOPKIT_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <loopkit/host.h>
#include <loopkit/nn.h>
#include <loopkit/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LK_LAYER_MAX_ARGS 8    /* arguments a layer type takes */
#define LK_LAYER_MAX_TENSORS 8 /* parameters and buffers a layer declares */
#define LK_LAYER_MAX_INPUTS 8  /* inputs a layer takes (add, cat: 2) */
#define LK_LAYER_WORD_MAX 32   /* a word argument's longest value */

/* ---- arguments ---------------------------------------------------------- */

typedef enum lk_layer_arg_type {
  LK_LAYER_INT,  /* a whole number in [min, max] */
  LK_LAYER_PAIR, /* a whole number, or a pair (a, b), each in [min, max] */
  LK_LAYER_BOOL, /* true or false */
  LK_LAYER_REAL, /* a finite number in the range min, max */
  LK_LAYER_WORD  /* a word, quoted or not; one of choices */
} lk_layer_arg_type;

/* Flags of an argument. */
#define LK_LAYER_ARG_POSITIONAL 0x1u /* may be given by position */
#define LK_LAYER_ARG_REQUIRED 0x2u   /* must be given */
/* the size of the input (in_channels, in_features, num_features,
 * normalized_shape): inferred, given by keyword only, then checked */
#define LK_LAYER_ARG_INPUT 0x4u
#define LK_LAYER_ARG_MIN_OPEN 0x8u  /* a real's min is excluded */
#define LK_LAYER_ARG_MAX_OPEN 0x10u /* a real's max is excluded */

typedef struct lk_layer_arg {
  const char *name; /* torch's constructor's; NULL ends the table */
  lk_layer_arg_type type;
  unsigned flags;
  const char *def;     /* the default, as written; NULL: none */
  double min, max;     /* the range (INT, PAIR, REAL); max INFINITY: none */
  const char *choices; /* WORD: the accepted values, "a|b" */
  const char *help;
} lk_layer_arg;

/* An argument's value, in the order of the table. */
typedef struct lk_layer_value {
  bool given; /* given in the text (else the default, if any) */
  bool set;   /* given or defaulted */
  int i, j;   /* INT (i), PAIR (i, j), BOOL (i: 0 or 1) */
  double r;   /* REAL */
  char word[LK_LAYER_WORD_MAX];
} lk_layer_value;

/* ---- shapes, tensors, instances ----------------------------------------- */

/* The shape of one sample (the batch dimension apart). */
typedef struct lk_layer_shape {
  lk_dtype dtype; /* LK_F32, or LK_I32 tokens */
  int ndim;
  int d[LK_MAX_DIMS];
  size_t tokens; /* LK_I32: the values are < tokens when known, else 0 */
} lk_layer_shape;

#define LK_LAYER_PARAM 0x1u  /* a parameter: trained, has .grad */
#define LK_LAYER_BUFFER 0x2u /* a buffer: state kept and checkpointed */
/* with LK_LAYER_BUFFER, an f64 of whole numbers that torch holds as int64
 * (num_batches_tracked): exported as I64 (lk_host_add_buffer's
 * LK_BUFFER_COUNT) */
#define LK_LAYER_COUNT 0x4u

/* A tensor a layer declares; its full name is the consumer's prefix then
 * NAME ("3." "running_mean"). */
typedef struct lk_layer_tensor {
  char name[32];
  unsigned flags; /* LK_LAYER_PARAM, or LK_LAYER_BUFFER [| LK_LAYER_COUNT] */
  lk_dtype dtype;
  int ndim; /* 0: a scalar */
  size_t shape[4];
  /* a buffer a checkpoint restores is checked: every element in [min,
   * max], and a whole number with INTEGER (lk_state_check) */
  bool checked, integer;
  double min, max;
} lk_layer_tensor;

typedef struct lk_layer_type lk_layer_type;

/* One layer of a network. */
typedef struct lk_layer {
  const lk_layer_type *type;
  lk_layer_value args[LK_LAYER_MAX_ARGS];
  int n_in;          /* inputs */
  lk_layer_shape in; /* the first input's shape */
  lk_layer_shape out;
  size_t in_numel, out_numel;
  lk_tensor *t[LK_LAYER_MAX_TENSORS]; /* as tensors() declared them */
  int n_t;
  void *state; /* type->state_size bytes, zeroed: the layer's own */
  size_t cap;  /* the batch lk_layer_reserve made room for */
  /* set by the consumer when the next layer's fuse_prev took this layer's
   * work: then neither its forward nor its backward is called, and its
   * output is its input */
  bool done_by_next;
  void *reserved[4];
} lk_layer;

/* Flags of a type. */
#define LK_LAYER_TRAIN_DIFFERS 0x1u /* training and evaluation differ */
/* the output is the input's memory, reshaped: no forward or backward is
 * called (flatten) */
#define LK_LAYER_VIEW 0x2u
/* takes tokens, i32 [T], and only as a network's first layer */
#define LK_LAYER_TOKENS 0x4u

struct lk_layer_type {
  uint32_t size;       /* LK_LAYER_TYPE_SIZE: fields past it read as 0 */
  const char *name;    /* torch's class name, lower case */
  const char *summary; /* one line */
  const lk_layer_arg *args;
  unsigned flags;
  int min_inputs, max_inputs; /* 1, 1 for a layer of a chain */
  size_t state_size;          /* bytes of l->state */
  /* OUT from the N_IN input shapes IN (l->in is IN[0]); the args are
   * parsed. A message says what does not fit, e.g. "input [64]; expected
   * an image [C, H, W]". */
  int (*infer)(lk_layer *l, int n_in, const lk_layer_shape *in,
               lk_layer_shape *out);
  /* The parameters then buffers, into OUT [LK_LAYER_MAX_TENSORS], in
   * torch's order: their count. NULL: none. */
  int (*tensors)(const lk_layer *l, lk_layer_tensor *out);
  /* torch's reset_parameters on l->t (zeroed); NULL: they stay 0 */
  void (*init)(lk_layer *l, lk_rng *rng);
  /* once l->t is set: the buffers' initial values (batch norm's
   * running_var 1) and what the layer keeps for its life. NULL: nothing */
  int (*bind)(lk_layer *l);
  /* whether this layer also does PREV's work (max-pool does a ReLU before
   * it, on fewer values): then the consumer sets prev->done_by_next */
  bool (*fuse_prev)(lk_layer *l, const lk_layer *prev);
  /* room for what a batch of N keeps between forward and backward */
  int (*reserve)(lk_layer *l, size_t n);
  /* frees everything bind and reserve made (l->state itself apart) */
  void (*release)(lk_layer *l);
  /* Y [n, out_numel] from X[k] [n, in_numel of input k]; RNG: dropout's */
  int (*forward)(lk_layer *l, lk_nn *nn, float *y, const float *const *x, int n,
                 bool training, lk_rng *rng);
  /* DX[k] [n, in_numel] += the gradient through the layer (DX[k] NULL: not
   * needed), the parameters' .grad += theirs, from DY (already scaled); X
   * and Y as the training forward had them. */
  int (*backward)(lk_layer *l, lk_nn *nn, float *const *dx, const float *dy,
                  const float *const *x, const float *y, int n);
  /* reserved for what comes: the ONNX lowering (appended), ... */
  const void *onnx;
  void *reserved[7];
};

#define LK_LAYER_TYPE_SIZE ((uint32_t)sizeof(lk_layer_type))

/* ---- the registry and the instances ------------------------------------- */

/* The built-in types: COUNT of them, I-th, and by name, any case (NAME of
 * LEN bytes; NULL when unknown). COUNT and I-th list the layers of one
 * input (a chain's); those of two, add and cat, are found by name. */
LK_API size_t lk_layer_count(void);
LK_API const lk_layer_type *lk_layer_at(size_t i);
LK_API const lk_layer_type *lk_layer_find(const char *name, size_t len);

/* Sets the message (as lk_last_error reads it) and returns CODE. */
LK_API int lk_layer_fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* TEXT [LEN], "name" or "name(ARGS)", positional then keyword, into L:
 * its type, its args (defaults filled) and its state (zeroed). On failure
 * L holds nothing to free; messages such as "conv2d needs kernel_size". */
LK_API int lk_layer_parse(lk_layer *l, const char *text, size_t len);
/* Since ABI 1.6: lk_layer_parse of TEXT [LEN] whose name is TYPE's (any
 * case), a type found elsewhere than among the built-ins (a layer plugin's,
 * lk_host_find_layer). */
LK_API int lk_layer_parse_as(lk_layer *l, const lk_layer_type *type,
                             const char *text, size_t len);
/* The args of TYPE from ARGS [LEN], the text between the parentheses,
 * into VALUES [LK_LAYER_MAX_ARGS]. */
LK_API int lk_layer_parse_args(const lk_layer_type *type, const char *args,
                               size_t len, lk_layer_value *values);
/* The output shape from N_IN input shapes: l->in, l->out and the numels. */
LK_API int lk_layer_infer(lk_layer *l, int n_in, const lk_layer_shape *in);
LK_API int lk_layer_bind(lk_layer *l);
LK_API int lk_layer_reserve(lk_layer *l, size_t n);
LK_API void lk_layer_free(lk_layer *l);
/* The index of argument NAME in L's type's table, or -1. */
LK_API int lk_layer_arg_index(const lk_layer_type *type, const char *name);
/* "[32, 14, 14]" into BUF [LEN]; returns BUF. */
LK_API const char *lk_layer_shape_text(const lk_layer_shape *s, char *buf,
                                       size_t len);

#ifdef __cplusplus
}
#endif

#endif
