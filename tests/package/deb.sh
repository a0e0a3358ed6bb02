#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian package, built and used as an administrator would:
#   1. copy the source tree (what git tracks, plus new files not ignored) to
#      a temporary directory and build it with `dpkg-buildpackage -b -us -uc`
#      (debian/rules: dh + CMake, `cmake --install` into the package);
#   2. check the .deb's file list (dpkg-deb -c): the plugin in nbdkit's
#      plugindir, /usr/sbin/nbdstripe, the systemd unit(s) naming
#      /usr/sbin/nbdstripe, both man pages, the example config, /etc/nbdstripe,
#      the bash completion if the source has one, nothing in /usr/local;
#   3. `dpkg -i` it, make a 3-member volume in a temporary directory with the
#      INSTALLED /usr/sbin/nbdstripe (create, check), serve it with
#      `nbdstripe serve` (which must run nbdkit with the installed plugin),
#      write random data with nbdcopy, read it back, and check every member
#      against the layout (chunk k on member k mod 3 after its header);
#   4. stop the server and purge the package: the machine is left as found
#      (files the package would overwrite are saved first and put back).
# lintian runs on the result if it is installed: its tags are printed, an
# error (E:) fails the test.
#
#   tests/package/deb.sh SOURCE_DIR
#
# Exit 77 (skipped) unless root with dpkg-buildpackage, debhelper (dh),
# nbdkit, nbdcopy, nbdinfo and python3, or if a package named nbdstripe is
# already installed (it is not ours to remove).  Takes about a minute on two
# cores (DEB_BUILD_OPTIONS="nocheck parallel=2").
set -euo pipefail
src=$(realpath "${1:?usage: deb.sh SOURCE_DIR}")

skip () { echo "SKIP: $*"; exit 77; }
fail () { echo "FAIL: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "not root (dpkg -i)"
for t in dpkg-buildpackage dh dpkg-deb dpkg nbdkit nbdcopy nbdinfo python3; do
  command -v "$t" >/dev/null || skip "$t not installed"
done
if dpkg-query -W -f='${Status}' nbdstripe 2>/dev/null | grep -q 'installed'; then
  skip "a package nbdstripe is already installed; not replacing it"
fi
# The plugin, the server and the tools: the installed ones only.
unset NBDSTRIPE_PLUGIN LD_PRELOAD

plugindir=$(pkg-config --variable=plugindir nbdkit 2>/dev/null ||
            nbdkit --dump-config | sed -n 's/^plugindir=//p')
[[ -n $plugindir ]] || fail "cannot tell nbdkit's plugindir"

tmp=$(mktemp -d /var/tmp/nbdstripe-deb.XXXXXX)
installed=0 server_pid= backup=$tmp/backup
preexisting_dirs=() saved=()
# Put back what was there before: directories dpkg removed when empty,
# files it overwrote.
restore ()
{
  local d f
  for d in "${preexisting_dirs[@]}"; do [[ -d $d ]] || mkdir -p "$d"; done
  for f in "${saved[@]}"; do cp -a "$backup$f" "$f"; done
}
cleanup ()
{
  local rc=$? d
  set +e
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null
  fi
  if [[ $installed -eq 1 ]]; then
    dpkg --purge nbdstripe >"$tmp/purge.log" 2>&1 ||
      { echo "cleanup: dpkg --purge nbdstripe failed:"; cat "$tmp/purge.log"; rc=1; }
    restore
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

# 1. Build.
echo "== copying $src"
mkdir "$tmp/src"
if git -C "$src" rev-parse --show-toplevel >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z --cached --others --exclude-standard |
     while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
     xargs -0 cp -a --parents -t "$tmp/src")
else
  (cd "$src" && tar --exclude='./build*' --exclude='./obj-*' \
                    --exclude='./debian/nbdstripe' --exclude='./debian/.debhelper' \
                    -cf - .) | tar -xf - -C "$tmp/src"
fi
[[ -f $tmp/src/debian/control ]] || fail "no debian/control in $src"

echo "== dpkg-buildpackage -b -us -uc"
start=$SECONDS
if ! (cd "$tmp/src" &&
      DEB_BUILD_OPTIONS="nocheck parallel=${NBDSTRIPE_DEB_JOBS:-2}" \
        dpkg-buildpackage -b -us -uc) >"$tmp/build.log" 2>&1; then
  tail -40 "$tmp/build.log"
  fail "dpkg-buildpackage failed (log above)"
fi
echo "   built in $((SECONDS - start)) s"
debs=("$tmp"/nbdstripe_*.deb)
[[ ${#debs[@]} -eq 1 && -f ${debs[0]} ]] || fail "no single nbdstripe_*.deb: $(ls "$tmp")"
deb=${debs[0]}
echo "   $(basename "$deb")"

# 2. What the package holds.
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's,^\./,/,; s,/$,,' | grep -v '^$' \
  > "$tmp/files"
bad=0
expect ()
{
  grep -qxF "$1" "$tmp/files" || { echo "FAIL: the package lacks $1"; bad=1; }
}
expect "$plugindir/nbdkit-stripe-plugin.so"
expect /usr/sbin/nbdstripe
expect /usr/share/man/man1/nbdkit-stripe-plugin.1.gz
expect /usr/share/man/man8/nbdstripe.8.gz
expect /usr/share/doc/nbdstripe/examples/example.conf
expect /usr/share/doc/nbdstripe/copyright
expect /etc/nbdstripe
units=()
for u in nbdstripe@.service nbdstripe@.socket nbdstripe-scrub@.service \
         nbdstripe-scrub@.timer; do
  # The service always; the others once the source has them.
  [[ $u == nbdstripe@.service || -e $tmp/src/conf/$u || -e $tmp/src/conf/$u.in ]] ||
    continue
  f=$(grep -E "^(/usr)?/lib/systemd/system/$u\$" "$tmp/files" | head -1) ||
    true
  if [[ -z $f ]]; then echo "FAIL: the package lacks the unit $u"; bad=1; continue; fi
  units+=("$f")
done
if [[ -e $tmp/src/daemon/nbdstripe.bash ]]; then
  expect /usr/share/bash-completion/completions/nbdstripe
fi
if grep -q '^/usr/local' "$tmp/files"; then
  echo "FAIL: the package installs into /usr/local:"; grep '^/usr/local' "$tmp/files"
  bad=1
fi
dpkg-deb -f "$deb" Depends | grep -qw nbdkit ||
  { echo "FAIL: Depends lacks nbdkit: $(dpkg-deb -f "$deb" Depends)"; bad=1; }
[[ $bad -eq 0 ]] || { echo "the package holds:"; cat "$tmp/files"; exit 1; }
echo "   holds the plugin, nbdstripe, ${#units[@]} unit(s), man pages, example, /etc/nbdstripe"

if command -v lintian >/dev/null; then
  changes=("$tmp"/nbdstripe_*.changes)
  lintian -I --pedantic "${changes[0]}" >"$tmp/lintian.log" 2>&1 || true
  grep -v 'running with root privileges' "$tmp/lintian.log" | sed 's/^/   lintian: /' || true
  grep -q '^E: ' "$tmp/lintian.log" && fail "lintian reports errors (above)"
else
  echo "   (lintian not installed: not run)"
fi

# 3. Install it, saving what it would overwrite.
while read -r f; do
  if [[ -d $f ]]; then
    preexisting_dirs+=("$f")
  elif [[ -e $f || -L $f ]]; then
    mkdir -p "$backup$(dirname "$f")"
    cp -a "$f" "$backup$f"
    saved+=("$f")
    echo "   saved the existing $f (put back afterwards)"
  fi
done < "$tmp/files"
echo "== dpkg -i"
installed=1
dpkg -i "$deb" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "dpkg -i failed"; }
[[ -x /usr/sbin/nbdstripe ]] || fail "/usr/sbin/nbdstripe not installed"
[[ -d /etc/nbdstripe ]] || fail "/etc/nbdstripe not created"
for u in "${units[@]}"; do
  [[ $u == *.service ]] && ! grep -q '^ExecStart=/usr/sbin/nbdstripe ' "$u" &&
    fail "$u does not start /usr/sbin/nbdstripe: $(grep '^Exec' "$u")"
  grep -q '/usr/local' "$u" && fail "$u names /usr/local: $(grep -n /usr/local "$u")"
done
# The scrub's timer is installed, never enabled (no instance of it).
if ls /etc/systemd/system/timers.target.wants/nbdstripe-scrub@* >/dev/null 2>&1; then
  fail "installing the package enabled a scrub timer: $(ls /etc/systemd/system/timers.target.wants/)"
fi
# nbdkit finds the plugin by its short name.
nbdkit stripe --dump-plugin | grep -qx 'name=stripe' ||
  fail "nbdkit does not find the installed plugin by name (nbdkit stripe)"

# A volume in the temporary directory: 3 members of 4 MiB, chunk 64K.
vol=$tmp/vol
mkdir "$vol"
chunk=$((64 * 1024)) n=3
members=()
for i in $(seq 0 $((n - 1))); do
  truncate -s 4M "$vol/m$i.img"
  members+=("\"$vol/m$i.img\"")
done
conf=$vol/pkgtest.conf
sock=$vol/pkgtest.sock
pidfile=$vol/pkgtest.pid
cat > "$conf" <<CONF
name = "pkgtest";
chunk = "64K";
members = [ $(IFS=,; echo "${members[*]}") ];
serve = { socket = "$sock"; pidfile = "$pidfile"; };
health = { status_file = "$vol/pkgtest.status.json"; };
CONF
/usr/sbin/nbdstripe create "$conf" >"$tmp/create.log" 2>&1 ||
  { cat "$tmp/create.log"; fail "nbdstripe create failed"; }
/usr/sbin/nbdstripe check "$conf" >"$tmp/check.log" 2>&1 ||
  { cat "$tmp/check.log"; fail "nbdstripe check failed"; }

serve ()
{
  rm -f "$pidfile"
  /usr/sbin/nbdstripe serve "$conf" >"$tmp/serve.log" 2>&1 ||
    { cat "$tmp/serve.log"; fail "nbdstripe serve failed"; }
  server_pid=$(<"$pidfile")
  kill -0 "$server_pid" || fail "the server ($server_pid) is not running"
  grep -qF "$plugindir/nbdkit-stripe-plugin.so" "/proc/$server_pid/maps" ||
    fail "the server did not load $plugindir/nbdkit-stripe-plugin.so"
}
stop ()
{
  kill -TERM "$server_pid"
  for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$server_pid" 2>/dev/null && fail "the server did not stop within 10 s"
  server_pid=
}

echo "== serve with the installed nbdstripe and plugin"
serve
uri="nbd+unix:///?socket=$sock"
size=$(nbdinfo --size "$uri")
[[ $size -gt 0 ]] || fail "volume size $size"
head -c "$size" /dev/urandom > "$tmp/data"
nbdcopy "$tmp/data" "$uri" || fail "nbdcopy to the volume failed"
nbdcopy "$uri" "$tmp/back" || fail "nbdcopy from the volume failed"
cmp "$tmp/data" "$tmp/back" || fail "read back differs from what was written"
stop

# The members hold the data where the layout puts it: chunk k on member
# k mod n at data_offset + (k div n) * chunk.
for i in $(seq 0 $((n - 1))); do
  /usr/sbin/nbdstripe inspect --json "$vol/m$i.img" > "$tmp/inspect$i.json" ||
    fail "nbdstripe inspect $vol/m$i.img failed"
done
python3 - "$tmp/data" "$chunk" "$n" "$vol" "$tmp" <<'PY' || fail "member contents"
import json, sys
data_path, chunk, n, vol, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
data = open(data_path, "rb").read()
members = [open(f"{vol}/m{i}.img", "rb").read() for i in range(n)]
offs = [json.load(open(f"{tmp}/inspect{i}.json"))[0]["data_offset"] for i in range(n)]
for k in range(len(data) // chunk):
    m, row = k % n, k // n
    at = offs[m] + row * chunk
    if members[m][at:at + chunk] != data[k * chunk:(k + 1) * chunk]:
        sys.exit(f"chunk {k}: not on member {m} at {at}")
print(f"   {len(data) // chunk} chunks where the layout puts them")
PY

# Served again from the members: the data outlived the server.
serve
nbdcopy "$uri" "$tmp/back2" || fail "nbdcopy from the restarted volume failed"
cmp "$tmp/data" "$tmp/back2" || fail "the restarted volume differs"
stop
echo "   $size bytes written, read back, on the members, served again: ok"

# 4. Purge (in cleanup too, should anything above fail).
dpkg --purge nbdstripe >"$tmp/purge.log" 2>&1 ||
  { cat "$tmp/purge.log"; fail "dpkg --purge nbdstripe failed"; }
installed=0
[[ -e /usr/sbin/nbdstripe ]] && fail "/usr/sbin/nbdstripe still there after purge"
restore
echo "PASS: $(basename "$deb") built, installed, served a volume, purged"
