#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The systemd units as this build installs them (build/conf/): checked
# without a running systemd, by systemd-analyze.
#
# - nbdstripe@.service runs the nbdstripe of the install prefix
#   (NBDSTRIPE_SBINDIR, CMake's CMAKE_INSTALL_FULL_SBINDIR): ExecStart is
#   that path, nothing of the template is left unsubstituted; so does
#   nbdstripe-scrub@.service (scrub --wait), a oneshot that
#   nbdstripe-scrub@.timer starts monthly (installed, not enabled).
# - Type=notify, NotifyAccess=main, Restart=on-failure, StartLimit* in
#   [Unit], no systemd-udev-settle; the socket on /run/nbdstripe/%i.sock.
# - With ExecStart pointing at the nbdstripe under test, `systemd-analyze
#   verify` of an instance of the service and of the socket prints nothing
#   and exits 0: no unknown key, no bad value, an executable that exists,
#   the man pages Documentation= names (the ones built here, through
#   MANPATH; not checked where man is not installed).
# - The service's capabilities are drive health's and no other:
#   CapabilityBoundingSet=CAP_SYS_ADMIN CAP_SYS_RAWIO (the NVMe SMART /
#   Health log, SATA SMART through ATA pass-through; read under them in
#   tests/vm/drive_health.sh), no AmbientCapabilities=.
# - `systemd-analyze security --offline=yes` rates the service at 4.0 or
#   below ("Overall exposure level"), and every exposure it still lists
#   (✗) is one of those the unit's comments justify, and is named there.
# Skipped (77) only without systemd-analyze.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init
command -v systemd-analyze >/dev/null ||
  d_skip "systemd-analyze is not installed (package systemd)"
[[ -n ${NBDSTRIPE_UNIT_DIR:-} && -n ${NBDSTRIPE_SBINDIR:-} ]] ||
  d_fail "NBDSTRIPE_UNIT_DIR and NBDSTRIPE_SBINDIR must be set (ctest does)"

service=$NBDSTRIPE_UNIT_DIR/nbdstripe@.service
socket=$NBDSTRIPE_UNIT_DIR/nbdstripe@.socket
[[ -f $service && -f $socket ]] || d_fail "no $service or $socket"

want="ExecStart=$NBDSTRIPE_SBINDIR/nbdstripe serve --foreground /etc/nbdstripe/%i.conf"
grep -q -x -F -- "$want" "$service" && d_ok "$want" ||
  d_bad "the generated unit does not say: $want"
grep -n '@[A-Za-z_]*@' "$service" && d_bad "placeholders left in $service"

# What the service must say (#16): readiness from the server itself
# (Type=notify, the main process's messages only), restarts on failure
# bounded by a start limit in [Unit] (a volume that cannot be assembled
# is left failed), no wait for udev to settle.
# (grep reads all of it: grep -q would leave sed writing to a closed pipe
# once the section outgrows a pipe buffer, and pipefail would see
# SIGPIPE.)
unit_key ()
{
  sed -n "/^\[$1\]/,/^\[/p" "$service" | grep -x -F -- "$2" >/dev/null
}
for kv in "Service:Type=notify" "Service:NotifyAccess=main" \
          "Service:Restart=on-failure" "Unit:StartLimitIntervalSec=5min" \
          "Unit:StartLimitBurst=5"; do
  unit_key "${kv%%:*}" "${kv#*:}" && d_ok "[${kv%%:*}] ${kv#*:}" ||
    d_bad "the service's [${kv%%:*}] section does not say ${kv#*:}"
done
grep -v '^#' "$service" | grep -q 'udev-settle' &&
  d_bad "the service waits for systemd-udev-settle" || d_ok "no udev-settle"
grep -q -x 'ListenStream=/run/nbdstripe/%i.sock' "$socket" &&
  d_ok "the socket listens on /run/nbdstripe/%i.sock" ||
  d_bad "the socket unit does not listen on /run/nbdstripe/%i.sock"

# Drive health's capabilities (#34), read as the sandbox tests apply
# them: exactly CAP_SYS_ADMIN and CAP_SYS_RAWIO, none ambient.
t_unit_caps "$service" || d_fail "cannot read the service's capabilities"
# CAP_SYS_ADMIN is 21, CAP_SYS_RAWIO 17 (linux/capability.h).
want=$(printf '%016x' $(( (1 << 21) | (1 << 17) )))
[[ $T_CAPMASK == "$want" ]] &&
  d_ok "CapabilityBoundingSet=CAP_SYS_ADMIN CAP_SYS_RAWIO (drive health), no other" ||
  d_bad "the service's bounding set is $T_CAPMASK, not $want (CAP_SYS_ADMIN, CAP_SYS_RAWIO)"
[[ " ${T_SETPRIV[*]} " == *' --ambient-caps=-all '* ]] && d_ok "no ambient capability" ||
  d_bad "the service has ambient capabilities: ${T_SETPRIV[*]}"

d_log "systemd-analyze verify"
mkdir -p "$D_TMP/units" "$D_TMP/man/man8" "$D_TMP/man/man1"
sed "s|^ExecStart=$NBDSTRIPE_SBINDIR/nbdstripe |ExecStart=$NBDSTRIPE |" \
  "$service" >"$D_TMP/units/nbdstripe@.service"
cp "$socket" "$D_TMP/units/"
grep -q -F "ExecStart=$NBDSTRIPE " "$D_TMP/units/nbdstripe@.service" ||
  d_fail "could not point ExecStart at $NBDSTRIPE"
man=--man=no
if command -v man >/dev/null && [[ -n ${NBDSTRIPE_BUILD_DIR:-} ]]; then
  cp "$NBDSTRIPE_BUILD_DIR/daemon/nbdstripe.8" "$D_TMP/man/man8/" &&
    cp "$NBDSTRIPE_BUILD_DIR/plugin/nbdkit-stripe-plugin.1" "$D_TMP/man/man1/" &&
    man=--man=yes
fi
for u in nbdstripe@vol0.service nbdstripe@vol0.socket; do
  d_run "verify.$u" env MANPATH="$D_TMP/man" \
    systemd-analyze verify "$man" "$D_TMP/units/$u"
  [[ $D_RC -eq 0 && ! -s $D_TMP/verify.$u.out && ! -s $D_TMP/verify.$u.err ]] &&
    d_ok "verify $u ($man): clean" || d_bad "verify $u: exit $D_RC or complaints (above)"
done

d_log "the scrub's service and timer (installed, not enabled)"
scrub_service=$NBDSTRIPE_UNIT_DIR/nbdstripe-scrub@.service
scrub_timer=$NBDSTRIPE_UNIT_DIR/nbdstripe-scrub@.timer
[[ -f $scrub_service && -f $scrub_timer ]] || d_fail "no $scrub_service or $scrub_timer"
want="ExecStart=$NBDSTRIPE_SBINDIR/nbdstripe scrub --wait /etc/nbdstripe/%i.conf"
grep -q -x -F -- "$want" "$scrub_service" && d_ok "$want" ||
  d_bad "the scrub unit does not say: $want"
grep -n '@[A-Za-z_]*@' "$scrub_service" && d_bad "placeholders left in $scrub_service"
grep -q -x 'Type=oneshot' "$scrub_service" && grep -q -x 'Persistent=true' "$scrub_timer" &&
  grep -q -x 'OnCalendar=Sun \*-\*-1..7 01:00:00' "$scrub_timer" &&
  d_ok "oneshot, monthly (the first Sunday, as mdcheck), persistent" ||
  d_bad "the scrub units are not a monthly oneshot"
sed "s|^ExecStart=$NBDSTRIPE_SBINDIR/nbdstripe |ExecStart=$NBDSTRIPE |" \
  "$scrub_service" >"$D_TMP/units/nbdstripe-scrub@.service"
cp "$scrub_timer" "$D_TMP/units/"
for u in nbdstripe-scrub@vol0.service nbdstripe-scrub@vol0.timer; do
  d_run "verify.$u" env MANPATH="$D_TMP/man" \
    systemd-analyze verify "$man" "$D_TMP/units/$u"
  [[ $D_RC -eq 0 && ! -s $D_TMP/verify.$u.out && ! -s $D_TMP/verify.$u.err ]] &&
    d_ok "verify $u ($man): clean" || d_bad "verify $u: exit $D_RC or complaints (above)"
done

d_log "systemd-analyze security --offline=yes"
# A UTF-8 locale: ✓ and ✗ mark the lines (ASCII stands in otherwise).
d_run security env LC_ALL=C.UTF-8 systemd-analyze security --offline=yes \
  "$D_TMP/units/nbdstripe@vol0.service"
level=$(sed -n 's/.*Overall exposure level for nbdstripe@vol0.service: \([0-9.]*\).*/\1/p' \
        "$D_TMP/security.out")
[[ $level =~ ^[0-9]+\.[0-9]+$ ]] || d_fail "no exposure level in the output"
awk -v l="$level" 'BEGIN { exit !(l <= 4.0) }' &&
  d_ok "exposure $level <= 4.0" || d_bad "exposure $level > 4.0"

grep -q '^✓ NoNewPrivileges=' "$D_TMP/security.out" ||
  d_fail "cannot read the security table (no ✓ NoNewPrivileges= line)"

# The exposures left, each with a reason in the unit's comments (the
# block after "# Left, with the reason:"): the setting as it names it.
reasons=$(sed -n '/^# Left, with the reason:/,/^[^#]/p' "$service")
declare -A justified=(
  ["RootDirectory=/RootImage="]="RootDirectory="
  ["User=/DynamicUser="]="User="
  ["PrivateDevices="]="PrivateDevices="
  ["DeviceAllow="]="DevicePolicy"
  ["RestrictAddressFamilies=~AF_UNIX"]="RestrictAddressFamilies="
  ["RestrictAddressFamilies=~AF_(INET|INET6)"]="RestrictAddressFamilies="
  ["PrivateNetwork="]="PrivateNetwork="
  ["IPAddressDeny="]="IPAddressDeny="
  ["ProcSubset="]="ProcSubset="
  ["PrivateUsers="]="PrivateUsers="
  ["CapabilityBoundingSet=~CAP_SYS_ADMIN"]="CAP_SYS_ADMIN"
  ["CapabilityBoundingSet=~CAP_SYS_RAWIO"]="CAP_SYS_RAWIO"
)
while read -r name; do
  if [[ -z ${justified[$name]+set} ]]; then
    d_bad "exposure not justified in the unit: $name"
  elif ! grep -q -F -- "${justified[$name]}" <<<"$reasons"; then
    d_bad "exposure $name: the unit's reasons do not name ${justified[$name]}"
  else
    d_ok "exposure $name: justified"
  fi
done < <(sed -n 's/^✗ \([^ ]*\) .*/\1/p' "$D_TMP/security.out")
d_done
