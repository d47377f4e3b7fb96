#!/bin/sh
# The trace profiler: RUN_DIR/trace.json in the Chrome trace-event format.
# Every file is parsed and checked by check.py below (fields, exact
# three-decimal times, nesting without partial overlap, metadata); then the
# counts: one event per action per batch, the L-BFGS closure many times per
# step, the file option, failed and resumed runs, and (through a small C
# host) escaping, bad nesting, teardown and write errors.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"

# The checks need Python: without it this script fails, it does not skip.
if ! command -v python3 >/dev/null 2>&1; then
  not_ok "python3 is required to check trace.json"
  finish
  exit 1
fi

cat >"$T/check.py" <<'PY'
"""check.py TRACE: validates a trace.json; prints NAME COUNT for each
action (names that are not identifiers count as "(other)"), then closure_outside_step and closure_outside_epoch (closures in
no optimizer_step / in neither optimizer_step nor run_training_epoch) and
unfinished. Exits 1 with the reason when the file is not a valid trace."""
import decimal, json, sys
from collections import Counter

def fail(msg):
    print("bad trace: " + msg)
    sys.exit(1)

def ns(x, what):
    if not isinstance(x, decimal.Decimal) or x.as_tuple().exponent != -3:
        fail(f"{what} = {x}: not microseconds with three decimals")
    if x < 0:
        fail(f"{what} = {x} is negative")
    return int(x * 1000)

with open(sys.argv[1], encoding="utf-8") as f:
    doc = json.load(f, parse_float=decimal.Decimal)
events = doc.get("traceEvents")
if not isinstance(events, list):
    fail("no traceEvents array")
meta, spans = {}, []
for e in events:
    if e.get("ph") == "M":
        meta[e.get("name")] = (e.get("pid"), e.get("tid"), e["args"]["name"])
    elif e.get("ph") == "X":
        for k in ("name", "ts", "dur", "pid", "tid"):
            if k not in e:
                fail(f"X event without {k}: {e}")
        if not isinstance(e["pid"], int) or not isinstance(e["tid"], int):
            fail(f"pid or tid not an integer: {e}")
        start = ns(e["ts"], "ts")
        spans.append((start, start + ns(e["dur"], "dur"), e))
    else:
        fail(f"unexpected event: {e}")
for m in ("process_name", "thread_name"):
    if m not in meta or not meta[m][2]:
        fail(f"no {m} metadata event")
for _, _, e in spans:
    if (e["pid"], e["tid"]) != meta["thread_name"][:2]:
        fail(f"event on another pid/tid than the named thread: {e}")

# Parents first: by start, the longer first. Each event must lie inside the
# innermost open one, or after it ended.
spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
stack, outside_step, outside_epoch = [], 0, 0
for start, end, e in spans:
    while stack and stack[-1][1] <= start:
        stack.pop()
    if stack and end > stack[-1][1]:
        p = stack[-1][2]
        fail(f"{e['name']} [{start}, {end}] overlaps its parent "
             f"{p['name']} [{stack[-1][0]}, {stack[-1][1]}]")
    if e["name"] == "closure":
        around = {s[2]["name"] for s in stack}
        outside_step += "optimizer_step" not in around
        outside_epoch += not around & {"optimizer_step", "run_training_epoch"}
    stack.append((start, end, e))

def word(name):  # names that would break the NAME COUNT lines
    return name if name.isidentifier() else "(other)"
for name, n in sorted(Counter(word(e["name"]) for _, _, e in spans).items()):
    print(name, n)
print("closure_outside_step", outside_step)
print("closure_outside_epoch", outside_epoch)
print("unfinished", sum(1 for _, _, e in spans if e.get("args", {}).get("unfinished")))
PY

# valid DESC FILE: passes when FILE is a valid trace; keeps its counts for n.
valid() {
  if python3 "$T/check.py" "$2" >"$T/counts" 2>&1; then
    ok "$1"
  else
    not_ok "$1" "$(head -c 2000 "$T/counts")"
    : >"$T/counts"
  fi
}
# n NAME: the count check.py printed for NAME in the last valid (0 if none).
n() { awk -v k="$1" '$1 == k { c = $2 } END { print c + 0 }' "$T/counts"; }

# Fashion-MNIST, 30 steps on a slice: 2 epochs with validation, then test.
FM="$LK_SRCDIR/examples/fashion-mnist.ini"
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  ok "fashion-mnist # SKIP dataset-fashion-mnist is not installed"
elif [ -n "${LK_LOOPKIT:-}" ]; then
  # Under valgrind the 10000-image test split alone takes minutes; the
  # gcc, clang and ASan runs of this script cover it.
  ok "fashion-mnist # SKIP loopkit runs under valgrind (LK_LOOPKIT)"
else
  expect 0 'trace: [0-9]+ events written to .*/fm/trace\.json' \
    "fashion-mnist with the trace profiler logs what it wrote" \
    -- train "$FM" --set plugins.profiler=trace --set loop.max_steps=30 \
    --set idx.limit=2000 --out "$T/fm"
  valid "fashion-mnist: trace.json is a valid, properly nested trace" "$T/fm/trace.json"
  check "fashion-mnist: 30 optimizer_step events" test "$(n optimizer_step)" -eq 30
  check "fashion-mnist: a closure and a training_step per step" \
    test "$(n closure)" -eq 30 -a "$(n training_step)" -eq 30
  check "fashion-mnist: zero_grad and backward in every closure" \
    test "$(n zero_grad)" -eq 30 -a "$(n backward)" -eq 30
  check "fashion-mnist: every closure inside an optimizer_step" \
    test "$(n closure_outside_step)" -eq 0
  check "fashion-mnist: epochs and validation traced" \
    test "$(n run_training_epoch)" -ge 2 -a "$(n validation)" -ge 1
  check "fashion-mnist: nothing left unfinished" test "$(n unfinished)" -eq 0
fi

# L-BFGS: the line search calls the closure many times per step.
expect 0 'trained 30 steps' "L-BFGS with the trace profiler trains" \
  -- train "$LK_SRCDIR/examples/lbfgs.ini" --set plugins.profiler=trace --out "$T/lbfgs"
valid "L-BFGS: trace.json is valid" "$T/lbfgs/trace.json"
check "L-BFGS: 30 optimizer_step events" test "$(n optimizer_step)" -eq 30
check "L-BFGS: training_step count == closure count > optimizer_step count" \
  test "$(n training_step)" -eq "$(n closure)" -a "$(n closure)" -gt 30
check "L-BFGS: every closure inside an optimizer_step" test "$(n closure_outside_step)" -eq 0
check "no profile.txt from the trace profiler" test ! -e "$T/lbfgs/profile.txt"

# Accumulation: the closures of the first batches of a window run in the
# epoch, outside any optimizer_step.
config accumulate <<INI
[loop]
max_epochs = 2
accumulate_grad_batches = 2
[plugins]
step = linreg
optimizer = sgd
data = synthetic
profiler = trace
[sgd]
lr = 0.001
INI
expect 0 'trained 8 steps' "accumulation with the trace profiler trains" \
  -- train "$T/accumulate.ini" --out "$T/acc"
valid "accumulation: trace.json is valid" "$T/acc/trace.json"
check "accumulation: a closure per batch, 16 in all" \
  test "$(n closure)" -eq 16 -a "$(n training_step)" -eq 16
check "accumulation: every closure inside an optimizer_step or an epoch" \
  test "$(n closure_outside_epoch)" -eq 0 -a "$(n run_training_epoch)" -eq 2

# The file option.
EX="$LK_SRCDIR/examples/rosenbrock.ini"
expect 2 'file = "runs/x\.json"' "file with a '/' is refused, naming option and value" \
  -- train "$EX" --set plugins.profiler=trace --set trace.file=runs/x.json --out "$T/slash"
expect 2 'file = "\.\."' "file = .. is refused" \
  -- train "$EX" --set plugins.profiler=trace --set trace.file=.. --out "$T/dots"
expect 0 'events written to .*/custom/my\.trace\.json' "file names the trace" \
  -- train "$EX" --set plugins.profiler=trace --set trace.file=my.trace.json \
  --set loop.max_steps=5 --out "$T/custom"
valid "file = my.trace.json: a valid trace" "$T/custom/my.trace.json"
check "file = my.trace.json: no trace.json" test ! -e "$T/custom/trace.json"

# A resumed run writes into the same directory: a new file, not the old one.
"$LOOPKIT" train "$EX" --quiet --set plugins.profiler=trace --set loop.max_steps=5 \
  --out "$T/res" >/dev/null 2>&1
expect 0 'events written to .*/trace-2\.json' "a resumed run writes trace-2.json" \
  -- train "$EX" --set plugins.profiler=trace --set loop.max_steps=12 \
  --resume "$T/res/checkpoints/last.ckpt"
valid "resume: the first run's trace.json is intact" "$T/res/trace.json"
check "resume: trace.json has the first 5 steps" test "$(n optimizer_step)" -eq 5
valid "resume: trace-2.json is valid" "$T/res/trace-2.json"
check "resume: trace-2.json has the other 7 steps" test "$(n optimizer_step)" -eq 7

# A failed run still leaves a valid trace, with every call up to the error.
config fail <<INI
[loop]
max_steps = 10
[plugins]
step = probe
optimizer = probe
profiler = trace
[probe]
fail_at = 3
INI
expect 1 'probe failing on purpose at call 3' "a failing run fails" \
  -- train "$T/fail.ini" --out "$T/fail"
valid "failed run: trace.json is valid" "$T/fail/trace.json"
check "failed run: all 4 training_step calls traced" test "$(n training_step)" -eq 4

# A host of its own drives the profiler where the loop never goes.
cat >"$T/host.c" <<'C'
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <loopkit/loopkit.h>

static void say(void *user, lk_log_level level, const char *msg) {
  (void)user;
  printf("log %d %s\n", (int)level, msg);
}

int main(int argc, char **argv) {
  const char *mode = argv[1], *dir = argv[2];
  lk_config *cfg;
  lk_run *run;
  lk_run_options o = {.out_dir = dir, .log = say, .verbosity = LK_LOG_DEBUG};
  if (argc != 3 ||
      lk_config_parse("host", "[loop]\nmax_steps = 1\n[plugins]\nstep = "
                      "rosenbrock\noptimizer = sgd\nprofiler = trace\n"
                      "[sgd]\nlr = 0.001\n",
                      &cfg) != 0 ||
      lk_run_new(cfg, &o, &run) != 0) {
    fprintf(stderr, "setup: %s\n", lk_last_error());
    return 3;
  }
  const lk_descriptor *d;
  void *self = lk_run_instance(run, "profiler", &d);
  const lk_profiler_ops *p = d->profiler;
  int odd = p->action(self, "q\"b\\s\n\t\x01 \xc3\xa9 \xff\xc3 end");
  int outer = p->action(self, "outer");
  printf("same id again: %d\n", p->action(self, "outer") == outer);
  if (!strcmp(mode, "nesting")) {
    p->start(self, outer);
    for (int i = 0; i < 100; i++)
      p->start(self, odd);
    for (int i = 0; i < 100; i++)
      p->stop(self, odd);
    p->stop(self, outer);
    p->stop(self, outer);    /* no start */
    p->start(self, outer);
    p->start(self, odd);     /* never stopped: ends with outer */
    p->stop(self, outer);
    p->start(self, outer);   /* still running at the report */
  } else if (!strcmp(mode, "teardown")) {
    p->start(self, outer);
    p->start(self, odd);
    p->stop(self, odd);
    lk_run_free(run);        /* no report */
    lk_config_free(cfg);
    return 0;
  } else if (!strcmp(mode, "lost")) {
    char moved[4096];
    snprintf(moved, sizeof moved, "%s.moved", dir);
    rename(dir, moved);      /* the file cannot be created */
    p->start(self, outer);
    p->stop(self, outer);
    p->start(self, outer);
  } else if (!strcmp(mode, "full")) {
    struct rlimit limit = {100000, 100000};
    signal(SIGXFSZ, SIG_IGN); /* writes past the limit fail with EFBIG */
    setrlimit(RLIMIT_FSIZE, &limit);
    for (int i = 0; i < 10000; i++) {
      p->start(self, outer);
      p->stop(self, outer);
    }
  }
  int rc = p->report(self, dir);
  printf("report %d %s\n", rc, rc ? lk_last_error() : "");
  lk_run_free(run);
  lk_config_free(cfg);
  return 0;
}
C
# Built like the library (with its sanitizers, if any): they must agree.
${LK_CC:-cc} ${LK_SANITIZE:-} -std=c11 -I"$LK_SRCDIR/include" -I"$LK_BUILDDIR/include" "$T/host.c" \
  -o "$T/host" -L"$LK_BUILDDIR/.libs" -Wl,-rpath,"$LK_BUILDDIR/.libs" -lloopkit \
  >"$T/cc.log" 2>&1
check "the test host builds" test -x "$T/host"

"$T/host" nesting "$T/h1" >"$T/h1.out" 2>&1
check "action() gives a name it knows its id" grep -q 'same id again: 1' "$T/h1.out"
check "report succeeds" grep -q '^report 0' "$T/h1.out"
valid "odd names, deep and broken nesting: a valid trace" "$T/h1/trace.json"
check "the odd name escaped, invalid UTF-8 replaced by U+FFFD" python3 -c '
import json, sys
names = {e["name"] for e in json.load(open(sys.argv[1]))["traceEvents"]}
sys.exit("q\"b\\s\n\t\x01 \u00e9 \ufffd\ufffd end" not in names)' "$T/h1/trace.json"
check "64 levels recorded, the 37 deeper dropped" \
  test "$(n outer)" -eq 3 -a "$(n '(other)')" -eq 64
check "the deep ones are reported" grep -q '^log 1 trace: 37 actions nested deeper than 64' "$T/h1.out"
check "the stop without a start is reported" grep -q '^log 1 trace: 1 stops without a matching start' "$T/h1.out"
check "the unstopped ones end with their parent or at the report" \
  test "$(n unfinished)" -eq 2

"$T/host" idle "$T/h5" >"$T/h5.out" 2>&1
valid "a run that starts no action: a valid trace" "$T/h5/trace.json"
check "with only the metadata" grep -q '^log 2 trace: 0 events written to' "$T/h5.out"

"$T/host" teardown "$T/h2" >"$T/h2.out" 2>&1
valid "torn down without a report: the trace is still valid" "$T/h2/trace.json"
check "torn down: the unstopped action is in it" test "$(n outer)" -eq 1 -a "$(n unfinished)" -eq 1

"$T/host" lost "$T/h3" >"$T/h3.out" 2>&1
check "a file that cannot be created fails the report, naming it" \
  grep -q "^report -[0-9]* .*cannot write $T/h3/trace.json" "$T/h3.out"
check "and is logged once" test "$(grep -c 'log 1 trace: cannot write' "$T/h3.out")" -eq 1

"$T/host" full "$T/h4" >"$T/h4.out" 2>&1
check "a write error fails the report, naming the file" \
  grep -q "^report -[0-9]* .*cannot write $T/h4/trace.json: File too large" "$T/h4.out"
check "and is logged once" test "$(grep -c 'log 1 trace: cannot write' "$T/h4.out")" -eq 1
finish
