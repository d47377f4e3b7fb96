#!/bin/sh
# Regenerates the build system from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --force --install --warnings=all
# automake installs test-driver but not the TAP driver the tests use.
cp -f "$(automake --print-libdir)/tap-driver.sh" build-aux/tap-driver.sh
