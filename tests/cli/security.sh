#!/bin/sh
# Plugin security through the command: a plugin file or directory writable
# by others than its owner and root, a plugin owned by someone else, and a
# relative or empty LOOPKIT_PLUGIN_PATH entry are refused (status 2, and the
# message says why and how to fix it), unless LOOPKIT_ALLOW_UNSAFE_PLUGINS=1;
# the current directory is never searched.
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
