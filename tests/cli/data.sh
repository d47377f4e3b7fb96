#!/bin/sh
# The idx and csv data plugins through loopkit train (the probe model
# ignores batches, so the number of steps tells how many batches the loop
# got): small IDX files written here, gzipped and not, CSV files, their
# errors as the user sees them (status 2, file named), and a short run on the
# real Fashion-MNIST when it is installed. tests/test_data.c checks values.
. "$LK_SRCDIR/tests/cli/lib.sh"
FASHION=/usr/share/datasets/fashion-mnist

# be32 N: N as 4 big-endian bytes.
be32() {
  printf "\\$(printf %03o $(($1 >> 24 & 255)))\\$(printf %03o $(($1 >> 16 & 255)))"
  printf "\\$(printf %03o $(($1 >> 8 & 255)))\\$(printf %03o $(($1 & 255)))"
}

# idx_set DIR N_TRAIN N_TEST: the four files of 2x2-pixel images in DIR.
idx_set() {
  mkdir -p "$1"
  for part in "train $2" "t10k $3"; do
    set -- "$1" $part
    { be32 2051; be32 "$3"; be32 2; be32 2; head -c $(($3 * 4)) /dev/zero; } \
      >"$1/$2-images-idx3-ubyte"
    { be32 2049; be32 "$3"; head -c "$3" /dev/zero; } >"$1/$2-labels-idx1-ubyte"
  done
}

# A model that ignores the data, and a data plugin.
run_with() { # NAME DATA_SECTION...
  name=$1
  shift
  {
    printf '[loop]\nmax_epochs = 2\n[plugins]\nstep = probe\noptimizer = probe\n'
    printf '%s\n' "$@"
  } >"$T/$name.ini"
}

idx_set "$T/idx" 100 10
run_with idx 'data = idx' '[idx]' "dir = $T/idx" 'batch_size = 16'
expect 0 'trained 14 steps \(2 epochs\)' "idx: 100 samples in batches of 16, 2 epochs" \
  -- train "$T/idx.ini" --out "$T/r-idx"
gzip "$T/idx/train-images-idx3-ubyte" "$T/idx/t10k-labels-idx1-ubyte"
expect 0 'trained 12 steps' "idx: gzipped files, drop_last drops the short batch" \
  -- train "$T/idx.ini" --out "$T/r-idx-gz" --set idx.drop_last=true
expect 0 'trained 10 steps' "idx: val_split 0.2 holds 20 samples out" \
  -- train "$T/idx.ini" --out "$T/r-idx-val" --set idx.val_split=0.2
expect 0 'trained 4 steps' "idx: limit 30" \
  -- train "$T/idx.ini" --out "$T/r-idx-limit" --set idx.limit=30
check "config.ini records the data options with their defaults" \
  grep -q '^normalize = scale$' "$T/r-idx/config.ini"

expect 2 "cannot find train-images-idx3-ubyte: tried $T/nowhere/train-images-idx3-ubyte and $T/nowhere/train-images-idx3-ubyte.gz" \
  "idx: a missing directory names the paths tried" \
  -- train "$T/idx.ini" --out "$T/r-missing" --set "idx.dir=$T/nowhere"
head -c 40 "$T/idx/train-labels-idx1-ubyte" >"$T/idx/cut" && mv "$T/idx/cut" "$T/idx/train-labels-idx1-ubyte"
expect 2 "train-labels-idx1-ubyte is truncated: its header promises 108 bytes, the file has 40" \
  "idx: a truncated file names it, with both sizes" -- train "$T/idx.ini" --out "$T/r-cut"
expect 2 'idx.normalize: expected one of none\|scale\|standard, got "minmax"' \
  "idx: normalize is an enum" -- train "$T/idx.ini" --out "$T/r-enum" --set idx.normalize=minmax

# ---- csv ----
printf 'a,b,label\n' >"$T/d.csv"
i=0
while [ $i -lt 25 ]; do
  printf '%d,%d.5,%d\n' $i $((i * 2)) $((i % 3)) >>"$T/d.csv"
  i=$((i + 1))
done
printf 'a,b,label\n1,2,0\n' >"$T/t.csv"
run_with csv 'data = csv' '[csv]' "path = $T/d.csv" "test = $T/t.csv" 'batch_size = 10'
expect 0 'trained 6 steps \(2 epochs\)' "csv: 25 rows in batches of 10, 2 epochs" \
  -- train "$T/csv.ini" --out "$T/r-csv"
expect 0 'trained 2 steps' "csv: limit 10" -- train "$T/csv.ini" --out "$T/r-csv-limit" --set csv.limit=10
printf 'a,b,label\n1,2,0\n3,x7,1\n' >"$T/bad.csv"
expect 2 "bad.csv:3:2: \"x7\" is not a number" "csv: a bad cell names file:line:column and the text" \
  -- train "$T/csv.ini" --out "$T/r-bad" --set "csv.path=$T/bad.csv"
printf 'a,b,label\n1,2,0\n3,1\n' >"$T/short.csv"
expect 2 "short.csv:3:3: missing cell: 2 columns, expected 3" "csv: a short row names file:line:column" \
  -- train "$T/csv.ini" --out "$T/r-short" --set "csv.path=$T/short.csv"
run_with nopath 'data = csv' '[csv]' 'batch_size = 10'
expect 2 'missing required option "path"' "csv: path is required" -- train "$T/nopath.ini" --out "$T/r-nopath"

expect 0 'label_column' "inspect csv lists its options" -- inspect csv
expect 0 'val_split' "inspect idx lists its options" -- inspect idx

# ---- the real data set ----
if [ -d "$FASHION" ]; then
  run_with fashion 'data = idx' '[idx]' 'batch_size = 100' 'limit = 1000' 'val_split = 0.1'
  expect 0 'trained 18 steps' "Fashion-MNIST: 900 training samples of the first 1000, batches of 100" \
    -- train "$T/fashion.ini" --out "$T/r-fashion"
else
  ok "# SKIP $FASHION is not installed (Debian: dataset-fashion-mnist)"
fi
finish
