/* The ONNX graph builder and its protocol buffers encoder (src/nn/onnx_*),
 * linked directly: the wire format byte for byte, and what the builder
 * refuses, each message naming the node or the tensor. That the files it
 * makes are valid ONNX, tests/cli/onnx.sh checks with onnx's checker and
 * ONNX Runtime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../src/nn/onnx_graph.h"
#include "internal.h"

static void assert_bytes(const lk__pb *b, const uint8_t *want, size_t n) {
  assert_false(b->oom);
  assert_int_equal(b->n, n);
  assert_memory_equal(b->p, want, n);
}

static void assert_error(int rc, const char *part) {
  assert_true(rc < 0);
  if (!strstr(lk_last_error(), part))
    fail_msg("message \"%s\" lacks \"%s\"", lk_last_error(), part);
}

/* varints (300: ac 02), negative int64s (ten bytes), strings, floats */
static void test_wire(void **state) {
  (void)state;
  lk__pb b = {0};
  lk__pb_int(&b, 1, 300);
  assert_bytes(&b, (const uint8_t[]){0x08, 0xac, 0x02}, 3);
  lk__pb_free(&b);
  lk__pb_int(&b, 3, -1);
  assert_bytes(&b,
               (const uint8_t[]){0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                 0xff, 0xff, 0x01},
               11);
  lk__pb_free(&b);
  lk__pb_str(&b, 4, "Relu");
  assert_bytes(&b, (const uint8_t[]){0x22, 4, 'R', 'e', 'l', 'u'}, 6);
  lk__pb_free(&b);
  lk__pb_f32(&b, 2, 1.0f); /* 0x3f800000, little-endian */
  assert_bytes(&b, (const uint8_t[]){0x15, 0, 0, 0x80, 0x3f}, 5);
  lk__pb_free(&b);
  lk__pb_packed(&b, 7, (const int64_t[]){1, 150}, 2);
  assert_bytes(&b, (const uint8_t[]){0x3a, 3, 0x01, 0x96, 0x01}, 5);
  lk__pb_free(&b);
}

/* input -> Relu -> output: the graph's bytes hold the node, the name, the
 * input and the output, in GraphProto's fields */
static void test_graph(void **state) {
  (void)state;
  lk_onnx *g = NULL;
  assert_int_equal(lk__onnx_new(&g), 0);
  const int64_t dims[2] = {-1, 3};
  assert_int_equal(lk_onnx_input(g, LK_ONNX_F32, 2, dims), 0);
  const char *in = "input", *out = "output";
  assert_int_equal(lk_onnx_node(g, "Relu", &in, 1, &out, 1, NULL, 0), 0);
  assert_int_equal(lk_onnx_output(g, LK_ONNX_F32, 2, dims), 0);
  lk__pb graph = {0};
  assert_int_equal(lk__onnx_graph(g, "net", &graph), 0);
  /* node (1): input, output, name Relu_0, op_type */
  static const uint8_t node[] = {0x0a, 29,   0x0a, 5,   'i', 'n', 'p', 'u',
                                 't',  0x12, 6,    'o', 'u', 't', 'p', 'u',
                                 't',  0x1a, 6,    'R', 'e', 'l', 'u', '_',
                                 '0',  0x22, 4,    'R', 'e', 'l', 'u'};
  assert_true(graph.n > sizeof node);
  assert_memory_equal(graph.p, node, sizeof node);
  assert_memory_equal(graph.p + sizeof node, "\x12\x03net", 5);
  lk__pb_free(&graph);
  lk__onnx_free(g);
}

static void test_refused(void **state) {
  (void)state;
  lk_onnx *g = NULL;
  assert_int_equal(lk__onnx_new(&g), 0);
  const int64_t dims[2] = {-1, 3};
  const char *x = "x", *in = "input", *y = "y";
  assert_error(lk_onnx_node(g, "Relu", &in, 1, &y, 1, NULL, 0),
               "node 0 (Relu): input 0 \"input\" is not defined before it");
  assert_int_equal(lk_onnx_input(g, LK_ONNX_F32, 2, dims), 0);
  assert_error(lk_onnx_input(g, LK_ONNX_F32, 2, dims), "declared twice");
  assert_int_equal(lk_onnx_node(g, "Relu", &in, 1, &y, 1, NULL, 0), 0);
  assert_error(lk_onnx_node(g, "Tanh", &x, 1, &y, 1, NULL, 0),
               "node 1 (Tanh): input 0 \"x\" is not defined");
  assert_error(lk_onnx_node(g, "Tanh", &in, 1, &y, 1, NULL, 0),
               "node 1 (Tanh): output 0 \"y\" is already defined");
  lk_onnx_attr bad = {.name = "axis", .type = 99};
  assert_error(lk_onnx_node(g, "Softmax", &in, 1, &x, 1, &bad, 1),
               "node 1 (Softmax): attribute axis: unknown type 99");
  float w[2] = {1, 2};
  lk_tensor t = {.name = "w",
                 .dtype = LK_F32,
                 .ndim = 1,
                 .shape = {2},
                 .numel = 2,
                 .data = w};
  assert_int_equal(lk_onnx_initializer(g, NULL, &t), 0);
  assert_int_equal(lk_onnx_initializer(g, NULL, &t), 0); /* shared */
  assert_error(lk_onnx_const_f32(g, "w", w, 2),
               "initializer w: the name is already defined");
  lk_tensor i32 = {.name = "i",
                   .dtype = LK_I32,
                   .ndim = 1,
                   .shape = {2},
                   .numel = 2,
                   .data = w};
  assert_error(lk_onnx_initializer(g, NULL, &i32), "initializer i: i32");
  const char *t1 = lk_onnx_tmp(g, "y"), *t2 = lk_onnx_tmp(g, "y");
  assert_non_null(t1);
  assert_non_null(t2);
  assert_string_not_equal(t1, t2);
  lk__pb graph = {0};
  assert_error(lk__onnx_graph(g, "net", &graph), "declared no graph output");
  assert_int_equal(lk_onnx_output(g, LK_ONNX_F32, 2, dims), 0);
  assert_error(lk__onnx_graph(g, "net", &graph),
               "no node gives the graph's output");
  lk__onnx_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_wire),
                                     cmocka_unit_test(test_graph),
                                     cmocka_unit_test(test_refused)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
