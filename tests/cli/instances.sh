#!/bin/sh
# Named instances: [plugins] names an instance NAME:PLUGIN, with its options
# in [NAME], for every role; a name used twice is a config error. Two
# checkpoint callbacks with their own monitors keep their own files and
# best.ckpt (filename, dirpath), and each instance resumes its own state.
. "$LK_SRCDIR/tests/cli/lib.sh"

# column NAME CSV: "step epoch value" for each row where column NAME is set.
column() {
  awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    k && $k != "" { print $1, $2, $k }' "$2"
}
# best NAME CSV [max]: "epoch=E-step=S.ckpt" of the best value of column NAME
# (ties: the earlier).
best() {
  column "$1" "$2" | awk '{ print $3, NR, $2, $1 }' | sort -k1,1g${3:+r} -k2,2n |
    head -n 1 | awk '{ printf "epoch=%s-step=%s.ckpt\n", $3, $4 }'
}
files() { ls "$1" | grep -v '^best\.ckpt$' | sort | tr '\n' ' '; }
same() {
  [ "$1" = "$2" ] && return 0
  echo "# got [$1], expected [$2]"
  return 1
}
train() { "$LOOPKIT" train "$@" --quiet >/dev/null 2>&1; }
# state CKPT OUT: every tensor of CKPT, state included, one element a line.
state() { python3 "$LK_SRCDIR/tests/cli/ckpt_edit.py" "$1" --dump >"$2"; }
# with NAME CALLBACKS: $T/NAME.ini, base.ini with callbacks = CALLBACKS (its
# line 7) and the sections on stdin.
with() {
  sed "/^data = /a callbacks = $2" "$T/base.ini" >"$T/$1.ini"
  cat >>"$T/$1.ini"
}

# val_loss goes up and down (sgd with momentum); no test split.
config base <<INI
[loop]
max_epochs = 12
[plugins]
step = linreg
optimizer = sgd
data = synthetic
[synthetic]
n_train = 32
n_val = 16
n_test = 0
batch_size = 8
noise = 0.5
[sgd]
lr = 0.1
momentum = 0.9
INI
train "$T/base.ini" --out "$T/base"

# ---- two checkpoint callbacks, different monitors ----
with two 'best_loss:checkpoint, best_mae:checkpoint, checkpoint' <<INI
[best_loss]
monitor = val_loss
save_top_k = 2
[best_mae]
monitor = val_mae
mode = max
[checkpoint]
monitor = val_loss
mode = max
INI
train "$T/two.ini" --out "$T/two"
C=$T/two/checkpoints
check "two named checkpoint callbacks: each in checkpoints/NAME, best.ckpt in each" \
  test -f "$C/best_loss/best.ckpt" -a -f "$C/best_mae/best.ckpt" -a -f "$C/best.ckpt"
bl=$(best val_loss "$T/base/metrics.csv")
bm=$(best val_mae "$T/base/metrics.csv" max)
bu=$(best val_loss "$T/base/metrics.csv" max)
check "best_loss's best.ckpt is its lowest val_loss ($bl)" cmp -s "$C/best_loss/best.ckpt" "$C/best_loss/$bl"
check "best_mae's best.ckpt is its highest val_mae ($bm)" cmp -s "$C/best_mae/best.ckpt" "$C/best_mae/$bm"
check "the unnamed checkpoint keeps checkpoints/best.ckpt, its highest val_loss ($bu)" \
  cmp -s "$C/best.ckpt" "$C/$bu"
check "the three best.ckpt differ (no instance clobbered another's)" \
  sh -c "! cmp -s '$C/best_loss/best.ckpt' '$C/best_mae/best.ckpt' && ! cmp -s '$C/best.ckpt' '$C/best_loss/best.ckpt'"
check "best_mae keeps one file, best_loss two (its save_top_k): nobody deleted the other's" \
  same "$(ls "$C/best_mae" | wc -l | tr -d ' ') $(ls "$C/best_loss" | wc -l | tr -d ' ')" "2 3"
check "the unnamed instance's files are where they always were" \
  same "$(files "$C")" "best_loss best_mae $bu last.ckpt "
state "$C/last.ckpt" "$T/two.state"
check "each instance's state is under its name in the checkpoint" \
  sh -c "grep -q '^best_loss\.kept\[' '$T/two.state' && grep -q '^best_mae\.kept\[' '$T/two.state' &&
    grep -q '^checkpoint\.kept\[' '$T/two.state'"
check "the effective config keeps the names and their sections" \
  sh -c "grep -qx 'callbacks = best_loss:checkpoint, best_mae:checkpoint, checkpoint' '$T/two/config.ini' &&
    grep -qx '\[best_mae\]' '$T/two/config.ini'"
train "$T/two/config.ini" --out "$T/two-again"
check "... and trains the same again from it" cmp -s "$T/two/checkpoints/best_mae/best.ckpt" \
  "$T/two-again/checkpoints/best_mae/best.ckpt"

# ---- one name, one instance ----
with dup ema,ema </dev/null
expect 2 'dup\.ini:7: name ema is used twice in \[plugins\] callbacks' "ema,ema refused with file:line" \
  -- train "$T/dup.ini" --out "$T/x1"
sed 's/^callbacks = .*/callbacks = checkpoint, checkpoint/' "$T/dup.ini" >"$T/dup1.ini"
expect 2 'dup1\.ini:7: name checkpoint is used twice in \[plugins\] callbacks' "checkpoint, checkpoint refused" \
  -- train "$T/dup1.ini" --out "$T/x2"
sed 's/^callbacks = .*/callbacks = a:ema, a:checkpoint/' "$T/dup.ini" >"$T/dup2.ini"
expect 2 'dup2\.ini:7: name a is used twice: for plugin checkpoint here and for plugin ema \(.*dup2\.ini:7\)' \
  "a:ema, a:checkpoint refused, naming file:line and the name" -- train "$T/dup2.ini" --out "$T/x3"
sed 's/^optimizer = .*/optimizer = a:sgd/; s/^\[sgd\]/[a]/; s/^callbacks = .*/callbacks = a:ema/' \
  "$T/dup.ini" >"$T/dup3.ini"
expect 2 'dup3\.ini:7: name a is used twice: for plugin ema here and for plugin sgd \(.*dup3\.ini:5\)' \
  "a name given in two roles to two plugins is refused" -- train "$T/dup3.ini" --out "$T/x4"
expect 2 'plugins\.callbacks=best loss:checkpoint: instance name "best loss" in "best loss:checkpoint": a name is letters' \
  "a name that is not [A-Za-z0-9_-]+ is refused" -- train "$T/dup.ini" --out "$T/x5" \
  --set 'plugins.callbacks=best loss:checkpoint'
expect 2 'instance name "loop" in "loop:ema"' "loop (a host section) is not an instance name" \
  -- train "$T/dup.ini" --out "$T/x6" --set 'plugins.callbacks=loop:ema'
expect 2 'unknown option "bogus" for plugin e1:ema' "an option error names the instance and its plugin" \
  -- train "$T/dup.ini" --out "$T/x7" --set 'plugins.callbacks=e1:ema' --set e1.bogus=1
check "no run directory is left by a refused config" sh -c "! ls -d '$T'/x* 2>/dev/null"

# ---- named optimizer and scheduler ----
sed 's/^optimizer = .*/optimizer = opt:sgd\nscheduler = sch:step_lr/; s/^\[sgd\]/[opt]/' "$T/base.ini" >"$T/nopt.ini"
printf '[sch]\nstep_size = 3\ngamma = 0.5\n' >>"$T/nopt.ini"
sed 's/^optimizer = .*/optimizer = sgd\nscheduler = step_lr/' "$T/base.ini" >"$T/uopt.ini"
printf '[step_lr]\nstep_size = 3\ngamma = 0.5\n' >>"$T/uopt.ini"
train "$T/nopt.ini" --out "$T/nopt"
train "$T/uopt.ini" --out "$T/uopt"
check "optimizer = opt:sgd, scheduler = sch:step_lr with options in [opt] and [sch] train as unnamed ones" \
  sh -c "'$LOOPKIT' dump '$T/nopt/checkpoints/last.ckpt' >'$T/n.dump' && '$LOOPKIT' dump '$T/uopt/checkpoints/last.ckpt' | cmp -s - '$T/n.dump' &&
    cmp -s '$T/nopt/metrics.csv' '$T/uopt/metrics.csv'"
check "... and differ from a run without [sch]'s gamma (the section is read)" \
  sh -c "! cmp -s '$T/nopt/metrics.csv' '$T/base/metrics.csv'"
check "the effective config names them optimizer = opt:sgd, scheduler = sch:step_lr" \
  sh -c "grep -qx 'optimizer = opt:sgd' '$T/nopt/config.ini' && grep -qx 'scheduler = sch:step_lr' '$T/nopt/config.ini' &&
    grep -qx 'gamma = 0.5' '$T/nopt/config.ini'"
sed 's/^\[opt\]/[sgd]/' "$T/nopt.ini" >"$T/nopt2.ini"
printf '[opt]\nlr = 0.001\n' >>"$T/nopt2.ini" # sgd's lr is required
expect 2 'nopt2\.ini:14: unknown section \[sgd\]: .*accepted sections: .*opt' \
  "a named optimizer's options under [sgd] are an unknown section" -- train "$T/nopt2.ini" --out "$T/y1"

# ---- filename and dirpath ----
with fn ck:checkpoint <<INI
[ck]
save_top_k = -1
filename = {epoch:02d}-{val_loss:.4f}-{val_mae:.2e}
dirpath = kept/ck
INI
train "$T/fn.ini" --out "$T/fn"
want=$(awk -F, 'NR > 1 && $5 != "" { printf "epoch=%02d-val_loss=%.4f-val_mae=%.2e.ckpt\n", $2, $5, $6 }' \
  "$T/base/metrics.csv" | sort | tr '\n' ' ')
check "filename {epoch:02d}-{val_loss:.4f}-{val_mae:.2e} names each file from metrics.csv's values" \
  same "$(files "$T/fn/kept/ck")" "$want"
check "dirpath kept/ck is relative to the run directory; checkpoints/ holds last.ckpt alone" \
  same "$(ls "$T/fn/checkpoints")" last.ckpt
train "$T/fn.ini" --out "$T/fn2" --set ck.save_top_k=1 --set ck.filename='best-{val_loss:.3f}' \
  --set ck.auto_insert_metric_name=false --set ck.dirpath="$T/abs"
bv=$(column val_loss "$T/base/metrics.csv" | sort -k3,3g | head -n 1 | awk '{ printf "best-%.3f.ckpt", $3 }')
check "auto_insert_metric_name = false and an absolute dirpath: $T/abs holds $bv and best.ckpt" \
  same "$(ls "$T/abs" | tr '\n' ' ')" "$bv best.ckpt "
check "... the same checkpoint" cmp -s "$T/abs/best.ckpt" "$T/abs/$bv"
train "$T/fn.ini" --out "$T/fn3" --set ck.save_top_k=1 --set ck.filename=latest_best
check "a filename without fields keeps its one file (the old one is not deleted over the new)" \
  same "$(ls "$T/fn3/kept/ck" | tr '\n' ' ')" "best.ckpt latest_best.ckpt "
expect 2 'option filename: field \{val_loss:\.4d\}: the format is \[0\]\[WIDTH\]\[\.PRECISION\] then f, e or g' \
  "a metric field with format d is refused" -- train "$T/fn.ini" --out "$T/y2" --set 'ck.filename={val_loss:.4d}'
expect 2 "option filename = a/\{epoch\}: '/' cannot be in a file name" "a / in filename is refused (dirpath is for that)" \
  -- train "$T/fn.ini" --out "$T/y3" --set 'ck.filename=a/{epoch}'
expect 2 'option filename = \{epoch: a \{ without its \}' "an unclosed field is refused" \
  -- train "$T/fn.ini" --out "$T/y4" --set 'ck.filename={epoch'
expect 1 'option filename: field \{nosuch\} was never logged' "a field naming no metric fails the run, named" \
  -- train "$T/fn.ini" --out "$T/y5" --set 'ck.filename={nosuch}' --quiet

# ---- resume: each instance its own state ----
with res 'lo:checkpoint, hi:checkpoint, slow:ema, fast:ema' <<INI
[lo]
save_top_k = 2
[hi]
mode = max
[slow]
apply_at_end = false
[fast]
decay = 0.5
apply_at_end = false
INI
train "$T/res.ini" --out "$T/whole"
train "$T/res.ini" --out "$T/half" --set loop.max_epochs=6
train "$T/res.ini" --resume "$T/half/checkpoints/last.ckpt"
state "$T/whole/checkpoints/last.ckpt" "$T/w.state"
state "$T/half/checkpoints/last.ckpt" "$T/h.state"
grep '^slow\.weight' "$T/w.state" | cut -d' ' -f2 >"$T/s"
grep '^fast\.weight' "$T/w.state" | cut -d' ' -f2 >"$T/f"
check "two named ema instances hold two states (slow.* and fast.*) that differ" \
  sh -c "test -s '$T/s' && ! cmp -s '$T/s' '$T/f'"
check "resumed halfway, the run ends with the uninterrupted one's state, every instance's included" \
  cmp -s "$T/h.state" "$T/w.state"
check "... the same metrics.csv" cmp -s "$T/half/metrics.csv" "$T/whole/metrics.csv"
check "... and the same files of each checkpoint instance" \
  same "$(cd "$T/half/checkpoints" && find . -type f | sort | tr '\n' ' ')" \
  "$(cd "$T/whole/checkpoints" && find . -type f | sort | tr '\n' ' ')"
for i in lo hi; do
  state "$T/half/checkpoints/$i/best.ckpt" "$T/hb"
  state "$T/whole/checkpoints/$i/best.ckpt" "$T/wb"
  check "... $i's best.ckpt the same as the uninterrupted run's" cmp -s "$T/hb" "$T/wb"
done

finish
