#!/bin/sh
# Data plumbing (issue 15, items 4 and 6): paths in a config resolve
# against the config file's directory and --set paths against the current
# one, errors show the absolute path tried; csv's skip_rows (scikit-learn's
# own CSV files, tests/data/sklearn-iris.csv being its iris.csv) and
# test_split; a run under mpirun, an MPI launcher or srun without a
# strategy is refused before anything is made; ranks but 0 print only
# errors.
. "$LK_SRCDIR/tests/cli/lib.sh"
LK=$LOOPKIT
IRIS=$LK_TEST_DATA/sklearn-iris.csv
# The launchers' variables are this test's to set.
unset OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_RANK PMI_SIZE PMI_RANK \
  SLURM_NTASKS SLURM_STEP_NUM_TASKS SLURM_PROCID SLURM_STEP_ID

# envexpect STATUS PATTERN DESC VAR=VALUE... -- ARGS: expect, with loopkit
# run under those variables.
envexpect() {
  status=$1 pattern=$2 desc=$3
  shift 3
  vars=
  while [ "$1" != -- ]; do
    vars="$vars $1"
    shift
  done
  shift
  LOOPKIT=env
  # shellcheck disable=SC2086 # VARS are words, none with a space
  expect "$status" "$pattern" "$desc" -- $vars "$LK" "$@"
  LOOPKIT=$LK
}

# ---- paths ----------------------------------------------------------------
mkdir -p "$T/proj/data" "$T/elsewhere"
printf 'x1,x2,y\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n' >"$T/proj/data/d.csv"
printf 'x1,x2,y\n2,2,1\n4,4,0\n' >"$T/proj/data/t.csv"
cp "$T/proj/data/d.csv" "$T/elsewhere/here.csv"
cat >"$T/proj/rel.ini" <<INI
[plugins]
step = mlp
data = csv
optimizer = sgd
[csv]
path = data/d.csv
test = ./data//t.csv
batch_size = 2
[mlp]
layers = 2,2
[sgd]
lr = 0.1
INI
cd "$T/elsewhere" || exit 1
expect 0 "4 training, 0 validation and 2 test samples .* from $T/proj/data/d.csv" \
  "a config's relative paths resolve against its directory, run from elsewhere" \
  -- train ../proj/rel.ini --out "$T/r-rel"
check "... and the effective config holds them absolute" \
  grep -qx "path = $T/proj/data/d.csv" "$T/r-rel/config.ini"
check "... the test file too, its . and // dropped" \
  grep -qx "test = $T/proj/data/t.csv" "$T/r-rel/config.ini"
expect 0 "from $T/elsewhere/here.csv" \
  "a --set path resolves against the current directory" \
  -- train ../proj/rel.ini --out "$T/r-set" --set csv.path=here.csv
expect 2 "cannot open data file $T/elsewhere/missing.csv: No such file" \
  "a missing --set path: the error shows the absolute path tried" \
  -- train ../proj/rel.ini --out "$T/r-miss1" --set csv.path=missing.csv
sed 's|^path = .*|path = nothere.csv|' "$T/proj/rel.ini" >"$T/proj/miss.ini"
expect 2 "cannot open data file $T/proj/nothere.csv: No such file" \
  "a missing path of the config: the error shows the absolute path tried" \
  -- train ../proj/miss.ini --out "$T/r-miss2"
cd "$T/proj" || exit 1
expect 0 "from $T/proj/data/d.csv" \
  "run from the config's own directory, the same files" \
  -- train rel.ini --out "$T/r-here"
expect 0 "from $T/proj/data/d.csv" \
  "the effective config.ini runs again from anywhere" \
  -- train "$T/r-rel/config.ini" --out "$T/r-again"
cd "$T" || exit 1
expect 0 '^  path +path +default' "inspect csv: path is of type path" \
  -- inspect csv

# ---- csv: skip_rows, test_split ---------------------------------------------
cat >"$T/iris.ini" <<INI
[loop]
max_epochs = 20
[plugins]
step = mlp
data = csv
optimizer = adam
[csv]
path = $IRIS
skip_rows = 1
header = false
batch_size = 16
normalize = standard
[mlp]
layers = 4,16,3
[adam]
lr = 0.01
INI
check "sklearn-iris.csv is scikit-learn's: a line of counts first" \
  grep -qx '150,4,setosa,versicolor,virginica' "$IRIS"
expect 2 'sklearn-iris.csv:1:3: "setosa" is not a number' \
  "without skip_rows, scikit-learn's first line is refused, FILE:LINE:COLUMN" \
  -- train "$T/iris.ini" --out "$T/r-iris0" --set csv.skip_rows=0
expect 0 '150 training, 0 validation and 0 test samples of 4 features, 3 classes' \
  "skip_rows = 1 reads scikit-learn's iris.csv" \
  -- train "$T/iris.ini" --out "$T/r-iris"
expect 0 '120 training, 0 validation and 30 test samples' \
  "test_split = 0.2 holds 30 of the 150 out as the test split" \
  -- train "$T/iris.ini" --out "$T/r-iris-t" --set csv.test_split=0.2
check "... which is evaluated at the end (test_acc in metrics.csv)" \
  sh -c "head -1 '$T/r-iris-t/metrics.csv' | grep -q test_acc"
expect 0 '105 training, 15 validation and 30 test samples' \
  "test_split = 0.2 and val_split = 0.1: three disjoint parts" \
  -- train "$T/iris.ini" --out "$T/r-iris-tv" --set csv.test_split=0.2 \
  --set csv.val_split=0.1
check "iris learns: test_acc above 0.9" \
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "test_acc") c = i; next }
    c && $c != "" { a = $c } END { exit !(a > 0.9) }' "$T/r-iris-tv/metrics.csv"
expect 2 'test_split = 0.2 and test = .*: the test split comes from one or the other' \
  "test_split with a test file is refused" \
  -- train "$T/iris.ini" --out "$T/r-iris-x" --set csv.test_split=0.2 \
  --set csv.test="$IRIS"
expect 2 'test_split = 0.5 and val_split = 0.5 of 150 samples \(75 and 75\) leave none for training' \
  "test_split and val_split that leave no training sample" \
  -- train "$T/iris.ini" --out "$T/r-iris-y" --set csv.test_split=0.5 \
  --set csv.val_split=0.5
expect 2 'has no data rows after the lines skip_rows skips' \
  "skip_rows past the end of the file" \
  -- train "$T/iris.ini" --out "$T/r-iris-z" --set csv.skip_rows=151

# ---- launchers ----------------------------------------------------------------
cat >"$T/lin.ini" <<INI
[plugins]
step = mlp
data = csv
optimizer = sgd
[csv]
path = $T/proj/data/d.csv
batch_size = 2
[mlp]
layers = 2,2
[sgd]
lr = 0.1
INI
mkdir "$T/launch" && cd "$T/launch" || exit 1
envexpect 2 'started by mpirun as one of 2 processes \(OMPI_COMM_WORLD_SIZE=2\), but \[plugins\] strategy is not set' \
  "mpirun's 2 processes and no strategy: refused, naming the strategy key" \
  OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 -- train "$T/lin.ini"
check "... before any run directory is made" test ! -e "$T/launch/runs"
envexpect 2 'one of 3 processes \(PMI_SIZE=3\).*strategy = mpi' \
  "an MPICH launcher's (PMI_SIZE) too" \
  PMI_SIZE=3 PMI_RANK=0 -- train "$T/lin.ini" --out "$T/r-pmi"
check "... and --out is not made" test ! -e "$T/r-pmi"
envexpect 2 'started by srun as one of 2 processes \(SLURM_NTASKS=2\)' \
  "srun's tasks (SLURM_NTASKS in a step) too" \
  SLURM_NTASKS=2 SLURM_PROCID=0 SLURM_STEP_ID=0 -- train "$T/lin.ini" --out "$T/r-srun"
envexpect 2 '\(SLURM_STEP_NUM_TASKS=4\)' \
  "srun: the step's task count before the allocation's" \
  SLURM_NTASKS=8 SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=0 SLURM_STEP_ID=0 \
  -- train "$T/lin.ini" --out "$T/r-srun2"
envexpect 0 'trained 2 steps' \
  "a batch script's SLURM_NTASKS without a step is one process" \
  SLURM_NTASKS=2 SLURM_PROCID=0 -- train "$T/lin.ini" --out "$T/r-batch"
envexpect 0 'trained 2 steps' "mpirun -np 1: one process, nothing to refuse" \
  OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0 -- train "$T/lin.ini" --out "$T/r-np1"
envexpect 0 'trained 2 steps' "an explicit strategy = single (--set) runs" \
  OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 \
  -- train "$T/lin.ini" --out "$T/r-single" --set plugins.strategy=single
sed 's/^optimizer = sgd$/optimizer = sgd\nstrategy = single/' "$T/lin.ini" >"$T/lin1.ini"
envexpect 0 'trained 2 steps' "... and so does strategy = single in the config" \
  PMI_SIZE=2 PMI_RANK=0 -- train "$T/lin1.ini" --out "$T/r-single2"

# Rank 1 prints no info lines (the data plugin's summary, the epochs):
# rank 0 does.
env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 "$LK" train "$T/lin1.ini" \
  --out "$T/r-rank1" >"$T/rank1.out" 2>"$T/rank1.err"
st=$?
check "rank 1 trains" test "$st" -eq 0
check "... and prints nothing on stderr (rank 0 speaks for the run)" \
  test ! -s "$T/rank1.err"
env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$LK" train "$T/lin1.ini" \
  --out "$T/r-rank0" >/dev/null 2>"$T/rank0.err"
check "rank 0 prints the data plugin's summary" grep -q '^csv: 4 training' "$T/rank0.err"
envexpect 2 "cannot open data file $T/launch/gone.csv" "rank 1 still prints its errors" \
  OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 \
  -- train "$T/lin1.ini" --out "$T/r-rank1e" --set csv.path=gone.csv
finish
