/* The ONNX graph builder (loopkit/onnx.h): nodes, initializers and the
 * graph's input and output, each encoded as it comes (GraphProto's
 * fields: node 1, initializer 5, input 11, output 12), and the names of
 * the values defined so far, so that a node taking a value nobody gave
 * yet, or giving one twice, is refused where it is added, naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/internal.h"
#include "onnx_graph.h"

enum { GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INIT = 5, GRAPH_INPUT = 11 };
enum { GRAPH_OUTPUT = 12 };

typedef struct value {
  char *name;
  const void *data; /* an initializer's source tensor, to share it */
} value;

struct lk_onnx {
  lk__pb nodes, inits, io;
  value *values; /* defined: the input, initializers, nodes' outputs */
  size_t n_values, cap_values;
  char **tmps; /* lk_onnx_tmp's names */
  size_t n_tmps, n_nodes;
  unsigned counter;
  bool has_input, has_output;
};

int lk__onnx_new(lk_onnx **out) {
  *out = calloc(1, sizeof **out);
  return *out ? 0 : lk__err(LK_ENOMEM, "out of memory");
}

void lk__onnx_free(lk_onnx *g) {
  if (!g)
    return;
  lk__pb_free(&g->nodes);
  lk__pb_free(&g->inits);
  lk__pb_free(&g->io);
  for (size_t i = 0; i < g->n_values; i++)
    free(g->values[i].name);
  for (size_t i = 0; i < g->n_tmps; i++)
    free(g->tmps[i]);
  free(g->values);
  free(g->tmps);
  free(g);
}

static value *find(const lk_onnx *g, const char *name) {
  for (size_t i = 0; i < g->n_values; i++)
    if (!strcmp(g->values[i].name, name))
      return &g->values[i];
  return NULL;
}

/* NAME defined (DATA: an initializer's source). */
static int define(lk_onnx *g, const char *name, const void *data) {
  if (g->n_values == g->cap_values) {
    size_t cap = g->cap_values ? 2 * g->cap_values : 64;
    value *v = realloc(g->values, cap * sizeof *v);
    if (!v)
      return lk__err(LK_ENOMEM, "out of memory");
    g->values = v, g->cap_values = cap;
  }
  char *copy = strdup(name);
  if (!copy)
    return lk__err(LK_ENOMEM, "out of memory");
  g->values[g->n_values++] = (value){copy, data};
  return 0;
}

/* Whether NAME may be a value's: not empty, printable. */
static bool valid_name(const char *name) {
  if (!name || !*name)
    return false;
  for (const char *c = name; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      return false;
  return true;
}

const char *lk_onnx_tmp(lk_onnx *g, const char *hint) {
  char buf[96];
  if (!g)
    return lk__err(LK_EINVAL, "lk_onnx_tmp: NULL graph"), NULL;
  const char *h = valid_name(hint) ? hint : "t";
  do
    snprintf(buf, sizeof buf, "%.80s_%u", h, g->counter++);
  while (find(g, buf));
  char **tmps = realloc(g->tmps, (g->n_tmps + 1) * sizeof *tmps);
  if (tmps)
    g->tmps = tmps;
  char *copy = tmps ? strdup(buf) : NULL;
  if (!copy)
    return lk__err(LK_ENOMEM, "out of memory"), NULL;
  return g->tmps[g->n_tmps++] = copy;
}

/* The inputs IN [N] of node WHAT: each defined or "". */
static int check_inputs(const lk_onnx *g, const char *what,
                        const char *const *in, int n) {
  for (int k = 0; k < n; k++) {
    if (!in[k])
      return lk__err(LK_EINVAL, "%s: input %d is NULL", what, k);
    if (*in[k] && !find(g, in[k]))
      return lk__err(LK_EINVAL,
                     "%s: input %d \"%s\" is not defined before it (the "
                     "graph's input, an initializer or an earlier node's "
                     "output)",
                     what, k, in[k]);
  }
  return 0;
}

/* The outputs OUT [N] of node WHAT: each new, none twice. */
static int check_outputs(const lk_onnx *g, const char *what,
                         const char *const *out, int n) {
  if (n < 1)
    return lk__err(LK_EINVAL, "%s: no output", what);
  for (int k = 0; k < n; k++) {
    if (!valid_name(out[k]))
      return lk__err(LK_EINVAL, "%s: output %d has no valid name", what, k);
    bool twice = false;
    for (int j = 0; j < k; j++)
      twice |= !strcmp(out[j], out[k]);
    if (twice || find(g, out[k]) || !strcmp(out[k], "input"))
      return lk__err(LK_EINVAL, "%s: output %d \"%s\" is already defined", what,
                     k, out[k]);
  }
  return 0;
}

/* Attribute A as an AttributeProto (name 1, f 2, i 3, s 4, ints 8, type
 * 20) into M. */
static int encode_attr(lk__pb *m, const lk_onnx_attr *a, const char *what) {
  if (!valid_name(a->name))
    return lk__err(LK_EINVAL, "%s: an attribute has no valid name", what);
  lk__pb_str(m, 1, a->name);
  switch (a->type) {
  case LK_ONNX_FLOAT: lk__pb_f32(m, 2, a->f), lk__pb_int(m, 20, 1); break;
  case LK_ONNX_INT: lk__pb_int(m, 3, a->i), lk__pb_int(m, 20, 2); break;
  case LK_ONNX_STRING:
    if (!a->s)
      return lk__err(LK_EINVAL, "%s: attribute %s: NULL string", what, a->name);
    lk__pb_str(m, 4, a->s), lk__pb_int(m, 20, 3);
    break;
  case LK_ONNX_INTS:
    if (!a->ints && a->n)
      return lk__err(LK_EINVAL, "%s: attribute %s: NULL ints", what, a->name);
    for (size_t k = 0; k < a->n; k++) /* repeated, unpacked, as onnx writes */
      lk__pb_int(m, 8, a->ints[k]);
    lk__pb_int(m, 20, 7);
    break;
  default:
    return lk__err(LK_EINVAL, "%s: attribute %s: unknown type %d", what,
                   a->name, (int)a->type);
  }
  return 0;
}

/* NodeProto: input 1, output 2, name 3, op_type 4, attribute 5. */
static int encode_node(lk__pb *m, const char *what, const char *name,
                       const char *op_type, const char *const *in, int n_in,
                       const char *const *out, int n_out, const lk_onnx_attr *a,
                       int n_a) {
  for (int k = 0; k < n_in; k++)
    lk__pb_str(m, 1, in[k]);
  for (int k = 0; k < n_out; k++)
    lk__pb_str(m, 2, out[k]);
  lk__pb_str(m, 3, name);
  lk__pb_str(m, 4, op_type);
  for (int k = 0; k < n_a; k++) {
    lk__pb attr = {0};
    int rc = encode_attr(&attr, &a[k], what);
    if (rc == 0)
      lk__pb_msg(m, 5, &attr);
    lk__pb_free(&attr);
    if (rc != 0)
      return rc;
  }
  return 0;
}

int lk_onnx_node(lk_onnx *g, const char *op_type, const char *const *in,
                 int n_in, const char *const *out, int n_out,
                 const lk_onnx_attr *a, int n_a) {
  char what[64];
  if (!g || !valid_name(op_type))
    return lk__err(LK_EINVAL, "lk_onnx_node: NULL graph or no op type");
  snprintf(what, sizeof what, "node %zu (%.32s)", g->n_nodes, op_type);
  if (n_in < 0 || n_out < 0 || n_a < 0 || (n_in && !in) || (n_out && !out) ||
      (n_a && !a))
    return lk__err(LK_EINVAL,
                   "%s: NULL or negative inputs, outputs or "
                   "attributes",
                   what);
  int rc = check_inputs(g, what, in, n_in);
  if (rc == 0)
    rc = check_outputs(g, what, out, n_out);
  lk__pb node = {0};
  char name[48];
  snprintf(name, sizeof name, "%.32s_%zu", op_type, g->n_nodes);
  if (rc == 0)
    rc = encode_node(&node, what, name, op_type, in, n_in, out, n_out, a, n_a);
  for (int k = 0; rc == 0 && k < n_out; k++)
    rc = define(g, out[k], NULL);
  if (rc == 0)
    lk__pb_msg(&g->nodes, GRAPH_NODE, &node);
  lk__pb_free(&node);
  if (rc == 0 && g->nodes.oom)
    rc = lk__err(LK_ENOMEM, "out of memory encoding %s", what);
  g->n_nodes += rc == 0;
  return rc;
}

/* ---- initializers: TensorProto (dims 1, data_type 2, name 8, raw_data
 * 9, little-endian) ---- */

/* A new initializer NAME: refused when the name is taken, unless by the
 * same DATA (*SHARED then set: nothing to add). */
static int new_init(lk_onnx *g, const char *name, const void *data,
                    bool *shared) {
  *shared = false;
  if (!valid_name(name))
    return lk__err(LK_EINVAL, "an initializer has no valid name");
  const value *v = find(g, name);
  if (v && data && v->data == data)
    return *shared = true, 0;
  if (v)
    return lk__err(LK_EINVAL, "initializer %s: the name is already defined",
                   name);
  return 0;
}

/* The TensorProto NAME of type TYPE, DIMS [NDIM], its NBYTES of
 * little-endian RAW, added as an initializer (DATA: its source). */
static int add_init(lk_onnx *g, const char *name, int type, const int64_t *dims,
                    size_t ndim, const void *raw, size_t nbytes,
                    const void *data) {
  lk__pb t = {0};
  for (size_t d = 0; d < ndim; d++)
    lk__pb_int(&t, 1, dims[d]);
  lk__pb_int(&t, 2, type);
  lk__pb_str(&t, 8, name);
  lk__pb_len(&t, 9, raw, nbytes);
  lk__pb_msg(&g->inits, GRAPH_INIT, &t);
  lk__pb_free(&t);
  if (g->inits.oom)
    return lk__err(LK_ENOMEM, "out of memory encoding initializer %s", name);
  return define(g, name, data);
}

/* N floats from SRC (f32, or f64 when F64) as little-endian f32 bytes. */
static uint8_t *f32_bytes(const void *src, bool f64, size_t n) {
  uint8_t *raw = malloc(n ? 4 * n : 1);
  for (size_t i = 0; raw && i < n; i++) {
    float f = f64 ? (float)((const double *)src)[i] : ((const float *)src)[i];
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    for (int b = 0; b < 4; b++)
      raw[4 * i + b] = (uint8_t)(u >> 8 * b);
  }
  return raw;
}

int lk_onnx_initializer(lk_onnx *g, const char *name, const lk_tensor *t) {
  bool shared;
  if (!g || !t)
    return lk__err(LK_EINVAL, "lk_onnx_initializer: NULL graph or tensor");
  name = name ? name : t->name;
  int rc = new_init(g, name, t->data, &shared);
  if (rc != 0 || shared)
    return rc;
  if ((t->dtype != LK_F32 && t->dtype != LK_F64) || !t->data ||
      t->ndim > LK_MAX_DIMS)
    return lk__err(LK_EINVAL,
                   "initializer %s: %s, %zu dimensions: only f32 or f64 "
                   "tensors with data, up to %d dimensions",
                   name, lk_dtype_name(t->dtype), t->ndim, LK_MAX_DIMS);
  int64_t dims[LK_MAX_DIMS];
  size_t numel = 1;
  for (size_t d = 0; d < t->ndim; d++)
    dims[d] = (int64_t)t->shape[d], numel *= t->shape[d];
  if (numel != t->numel || numel > SIZE_MAX / 4)
    return lk__err(LK_EINVAL, "initializer %s: shape and numel %zu differ",
                   name, t->numel);
  uint8_t *raw = f32_bytes(t->data, t->dtype == LK_F64, numel);
  rc = raw ? add_init(g, name, LK_ONNX_F32, dims, t->ndim, raw, 4 * numel,
                      t->data)
           : lk__err(LK_ENOMEM, "out of memory encoding initializer %s", name);
  free(raw);
  return rc;
}

int lk_onnx_const_f32(lk_onnx *g, const char *name, const float *v, size_t n) {
  bool shared;
  if (!g || !v)
    return lk__err(LK_EINVAL, "lk_onnx_const_f32: NULL graph or values");
  int rc = new_init(g, name, NULL, &shared);
  if (rc != 0)
    return rc;
  int64_t dim = (int64_t)n;
  uint8_t *raw = f32_bytes(v, false, n ? n : 1);
  rc = raw ? add_init(g, name, LK_ONNX_F32, &dim, n ? 1 : 0, raw,
                      4 * (n ? n : 1), NULL)
           : lk__err(LK_ENOMEM, "out of memory encoding initializer %s", name);
  free(raw);
  return rc;
}

int lk_onnx_const_i64(lk_onnx *g, const char *name, const int64_t *v,
                      size_t n) {
  bool shared;
  if (!g || (!v && n))
    return lk__err(LK_EINVAL, "lk_onnx_const_i64: NULL graph or values");
  int rc = new_init(g, name, NULL, &shared);
  if (rc != 0)
    return rc;
  uint8_t *raw = malloc(n ? 8 * n : 1);
  if (!raw)
    return lk__err(LK_ENOMEM, "out of memory encoding initializer %s", name);
  for (size_t i = 0; i < n; i++)
    for (int b = 0; b < 8; b++)
      raw[8 * i + b] = (uint8_t)((uint64_t)v[i] >> 8 * b);
  int64_t dim = (int64_t)n;
  rc = add_init(g, name, LK_ONNX_I64, &dim, 1, raw, 8 * n, NULL);
  free(raw);
  return rc;
}

/* ---- the graph's input and output: ValueInfoProto (name 1, type 2 ->
 * TypeProto.tensor_type 1 -> elem_type 1, shape 2 -> dim 1 -> dim_value 1
 * or dim_param 2) ---- */

/* A dimension given at run time: the batch N, then T, then D2, D3. */
static const char *dim_param(int d, char *buf, size_t len) {
  if (d < 2)
    snprintf(buf, len, "%s", d == 0 ? "N" : "T");
  else
    snprintf(buf, len, "D%d", d);
  return buf;
}

static int declare(lk_onnx *g, const char *name, unsigned field,
                   lk_onnx_type type, int ndim, const int64_t *dims) {
  if (type != LK_ONNX_F32 && type != LK_ONNX_I64)
    return lk__err(LK_EINVAL, "graph %s: unknown element type %d", name,
                   (int)type);
  if (ndim < 0 || ndim > 8 || (ndim && !dims))
    return lk__err(LK_EINVAL, "graph %s: %d dimensions (0 to 8)", name, ndim);
  for (int d = 0; d < ndim; d++)
    if (dims[d] < -1)
      return lk__err(LK_EINVAL, "graph %s: dimension %d is %lld", name, d,
                     (long long)dims[d]);
  lk__pb shape = {0}, tensor = {0}, tp = {0}, vi = {0};
  for (int d = 0; d < ndim; d++) {
    lk__pb dim = {0};
    char p[16]; /* "D" and any int */
    if (dims[d] < 0)
      lk__pb_str(&dim, 2, dim_param(d, p, sizeof p));
    else
      lk__pb_int(&dim, 1, dims[d]);
    lk__pb_msg(&shape, 1, &dim);
    lk__pb_free(&dim);
  }
  lk__pb_int(&tensor, 1, type);
  lk__pb_msg(&tensor, 2, &shape);
  lk__pb_msg(&tp, 1, &tensor);
  lk__pb_str(&vi, 1, name);
  lk__pb_msg(&vi, 2, &tp);
  lk__pb_msg(&g->io, field, &vi);
  bool oom = g->io.oom;
  lk__pb_free(&shape), lk__pb_free(&tensor), lk__pb_free(&tp);
  lk__pb_free(&vi);
  return oom ? lk__err(LK_ENOMEM, "out of memory declaring %s", name) : 0;
}

int lk_onnx_input(lk_onnx *g, lk_onnx_type type, int ndim,
                  const int64_t *dims) {
  if (!g || g->has_input)
    return lk__err(LK_EINVAL, "graph input: %s",
                   g ? "declared twice" : "NULL graph");
  int rc = declare(g, "input", GRAPH_INPUT, type, ndim, dims);
  if (rc == 0)
    rc = define(g, "input", NULL);
  g->has_input = rc == 0;
  return rc;
}

int lk_onnx_output(lk_onnx *g, lk_onnx_type type, int ndim,
                   const int64_t *dims) {
  if (!g || g->has_output)
    return lk__err(LK_EINVAL, "graph output: %s",
                   g ? "declared twice" : "NULL graph");
  int rc = declare(g, "output", GRAPH_OUTPUT, type, ndim, dims);
  g->has_output = rc == 0;
  return rc;
}

int lk__onnx_graph(lk_onnx *g, const char *name, lk__pb *out) {
  if (!g->has_input || !g->has_output)
    return lk__err(LK_EINVAL, "the model declared no graph %s",
                   g->has_input ? "output" : "input");
  if (!find(g, "output"))
    return lk__err(LK_EINVAL, "no node gives the graph's output \"output\"");
  *out = (lk__pb){0};
  lk__pb_raw(out, g->nodes.p, g->nodes.n);
  lk__pb_str(out, GRAPH_NAME, name);
  lk__pb_raw(out, g->inits.p, g->inits.n);
  lk__pb_raw(out, g->io.p, g->io.n);
  if (out->oom) {
    lk__pb_free(out);
    return lk__err(LK_ENOMEM, "out of memory encoding the graph");
  }
  return 0;
}
