# man3.awk: section-3 manual pages for the public API, one per function
# and named after it, from the public headers' comments.
#
#   awk -v outdir=DIR -v version=V -f man3.awk include/loopkit/*.h ...
#
# Each LK_API declaration takes the comment right above it. Declarations
# that follow one another without a blank line or another comment share
# that comment (lk_plugin_open, lk_plugin_close, ...): each gets the
# comment, and names the others under SEE ALSO. A declaration with no
# comment above it gets the header's own first comment. Between a comment
# and its declarations may come the types and constants they use. The NAME line is
# the comment's first clause, so that apropos finds the page.

function reset_group() { ng = 0 }

# roff: backslashes escaped, the headers' one non-ASCII character (an em
# dash) named, a line never starting with a control character.
function roff(s) {
  gsub(/\\/, "\\e", s)
  gsub(/—/, "\\(em", s)
  if (s ~ /^[.']/)
    s = "\\&" s
  return s
}

# The first clause of comment C that says something, short enough for a
# NAME line: "lk_bind: as lk_bind_n, ..." and "Since ABI 1.4: ..." skip to
# what follows.
function summary(c,    s, first, clause) {
  s = c
  gsub(/\n/, " ", s)
  sub(/^ +/, "", s)
  first = ""
  while (s != "") {
    if (match(s, /(\. |: |; |\.$|:$)/)) {
      clause = substr(s, 1, RSTART - 1)
      s = substr(s, RSTART + RLENGTH)
    } else {
      clause = s
      s = ""
    }
    if (first == "")
      first = clause
    if (clause !~ /^([a-z_0-9]+|Since ABI [0-9.]+(, for [a-z_]+)?)$/)
      break
    clause = ""
  }
  if (clause == "")
    clause = first
  if (length(clause) > 72)
    clause = substr(clause, 1, 69) "..."
  return clause
}

function header_name(path,    h) {
  h = path
  sub(/^(.*\/)?include\//, "", h)
  return h
}

# Writes the page of declaration I of the current group.
function page(i,    with, f, name, lines, n, k, line, c, sep, j) {
  name = gname[i]
  f = outdir "/" name ".3"
  c = gcomment != "" ? gcomment : filecomment
  printf ".TH %s 3 \"\" \"loopkit %s\" \"loopkit library functions\"\n", \
    toupper(name), version > f
  with = i > 1 ? "with " gname[1] ": " : ""
  printf ".SH NAME\n%s \\- %s%s\n", name, with, roff(summary(c)) > f
  printf ".SH SYNOPSIS\n.nf\n.B #include <%s>\n.PP\n", header_name(FILENAME) > f
  printf "%s\n.fi\n", roff(gdecl[i]) > f
  printf ".SH DESCRIPTION\n" > f
  n = split(c, lines, "\n")
  for (k = 1; k <= n; k++) {
    line = lines[k]
    sub(/^ +/, "", line)
    if (line == "")
      printf ".PP\n" > f
    else
      printf "%s\n", roff(line) > f
  }
  if (ng > 1 || gcomment == "") {
    printf ".PP\n" > f
    if (gcomment == "")
      printf "(The header says nothing more of %s than the\ndescription of %s above.)\n", name, header_name(FILENAME) > f
  }
  printf ".SH \"SEE ALSO\"\n" > f
  sep = ""
  for (j = 1; j <= ng; j++)
    if (j != i) {
      printf "%s.BR %s (3)", sep, gname[j] > f
      sep = ",\n"
    }
  printf "%s.BR loopkit-plugin (7),\n.BR loopkit (1)\n", sep > f
  close(f)
}

function flush(    i) {
  for (i = 1; i <= ng; i++)
    page(i)
  reset_group()
  gcomment = ""
}

# A complete declaration D (one line, spaces collapsed).
function declared(d,    name) {
  sub(/^LK_API +/, "", d)
  sub(/ *LK_DEPRECATED\(.*\) *;$/, ";", d) # the compiler's warning, not the API
  gsub(/ +/, " ", d)
  gsub(/\( /, "(", d)
  gsub(/ \)/, ")", d)
  name = d
  sub(/\(.*/, "", name)
  sub(/^.*[ *]/, "", name)
  if (name !~ /^lk_[a-z0-9_]+$/)
    return
  if (ng == 0)
    gcomment = pending
  pending = ""
  gname[++ng] = name
  gdecl[ng] = d
}

FNR == 1 {
  if (ng)
    flush()
  filecomment = ""
  pending = ""
  incomment = 0
  indecl = 0
  first = 1
}

# Comments: their text, stars and slashes removed; a blank comment line
# is a paragraph break.
incomment || /^\/\*/ {
  line = $0
  if (!incomment) {
    sub(/^\/\* ?/, "", line)
    text = ""
    incomment = 1
  } else
    sub(/^ *\* ?/, "", line)
  done = sub(/ *\*\/ *$/, "", line)
  text = text (text == "" ? "" : "\n") line
  if (done) {
    incomment = 0
    if (first) {
      filecomment = text
      first = 0
    } else {
      if (ng)
        flush()
      # a section title ("---- plugins ----") belongs to no function
      pending = text ~ /^-+ .* -+$/ ? "" : text
    }
  }
  next
}

indecl {
  decl = decl " " $0
  if (decl ~ /;/) {
    indecl = 0
    declared(decl)
  }
  next
}

/^LK_API / {
  first = 0
  decl = $0
  if (decl ~ /;/)
    declared(decl)
  else
    indecl = 1
  next
}

# Between a comment and the declarations it is about there may be the
# types and constants they use (typedef, #define, a struct's body) and
# blank lines: the comment stays, and a declaration after a blank line
# with no comment of its own joins the group above. Anything else
# (#include, #ifdef, extern) ends it.
/^(typedef |#define |[ \t}]|$)/ {
  first = 0
  next
}

{
  first = 0
  if (ng)
    flush()
  pending = ""
}

END {
  if (ng)
    flush()
}
