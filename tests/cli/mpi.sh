#!/bin/sh
# The mpi strategy under mpirun: K processes with batches of B train as one
# process with batches of K*B (f64 and f32, SGD with momentum and Adam,
# K = 2 and 3, shuffled; L-BFGS and SAM, which evaluate the closure several
# times a step); setup gives every rank rank 0's parameters and state; only
# rank 0 writes the run directory; a resumed run equals an uninterrupted
# one; a failure on one rank stops them all; rank 0 logs what the gradient
# allreduces cost.
# shellcheck disable=SC2046 # $(opts NAME) is a list of arguments
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1

skip() {
  echo "ok 1 # SKIP no MPI: $1"
  echo "1..1"
  exit 0
}
[ "${LK_HAVE_MPI:-no}" = yes ] ||
  skip "configure found no mpi-c (Debian: libopenmpi-dev openmpi-bin)"
command -v mpirun >/dev/null 2>&1 || skip "mpirun is not on PATH"

# Some containers forbid the cross-memory attach Open MPI's shared-memory
# transport tries first.
OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl_vader_single_copy_mechanism
# Under ASan (ignored otherwise): whole stacks, so that lsan.supp can name
# Open MPI's own leaks by the function they come from; and no
# __tls_get_addr interception, which in GCC <= 13's runtime crashes
# LeakSanitizer's tracer in processes with Open MPI's threads.
asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0:intercept_tls_get_addr=0"

# mpirun, as root too, with a timeout so that a hang fails the test. It
# runs the libtool wrapper of the real binary, never a valgrind wrapper
# ($LOOPKIT may be one).
mpirun_() {
  ASAN_OPTIONS=$asan timeout 120 mpirun --allow-run-as-root --oversubscribe "$@"
}

# mpi K ARGS...: K ranks run loopkit ARGS.
mpi() {
  k=$1
  shift
  mpirun_ -np "$k" "$LK_BUILDDIR/loopkit" "$@"
}

# mpmd EXTRA ARGS...: two ranks run loopkit ARGS, rank 1 with the
# arguments EXTRA (split at spaces) after them: a process that disagrees.
mpmd() {
  extra=$1
  shift
  # shellcheck disable=SC2086 # EXTRA is a list of arguments
  mpirun_ -np 1 "$LK_BUILDDIR/loopkit" "$@" : \
    -np 1 "$LK_BUILDDIR/loopkit" "$@" $extra
}

# dump CKPT: its parameters. Not what this test checks, so never under
# valgrind.
dump() { "$LK_BUILDDIR/loopkit" dump "$1"; }

# mexpect STATUS PATTERN DESC -- K ARGS...: expect, under mpirun -np K.
mexpect() {
  status=$1 pattern=$2 desc=$3
  shift 4
  mpi "$@" >"$T/out" 2>&1
  got=$?
  if [ "$got" -ne "$status" ]; then
    not_ok "$desc" "exit status $got, expected $status" "$(head -c 2000 "$T/out")"
  elif ! grep -Eq -- "$pattern" "$T/out"; then
    not_ok "$desc" "output does not match /$pattern/:" "$(head -c 2000 "$T/out")"
  else
    ok "$desc"
  fi
}

# worst A.ckpt B.ckpt: the largest relative difference between the
# parameters of two checkpoints, relative to max(|a|, |b|, 0.01) so that
# weights near zero are held to 0.01 * that absolute; fails unless both
# hold the same parameters.
worst() {
  dump "$1" >"$T/dump1" && dump "$2" >"$T/dump2" &&
    awk '
      function abs(x) { return x < 0 ? -x : x }
      NR == FNR { a[$1] = $2; na++; next }
      { nb++
        if (!($1 in a)) { bad = 1; next }
        s = abs(a[$1]) > abs($2) ? abs(a[$1]) : abs($2)
        if (s < 0.01) s = 0.01
        r = abs(a[$1] - $2) / s
        if (r >= w) { w = r; at = $1 } }
      END { if (na == 0 || na != nb || bad) exit 1
            printf "%.3g %s\n", w, at }' "$T/dump1" "$T/dump2"
}

# close A.ckpt B.ckpt TOL: every parameter agrees within TOL; prints the
# worst difference as a TAP comment.
close() {
  set -- "$(worst "$1" "$2")" "$3"
  echo "# worst relative difference: ${1:-none}"
  [ -n "$1" ] && awk -v w="${1%% *}" -v tol="$2" 'BEGIN { exit !(w <= tol) }'
}

# apart A.ckpt B.ckpt TOL: some parameter differs by more than TOL.
apart() {
  set -- "$(worst "$1" "$2")" "$3"
  [ -n "$1" ] && awk -v w="${1%% *}" -v tol="$2" 'BEGIN { exit !(w > tol) }'
}

# losses_close A B TOL: the loss columns of two metrics.csv files agree.
losses_close() {
  awk -F, -v tol="$3" '
    function abs(x) { return x < 0 ? -x : x }
    FNR == 1 { next }
    NR == FNR { a[FNR] = $3; na++; next }
    { nb++; s = abs($3) > 1e-300 ? abs($3) : 1; r = abs(a[FNR] - $3) / s
      if (r >= worst) worst = r }
    END { printf "# worst loss difference %.3g (%d rows)\n", worst, nb
          exit !(na > 0 && na == nb && worst <= tol) }' "$1" "$2"
}

# opts NAME: --set arguments for optimizer NAME, with $lr_sgd and $lr_adam
# (a config section must name a plugin of the run, so they are not there).
# Used unquoted: the words are the arguments.
opts() {
  case $1 in
  sgd) echo "--set plugins.optimizer=sgd --set sgd.lr=$lr_sgd --set sgd.momentum=0.9" ;;
  adam) echo "--set plugins.optimizer=adam --set adam.lr=$lr_adam" ;;
  lbfgs) echo "--set plugins.optimizer=lbfgs --set lbfgs.max_iter=4" ;;
  lbfgs_wolfe) echo "--set plugins.optimizer=lbfgs --set lbfgs.max_iter=4 --set lbfgs.line_search_fn=strong_wolfe" ;;
  sam) echo "--set plugins.optimizer=sam --set sgd.lr=$lr_sgd --set sgd.momentum=0.9" ;;
  esac
}

expect 0 '^mpi +strategy ' "loopkit plugins lists mpi as a strategy" -- plugins

# ---- f64: linreg on synthetic data ----------------------------------------
# 48 samples: batches of 4 per rank, 8 or 12 in one process, none dropped.
config lin <<INI
[loop]
max_epochs = 3
seed = 11
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[synthetic]
shuffle = true
n_train = 48
batch_size = 4
[sgd]
lr = 0.001
INI
lr_sgd=0.05 lr_adam=0.05

for opt in sgd adam; do
  for k in 2 3; do
    "$LOOPKIT" train lin.ini --quiet --out "lin-$opt-1x$k" \
      $(opts $opt) --set synthetic.batch_size=$((4 * k)) >/dev/null 2>&1
    mexpect 0 "trained $((36 / k)) steps" "f64 $opt: $k ranks train" \
      -- "$k" train lin.ini --quiet --out "lin-$opt-$k" \
      $(opts $opt) --set plugins.strategy=mpi
    check "f64 $opt: $k ranks x 4 = one process x $((4 * k)) within 1e-12" \
      close "lin-$opt-1x$k/checkpoints/last.ckpt" "lin-$opt-$k/checkpoints/last.ckpt" 1e-12
  done
done
"$LOOPKIT" train lin.ini --quiet --out lin-sgd-1 $(opts sgd) >/dev/null 2>&1
check "the comparison tells runs apart: one process x 4 differs by > 1e-3" \
  apart lin-sgd-1/checkpoints/last.ckpt lin-sgd-2/checkpoints/last.ckpt 1e-3

# Only rank 0 writes: metrics.csv as in one process, loss the mean of ranks.
check "metrics.csv: a row per step, as in one process" \
  test "$(wc -l <lin-sgd-2/metrics.csv)" -eq "$(wc -l <lin-sgd-1x2/metrics.csv)"
check "metrics.csv: loss is the mean over the ranks (1e-12)" \
  losses_close lin-sgd-1x2/metrics.csv lin-sgd-2/metrics.csv 1e-12
check "checkpoints/last.ckpt written" test -s lin-sgd-2/checkpoints/last.ckpt
mkdir cwd && cd cwd || exit 1
mpi 3 train ../lin.ini --quiet --set plugins.strategy=mpi $(opts sgd) >../out 2>&1
cd "$T" || exit 1
check "3 ranks make one run directory: runs/lin-1" \
  test "$(ls cwd/runs)" = lin-1 -a -s cwd/runs/lin-1/checkpoints/last.ckpt
check "one summary on stdout, from rank 0" test "$(grep -c '^trained' out)" -eq 1

# Several closure evaluations per step: every one averages its gradients,
# and the optimizer sees the loss averaged too, so that L-BFGS's
# strong-Wolfe search, which branches on it, takes one path on every rank.
for opt in lbfgs lbfgs_wolfe sam; do
  "$LOOPKIT" train lin.ini --quiet --out "lin-$opt-1x2" --set loop.max_epochs=1 \
    $(opts $opt) --set synthetic.batch_size=8 >/dev/null 2>&1
  mexpect 0 "trained 6 steps" "f64 $opt: 2 ranks train" \
    -- 2 train lin.ini --quiet --out "lin-$opt-2" --set loop.max_epochs=1 \
    $(opts $opt) --set plugins.strategy=mpi
  check "f64 $opt: 2 ranks x 4 = one process x 8 within 1e-12" \
    close "lin-$opt-1x2/checkpoints/last.ckpt" "lin-$opt-2/checkpoints/last.ckpt" 1e-12
done

# Resume: 5 steps, then on to 3 epochs, equals 3 epochs straight.
mpi 2 train lin.ini --quiet --out part --set plugins.strategy=mpi $(opts sgd) \
  --set loop.max_steps=5 >/dev/null 2>&1
mexpect 0 "trained 18 steps" "2 ranks resume from last.ckpt" \
  -- 2 train lin.ini --quiet --resume part/checkpoints/last.ckpt \
  --set plugins.strategy=mpi $(opts sgd)
dump part/checkpoints/last.ckpt >a
dump lin-sgd-2/checkpoints/last.ckpt >b
check "the resumed run equals the uninterrupted one, bit for bit" \
  sh -c 'test -s a && cmp -s a b'

# Setup makes every rank start from rank 0's parameters and state: rank 1
# is given another initial weight, or another learning rate (optimizer
# state), and the run is the same. A rank with other tensors is refused.
config pw <<INI
[loop]
max_steps = 3
[plugins]
step = probe
optimizer = probe
INI
"$LOOPKIT" train pw.ini --quiet --out pw-1 >/dev/null 2>&1
mpmd "--set probe.w0=5" train pw.ini --quiet --out pw-2 --set plugins.strategy=mpi >/dev/null 2>&1
check "rank 0's initial parameters everywhere (probe.w0 = 5 on rank 1)" \
  close pw-1/checkpoints/last.ckpt pw-2/checkpoints/last.ckpt 0
mpmd "--set sgd.lr=0.5" train lin.ini --quiet --out lin-lr $(opts sgd) \
  --set plugins.strategy=mpi >/dev/null 2>&1
check "rank 0's optimizer state everywhere (sgd.lr = 0.5 on rank 1)" \
  close lin-sgd-2/checkpoints/last.ckpt lin-lr/checkpoints/last.ckpt 0
mpmd "--set synthetic.features=4 --set linreg.features=4" \
  train lin.ini --quiet --out lin-other --set plugins.strategy=mpi >out 2>&1
got=$?
check "a rank with other parameters: exit status 2" test "$got" -eq 2
check "... and an error naming the mismatch" \
  grep -q 'rank 1 of 2: setup of strategy mpi: the 2 processes do not have the same parameters' out

# ---- f32: mlp on a csv file -------------------------------------------------
# One process sums a batch's gradient in one product, K ranks in K products
# and an allreduce: the roundings differ (~1e-7). Adam divides each
# gradient by its own running scale, so a small weight's error does not
# shrink with its gradient: after 12 to 18 steps the worst is 2.4e-6 of
# 0.01 (seeds 1 to 6), and it grows with the number of steps.
awk 'BEGIN { srand(5); print "a,b,c,label";
  for (i = 0; i < 72; i++) { a = rand() * 2 - 1; b = rand() * 2 - 1; c = rand() * 2 - 1;
    printf "%.6f,%.6f,%.6f,%d\n", a, b, c, (a + b > 0.3) + (b - c > 0.2) } }' >cls.csv
config mlp <<INI
[loop]
max_epochs = 2
seed = 3
[plugins]
step = mlp
optimizer = sgd
data = csv
[csv]
path = $T/cls.csv
batch_size = 4
[mlp]
layers = 3,16,3
[sgd]
lr = 0.001
INI
lr_sgd=0.1 lr_adam=0.01
for opt in sgd adam; do
  for k in 2 3; do
    "$LOOPKIT" train mlp.ini --quiet --out "mlp-$opt-1x$k" \
      $(opts $opt) --set csv.batch_size=$((4 * k)) >/dev/null 2>&1
    mexpect 0 "trained $((36 / k)) steps" "f32 $opt: $k ranks train" \
      -- "$k" train mlp.ini --quiet --out "mlp-$opt-$k" \
      $(opts $opt) --set plugins.strategy=mpi
    check "f32 $opt: $k ranks x 4 = one process x $((4 * k)) within 1e-5" \
      close "mlp-$opt-1x$k/checkpoints/last.ckpt" "mlp-$opt-$k/checkpoints/last.ckpt" 1e-5
  done
done

# ---- errors -----------------------------------------------------------------
config probe <<INI
[loop]
max_steps = 50
[plugins]
step = probe
optimizer = probe
strategy = mpi
[probe]
fail_at = 3
fail_rank = 1
INI
mpi 2 train probe.ini --quiet --out probe >out 2>&1
got=$?
check "a failure on rank 1 stops both ranks (exit status 1, not a timeout)" test "$got" -eq 1
check "the error names the rank and the failure" \
  grep -Eq 'rank 1 of 2: training failed: .*probe failing on purpose' out
mexpect 2 'data plugin synthetic has 1 training batches for 2 processes' \
  "fewer training batches than ranks: an error naming the data plugin" \
  -- 2 train lin.ini --quiet --out few --set plugins.strategy=mpi --set synthetic.n_train=4

# ---- the README's command line, on one machine ------------------------------
# Its two-node Open MPI line, with this machine as the one node of 3 slots:
# batch_size is per process (rank 0 says so), a schedule's auto length
# counts one rank's share, and the run is one process's with batches of 3
# times the size.
readme=$(grep '^  mpirun -np 8 --host node1:4,node2:4 loopkit train CONFIG.ini' "$LK_SRCDIR/README.md")
check "the README shows the two-node mpirun line" test -n "$readme"
check "... and the srun one" grep -q '^  srun --nodes=2 --ntasks-per-node=4 --mpi=pmix loopkit train CONFIG.ini --set plugins.strategy=mpi$' "$LK_SRCDIR/README.md"
# shellcheck disable=SC2086 # the README's words are the arguments
set -- $(echo "$readme" | sed -e 's/-np 8 --host node1:4,node2:4/-np 3 --host localhost:3/' \
  -e "s|loopkit train CONFIG.ini|$LK_BUILDDIR/loopkit train lin.ini|")
shift # mpirun
ASAN_OPTIONS=$asan timeout 120 mpirun --allow-run-as-root --oversubscribe "$@" \
  --out readme-3 $(opts sgd) --set plugins.scheduler=cosine --set cosine.interval=step >out 2>&1
got=$?
check "mpirun -np 3 --host localhost:3 (the README's line) trains" test "$got" -eq 0
check "... rank 0 says batch_size is per process: 3 x 4 = 12 samples a step" \
  grep -q '^3 processes with batches of 4 each: 12 samples a step; batch_size is per process, as DDP.s$' out
check "... once, from rank 0" test "$(grep -c 'batch_size is per process' out)" -eq 1
check "... cosine's T_max = auto counts a rank's 4 batches an epoch: 12 steps" \
  grep -q 'cosine: T_max = auto = 12 ' out
"$LOOPKIT" train lin.ini --quiet --out readme-1x3 $(opts sgd) --set synthetic.batch_size=12 \
  --set plugins.scheduler=cosine --set cosine.interval=step >/dev/null 2>&1
check "... equal to one process with batches of 12 (the same schedule), within 1e-12" \
  close readme-1x3/checkpoints/last.ckpt readme-3/checkpoints/last.ckpt 1e-12

# Macro F1 sums its counts over the ranks that share the validation: 3
# ranks give one process's val_f1, on the same checkpoint.
config cls <<INI
[loop]
max_epochs = 1
[plugins]
step = mlp
optimizer = sgd
data = csv
[csv]
path = $T/cls.csv
batch_size = 2
val_split = 0.5
[mlp]
layers = 3,16,3
f1 = true
[sgd]
lr = 0.1
INI
"$LOOPKIT" train cls.ini --quiet --out cls-1 >/dev/null 2>&1
"$LOOPKIT" validate cls.ini --ckpt cls-1/checkpoints/last.ckpt >val-1 2>&1
mpi 3 validate cls.ini --ckpt cls-1/checkpoints/last.ckpt --set plugins.strategy=mpi >val-3 2>&1
f1_1=$(grep '^val_f1 ' val-1)
check "val_f1 over 3 ranks sharing the split's batches is one process's ($f1_1)" \
  sh -c "[ -n '$f1_1' ] && [ \"\$(grep '^val_f1 ' val-3 | sort -u)\" = '$f1_1' ]"

# The line bench/mpi reads.
mexpect 0 '^mpi: 2 ranks; 12 gradient allreduces of 32 bytes, [0-9.]+ µs each \(mean\), total [0-9.]+ s$' \
  "rank 0 reports the gradient allreduces" \
  -- 2 train lin.ini --out report --set plugins.strategy=mpi --set loop.max_epochs=2
finish
