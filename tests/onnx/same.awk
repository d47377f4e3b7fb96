# same.awk: loopkit predict's CSV (index, pred, p0.. for a classifier;
# index, y0.. for a regression) and tests/onnx/run.js's (index, values),
# the first file then the second, hold the same samples, each value
# within 1e-4 (absolute). Prints the largest difference as a TAP comment;
# exits 1 when they differ.
#   awk -F, -f same.awk PREDICT.csv RUNJS.csv
NR == FNR {
  if (FNR == 1) { s = $2 == "pred" ? 3 : 2; next }
  rows++
  w[$1] = NF - s + 1
  for (i = s; i <= NF; i++) want[$1, i - s] = $i
  next
}
/^#/ { next }
{
  got++
  if (NF - 1 != w[$1]) { print "# sample " $1 ": " NF - 1 " values, predict " w[$1]; bad++; next }
  for (i = 2; i <= NF; i++) {
    d = $i - want[$1, i - 2]
    d = d < 0 ? -d : d
    if (d > max) max = d
    if (d > 1e-4) bad++
  }
}
END {
  printf "# %d samples, largest difference %g\n", got, max
  exit !(got == rows && got > 0 && !bad)
}
