#!/bin/sh
# loopkit plot: a real run's metrics.csv drawn into a PNG (the default
# RUN_DIR/curves.png) or an SVG of a panel per metric, training, validation
# and test values of a metric in one panel, what each panel shows read back
# from the SVG and listed by --list; a GAN's d_loss and g_loss, a constant
# learning rate from config.ini, --metrics, --log; hand-written
# metrics.csv files with one point, only training rows, ragged rows, CRLF,
# non-finite cells and 200000 rows; the errors, and a failed write that
# leaves the old file alone. Built without cairo, plot says how to get it.
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
[sgd]
lr = 0.001
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

# panels SVG: what each panel of the figure shows, "|" between panels in
# reading order (the grid's columns from the SVG's width, 600 each): the
# series, known by their colours in src/cli/plot.c (paths that draw
# something: a move alone is invisible; the legend's swatches above the
# plot area left out), and "msg" for the grey no-data message. A test
# result (green) or a learning rate (purple) drawn as a straight flat line
# is "test_flat" or "lr_flat".
cat >"$T/panels.py" <<'PY'
import re, sys, xml.etree.ElementTree as E
NS = '{http://www.w3.org/2000/svg}'
names = {(68, 78, 93): 'raw', (10, 33, 72): 'smooth', (85, 37, 1): 'val',
         (11, 55, 27): 'test', (46, 27, 65): 'lr', (45, 45, 45): 'msg'}
def name(style):
    m = re.search(r'(?:stroke|fill):rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\)', style)
    return m and names.get(tuple(round(float(v)) for v in m.groups()))
root = E.parse(sys.argv[1]).getroot()
assert root.tag == NS + 'svg', root.tag
width, height = (float(v) for v in root.get('viewBox').split()[2:])
cols, rows = int(width) // 600, int(height) // 450
def panel(x, y):
    return int(float(y) // 450) * cols + int(float(x) // 600)
found = [set() for _ in range(cols * rows)]
for p in root.iter(NS + 'path'):
    d, style = p.get('d', ''), p.get('style', '')
    pts = [(float(a), float(b)) for a, b in re.findall(r'(-?[\d.]+) (-?[\d.]+)', d)]
    n = name(style)
    if not pts or not re.search('[LC]', d) or not n or pts[0][1] % 450 < 44:
        continue
    stroked = 'stroke:rgb' in style
    if n in ('test', 'lr') and stroked and 'C' not in d and len({y for _, y in pts}) == 1:
        n += '_flat'
    elif n == 'test':
        continue  # its dot
    found[panel(*pts[0])].add(n)
for g in root.iter(NS + 'g'):
    if name(g.get('style', '')) == 'msg':
        for u in g.iter(NS + 'use'):
            found[panel(u.get('x'), u.get('y'))].add('msg')
print('|'.join(' '.join(sorted(s)) or '-' for s in found).rstrip('|-'))
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
check "SVG: loss and mae raw, smoothed, val and the test level; the cosine lr ($got)" \
  test "$got" = "raw smooth test_flat val|raw smooth test_flat val|lr"
"$LOOPKIT" plot "$T/data" --list >"$T/list" 2>&1
test_loss=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "test_loss") k = i }
  NR > 1 && $k != "" { printf "%.6g", $k }' "$T/data/metrics.csv")
check "--list: a panel a line, each metric's train, val and test columns, the test's value" \
  test "$(cat "$T/list")" = "loss: loss, val_loss, test_loss $test_loss
mae: mae, val_mae, test_mae $(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "test_mae") k = i }
  NR > 1 && $k != "" { printf "%.6g", $k }' "$T/data/metrics.csv")
lr: lr"
check "--list writes no figure" test ! -e "$T/data/curves.svg"
# The test's value is the test row's: changed in the file, it changes.
sed 's/^\([0-9]*,[0-9]*,,,,,,\)[^,]*/\10.5/' "$T/data/metrics.csv" >"$T/moved.csv"
mkdir "$T/moved" && cp "$T/moved.csv" "$T/moved/metrics.csv"
"$LOOPKIT" plot "$T/moved" --list >"$T/moved.list" 2>&1
check "the test's value is the test row's (0.5 when the file says so)" \
  grep -q '^loss: loss, val_loss, test_loss 0.5$' "$T/moved.list"
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
  test "$(panels "$T/one/c.svg")" = "raw smooth val|raw smooth val|lr"
fixture same <<CSV
step,epoch,loss,lr
5,0,1,0.1
5,0,1,0.1
CSV
expect 0 wrote "points on one spot" -- plot "$T/same" -o "$T/same/c.svg"
check "points on one spot are drawn as a dot" \
  test "$(panels "$T/same/c.svg")" = "raw smooth|lr"
# Parameter groups and a second optimizer: their rates (lr_NAME) after lr,
# drawn as set, never smoothed; their losses as any metric.
fixture groups <<CSV
step,epoch,loss,loss_second,lr,lr_no_decay,lr_second
0,0,2.5,1.5,0.1,0.01,0.2
2,0,2,1,0.05,0.005,0.1
CSV
expect 0 wrote "groups' and optimizers' rates plot" -- plot "$T/groups" -o "$T/groups/c.svg"
check "... rates last and not smoothed, loss_second as a metric" \
  test "$(panels "$T/groups/c.svg")" = "raw smooth|raw smooth|lr|lr|lr"
check "... in --list: lr, lr_no_decay, lr_second after the losses" \
  test "$("$LOOPKIT" plot "$T/groups" --list | cut -d: -f1 | tr '\n' ' ')" = "loss loss_second lr lr_no_decay lr_second "
fixture train <<CSV
step,epoch,loss
0,0,3
1,0,2
2,0,
3,0,1.5
CSV
expect 0 wrote "only training rows: plots" -- plot "$T/train" -o "$T/train/c.svg"
check "only training rows: one panel, no empty ones" \
  test "$(panels "$T/train/c.svg")" = "raw smooth"
check "one panel: a 600x450 figure" \
  grep -q 'viewBox="0 0 600 450"' "$T/train/c.svg"
fixture acc <<CSV
step,epoch,loss,val_loss,val_top1_acc
0,0,3,,
1,1,,2,0.25
2,2,,1,0.5
CSV
expect 0 wrote "a val_* column with acc in its name" -- plot "$T/acc" -o "$T/acc/c.svg"
check "val_top1_acc has a panel of its own, top1_acc" \
  test "$(panels "$T/acc/c.svg")" = "raw smooth val|val"
check "... named top1_acc in --list" \
  test "$("$LOOPKIT" plot "$T/acc" --list | tail -1)" = "top1_acc: val_top1_acc"
printf 'step,epoch,loss,lr,val_loss\r\n0,0,5\r\n1\r\n\r\n2,0,inf,nan,\r\n3,0,x,0.1,,extra,cells\r\n4,1,4,-inf\r\n4,1,,,7\r\n' |
  fixture ragged
expect 0 wrote "CRLF, short and long rows, blank lines, inf, nan, text" \
  -- plot "$T/ragged" -o "$T/ragged/c.svg"
check "ragged: what is there is drawn" \
  test "$(panels "$T/ragged/c.svg")" = "raw smooth val|lr"
awk 'BEGIN { print "step,epoch,loss,val_loss"
             for (i = 0; i < 200000; i++) printf "%d,0,%g,\n", i, 1 / (i + 1)
             print "200000,1,,0.5" }' | fixture long
expect 0 wrote "200000 rows" -- plot "$T/long" -o "$T/long/c.svg"
check "200000 rows: the last row is read" \
  test "$(panels "$T/long/c.svg")" = "raw smooth val"
fixture header <<CSV
step,epoch,loss
CSV
expect 0 wrote "a header and no rows: one panel says so" -- plot "$T/header" -o "$T/header/c.svg"
check "no rows: one message" test "$(panels "$T/header/c.svg")" = "msg"

# A GAN's run (examples/gan's columns and config): a panel for every
# metric, the constant learning rate of the run's optimizer from
# config.ini drawn flat.
fixture gan <<CSV
step,epoch,loss,d_loss,g_loss,g_mean_x
1,0,1.4,1.4,0.7,0.1
2,0,1.3,1.3,0.8,0.5
3,0,1.35,1.35,0.75,1.2
CSV
cat >"$T/gan/config.ini" <<INI
[loop]
manual_optimization = true
[plugins]
step = gan
optimizer = sgd
[gan]
g_optimizer = adam
[sgd]
lr = 0.05
[adam]
lr = 0.005
INI
expect 0 wrote "a GAN's run plots" -- plot "$T/gan" -o "$T/gan/c.svg"
check "GAN: loss, d_loss, g_loss and g_mean_x drawn, and the constant lr, flat" \
  test "$(panels "$T/gan/c.svg")" = "raw smooth|raw smooth|raw smooth|raw smooth|lr_flat"
check "GAN: five panels, three a row: a 1800x900 figure" \
  grep -q 'viewBox="0 0 1800 900"' "$T/gan/c.svg"
check "GAN: --list names d_loss, g_loss and the lr's source" \
  test "$("$LOOPKIT" plot "$T/gan" --list | tr '\n' '|')" = "loss: loss|d_loss: d_loss|g_loss: g_loss|g_mean_x: g_mean_x|lr: lr 0.05 ([sgd] in config.ini)|"
expect 0 wrote "--metrics d_loss,g_loss" -- plot "$T/gan" --metrics d_loss,g_loss -o "$T/gan/dg.svg"
check "--metrics: those panels only, in that order, 1200x450" \
  sh -c "test \"\$(python3 '$T/panels.py' '$T/gan/dg.svg')\" = 'raw smooth|raw smooth' && grep -q 'viewBox=\"0 0 1200 450\"' '$T/gan/dg.svg'"
check "--metrics=LIST, in its order" \
  test "$("$LOOPKIT" plot "$T/gan" --metrics=g_loss,lr,d_loss --list | cut -d: -f1 | tr '\n' ' ')" = "g_loss lr d_loss "
check "--metrics loss: its train, val and test columns" \
  test "$("$LOOPKIT" plot "$T/data" --metrics loss --list)" = "loss: loss, val_loss, test_loss $test_loss"
check "--metrics val_loss: that column alone" \
  test "$("$LOOPKIT" plot "$T/data" --metrics val_loss --list)" = "val_loss: val_loss"
expect 2 '--metrics d_los: no column d_los, val_d_los or test_d_los with values in metrics.csv; the columns with values are: loss, d_loss, g_loss, g_mean_x' \
  "--metrics: an unknown name is refused with the columns there are" -- plot "$T/gan" --metrics d_loss,d_los
expect 2 'expected a comma list of metric names' "--metrics with an empty name" -- plot "$T/gan" --metrics d_loss,,g_loss
expect 2 '--metrics needs a comma list' "--metrics without a value" -- plot "$T/gan" --metrics
expect 2 '--metrics lr: no column lr' "--metrics lr without an lr column or config.ini" -- plot "$T/train" --metrics lr
check "without config.ini and an lr column: no lr panel" \
  sh -c "! '$LOOPKIT' plot '$T/train' --list | grep -q '^lr'"

# --log: every y axis on a log scale. Values 1, 10, 1000 at equal steps
# rise by one decade then two on it (cairo would merge the segments of a
# straight line), and 0 is left out.
fixture decades <<CSV
step,epoch,loss,lr
0,0,0,0
1,0,1,0
2,0,10,0
3,0,1000,0
CSV
# raw_dy SVG: the vertical steps of the raw loss line, rounded.
raw_dy() {
  python3 - "$1" <<'PY'
import re, sys
for p in re.findall(r'<path style="([^"]*)" d="([^"]*)"', open(sys.argv[1]).read()):
    if 'stroke:rgb(68%,78%,93%)' in p[0] and ' L ' in p[1]:
        ys = [float(y) for y in re.findall(r'[\d.]+ ([\d.]+)', p[1])]
        if ys[0] % 450 >= 44:  # not the legend's swatch
            print(' '.join('%.1f' % (b - a) for a, b in zip(ys, ys[1:])))
PY
}
expect 0 wrote "--log" -- plot "$T/decades" --log -o "$T/decades/log.svg"
"$LOOPKIT" plot "$T/decades" -o "$T/decades/lin.svg" >/dev/null 2>&1
dy=$(raw_dy "$T/decades/log.svg")
check "--log: 1, 10, 1000 one decade then two apart, 0 left out ($dy)" \
  awk -v d="$dy" 'BEGIN { n = split(d, a, " "); x = a[2] - 2 * a[1]; exit !(n == 2 && a[1] < 0 && x * x < 0.1) }'
dy=$(raw_dy "$T/decades/lin.svg")
check "without --log: 0, 1, 10, 1000 on a linear scale ($dy)" \
  awk -v d="$dy" 'BEGIN { n = split(d, a, " "); exit !(n == 3 && a[3] < 100 * a[2]) }'
check "--log: a panel with nothing above 0 says so" \
  test "$(panels "$T/decades/log.svg")" = "raw smooth|msg"

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
expect 2 "unexpected \"--metricsx\"; usage" "an option that only starts like --metrics" -- plot "$T/data" --metricsx
expect 2 "-o needs a file name" "-o without a file" -- plot "$T/data" -o
expect 0 "^usage: loopkit plot RUN_DIR \[-o FILE\] \[--metrics NAME,...\] \[--log\] \[--list\]" "plot --help" -- plot --help
expect 2 "cannot create $T/nowhere/c.png: No such file or directory" \
  "an output directory that does not exist: status 2 (nothing drawn), the file named" \
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
