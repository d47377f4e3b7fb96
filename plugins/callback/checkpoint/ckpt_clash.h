/* Whether the checkpoint callback's filename pattern (ckpt_name.h) can make
 * a name that another owner of its directory writes: the loop's last.ckpt,
 * its keep_last step-N.ckpt (which it prunes, deleting all but the newest)
 * and last.ckpt.link, the callback's own best.ckpt, and the temporary
 * files every writer makes (NAME.tmp-XXXXXX, which a resumed run removes
 * as a killed run's leftovers). Checked once, at create, so that such a
 * pattern is a config error before any run directory exists, not a file
 * silently replaced or deleted in the middle of a run.
 *
 * Both sides are small automata over bytes, a sequence of atoms (one
 * character of a set, or any number of them); two patterns clash when the
 * product of their automata reaches both ends, and the path it took is a
 * name both make. A field is taken as any non-empty run of the characters
 * it can print, which is more than it can print: the check errs on the
 * side of refusing. Static inline: the plugin exports its descriptor only. */
#ifndef LOOPKIT_CKPT_CLASH_H
#define LOOPKIT_CKPT_CLASH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_name.h"

typedef struct clash_atom {
  uint32_t set[8]; /* the characters it takes, a bit each */
  bool star;       /* any number of them (else exactly one) */
} clash_atom;

typedef struct clash_nfa {
  clash_atom *atoms;
  size_t n, cap;
  bool oom;
} clash_nfa;

static inline bool clash_has(const clash_atom *a, unsigned char c) {
  return a->set[c >> 5] >> (c & 31) & 1;
}

static inline clash_atom *clash_push(clash_nfa *m, bool star) {
  if (m->n == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 64;
    clash_atom *a = m->oom ? NULL : realloc(m->atoms, cap * sizeof *a);
    if (!a) {
      m->oom = true;
      return NULL;
    }
    m->atoms = a;
    m->cap = cap;
  }
  clash_atom *a = &m->atoms[m->n++];
  memset(a, 0, sizeof *a);
  a->star = star;
  return a;
}

/* Each character of TEXT, exactly. */
static inline void clash_text(clash_nfa *m, const char *text) {
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    clash_atom *a = clash_push(m, false);
    if (a)
      a->set[*p >> 5] |= 1u << (*p & 31);
  }
}

/* One atom of the characters of CHARS ("": any character). */
static inline void clash_set(clash_nfa *m, const char *chars, bool star) {
  clash_atom *a = clash_push(m, star);
  for (const unsigned char *p = (const unsigned char *)chars; a && *p; p++)
    a->set[*p >> 5] |= 1u << (*p & 31);
  if (a && !*chars)
    memset(a->set, 0xff, sizeof a->set);
}

/* AT_LEAST or more characters of CHARS. */
static inline void clash_run(clash_nfa *m, const char *chars,
                             unsigned at_least) {
  for (unsigned k = 0; k < at_least; k++)
    clash_set(m, chars, false);
  clash_set(m, chars, true);
}

/* What pattern N renders: its text, each field's NAME= and value, .ckpt. */
static inline void clash_pattern(clash_nfa *m, const ckpt_name *n) {
  for (size_t i = 0; i < n->n; i++) {
    const ckpt_piece *p = &n->pieces[i];
    if (p->kind == PIECE_TEXT) {
      clash_text(m, p->text);
      continue;
    }
    if (n->insert_names) {
      clash_text(m, p->text);
      clash_text(m, "=");
    }
    /* At least WIDTH characters; a width without a 0 pads with spaces. */
    const char *f = p->format + 1;
    bool zero = *f == '0';
    unsigned width = (unsigned)strtoul(f + zero, NULL, 10);
    bool pad = !zero && width > 0;
    const char *chars =
        p->kind == PIECE_METRIC
            ? (pad ? " 0123456789.+-einfa" : "0123456789.+-einfa")
            : (pad ? " 0123456789" : "0123456789");
    clash_run(m, chars, width > 1 ? width : 1);
  }
  clash_text(m, ".ckpt");
}

/* Whether A and B share a name, the shortest into WITNESS (LEN bytes).
 * -1 when out of memory. */
static inline int clash_meet(const clash_nfa *a, const clash_nfa *b,
                             char *witness, size_t len) {
  size_t w = b->n + 1, states = (a->n + 1) * w;
  size_t *from = malloc(states * sizeof *from),
         *queue = malloc(states * sizeof *queue);
  unsigned char *by = malloc(states);
  if (!from || !queue || !by) {
    free(from);
    free(queue);
    free(by);
    return -1;
  }
  for (size_t s = 0; s < states; s++)
    from[s] = SIZE_MAX;
  size_t head = 0, tail = 0, end = SIZE_MAX;
  from[0] = 0;
  by[0] = 0;
  queue[tail++] = 0;
  while (head < tail && end == SIZE_MAX) {
    size_t s = queue[head++], i = s / w, j = s % w;
    if (i == a->n && j == b->n) {
      end = s;
      break;
    }
    /* Empty moves past a star, then one character on both sides. */
    for (int k = 0; k < 2; k++) {
      bool ok =
          k == 0 ? i < a->n && a->atoms[i].star : j < b->n && b->atoms[j].star;
      size_t t = k == 0 ? s + w : s + 1;
      if (ok && from[t] == SIZE_MAX) {
        from[t] = s;
        by[t] = 0;
        queue[tail++] = t;
      }
    }
    if (i == a->n || j == b->n)
      continue;
    const clash_atom *x = &a->atoms[i], *y = &b->atoms[j];
    for (int c = 1; c < 256; c++) {
      if (!clash_has(x, (unsigned char)c) || !clash_has(y, (unsigned char)c))
        continue;
      size_t t = (x->star ? i : i + 1) * w + (y->star ? j : j + 1);
      if (from[t] == SIZE_MAX) {
        from[t] = s;
        by[t] = (unsigned char)c;
        queue[tail++] = t;
      }
    }
  }
  int found = end != SIZE_MAX;
  if (found) { /* the path's characters, gathered from its end back */
    size_t k = 0;
    for (size_t s = end; s != 0; s = from[s])
      k += by[s] != 0;
    size_t keep = k < len ? k : len - 1;
    witness[keep] = '\0';
    for (size_t s = end; s != 0; s = from[s])
      if (by[s] && --k < keep)
        witness[k] = (char)by[s];
  }
  free(from);
  free(queue);
  free(by);
  return found;
}

/* The names another owner writes, each as the message shows it, who
 * writes it, and whether only in the directory the loop writes. */
enum { CLASH_EXACT, CLASH_STEP, CLASH_STEP0, CLASH_TEMP };
typedef struct clash_owner {
  int form; /* CLASH_EXACT: NAME itself */
  const char *name, *who;
  bool shared_only;
} clash_owner;

#define CLASH_KEEP_LAST                                                        \
  "the loop ([loop] keep_last; it deletes all but the newest)"

static const clash_owner clash_owners[] = {
    {CLASH_EXACT, "last.ckpt", "the loop (its latest checkpoint)", true},
    {CLASH_EXACT, "last.ckpt.link",
     "the loop (the link it renames to last.ckpt)", true},
    /* N as %llu prints it: 0, or digits without a leading 0. */
    {CLASH_STEP, "step-N.ckpt", CLASH_KEEP_LAST, true},
    {CLASH_STEP0, "step-N.ckpt", CLASH_KEEP_LAST, true},
    {CLASH_EXACT, "best.ckpt", "this callback (its best checkpoint)", false},
    {CLASH_TEMP, "NAME.tmp-XXXXXX",
     "every checkpoint writer (its temporary files, which a resumed run "
     "removes as a killed run's leftovers)",
     false},
};

static inline void clash_owner_nfa(clash_nfa *m, const clash_owner *o) {
  if (o->form == CLASH_STEP) {
    clash_text(m, "step-");
    clash_set(m, "123456789", false);
    clash_run(m, "0123456789", 0);
    clash_text(m, ".ckpt");
  } else if (o->form == CLASH_STEP0) {
    clash_text(m, "step-0.ckpt");
  } else if (o->form == CLASH_TEMP) {
    clash_run(m, "", 0);
    clash_text(m, ".tmp-");
    clash_run(m, "", 0);
  } else {
    clash_text(m, o->name);
  }
}

/* Refuses pattern N (option filename = PATTERN, in the directory the loop
 * writes when SHARED) if it can make a name of another owner. */
static inline int ckpt_clash_check(const ckpt_name *n, lk_host *host,
                                   const char *pattern, bool shared) {
  clash_nfa mine = {0};
  clash_pattern(&mine, n);
  int rc = 0;
  for (size_t k = 0; k < sizeof clash_owners / sizeof clash_owners[0] && !rc;
       k++) {
    const clash_owner *o = &clash_owners[k];
    if (o->shared_only && !shared)
      continue;
    clash_nfa other = {0};
    clash_owner_nfa(&other, o);
    char name[256];
    int met = mine.oom || other.oom
                  ? -1
                  : clash_meet(&mine, &other, name, sizeof name);
    free(other.atoms);
    if (met < 0)
      rc = lk_fail(host, LK_ENOMEM, "out of memory");
    else if (met)
      rc = lk_fail(
          host, LK_ECONFIG,
          "option filename = %s%s can name a file %s, and %s names "
          "%s in %s: the two would replace or delete each other's "
          "files. Choose another filename (as {epoch}-{step})%s",
          pattern, n->insert_names ? "" : " (auto_insert_metric_name = false)",
          name, o->who, o->name, shared ? "checkpoints/" : "the same directory",
          shared ? " or a dirpath of its own" : "");
  }
  free(mine.atoms);
  return rc;
}

#endif
