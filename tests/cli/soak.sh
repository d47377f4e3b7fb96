#!/bin/sh
# Soak: runs killed with SIGKILL again and again, at random moments and at
# chosen ones (inside a checkpoint write, a validation, the test, an
# optimizer step: the killer profiler, from LK_KILL), each time resumed
# from whatever last.ckpt survived, until they finish; then compared byte
# for byte with the uninterrupted run: `loopkit dump`, metrics.csv and
# last.ckpt. Configs cover early stopping, the checkpoint callback, ema,
# reduce_on_plateau at epoch and step intervals, accumulation, L-BFGS,
# SAM, manual optimization, a momentum a scheduler changes and, with MPI,
# two ranks.
#
# make check runs the short mode (LK_SOAK_KILLS=2 kills per config, one
# round). The long mode, run by hand:
#   LK_SOAK_ROUNDS=20 LK_SOAK_KILLS=4 make check TESTS=tests/cli/soak.sh
# prints "soak: K kills, C configs runs, D differences" at the end (in
# tests/cli/soak.log); LK_SOAK_SEED makes a run repeatable.
. "$LK_SRCDIR/tests/cli/lib.sh"
cd "$T" || exit 1
kills_per=${LK_SOAK_KILLS:-2}
rounds=${LK_SOAK_ROUNDS:-1}
seed=${LK_SOAK_SEED:-$$}
echo "# soak: seed $seed, $rounds round(s), up to $kills_per kills per config"
# The loopkit binary itself, not a valgrind wrapper: this test is about
# state, and it kills processes valgrind would report on.
LK=${LK_BUILDDIR:?}/loopkit

rand() { # N: a pseudo-random number in [0, N)
  seed=$(((seed * 1103515245 + 12345) % 2147483648))
  echo $(((seed / 65536) % $1))
}

total_kills=0
total_runs=0
differences=0

# The moments a kill can be aimed at, and how far into the action.
actions="checkpoint_save checkpoint_save/end optimizer_step training_step
  backward validation validation_step test test_step get_batch
  run_training_epoch run_training_epoch/end lr_scheduler_step closure"
pick_action() {
  n=$(echo $actions | wc -w)
  echo $actions | tr ' ' '\n' | sed -n "$(($(rand "$n") + 1))p"
}

# run_ NAME ARGS...: loopkit (under mpirun for the MPI config).
run_() {
  name=$1
  shift
  if [ "$name" = mpi ]; then
    OMPI_MCA_btl_vader_single_copy_mechanism=none \
      timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$LK" "$@"
  else
    timeout 120 "$LK" "$@"
  fi
}

# soak NAME: $T/NAME.ini killed up to $kills_per times, resumed to the end,
# compared with its uninterrupted run.
soak() {
  name=$1 cfg="$T/$1.ini" ref="$T/$1-ref"
  [ -d "$ref" ] || run_ "$name" train "$cfg" --out "$ref" --quiet >"$T/$name.ref.log" 2>&1 ||
    { not_ok "$name: the uninterrupted run" "$(tail -5 "$T/$name.ref.log")"; return; }
  steps=$(awk -F, 'NR > 1 && $1 != "" { s = $1 } END { print s + 1 }' "$ref/metrics.csv")
  r=1
  while [ $r -le "$rounds" ]; do
    dir="$T/$name-$r" kills=0 tries=0 broken=0
    rm -rf "$dir"
    while [ $tries -lt 40 ]; do
      tries=$((tries + 1))
      if [ -f "$dir/checkpoints/last.ckpt" ]; then
        "$LK" dump "$dir/checkpoints/last.ckpt" >/dev/null 2>&1 || broken=$((broken + 1))
        set -- --resume "$dir/checkpoints/last.ckpt"
      else
        rm -rf "$dir"
        set -- --out "$dir"
      fi
      spec=
      if [ $kills -lt "$kills_per" ]; then
        case $(rand 3) in
        0) spec= ;; # a random moment, by the clock
        *)
          action=$(pick_action)
          # per-step actions come once a batch; the others a few times
          case $action in
          optimizer_step | training_step | backward | closure | get_batch) most=$steps ;;
          *) most=6 ;;
          esac
          spec="$action:$(($(rand "$most") + 1)):$(rand 3000)"
          ;;
        esac
      fi
      if [ $kills -lt "$kills_per" ] && [ -z "$spec" ]; then
        LK_KILL_RANK=0 run_ "$name" train "$cfg" --quiet "$@" >"$T/$name.log" 2>&1 &
        pid=$!
        sleep "$(awk -v r="$(rand 100)" 'BEGIN { printf "%.3f", 0.02 + r / 250 }')"
        if kill -9 $pid 2>/dev/null; then
          # $pid is the subshell: the loopkit (or mpirun and its ranks)
          # under it is killed by its command line, and gone before the
          # next run starts.
          pkill -9 -f "train $cfg" 2>/dev/null
          wait $pid
          while pgrep -f "train $cfg" >/dev/null 2>&1; do sleep 0.02; done
          kills=$((kills + 1))
          continue
        fi
        wait $pid
        status=$?
      else
        LK_KILL=$spec LK_KILL_RANK=0 run_ "$name" train "$cfg" --quiet "$@" >"$T/$name.log" 2>&1
        status=$?
        [ "$name" = mpi ] && pkill -9 -f "train $cfg" 2>/dev/null
      fi
      case $status in
      0) break ;;
      137 | 9) kills=$((kills + 1)) ;;
      *)
        # mpirun reports a killed rank with its own status.
        if [ "$name" = mpi ] && [ -n "$spec" ]; then
          kills=$((kills + 1))
        else
          not_ok "$name round $r: a run failed (status $status, LK_KILL=$spec)" "$(tail -5 "$T/$name.log")"
          differences=$((differences + 1))
          return
        fi
        ;;
      esac
    done
    total_kills=$((total_kills + kills))
    total_runs=$((total_runs + 1))
    same=yes
    "$LK" dump "$ref/checkpoints/last.ckpt" >"$T/want" 2>&1
    "$LK" dump "$dir/checkpoints/last.ckpt" >"$T/got" 2>&1
    cmp -s "$T/want" "$T/got" || same="dump"
    cmp -s "$ref/metrics.csv" "$dir/metrics.csv" || same="$same metrics.csv"
    cmp -s "$ref/checkpoints/last.ckpt" "$dir/checkpoints/last.ckpt" || same="$same last.ckpt"
    if [ "$same" = yes ] && [ $broken -eq 0 ]; then
      ok "$name round $r: killed $kills times, resumed, equal to the uninterrupted run"
    else
      differences=$((differences + 1))
      not_ok "$name round $r: killed $kills times: differs ($same; $broken unreadable checkpoints)" \
        "$(diff "$ref/metrics.csv" "$dir/metrics.csv" | head -5)"
    fi
    r=$((r + 1))
  done
}

# ---- the configs ----

data="data = synthetic
profiler = killer"
syn="[synthetic]
n_train = 24
n_val = 8
n_test = 8
batch_size = 4
shuffle = true
noise = 0.5"

config es <<INI
[loop]
max_epochs = 12
seed = 5
[plugins]
step = linreg
optimizer = sgd
$data
callbacks = early_stopping
$syn
[sgd]
lr = 0.02
momentum = 0.9
[early_stopping]
patience = 2
INI

config ckpt <<INI
[loop]
max_epochs = 5
checkpoint_every_n_steps = 4
keep_last = 2
[plugins]
step = linreg
optimizer = adam
$data
callbacks = checkpoint, ema
$syn
[adam]
lr = 0.05
[checkpoint]
save_top_k = 2
[ema]
decay = 0.8
INI

config rop_epoch <<INI
[loop]
max_epochs = 6
checkpoint_every_n_steps = 5
[plugins]
step = linreg
optimizer = sgd
scheduler = reduce_on_plateau
$data
$syn
[sgd]
lr = 0.1
[reduce_on_plateau]
monitor = loss
patience = 0
factor = 0.5
threshold = 0.01
INI

config rop_step <<INI
[loop]
max_epochs = 4
checkpoint_every_n_steps = 3
[plugins]
step = linreg
optimizer = sgd
scheduler = reduce_on_plateau
$data
$syn
[sgd]
lr = 0.1
[reduce_on_plateau]
monitor = loss
interval = step
patience = 1
factor = 0.7
INI

config accum <<INI
[loop]
max_epochs = 4
accumulate_grad_batches = 3
checkpoint_every_n_steps = 2
[plugins]
step = linreg
optimizer = sgd
$data
$syn
[sgd]
lr = 0.05
momentum = 0.9
INI

config lbfgs <<INI
[loop]
max_steps = 40
checkpoint_every_n_steps = 3
[plugins]
step = rosenbrock
optimizer = lbfgs
profiler = killer
[rosenbrock]
n = 2000
[lbfgs]
history_size = 4
max_iter = 4
line_search_fn = strong_wolfe
INI

config sam <<INI
[loop]
max_epochs = 4
checkpoint_every_n_steps = 4
[plugins]
step = linreg
optimizer = sam
$data
$syn
[sam]
base = sgd
rho = 0.05
[sgd]
lr = 0.05
momentum = 0.5
INI

config manual <<INI
[loop]
max_epochs = 5
manual_optimization = true
checkpoint_every_n_steps = 3
[plugins]
step = probe
optimizer = sgd
$data
$syn
[probe]
manual = true
n = 50000
[sgd]
lr = 0.01
momentum = 0.9
INI

# A momentum that a scheduler changes every step (momsched, a test
# scheduler that keeps no state: the momentum is the optimizer's).
config momentum <<INI
[loop]
max_epochs = 4
checkpoint_every_n_steps = 3
[plugins]
step = linreg
optimizer = nadam
scheduler = momsched
$data
$syn
[nadam]
lr = 0.02
[momsched]
values = 0.9,0.5,0,0.95,0.7
INI

if [ -n "${LK_SANITIZE:-}" ] && [ -z "${LK_SOAK_KILLS:-}" ]; then
  # A state test, not a memory one: the plain builds run it.
  echo "ok 1 # SKIP soak in a sanitizer build"
  echo "1..1"
  exit 0
fi
for c in es ckpt rop_epoch rop_step accum lbfgs sam manual momentum; do
  soak $c
done

if [ "${LK_HAVE_MPI:-no}" = yes ] && command -v mpirun >/dev/null 2>&1 &&
  [ -z "${LK_SANITIZE:-}" ]; then
  config mpi <<INI
[loop]
max_epochs = 5
checkpoint_every_n_steps = 2
[plugins]
step = linreg
optimizer = sgd
strategy = mpi
$data
callbacks = early_stopping
[synthetic]
n_train = 32
n_val = 8
n_test = 8
batch_size = 2
shuffle = true
[sgd]
lr = 0.02
momentum = 0.9
INI
  soak mpi
else
  ok "mpi # SKIP no MPI here (or a sanitizer build)"
fi

echo "# soak: $total_kills kills, $total_runs config runs, $differences differences (seed $seed)"
finish
