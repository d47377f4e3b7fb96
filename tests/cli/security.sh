#!/bin/sh
# Plugin security through the command: a plugin file or directory writable
# by others than its owner and root, a plugin owned by someone else, and a
# relative or empty LOOPKIT_PLUGIN_PATH entry are refused (status 2, and the
# message says why and how to fix it), unless LOOPKIT_ALLOW_UNSAFE_PLUGINS=1;
# the current directory is never searched. A symlink chain through a link
# another user owns is refused, and that user swapping the link while
# loopkit loads through it never gets their code run.
. "$LK_SRCDIR/tests/cli/lib.sh"
: "${LK_BUILDDIR:?}"
unset LOOPKIT_ALLOW_UNSAFE_PLUGINS
P=$LOOPKIT_PLUGIN_PATH
SGD=$LK_BUILDDIR/plugins/.libs/sgd.so
FIX='fix with chmod go-w .*, or set LOOPKIT_ALLOW_UNSAFE_PLUGINS=1'

config good <<'INI'
[loop]
max_steps = 3
[plugins]
step = rosenbrock
optimizer = sgd
[sgd]
lr = 0.001
INI
expect 0 'trained 3 steps' "the bundled plugins still load" -- train "$T/good.ini" --out "$T/run0"

# A copy of sgd in $T/p, first on the path: a refused plugin fails the run,
# it is never skipped for the sgd further on.
mkdir "$T/p" && cp "$SGD" "$T/p/sgd.so" && chmod 0755 "$T/p" "$T/p/sgd.so"
LOOPKIT_PLUGIN_PATH="$T/p:$P"
expect 0 'trained 3 steps' "a plugin only its owner can write loads" -- train "$T/good.ini" --out "$T/run1"

chmod 0646 "$T/p/sgd.so"
expect 2 "refusing plugin sgd: $T/p/sgd.so is writable by others \(mode 0646\), so they could change its code; $FIX" \
  "world-writable plugin file refused by name" -- train "$T/good.ini" --out "$T/run2"
expect 2 "refusing plugin $T/p/sgd.so: it is writable by others \(mode 0646\)" \
  "world-writable plugin file refused by path" -- train "$T/good.ini" --out "$T/run3" \
  --set "plugins.optimizer=$T/p/sgd.so"
chmod 0664 "$T/p/sgd.so"
expect 2 "refusing plugin sgd: .* is writable by group \(mode 0664\)" \
  "group-writable plugin file refused" -- train "$T/good.ini" --out "$T/run4"
chmod 0755 "$T/p/sgd.so"

chmod 0777 "$T/p"
expect 2 "refusing plugin sgd \($T/p/sgd.so\): its directory $T/p is writable by group and others \(mode 0777\), so they could replace the plugin; $FIX" \
  "world-writable plugin directory refused" -- train "$T/good.ini" --out "$T/run5"
chmod 1777 "$T/p"
expect 2 "its directory $T/p is writable by group and others \(mode 1777\)" \
  "a sticky plugin directory is refused too" -- inspect sgd
chmod 0755 "$T/p"

mkdir -p "$T/up/in" && cp "$SGD" "$T/up/in/sgd.so" && chmod 0757 "$T/up"
expect 2 "directory $T/up above it is writable by others \(mode 0757\) without the sticky bit" \
  "a writable directory above the plugin is refused" -- inspect "$T/up/in/sgd.so"
chmod 1777 "$T/up"
expect 0 'name: +sgd' "a sticky directory above it is fine, like /tmp" -- inspect "$T/up/in/sgd.so"

if [ "$(id -u)" -eq 0 ]; then
  chown 65534 "$T/p/sgd.so"
  expect 2 "refusing plugin sgd: $T/p/sgd.so is owned by uid 65534, not by root or you \(uid 0\), so that user could change its code; fix with chown" \
    "a plugin owned by another user is refused" -- train "$T/good.ini" --out "$T/run6"
  chown 0 "$T/p/sgd.so"
  chown 65534 "$T/p"
  expect 2 "its directory $T/p is owned by uid 65534" \
    "a plugin directory owned by another user is refused" -- inspect sgd
  chown 0 "$T/p"
else
  ok "a plugin owned by another user is refused # SKIP not root"
  ok "a plugin directory owned by another user is refused # SKIP not root"
fi

# ---- a symlink another user owns, in the middle of a chain ----
# $R/safe/a.so -> $R/sticky/link (uid 65534's, in a sticky world-writable
# directory) -> $R/safe/d/.../good.so. The checks used to cover the path given
# and the file it led to, and dlopen resolved the path again: the owner of
# the link could swap it in between and have loopkit run their code.
race_skip() {
  for t in "a chain through another user's symlink is refused" "inspect refuses it too" \
    "plugins loads through the chain while the link is swapped" \
    "the stranger's constructor never ran, in 400 loads" "each of the 400 was refused"; do
    ok "$t # SKIP $1"
  done
}
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
  R=$T/race
  as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
  chmod 0755 "$T" # so that uid 65534 can reach $R
  mkdir "$R" "$R/safe" "$R/links" "$R/sticky" "$R/evil"
  chmod 0755 "$R" "$R/safe" "$R/links" "$R/evil" && chmod 1777 "$R/sticky"
  # The good plugin sits 200 directories deep: the old checks took a stat
  # for each, which widened the window between check and load enough for
  # the race to be won in most runs, not in a few.
  deep=$R/safe/$(i=0; while [ $i -lt 200 ]; do printf d/; i=$((i + 1)); done)
  mkdir -p "$deep" && cp "$SGD" "$deep/good.so" && chmod 0755 "$deep/good.so"
  # The stranger's plugin: a constructor that leaves a mark.
  cat >"$R/evil.c" <<'EOF'
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void evil(void) {
  int fd = open(MARKER, O_WRONLY | O_CREAT, 0644);
  if (fd >= 0)
    close(fd);
}
EOF
  # Swaps DIR/link between GOOD and EVIL for as long as GO exists (120 s at
  # most): two links made once, then hard links to them renamed over
  # DIR/link in turn, so that it is never missing and each state lasts as
  # long as the other.
  cat >"$R/swap.c" <<'EOF'
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  if (argc != 5)
    return 2;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  char link[4096], tmp[4096], to[2][4096];
  snprintf(link, sizeof link, "%s/link", argv[2]);
  snprintf(tmp, sizeof tmp, "%s/link.tmp", argv[2]);
  for (int k = 0; k < 2; k++) {
    snprintf(to[k], sizeof to[k], "%s/link.%d", argv[2], k);
    unlink(to[k]);
    if (symlink(argv[3 + k], to[k]) != 0)
      return 1;
  }
  time_t start = time(NULL);
  while (access(argv[1], F_OK) == 0 && time(NULL) - start < 120)
    for (int i = 0; i < 256; i++)
      if (linkat(AT_FDCWD, to[i % 2], AT_FDCWD, tmp, 0) == 0)
        rename(tmp, link);
  return 0;
}
EOF
  if ! as_nobody test -w "$R/sticky"; then
    race_skip "uid 65534 cannot reach $R"
  elif "$LK_CC" -shared -fPIC -DMARKER="\"$R/ran\"" -o "$R/evil/evil.so" "$R/evil.c" &&
    "$LK_CC" -o "$R/swap" "$R/swap.c"; then
    chown 65534 "$R/evil" "$R/evil/evil.so"
    as_nobody ln -s "$deep/good.so" "$R/sticky/link"
    ln -s "$R/sticky/link" "$R/safe/a.so"
    expect 2 "refusing plugin $R/safe/a.so: symlink $R/sticky/link is owned by uid 65534, not by root or you \(uid 0\), so that user could repoint it; fix with chown -h, or set LOOPKIT_ALLOW_UNSAFE_PLUGINS=1" \
      "a chain through another user's symlink is refused, naming the link and its owner" \
      -- train "$T/good.ini" --out "$T/run8" --set "plugins.optimizer=$R/safe/a.so"
    expect 2 "symlink $R/sticky/link is owned by uid 65534" "inspect refuses it too" -- inspect "$R/safe/a.so"

    # The race: 400 loads through the chain (one loopkit plugins over 400
    # links to it) while uid 65534 swaps the link as fast as it can.
    i=0
    while [ $i -lt 400 ]; do
      i=$((i + 1))
      ln -s "$R/sticky/link" "$R/links/a$i.so"
    done
    touch "$R/go"
    as_nobody "$R/swap" "$R/go" "$R/sticky" "$deep/good.so" "$R/evil/evil.so" &
    swapper=$!
    saved_path=$LOOPKIT_PLUGIN_PATH
    LOOPKIT_PLUGIN_PATH=$R/links
    expect 1 "symlink $R/sticky/link is owned by uid 65534" \
      "plugins loads through the chain while the link is swapped" -- plugins
    LOOPKIT_PLUGIN_PATH=$saved_path
    cp "$T/out" "$R/plugins.out"
    rm -f "$R/go"
    wait "$swapper"
    check "the stranger's constructor never ran, in 400 loads" test ! -e "$R/ran"
    # (stdout and stderr interleave in the file: count matches, not lines)
    refusals=$(grep -o "refusing plugin $R/links/a[0-9]*\.so: symlink $R/sticky/link is owned by uid 65534, not by root or you (uid 0), so that user could repoint it" "$R/plugins.out" | wc -l)
    check "each of the 400 was refused, naming the link and its owner (got $refusals)" test "$refusals" -eq 400
  else
    not_ok "the race test's programs build with $LK_CC"
  fi
else
  race_skip "not root, or no setpriv"
fi

# loopkit plugins reports what it refuses.
chmod 0666 "$T/p/sgd.so"
expect 1 "refusing plugin $T/p/sgd.so: it is writable by group and others" \
  "plugins names the refused plugin" -- plugins
check "plugins lists it as cannot load" grep -Eq "^sgd +\(cannot load\) .* $T/p/sgd.so" "$T/out"
chmod 0755 "$T/p/sgd.so"

# ---- the search path ----
for entry in plugins ./plugins .; do
  LOOPKIT_PLUGIN_PATH="$P:$entry"
  expect 2 "refusing LOOPKIT_PLUGIN_PATH entry \"$entry\": relative directories are not searched, as what they hold depends on the current directory; use an absolute directory, or set LOOPKIT_ALLOW_UNSAFE_PLUGINS=1" \
    "relative entry \"$entry\" refused" -- train "$T/good.ini" --out "$T/rel"
done
expect 1 'refusing LOOPKIT_PLUGIN_PATH entry "\."' "plugins refuses a relative entry" -- plugins
for value in ":$P" "$P:" "$T/p::$P"; do
  LOOPKIT_PLUGIN_PATH=$value
  expect 2 "refusing LOOPKIT_PLUGIN_PATH=\"$value\": it has an empty entry \(a leading, trailing or doubled ':'\), which means the current directory, and the current directory is never searched" \
    "empty entry refused in \"$value\"" -- train "$T/good.ini" --out "$T/empty"
done

mkdir "$T/cwd" && cp "$SGD" "$T/cwd/here.so" && cd "$T/cwd" || exit 1
LOOPKIT_PLUGIN_PATH=$P
expect 2 'plugin here not found; tried: ' "a plugin in the current directory is not found by name" -- inspect here
check "the current directory is not among the paths tried" sh -c "! grep -q ' here.so\|\./here.so\|$T/cwd' '$T/out'"
unset LOOPKIT_PLUGIN_PATH
expect 2 'plugin here not found' "nor without LOOPKIT_PLUGIN_PATH" -- inspect here
LOOPKIT_PLUGIN_PATH=
export LOOPKIT_PLUGIN_PATH
expect 2 'plugin here not found' "nor with LOOPKIT_PLUGIN_PATH set but empty" -- inspect here
expect 0 'name: +sgd' "a path to it is explicit and loads" -- inspect ./here.so

# ---- LOOPKIT_ALLOW_UNSAFE_PLUGINS=1, exactly ----
chmod 0777 "$T/p" "$T/p/sgd.so"
LOOPKIT_PLUGIN_PATH="$T/p:$P"
for value in 0 yes true 2 ''; do
  LOOPKIT_ALLOW_UNSAFE_PLUGINS=$value
  export LOOPKIT_ALLOW_UNSAFE_PLUGINS
  expect 2 'refusing plugin sgd' "LOOPKIT_ALLOW_UNSAFE_PLUGINS=\"$value\" allows nothing" -- inspect sgd
done
LOOPKIT_ALLOW_UNSAFE_PLUGINS=1
expect 0 'trained 3 steps' "LOOPKIT_ALLOW_UNSAFE_PLUGINS=1 loads a writable plugin" -- train "$T/good.ini" --out "$T/run7"
check "and prints no warning" sh -c "! grep -qi 'unsafe\|refus\|warn' '$T/out'"
LOOPKIT_PLUGIN_PATH="p:$P"
cd "$T" || exit 1
expect 0 'path: +p/sgd.so' "with it, relative entries are searched" -- inspect sgd
LOOPKIT_PLUGIN_PATH=":$P"
cd "$T/cwd" || exit 1
expect 0 'path: +\./here.so' "with it, an empty entry means the current directory" -- inspect here
unset LOOPKIT_ALLOW_UNSAFE_PLUGINS
finish
