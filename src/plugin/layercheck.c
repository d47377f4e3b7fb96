/* What a layer plugin's table must say to be used (layertypes.h): the
 * checks after the loader's of its pointers. Nothing here knows the
 * loader or the registry. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layertypes.h"

#define NAME_MAX_LEN 31 /* a layer's or an argument's name, at most */

/* [A-Za-z_][A-Za-z0-9_]*, at most NAME_MAX_LEN characters. */
static bool identifier(const char *s) {
  if (!s || !*s || (*s >= '0' && *s <= '9'))
    return false;
  size_t n = 0;
  for (; s[n]; n++) {
    char c = s[n];
    if (n == NAME_MAX_LEN ||
        !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

#define ARG_FLAGS                                                              \
  (LK_LAYER_ARG_POSITIONAL | LK_LAYER_ARG_REQUIRED | LK_LAYER_ARG_INPUT |      \
   LK_LAYER_ARG_MIN_OPEN | LK_LAYER_ARG_MAX_OPEN)
#define TYPE_FLAGS (LK_LAYER_TRAIN_DIFFERS | LK_LAYER_VIEW | LK_LAYER_TOKENS)

/* The default of argument A, parsed as the layer's parser will. */
static int check_default(const lk_layer_type *t, const lk_layer_arg *a) {
  if (!a->def)
    return 0;
  lk_layer_arg one[2] = {*a, {0}};
  one[0].flags &= ~LK_LAYER_ARG_REQUIRED;
  lk_layer_type alone = {.size = LK_LAYER_TYPE_SIZE, .name = t->name};
  alone.args = one;
  lk_layer_value v[LK_LAYER_MAX_ARGS];
  int rc = lk_layer_parse_args(&alone, "", 0, v);
  return rc ? lk__err_prefix(LK_ELOAD, "argument %s", a->name) : 0;
}

/* Argument K of T's table. */
static int check_arg(const lk_layer_type *t, int k) {
  const lk_layer_arg *a = &t->args[k];
  if (!identifier(a->name))
    return lk__err(LK_ELOAD,
                   "argument %d: its name is not an identifier "
                   "([A-Za-z_][A-Za-z0-9_]*, at most %d characters)",
                   k, NAME_MAX_LEN);
  for (int j = 0; j < k; j++)
    if (!strcmp(t->args[j].name, a->name))
      return lk__err(LK_ELOAD, "argument %s: in the table twice", a->name);
  int type;
  memcpy(&type, &a->type, sizeof type); /* any value, not just the enum's */
  if (type < LK_LAYER_INT || type > LK_LAYER_WORD)
    return lk__err(LK_ELOAD,
                   "argument %s: type %d is not an lk_layer_arg_type "
                   "(LK_LAYER_INT to LK_LAYER_WORD are %d to %d)",
                   a->name, type, LK_LAYER_INT, LK_LAYER_WORD);
  if (a->flags & ~ARG_FLAGS)
    return lk__err(LK_ELOAD, "argument %s: flags 0x%x has unknown bits",
                   a->name, a->flags);
  bool number = type != LK_LAYER_BOOL && type != LK_LAYER_WORD;
  if (number && (isnan(a->min) || isnan(a->max) || a->min > a->max))
    return lk__err(LK_ELOAD, "argument %s: range [%g, %g] is empty", a->name,
                   a->min, a->max);
  if (type == LK_LAYER_WORD && (!a->choices || !*a->choices))
    return lk__err(LK_ELOAD, "argument %s: a word with no choices", a->name);
  if ((a->flags & LK_LAYER_ARG_INPUT) && type != LK_LAYER_INT)
    return lk__err(LK_ELOAD,
                   "argument %s: LK_LAYER_ARG_INPUT on an argument that is "
                   "not an LK_LAYER_INT",
                   a->name);
  return check_default(t, a);
}

int lk__layer_type_check(const lk_layer_type *t) {
  if (!identifier(t->name))
    return lk__err(LK_ELOAD,
                   "name: not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most "
                   "%d characters)",
                   NAME_MAX_LEN);
  if (t->flags & ~TYPE_FLAGS)
    return lk__err(LK_ELOAD, "flags 0x%x has unknown bits", t->flags);
  bool view = t->flags & LK_LAYER_VIEW;
  if (!t->forward && !view)
    return lk__err(LK_ELOAD, "forward is NULL");
  if (!t->backward && !view)
    return lk__err(LK_ELOAD, "backward is NULL (only a view, LK_LAYER_VIEW, "
                             "has none)");
  int lo = t->min_inputs ? t->min_inputs : 1,
      hi = t->max_inputs ? t->max_inputs : 1;
  if (t->min_inputs < 0 || t->max_inputs < 0 || lo > hi ||
      hi > LK_LAYER_MAX_INPUTS)
    return lk__err(LK_ELOAD,
                   "min_inputs %d, max_inputs %d: expected 1 <= min_inputs "
                   "<= max_inputs <= %d (0 reads as 1)",
                   t->min_inputs, t->max_inputs, LK_LAYER_MAX_INPUTS);
  if (t->state_size > ((size_t)1 << 30))
    return lk__err(LK_ELOAD, "state_size %zu: larger than 1 GiB",
                   t->state_size);
  for (int k = 0; t->args && k < LK_LAYER_MAX_ARGS && t->args[k].name; k++) {
    int rc = check_arg(t, k);
    if (rc != 0)
      return rc;
  }
  return 0;
}
