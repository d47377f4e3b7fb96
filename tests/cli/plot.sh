#!/bin/sh
# loopkit plot: a real run's metrics.csv drawn into a 1200x900 PNG (the
# default RUN_DIR/curves.png) or an SVG; what each of the four panels shows,
# read back from the SVG; hand-written metrics.csv files with one point,
# only training rows, ragged rows, CRLF, non-finite cells and 200000 rows;
# the errors, and a failed write that leaves the old file alone. Built
# without cairo, plot says how to get it.
. "$LK_SRCDIR/tests/cli/lib.sh"

if [ "${LK_HAVE_CAIRO:-no}" != yes ]; then
  mkdir "$T/run"
  printf 'step,epoch,loss\n0,0,1\n' >"$T/run/metrics.csv"
  expect 2 'built without cairo: install libcairo2-dev and rebuild to draw plots' \
    "without cairo: plot says how to get it" -- plot "$T/run"
  check "without cairo: nothing written" test ! -e "$T/run/curves.png"
  config nocairo <<INI
[loop]
max_steps = 3
[plugins]
step = rosenbrock
optimizer = sgd
INI
  expect 0 'trained 3 steps' "without cairo: train still succeeds" -- train "$T/nocairo.ini" --out "$T/nc"
  check "without cairo: train writes no curves.png" test ! -e "$T/nc/curves.png"
  finish
  exit
fi

# png_header FILE: the PNG signature, the first chunk's type, and the
# width and height of its IHDR.
png_header() {
  od -An -tx1 -N8 "$1" | tr -d ' \n'
  printf ' %s' "$(dd if="$1" bs=1 skip=12 count=4 2>/dev/null)"
  od -An -tu1 -j16 -N8 "$1" |
    awk '{ printf " %dx%d\n", (($1 * 256 + $2) * 256 + $3) * 256 + $4,
                              (($5 * 256 + $6) * 256 + $7) * 256 + $8 }'
}

# panels SVG: what each panel (training loss, validation loss, validation
# accuracy, learning rate) shows, "|" between panels: the series, known by
# their colours in src/cli/plot.c (paths that draw something: a move alone
# is invisible), and "msg" for the grey no-data message.
cat >"$T/panels.py" <<'PY'
import re, sys, xml.etree.ElementTree as E
NS = '{http://www.w3.org/2000/svg}'
names = {(68, 78, 93): 'raw', (10, 33, 72): 'smooth', (85, 37, 1): 'val_loss',
         (11, 55, 27): 'acc', (46, 27, 65): 'lr', (45, 45, 45): 'msg'}
def name(style):
    m = re.search(r'(?:stroke|fill):rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\)', style)
    return m and names.get(tuple(round(float(v)) for v in m.groups()))
def panel(x, y):
    return (2 if float(y) >= 450 else 0) + (1 if float(x) >= 600 else 0)
root = E.parse(sys.argv[1]).getroot()
assert root.tag == NS + 'svg', root.tag
found = [set() for _ in range(4)]
for p in root.iter(NS + 'path'):
    d = p.get('d', '')
    m = re.match(r'\s*M\s*(\S+)\s+(\S+)', d)
    if m and re.search('[LC]', d) and name(p.get('style', '')):
        found[panel(m[1], m[2])].add(name(p.get('style', '')))
for g in root.iter(NS + 'g'):
    if name(g.get('style', '')) == 'msg':
        for u in g.iter(NS + 'use'):
            found[panel(u.get('x'), u.get('y'))].add('msg')
print('|'.join(' '.join(sorted(s)) or '-' for s in found))
PY
panels() { python3 "$T/panels.py" "$1" 2>&1; }

# A real run: validation each epoch, a test at the end, a cosine schedule.
config data <<INI
[loop]
max_epochs = 6
seed = 7
[plugins]
step = linreg
optimizer = sgd
data = synthetic
scheduler = cosine
[sgd]
lr = 0.05
[cosine]
T_max = 6
interval = epoch
INI
"$LOOPKIT" train "$T/data.ini" --out "$T/data" --quiet >/dev/null 2>&1
check "the run has lr and val_loss columns" \
  grep -q '^step,epoch,loss,mae,lr,val_loss,' "$T/data/metrics.csv"
check "loopkit train wrote RUN_DIR/curves.png at the end of the run" \
  test "$(png_header "$T/data/curves.png")" = "89504e470d0a1a0a IHDR 1200x900"
rm -f "$T/data/curves.png"
expect 0 "^wrote $T/data/curves.png\$" "default output: RUN_DIR/curves.png" -- plot "$T/data"
check "PNG: signature, IHDR, 1200x900" \
  test "$(png_header "$T/data/curves.png")" = "89504e470d0a1a0a IHDR 1200x900"
expect 0 "^wrote $T/data/c.svg\$" "-o FILE.svg" -- plot "$T/data" -o "$T/data/c.svg"
check "SVG: an XML document with an <svg> root" \
  python3 -c 'import xml.etree.ElementTree as E,sys; assert E.parse(sys.argv[1]).getroot().tag.endswith("svg")' "$T/data/c.svg"
got=$(panels "$T/data/c.svg")
check "SVG: loss raw and smoothed, val_loss, no accuracy (says so), lr ($got)" \
  test "$got" = "raw smooth|val_loss|msg|lr"
expect 0 "^wrote $T/data/o.png\$" "--output FILE" -- plot "$T/data" --output "$T/data/o.png"
expect 0 "^wrote $T/data/O.PNG\$" "--output=FILE, extension in capitals" -- plot "$T/data" "--output=$T/data/O.PNG"
check "O.PNG is a PNG" test "$(png_header "$T/data/O.PNG")" = "89504e470d0a1a0a IHDR 1200x900"
echo old >"$T/data/curves.png"
"$LOOPKIT" plot "$T/data" >/dev/null 2>&1
check "an existing curves.png is replaced" test "$(png_header "$T/data/curves.png")" = "89504e470d0a1a0a IHDR 1200x900"
check "no temporary file left" sh -c "! ls '$T/data' | grep -q tmp"

# Hand-written files.
fixture() { # NAME: a run directory holding metrics.csv from standard input
  mkdir -p "$T/$1"
  cat >"$T/$1/metrics.csv"
}
fixture one <<CSV
step,epoch,loss,accuracy,lr,val_loss,val_accuracy
0,0,2.5,0.1,1e-6,,
0,0,,,,1.25,0.5
CSV
expect 0 wrote "one row of each kind plots" -- plot "$T/one" -o "$T/one/c.svg"
check "a single point is still drawn in every panel" \
  test "$(panels "$T/one/c.svg")" = "raw smooth|val_loss|acc|lr"
fixture same <<CSV
step,epoch,loss,lr
5,0,1,0.1
5,0,1,0.1
CSV
expect 0 wrote "points on one spot" -- plot "$T/same" -o "$T/same/c.svg"
check "points on one spot are drawn as a dot" \
  test "$(panels "$T/same/c.svg")" = "raw smooth|msg|msg|lr"
fixture train <<CSV
step,epoch,loss
0,0,3
1,0,2
2,0,
3,0,1.5
CSV
expect 0 wrote "only training rows: plots" -- plot "$T/train" -o "$T/train/c.svg"
check "only training rows: the other panels say there is no data" \
  test "$(panels "$T/train/c.svg")" = "raw smooth|msg|msg|msg"
fixture acc <<CSV
step,epoch,loss,val_loss,val_top1_acc
0,0,3,,
1,1,,2,0.25
2,2,,1,0.5
CSV
expect 0 wrote "a val_* column with acc in its name" -- plot "$T/acc" -o "$T/acc/c.svg"
check "val_top1_acc is drawn as the accuracy" \
  test "$(panels "$T/acc/c.svg")" = "raw smooth|val_loss|acc|msg"
printf 'step,epoch,loss,lr,val_loss\r\n0,0,5\r\n1\r\n\r\n2,0,inf,nan,\r\n3,0,x,0.1,,extra,cells\r\n4,1,4,-inf\r\n4,1,,,7\r\n' |
  fixture ragged
expect 0 wrote "CRLF, short and long rows, blank lines, inf, nan, text" \
  -- plot "$T/ragged" -o "$T/ragged/c.svg"
check "ragged: what is there is drawn" \
  test "$(panels "$T/ragged/c.svg")" = "raw smooth|val_loss|msg|lr"
awk 'BEGIN { print "step,epoch,loss,val_loss"
             for (i = 0; i < 200000; i++) printf "%d,0,%g,\n", i, 1 / (i + 1)
             print "200000,1,,0.5" }' | fixture long
expect 0 wrote "200000 rows" -- plot "$T/long" -o "$T/long/c.svg"
check "200000 rows: the last row is read" \
  test "$(panels "$T/long/c.svg")" = "raw smooth|val_loss|msg|msg"
fixture header <<CSV
step,epoch,loss
CSV
expect 0 wrote "a header and no rows: every panel says so" -- plot "$T/header" -o "$T/header/c.svg"
check "no rows: four messages" test "$(panels "$T/header/c.svg")" = "msg|msg|msg|msg"

# Errors.
expect 2 "cannot tell the format of $T/data/c.jpg: the file name must end in .png or .svg" \
  "another extension: status 2, the accepted ones named" -- plot "$T/data" -o "$T/data/c.jpg"
check "nothing written for .jpg" test ! -e "$T/data/c.jpg"
expect 2 "must end in .png or .svg" "no extension: status 2" -- plot "$T/data" -o "$T/data/curves"
expect 2 "cannot open run directory $T/nowhere: No such file or directory" \
  "a missing run directory is named" -- plot "$T/nowhere"
expect 2 "$T/data/metrics.csv is not a directory" "a file for RUN_DIR" -- plot "$T/data/metrics.csv"
mkdir "$T/bare"
expect 2 "cannot read $T/bare/metrics.csv: No such file or directory" \
  "a directory without metrics.csv: the path named" -- plot "$T/bare"
fixture foreign <<CSV
epoch,step,loss
1,2,3
CSV
expect 2 "$T/foreign/metrics.csv is not a loopkit metrics file: its header is \"epoch,step,loss\", expected \"step,epoch,loss\"" \
  "a foreign header: status 2, the expected one said" -- plot "$T/foreign"
printf 'step,epoch,lossy\n' | fixture lossy
expect 2 "not a loopkit metrics file" "a header that only starts like loopkit's" -- plot "$T/lossy"
: | fixture empty
expect 2 "$T/empty/metrics.csv is empty" "an empty metrics.csv" -- plot "$T/empty"
expect 2 "no run directory; usage: loopkit plot RUN_DIR" "no arguments: usage" -- plot
expect 2 "unexpected \"other\"; usage" "two run directories: usage" -- plot "$T/data" other
expect 2 "unexpected \"--bogus\"; usage" "an unknown option: usage" -- plot "$T/data" --bogus
expect 2 "-o needs a file name" "-o without a file" -- plot "$T/data" -o
expect 0 "^usage: loopkit plot RUN_DIR" "plot --help" -- plot --help
expect 1 "cannot write $T/nowhere/c.png: No such file or directory" \
  "an output directory that does not exist: status 1, the file named" \
  -- plot "$T/data" -o "$T/nowhere/c.png"

# A write that fails half way (the file size limit, without its signal)
# leaves the earlier file whole and no temporary file.
echo old >"$T/train/curves.png"
(
  ulimit -f 1
  trap '' XFSZ
  exec "$LOOPKIT" plot "$T/train"
) >"$T/out" 2>&1
status=$?
check "a failed write: status 1, the file and the reason named" \
  sh -c "test $status -eq 1 && grep -q 'cannot write $T/train/curves.png: File too large' '$T/out'"
check "a failed write leaves the old file" test "$(cat "$T/train/curves.png")" = old
check "a failed write leaves no temporary file" sh -c "! ls '$T/train' | grep -q tmp"
finish
