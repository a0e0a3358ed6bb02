#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian package, built and used as an administrator would:
#   1. copy the source tree (what git tracks, plus new files not ignored) to
#      a temporary directory and build it with `dpkg-buildpackage -b -us -uc`
#      (debian/rules: dh + CMake, `cmake --install` into the package);
#   2. check the .deb's file list (dpkg-deb -c): the plugin in nbdkit's
#      plugindir, /usr/sbin/nbdstripe, the systemd unit(s) naming
#      /usr/sbin/nbdstripe, both man pages, README.md and the example config
#      under /usr/share/doc/nbdstripe, /etc/nbdstripe, the bash completion if
#      the source has one, nothing in /usr/local; a description naming every
#      command `nbdstripe --help` lists and every unit; maintainer scripts
#      that stop (prerm) and unlink on purge (postrm) every unit's instances;
#   3. `dpkg -i` it, make a 3-member volume in a temporary directory with the
#      INSTALLED /usr/sbin/nbdstripe (create, check), serve it with
#      `nbdstripe serve` (which must run nbdkit with the installed plugin),
#      write random data with nbdcopy, read it back, and check every member
#      against the layout (chunk k on member k mod 3 after its header);
#   4. stop the server, and as an administrator would: put a config in
#      /etc/nbdstripe, `systemctl enable` an instance of the service, of the
#      socket and of the scrub timer (and start the socket and the timer when
#      systemd runs), then `dpkg --remove`: the units are gone (and stopped,
#      and gone from `systemctl list-unit-files` when systemd runs), the
#      enable links and the config stay; `dpkg --purge`: the links go, no
#      file of the package is left, /etc/nbdstripe holds the config alone.
#      Installed and purged again without it, /etc/nbdstripe goes too.
# The machine is left as found, failed or not (files the package would
# overwrite and enable links of other instances are saved first and put
# back; what the test enabled or wrote in /etc is removed).
# lintian runs on the result if it is installed: its tags are printed, an
# error (E:) fails the test.
#
#   tests/package/deb.sh SOURCE_DIR
#
# Exit 77 (skipped) unless root with dpkg-buildpackage, debhelper (dh),
# nbdkit, nbdcopy, nbdinfo and python3, or if a package named nbdstripe is
# already installed (it is not ours to remove).  Without a running systemd
# (a container) the stop on removal and the daemon-reload cannot be seen
# and are not checked; the links are (systemctl enable works offline).
# Takes about 35 s on two cores (DEB_BUILD_OPTIONS="nocheck noopt
# parallel=2"; without noopt the -O2 build with link-time optimisation
# took 69 s against 37 s measured side by side: the package's contents,
# scripts and units are what this test checks, and the optimised build
# is the plain build of tests/run.sh).
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
# What step 4 does as the administrator, undone in cleanup whatever the
# package did: the instance it enables, the config it writes.
etcsd=/etc/systemd/system
inst=pkgtest$$
admin_conf=/etc/nbdstripe/$inst.conf
systemd_runs=0
[[ -d /run/systemd/system ]] && systemd_runs=1
# Enable links of the package's units (any instance) as NAME -> TARGET.
unit_links ()
{
  local l
  [[ -d $etcsd ]] || return 0
  find "$etcsd" -mindepth 2 -maxdepth 2 -type l \
       \( -name 'nbdstripe@?*.*' -o -name 'nbdstripe-scrub@?*.*' \) -print |
    sort | while read -r l; do echo "$l -> $(readlink "$l")"; done
}
unit_links > "$tmp/links.before"
find "$etcsd" -mindepth 1 -maxdepth 1 -type d | sort > "$tmp/dirs.before"
[[ -d /etc/nbdstripe ]] && etc_existed=1 || etc_existed=0
[[ -d /run/nbdstripe ]] && run_existed=1 || run_existed=0
undo_admin ()
{
  local l d
  if [[ $systemd_runs -eq 1 ]]; then
    systemctl stop "nbdstripe-scrub@$inst.timer" "nbdstripe@$inst.socket" \
      "nbdstripe@$inst.service" 2>/dev/null
  fi
  rm -f "$etcsd"/*/"nbdstripe@$inst".* "$etcsd"/*/"nbdstripe-scrub@$inst".*
  # Links of other instances the purge removed (a source install's units
  # at the package's path) come back.
  while read -r l _ d; do
    [[ -L $l ]] || { mkdir -p "$(dirname "$l")"; ln -s "$d" "$l"; }
  done < "$tmp/links.before"
  find "$etcsd" -mindepth 1 -maxdepth 1 -type d | sort |
    comm -13 "$tmp/dirs.before" - | while read -r d; do rmdir "$d" 2>/dev/null; done
  rm -f "$admin_conf"
  [[ $etc_existed -eq 1 ]] || rmdir /etc/nbdstripe 2>/dev/null
  if [[ $systemd_runs -eq 1 ]]; then
    # The socket's directory, when this test's socket unit made it.
    [[ $run_existed -eq 1 ]] || rmdir /run/nbdstripe 2>/dev/null
    systemctl daemon-reload
  fi
  return 0
}
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
  undo_admin
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
      DEB_BUILD_OPTIONS="nocheck noopt parallel=${NBDSTRIPE_DEB_JOBS:-2}" \
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
grep -qxE '/usr/share/doc/nbdstripe/README\.md(\.gz)?' "$tmp/files" ||
  { echo "FAIL: the package lacks /usr/share/doc/nbdstripe/README.md"; bad=1; }
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
echo "   holds the plugin, nbdstripe, ${#units[@]} unit(s), man pages, README, example, /etc/nbdstripe"

# Every unit is a template, which dh_installsystemd leaves alone: the
# package's own prerm stops each one's instances on removal, its postrm
# removes their enable links on purge and has systemd reload.
dpkg-deb -e "$deb" "$tmp/control"
for u in "${units[@]}"; do
  u=${u##*/}
  grep -qF "'${u/@./@*.}'" "$tmp/control/prerm" 2>/dev/null ||
    { echo "FAIL: prerm does not stop the instances of $u (${u/@./@*.})"; bad=1; }
  grep -qF "/lib/systemd/system/$u" "$tmp/control/postrm" 2>/dev/null ||
    { echo "FAIL: postrm does not remove the enable links of $u"; bad=1; }
done
grep -q 'daemon-reload' "$tmp/control/postrm" 2>/dev/null ||
  { echo "FAIL: postrm does not run systemctl daemon-reload"; bad=1; }
[[ $bad -eq 0 ]] || { ls -l "$tmp/control"; exit 1; }
echo "   prerm stops, postrm unlinks on purge, the instances of all ${#units[@]} units"

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
# The units are installed, none enabled (no instance of them).
unit_links | comm -13 "$tmp/links.before" - > "$tmp/links.new"
[[ -s $tmp/links.new ]] && fail "installing the package enabled units: $(cat "$tmp/links.new")"
# The description names every command of the installed nbdstripe and
# every unit.
dpkg-query -W -f='${Description}\n' nbdstripe > "$tmp/description"
/usr/sbin/nbdstripe --help |
  sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)\( .*\)\{0,1\}$/\1/p' > "$tmp/commands"
[[ $(wc -l < "$tmp/commands") -ge 5 ]] ||
  fail "cannot read the commands from nbdstripe --help: $(cat "$tmp/commands")"
for w in $(cat "$tmp/commands") "${units[@]##*/}"; do
  grep -qwF -- "$w" "$tmp/description" ||
    { echo "FAIL: the package description does not name $w"; bad=1; }
done
[[ $bad -eq 0 ]] || { cat "$tmp/description"; exit 1; }
echo "   its description names the $(wc -l < "$tmp/commands") commands and ${#units[@]} units"
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
offs = [json.load(open(f"{tmp}/inspect{i}.json"))["members"][0]["data_offset"] for i in range(n)]
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

# 4. Enabled by the administrator, removed, purged (in cleanup too, should
# anything above fail).
echo "== enable $inst, remove, purge"
[[ -e $admin_conf ]] && fail "$admin_conf exists already"
cp "$conf" "$admin_conf"
enabled=("nbdstripe@$inst.service")
for u in "${units[@]##*/}"; do
  case $u in nbdstripe@.socket|nbdstripe-scrub@.timer) enabled+=("${u/@./@$inst.}");; esac
done
if command -v systemctl >/dev/null; then
  systemctl enable "${enabled[@]}" >"$tmp/enable.log" 2>&1 ||
    { cat "$tmp/enable.log"; fail "systemctl enable ${enabled[*]} failed"; }
else
  # No systemd at all: the links systemctl enable would make, by hand.
  for u in "${enabled[@]}"; do
    t=$(printf '%s\n' "${units[@]}" | grep -F "/${u/@$inst./@.}" | head -1)
    w=$(sed -n 's/^WantedBy=//p' "$t")
    mkdir -p "$etcsd/$w.wants"
    ln -s "$t" "$etcsd/$w.wants/$u"
  done
fi
unit_links | comm -13 "$tmp/links.before" - > "$tmp/links.enabled"
[[ $(wc -l < "$tmp/links.enabled") -eq ${#enabled[@]} ]] ||
  fail "systemctl enable ${enabled[*]} made other links: $(cat "$tmp/links.enabled")"
started=()
if [[ $systemd_runs -eq 1 ]]; then
  # The socket and the timer need no volume to run.
  started=("${enabled[@]:1}")
  [[ ${#started[@]} -eq 0 ]] || systemctl start "${started[@]}" ||
    fail "systemctl start ${started[*]} failed"
fi

dpkg --remove nbdstripe >"$tmp/remove.log" 2>&1 ||
  { cat "$tmp/remove.log"; fail "dpkg --remove nbdstripe failed"; }
for u in "${units[@]}"; do
  [[ -e $u ]] && fail "$u still there after dpkg --remove"
done
for u in "${started[@]}"; do
  systemctl -q is-active "$u" && fail "$u still runs after dpkg --remove"
done
if [[ $systemd_runs -eq 1 ]] &&
   systemctl list-unit-files --no-legend 'nbdstripe*' | grep -q .; then
  fail "systemd still knows units after dpkg --remove (no daemon-reload?):
$(systemctl list-unit-files --no-legend 'nbdstripe*')"
fi
unit_links | comm -13 "$tmp/links.before" - | cmp -s - "$tmp/links.enabled" ||
  fail "dpkg --remove changed the enable links (a remove keeps them):
$(unit_links)"
[[ -f $admin_conf ]] || fail "dpkg --remove removed the administrator's $admin_conf"

dpkg --purge nbdstripe >"$tmp/purge.log" 2>&1 ||
  { cat "$tmp/purge.log"; fail "dpkg --purge nbdstripe failed"; }
installed=0
unit_links | comm -13 "$tmp/links.before" - > "$tmp/links.left"
[[ -s $tmp/links.left ]] && fail "enable links left after dpkg --purge:
$(cat "$tmp/links.left")"
# Links of other instances pointing at the package's units went too; for
# the machine as found they come back in cleanup.
left=()
while read -r f; do
  [[ $f == /etc/nbdstripe ]] && continue
  [[ -e $f || -L $f ]] || continue
  [[ -d $f ]] && printf '%s\n' "${preexisting_dirs[@]}" | grep -qxF "$f" && continue
  left+=("$f")
done < "$tmp/files"
[[ ${#left[@]} -eq 0 ]] || fail "left after dpkg --purge: ${left[*]}"
[[ -f $admin_conf ]] || fail "dpkg --purge removed the administrator's $admin_conf"
if [[ $etc_existed -eq 0 ]]; then
  [[ $(ls -A /etc/nbdstripe) == "$inst.conf" ]] ||
    fail "/etc/nbdstripe holds more than $inst.conf after purge: $(ls -A /etc/nbdstripe)"
fi
dpkg-query -W -f='${db:Status-Status}' nbdstripe 2>/dev/null | grep -qvx 'not-installed' &&
  fail "dpkg still lists nbdstripe: $(dpkg-query -W -f='${db:Status-Status}' nbdstripe)"
if ls /var/lib/systemd/deb-systemd-helper-enabled 2>/dev/null | grep -q nbdstripe; then
  fail "deb-systemd-helper state left: $(ls /var/lib/systemd/deb-systemd-helper-enabled)"
fi
echo "   remove kept the ${#enabled[@]} enable links and the config; purge removed the links and every file"

# Without the administrator's config /etc/nbdstripe goes with the package.
rm "$admin_conf"
installed=1
dpkg -i "$deb" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "dpkg -i (again) failed"; }
dpkg --purge nbdstripe >"$tmp/purge.log" 2>&1 ||
  { cat "$tmp/purge.log"; fail "dpkg --purge nbdstripe (again) failed"; }
installed=0
[[ $etc_existed -eq 1 || ! -e /etc/nbdstripe ]] ||
  fail "/etc/nbdstripe left after purge: $(ls -A /etc/nbdstripe)"
restore
echo "PASS: $(basename "$deb") built, installed, served a volume, enabled, removed, purged"
