#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `cmake --install` must put the plugin where nbdkit looks for plugins, so
# that `nbdkit stripe ...` works, the man page in man1, the bash
# completion in bash-completion's completions directory, and the systemd
# units in systemd's unit directory, the service running the nbdstripe
# installed beside them.  Installs into a DESTDIR so that the machine is
# not changed.
set -euo pipefail
build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT

DESTDIR=$dest cmake --install "$build" >/dev/null
plugindir=$(nbdkit --dump-config | sed -n 's/^plugindir=//p')
so=$dest$plugindir/nbdkit-stripe-plugin.so
if [ ! -f "$so" ]; then
  echo "FAIL: $so not installed; installed files:"; find "$dest" -type f
  exit 1
fi
man=$(find "$dest" -path '*/man1/nbdkit-stripe-plugin.1' | head -1)
[ -n "$man" ] || { echo "FAIL: man page not installed"; exit 1; }
# In the sanitizer build the plugin needs libasan preloaded into nbdkit.
LD_PRELOAD=${STRIPE_LD_PRELOAD:-} ASAN_OPTIONS=detect_leaks=0 \
  nbdkit "$so" --dump-plugin | grep -qx 'name=stripe' \
  || { echo "FAIL: installed plugin does not load"; exit 1; }
# The bash completion, where bash-completion looks for it.
comp=$(find "$dest" -path '*/bash-completion/completions/nbdstripe' | head -1)
[ -n "$comp" ] || { echo "FAIL: bash completion not installed"; exit 1; }
bash -c "source '$comp' && complete -p nbdstripe" >/dev/null ||
  { echo "FAIL: $comp does not register a completion"; exit 1; }
unitdir=$(sed -n 's/^NBDSTRIPE_SYSTEMDUNITDIR:PATH=//p' "$build/CMakeCache.txt")
sbindir=$(sed -n 's/^CMAKE_INSTALL_SBINDIR:PATH=//p' "$build/CMakeCache.txt")
case $sbindir in
  /*) ;;
  *) sbindir=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")/$sbindir ;;
esac
for u in nbdstripe@.service nbdstripe@.socket; do
  [ -f "$dest$unitdir/$u" ] || { echo "FAIL: $dest$unitdir/$u not installed"; exit 1; }
done
grep -q -x "ExecStart=$sbindir/nbdstripe serve --foreground /etc/nbdstripe/%i.conf" \
  "$dest$unitdir/nbdstripe@.service" ||
  { echo "FAIL: the installed unit does not run $sbindir/nbdstripe"; exit 1; }
[ -x "$dest$sbindir/nbdstripe" ] || { echo "FAIL: $dest$sbindir/nbdstripe not installed"; exit 1; }
echo "installed: $so, $man, $comp and the units in $unitdir"
