/* bind: partial application of any C function whose type is spelled as a
 * string, e.g. "double (const double *, size_t)". The argument values are
 * copied, so the result is a closure, double (*)(void), that owns all it
 * needs.
 *
 * Parsing is deliberately small: a return type, then one parenthesised
 * list of argument types. Parameter names are tolerated ("size_t n", even
 * a function name before the list) because people paste declarations. */
#include <ffi.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "thunk.h"

/* How the target's result becomes a double. Integers narrower than ffi_arg
 * come back widened into an ffi_arg (libffi's return value promotion), so
 * the handler truncates to the declared width to get the right value. */
typedef enum result_kind {
  R_VOID,
  R_FLOAT,
  R_DOUBLE,
  R_POINTER,
  R_S8,
  R_U8,
  R_S16,
  R_U16,
  R_S32,
  R_U32,
  R_S64,
  R_U64
} result_kind;

/* One copied argument: every accepted type fits and is aligned. */
typedef union slot {
  int64_t i;
  double d;
  void *p;
} slot;

struct lk_bound {
  void (*target)(void);
  result_kind kind;
  unsigned n;
  ffi_type **types; /* n, after slots */
  void **avalues;   /* n, each pointing into slots */
  ffi_cif target_cif;
  lk__thunk thunk; /* the double (void) closure */
  slot slots[];    /* the argument values */
};

typedef struct span {
  const char *s;
  size_t len;
} span;

/* ---- the signature ---------------------------------------------------- */

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

static bool is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

static span trim(span t) {
  while (t.len > 0 && is_space(t.s[0])) {
    t.s++;
    t.len--;
  }
  while (t.len > 0 && is_space(t.s[t.len - 1]))
    t.len--;
  return t;
}

static bool span_is(span t, const char *word) {
  return t.len == strlen(word) && memcmp(t.s, word, t.len) == 0;
}

_Static_assert(sizeof(bool) == 1, "bool is passed as a uint8");

#define S(name, t)                                                             \
  { name, sizeof(t), 's' }
#define U(name, t)                                                             \
  { name, sizeof(t), 'u' }

/* The accepted spellings, qualifiers removed and words separated by one
 * space, with what they are on this platform. */
static const struct known {
  const char *name;
  unsigned char size;
  char cls; /* s signed, u unsigned, f float, d double, v void */
} known[] = {
    {"void", 0, 'v'},
    {"char", 1, CHAR_MIN < 0 ? 's' : 'u'},
    S("signed char", signed char),
    U("unsigned char", unsigned char),
    S("short", short),
    S("short int", short),
    S("signed short", short),
    S("signed short int", short),
    U("unsigned short", unsigned short),
    U("unsigned short int", unsigned short),
    S("int", int),
    S("signed", int),
    S("signed int", int),
    U("unsigned", unsigned),
    U("unsigned int", unsigned),
    S("long", long),
    S("long int", long),
    S("signed long", long),
    S("signed long int", long),
    U("unsigned long", unsigned long),
    U("unsigned long int", unsigned long),
    S("long long", long long),
    S("long long int", long long),
    S("signed long long", long long),
    S("signed long long int", long long),
    U("unsigned long long", unsigned long long),
    U("unsigned long long int", unsigned long long),
    S("int8_t", int8_t),
    U("uint8_t", uint8_t),
    S("int16_t", int16_t),
    U("uint16_t", uint16_t),
    S("int32_t", int32_t),
    U("uint32_t", uint32_t),
    S("int64_t", int64_t),
    U("uint64_t", uint64_t),
    U("size_t", size_t),
    S("ssize_t", ssize_t),
    U("bool", bool),
    U("_Bool", bool),
    {"float", sizeof(float), 'f'},
    {"double", sizeof(double), 'd'},
#undef S
#undef U
};

static ffi_type *lookup(const char *canon) {
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    const struct known *k = &known[i];
    if (strcmp(canon, k->name) != 0)
      continue;
    bool s = k->cls == 's';
    switch (k->cls) {
    case 'v': return &ffi_type_void;
    case 'f': return &ffi_type_float;
    case 'd': return &ffi_type_double;
    }
    switch (k->size) {
    case 1: return s ? &ffi_type_sint8 : &ffi_type_uint8;
    case 2: return s ? &ffi_type_sint16 : &ffi_type_uint16;
    case 4: return s ? &ffi_type_sint32 : &ffi_type_uint32;
    default: return s ? &ffi_type_sint64 : &ffi_type_uint64;
    }
  }
  return NULL;
}

/* The type that T spells, or NULL. Any '*' makes a pointer (data or
 * function); otherwise T is words, const and volatile ignored, with an
 * optional trailing name. */
static ffi_type *resolve(span t) {
  if (memchr(t.s, '*', t.len))
    return &ffi_type_pointer;
  char canon[64];
  size_t len = 0, last = 0; /* LAST: where the last word starts in CANON */
  int words = 0;
  for (size_t i = 0; i < t.len;) {
    if (is_space(t.s[i])) {
      i++;
      continue;
    }
    if (!is_ident(t.s[i]))
      return NULL;
    span w = {t.s + i, 0};
    while (i < t.len && is_ident(t.s[i])) {
      i++;
      w.len++;
    }
    if (span_is(w, "const") || span_is(w, "volatile"))
      continue;
    if (len + w.len + 2 > sizeof canon)
      return NULL;
    if (len > 0)
      canon[len++] = ' ';
    last = len;
    memcpy(canon + len, w.s, w.len);
    len += w.len;
    words++;
  }
  canon[len] = '\0';
  ffi_type *type = lookup(canon);
  if (type || words < 2 || lookup(canon + last))
    return type;
  canon[last - 1] = '\0'; /* "size_t n": drop the name */
  return lookup(canon);
}

/* Splits SIG into its return type and the text inside the parentheses. */
static int split(const char *sig, span *ret, span *list) {
  const char *open = strchr(sig, '(');
  if (!open)
    return lk__err(LK_EINVAL, "bind: no argument list \"(...)\" in \"%s\"",
                   sig);
  *ret = trim((span){sig, (size_t)(open - sig)});
  if (memchr(ret->s, ')', ret->len))
    return lk__err(LK_EINVAL, "bind: unbalanced parentheses in \"%s\"", sig);
  if (ret->len == 0)
    return lk__err(LK_EINVAL, "bind: missing return type in \"%s\"", sig);
  int depth = 1;
  const char *p = open + 1;
  for (; *p && depth > 0; p++)
    depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
  if (depth > 0)
    return lk__err(LK_EINVAL, "bind: unbalanced parentheses in \"%s\"", sig);
  *list = (span){open + 1, (size_t)(p - 1 - (open + 1))};
  span rest = trim((span){p, strlen(p)});
  for (; *p && depth >= 0; p++)
    depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
  if (depth != 0)
    return lk__err(LK_EINVAL, "bind: unbalanced parentheses in \"%s\"", sig);
  if (rest.len > 0)
    return lk__err(LK_EINVAL,
                   "bind: unexpected \"%.*s\" after the argument list of "
                   "\"%s\"",
                   (int)rest.len, rest.s, sig);
  return 0;
}

/* The next argument of LIST from *POS: up to a comma outside nested
 * parentheses (a function pointer's own list). */
static span next_arg(span list, size_t *pos) {
  size_t start = *pos, i = start;
  int depth = 0;
  for (; i < list.len; i++) {
    char c = list.s[i];
    if (c == ',' && depth == 0)
      break;
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
  }
  *pos = i + 1;
  return trim((span){list.s + start, i - start});
}

static unsigned count_args(span list) {
  span all = trim(list);
  if (all.len == 0 || span_is(all, "void"))
    return 0;
  unsigned n = 0;
  for (size_t pos = 0; pos <= list.len; n++)
    next_arg(list, &pos);
  return n;
}

static result_kind kind_of(const ffi_type *t) {
  switch (t->type) {
  case FFI_TYPE_VOID: return R_VOID;
  case FFI_TYPE_FLOAT: return R_FLOAT;
  case FFI_TYPE_DOUBLE: return R_DOUBLE;
  case FFI_TYPE_POINTER: return R_POINTER;
  case FFI_TYPE_SINT8: return R_S8;
  case FFI_TYPE_UINT8: return R_U8;
  case FFI_TYPE_SINT16: return R_S16;
  case FFI_TYPE_UINT16: return R_U16;
  case FFI_TYPE_SINT32: return R_S32;
  case FFI_TYPE_UINT32: return R_U32;
  case FFI_TYPE_SINT64: return R_S64;
  default: return R_U64;
  }
}

/* ---- the closure ------------------------------------------------------ */

static void handler(ffi_cif *cif, void *ret, void **args, void *user) {
  lk_bound *b = user;
  /* At least an ffi_arg: narrow integer results are written widened. */
  union {
    ffi_arg a;
    int64_t s64;
    uint64_t u64;
    float f;
    double d;
    void *p;
  } r;
  LK_UNUSED(cif);
  LK_UNUSED(args);
  ffi_call(&b->target_cif, b->target, &r, b->avalues);
  double v;
  switch (b->kind) {
  case R_VOID: v = NAN; break;
  case R_FLOAT: v = r.f; break;
  case R_DOUBLE: v = r.d; break;
  case R_POINTER: v = (double)(uintptr_t)r.p; break;
  case R_S8: v = (int8_t)r.a; break;
  case R_U8: v = (uint8_t)r.a; break;
  case R_S16: v = (int16_t)r.a; break;
  case R_U16: v = (uint16_t)r.a; break;
  case R_S32: v = (int32_t)r.a; break;
  case R_U32: v = (uint32_t)r.a; break;
  case R_S64: v = (double)r.s64; break;
  default: v = (double)r.u64; break;
  }
  *(double *)ret = v;
}

/* Resolves the types of LIST into B and copies the values from ARGS. */
static int fill(lk_bound *b, const char *sig, span list,
                const void *const *args) {
  size_t pos = 0;
  for (unsigned i = 0; i < b->n; i++) {
    span t = next_arg(list, &pos);
    if (t.len == 0)
      return lk__err(LK_EINVAL, "bind: argument %u of \"%s\" is empty", i + 1,
                     sig);
    ffi_type *type = resolve(t);
    if (!type)
      return lk__err(LK_EINVAL,
                     "bind: unknown type \"%.*s\" in argument %u of \"%s\"",
                     (int)t.len, t.s, i + 1, sig);
    if (type == &ffi_type_void)
      return lk__err(LK_EINVAL,
                     "bind: argument %u of \"%s\" is void (void is only a "
                     "return type or a whole empty argument list)",
                     i + 1, sig);
    if (!args[i])
      return lk__err(LK_EINVAL,
                     "bind: args[%u] is NULL but \"%s\" needs argument %u", i,
                     sig, i + 1);
    b->types[i] = type;
    b->avalues[i] = &b->slots[i];
    memcpy(&b->slots[i], args[i], type->size);
  }
  return 0;
}

/* N_ARGS: the entries of ARGS, or ARGS_TRUSTED (lk_bind: as many as the
 * signature declares, which cannot be checked). */
#define ARGS_TRUSTED SIZE_MAX

static int bind(void (*fn)(void), const char *signature, size_t n_args,
                const void *const *args, lk_bound **out) {
  if (!out)
    return lk__err(LK_EINVAL, "bind: OUT is NULL");
  *out = NULL;
  if (!signature)
    return lk__err(LK_EINVAL, "bind: the signature is NULL");
  if (!fn)
    return lk__err(LK_EINVAL, "bind: the function of \"%s\" is NULL",
                   signature);
  span ret, list;
  int rc = split(signature, &ret, &list);
  if (rc != 0)
    return rc;
  ffi_type *rtype = resolve(ret);
  if (!rtype)
    return lk__err(LK_EINVAL,
                   "bind: unknown type \"%.*s\" in the return type of \"%s\"",
                   (int)ret.len, ret.s, signature);
  unsigned n = count_args(list);
  if (n_args != ARGS_TRUSTED && n_args != n)
    return lk__err(
        LK_EINVAL, "bind: \"%s\" takes %u argument%s but %zu %s given",
        signature, n, n == 1 ? "" : "s", n_args, n_args == 1 ? "is" : "are");
  if (n > 0 && !args)
    return lk__err(LK_EINVAL,
                   "bind: \"%s\" takes %u argument%s but args is "
                   "NULL",
                   signature, n, n == 1 ? "" : "s");

  lk_bound *b = calloc(
      1, sizeof *b + n * (sizeof(slot) + sizeof(ffi_type *) + sizeof(void *)));
  if (!b)
    return lk__err(LK_ENOMEM, "bind: out of memory for \"%s\"", signature);
  b->target = fn;
  b->kind = kind_of(rtype);
  b->n = n;
  b->types = (ffi_type **)(b->slots + n);
  b->avalues = (void **)(b->types + n);
  if ((rc = fill(b, signature, list, args)) != 0) {
    free(b);
    return rc;
  }
  if (ffi_prep_cif(&b->target_cif, FFI_DEFAULT_ABI, n, rtype, b->types) !=
      FFI_OK) {
    free(b);
    return lk__err(LK_EINVAL, "bind: libffi cannot call \"%s\"", signature);
  }

  if ((rc = lk__thunk_init(&b->thunk, handler, b, "bind")) != 0) {
    free(b);
    return lk__err_prefix(rc, "\"%s\"", signature);
  }
  *out = b;
  return 0;
}

int lk_bind_n(void (*fn)(void), const char *signature, size_t n_args,
              const void *const *args, lk_bound **out) {
  if (n_args == ARGS_TRUSTED) {
    if (out)
      *out = NULL;
    return lk__err(LK_EINVAL, "bind: N_ARGS is SIZE_MAX");
  }
  return bind(fn, signature, n_args, args, out);
}

int lk_bind(void (*fn)(void), const char *signature, const void *const *args,
            lk_bound **out) {
  return bind(fn, signature, ARGS_TRUSTED, args, out);
}

lk_closure_fn lk_bound_function(const lk_bound *b) {
  return b ? b->thunk.fn : NULL;
}

void lk_bound_free(lk_bound *b) {
  if (!b)
    return;
  lk__thunk_free(&b->thunk);
  free(b);
}
