#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Drive health from real drivers: a volume served inside a throw-away
# qemu VM (TCG) whose members are qemu's emulated NVMe namespace, its
# emulated SATA disk (AHCI), a loop device and a regular file.  The
# guest runs the host's nbdstripe, nbdkit and plugin (copied into the
# initramfs with their libraries, as md_raid0.sh copies mdadm), reads
# the drives through the guest kernel's nvme and libata drivers (libnvme,
# libatasmart), and prints its status; drive_health_guest.sh is its
# /init.  The server runs in the guest as nbdstripe@.service would run
# it, as far as its capabilities go: the capability bounding set, ambient
# set and no_new_privs of the unit as built
# (build/conf/nbdstripe@.service, read with t_unit_caps, applied with
# util-linux's setpriv in the guest; the seccomp filter is
# tests/daemon/sandbox.sh's, on the host, and the namespaces are
# systemd's alone).  Halfway the guest asks for a critical warning,
# which tests/lib/qmp_inject.py injects with QMP qom-set on the NVMe
# device (qemu 7.2's smart_critical_warning property).
#
# Checked here, against what qemu and the guest kernel say, not against
# our own decoder:
#   - the server (nbdkit, exec'd by nbdstripe serve) holds the unit's
#     capabilities and no other (permitted, effective, bounding) and
#     no_new_privs; the NVMe and the SATA drive are read under them (the
#     guest fails at once, with the drive's reason, when either is not:
#     the NVMe SMART / Health log needs CAP_SYS_ADMIN, the SATA disk's
#     ATA pass-through CAP_SYS_RAWIO).
#   - member 0 (NVMe): drive available, kind nvme, model "QEMU NVMe Ctrl"
#     and the serial number given to -device nvme; temperature 50 C
#     (qemu's default composite temperature, 323 K); critical warning 0;
#     spare 0% and threshold 0% (qemu reports neither), percentage used
#     0; data units written = ceil(sectors written / 1000), sectors as
#     the guest kernel counts them for nvme0n1 (/sys/block/nvme0n1/stat),
#     data written = units x 512000; state ok.
#   - member 1 (SATA): available, kind ata, model "QEMU HARDDISK", our
#     serial, SMART self-assessment passed; qemu's attribute table
#     (hw/ide/core.c): reallocated sectors 0 (attribute 5), 31 C (190),
#     1 power-on hour (9), no pending sectors (197) nor wear levelling
#     count (177); ok.
#   - member 2 (loop device) and 3 (regular file): available false, the
#     reason naming the loop device's backing file and "regular file".
#   - after smart_critical_warning = 4: member 0 failing with the reason
#     "predicted: critical warning 0x04: reliability_degraded", the
#     drive's critical_warnings ["reliability_degraded"], the volume
#     degraded; the hook got MemberFailing for member 0 with that
#     reason; the Prometheus file has
#     nbdstripe_member_drive_critical_warning{...member="0"} 4 and
#     nbdstripe_member_drive_predicts_failure 1 for it, 0 for member 1;
#     `nbdstripe status` shows the reason, and its drives table a row
#     per member: the NVMe and SATA figures, why the others have none.
#     on_failing = "replace", but the spare (/tmp/spare.img) is not
#     there yet: not replaced, the reason naming the spare, member 0
#     stays failing (so that the checks above hold still).
#   - the spare made, the warning cleared (member 0 ok again) and
#     injected again: member 0 is replaced onto the spare by the server
#     itself: the replace done and automatic, /dev/nvme0n1 -> the spare,
#     member 0 the spare and ok, no spare left; the config rewritten
#     (the spare member 0, /dev/nvme0n1 removed, spares empty); the
#     hook's events in order (MemberFailing, MemberNotReplaced, ...,
#     MemberReplacing, MemberReplaced with the old and new paths); the
#     volume's first 1 MiB read back in the guest is the 1 MiB of
#     random data written while member 0 was failing, not replaced
#     (sha256).
#
# One boot, about 35 s under TCG; skipped (77) in the sanitizer build
# (the guest runs the plain build's binaries) and without qemu.  To see
# it fail: VM_SABOTAGE=noinject (no critical warning is asked for: the
# guest times out waiting for "failing"); or NBDSTRIPE_UNIT_DIR naming a
# directory whose nbdstripe@.service has an empty CapabilityBoundingSet=
# (the unit before drive health was granted its capabilities: the guest
# fails, both drives refused, the reasons naming CAP_SYS_ADMIN and
# CAP_SYS_RAWIO), or CAP_SYS_ADMIN or CAP_SYS_RAWIO alone (the other
# drive refused).

here=$(dirname "$(realpath "$0")")
source "$here/../lib/vm.sh"

[[ -z ${STRIPE_LD_PRELOAD:-} ]] ||
  v_skip "sanitizer build (STRIPE_LD_PRELOAD set): the TCG VM runs in the plain build only"
v_init jq python3 nbdcopy setpriv
[[ -n ${NBDSTRIPE_UNIT_DIR:-} && -f $NBDSTRIPE_UNIT_DIR/nbdstripe@.service ]] ||
  v_fail "NBDSTRIPE_UNIT_DIR must hold the built nbdstripe@.service"
t_unit_caps "$NBDSTRIPE_UNIT_DIR/nbdstripe@.service" ||
  v_fail "cannot read the unit's capabilities"
v_log "the unit's capabilities: CapBnd $T_CAPMASK, setpriv ${T_SETPRIV[*]}"
VM_TIMEOUT=${VM_TIMEOUT:-150}
VM_SABOTAGE=${VM_SABOTAGE:-none}
NVME_SERIAL=nbdstripe-nvme0
SATA_SERIAL=nbdstripe-sata0

v_apt_install qemu-system-x86 busybox-static ||
  v_log "could not install every package (see above)"
v_vm_require
v_vm_kernel
NBDKIT=$(command -v nbdkit) || v_fail "nbdkit is not installed"

v_initramfs_begin "$here/drive_health_guest.sh"
v_initramfs_bin "$NBDSTRIPE" nbdstripe
v_initramfs_bin "$NBDKIT" nbdkit
v_initramfs_bin "$(command -v jq)" jq
v_initramfs_bin "$(command -v nbdcopy)" nbdcopy
# busybox's setpriv has no --bounding-set: util-linux's.
v_initramfs_bin "$(command -v setpriv)" setpriv
printf '%s\n' "${T_SETPRIV[@]}" >"$VM_ROOT/etc/unit-setpriv" || v_fail "unit-setpriv"
v_initramfs_lib "$STRIPE_PLUGIN" /usr/lib/nbdstripe/nbdkit-stripe-plugin.so
v_initramfs_modules nvme ahci sd_mod loop
v_initramfs_pack

truncate -s 12M "$V_TMP/nvme.img" "$V_TMP/sata.img" || v_fail "truncate"
QMP=$V_TMP/qmp.sock
STOP=$V_TMP/qmp.stop
VM_DEADLINE=$(( SECONDS + VM_TIMEOUT ))
# Its lines ("qmp: ...") go to our output as they happen.
python3 "$here/../lib/qmp_inject.py" "$QMP" "$V_TMP/console.drive.log" "$STOP" \
  2>&1 | sed -u "s/^/   | /" &
V_PIDS+=("$!")
v_vm_boot drive "vm.sabotage=$VM_SABOTAGE" \
  -qmp "unix:$QMP,server=on,wait=off" \
  -drive "file=$V_TMP/nvme.img,format=raw,if=none,id=nv0,cache=unsafe" \
  -device "nvme,id=nvme0,serial=$NVME_SERIAL,drive=nv0" \
  -drive "file=$V_TMP/sata.img,format=raw,if=none,id=sd0,cache=unsafe" \
  -device ahci,id=ahci0 \
  -device "ide-hd,drive=sd0,bus=ahci0.0,serial=$SATA_SERIAL"
touch "$STOP"

CONSOLE=$V_TMP/console.drive.log
# file NAME: what the guest printed between vmf: BEGIN NAME and END NAME.
file ()
{
  tr -d '\r' <"$CONSOLE" |
    sed -n "/^vmf: BEGIN $1\$/,/^vmf: END $1\$/p" | sed -n 's/^vmf: | //p'
}
for f in status1.json status2.json prom hook.log status2.txt status3.json dh.conf; do
  file "$f" >"$V_TMP/$f"
  [[ -s $V_TMP/$f ]] || v_fail "the guest printed no $f"
done
file status2.txt | sed 's/^/   status: /'

# check DESCRIPTION FILE JQ-FILTER: the filter holds on the file.
check ()
{
  if jq -e "$3" "$V_TMP/$2" >/dev/null 2>&1; then
    v_ok "$1"
  else
    v_bad "$1 ($3 on $2 does not hold)"
    jq -c "${4:-.members}" "$V_TMP/$2" | head -c 3000 >&2; echo >&2
  fi
}

creds=$(tr -d '\r' <"$CONSOLE" | sed -n 's/^vm: ORACLE server_credentials=//p')
nnp=0
[[ " ${T_SETPRIV[*]} " != *' --no-new-privs '* ]] || nnp=1
want="CapPrm: $T_CAPMASK;CapEff: $T_CAPMASK;CapBnd: $T_CAPMASK;NoNewPrivs: $nnp;"
if [[ $creds == "$want" ]]; then
  v_ok "the server holds the unit's capabilities ($T_CAPMASK) and no other, no_new_privs $nnp"
else
  v_bad "the server's credentials: '$creds', the unit's: '$want'"
fi

sectors=$(tr -d '\r' <"$CONSOLE" | sed -n 's/^vm: ORACLE nvme0n1_sectors_written=//p')
[[ $sectors =~ ^[0-9]+$ ]] || v_fail "no sector count from the guest"
units=$(( (sectors + 999) / 1000 ))
v_log "the guest kernel wrote $sectors sectors to nvme0n1: $units data units"

d0='.members[0].drive'
check "NVMe member: drive available, kind nvme, qemu's model and our serial" status1.json \
  "$d0.available == true and $d0.kind == \"nvme\" and
   ($d0.model | startswith(\"QEMU NVMe\")) and $d0.serial == \"$NVME_SERIAL\""
check "NVMe member: 50 C (qemu's 323 K), no warning, spare 0/0, 0% used" status1.json \
  "$d0.temperature_celsius == 50 and $d0.critical_warning == 0 and
   $d0.critical_warnings == [] and $d0.available_spare == 0 and
   $d0.available_spare_threshold == 0 and $d0.percentage_used == 0 and
   $d0.media_errors == 0 and $d0.predicts_failure == null"
check "NVMe member: data units written = the guest kernel's sectors / 1000 ($units)" status1.json \
  "$d0.data_units_written == $units and $d0.data_written_bytes == $units * 512000"
check "NVMe member ok before the warning" status1.json '.members[0].state == "ok"'
d1='.members[1].drive'
check "SATA member: available, kind ata, QEMU HARDDISK, our serial, SMART passed" status1.json \
  "$d1.available == true and $d1.kind == \"ata\" and
   ($d1.model | startswith(\"QEMU HARDDISK\")) and $d1.serial == \"$SATA_SERIAL\" and
   $d1.smart_status == \"passed\" and $d1.predicts_failure == null"
check "SATA member: qemu's attributes: 0 reallocated, 31 C (190), 1 hour (9), no 177" status1.json \
  "$d1.reallocated_sectors == 0 and $d1.temperature_celsius == 31 and
   $d1.power_on_hours == 1 and $d1.wear_leveling_count == null and
   $d1.pending_sectors == null"
check "loop member: not available, the reason names its backing file" status1.json \
  '.members[2].drive.available == false and
   (.members[2].drive.reason | test("loop device \\(over /tmp/loop.img\\)"))'
check "file member: not available, a regular file" status1.json \
  '.members[3].drive.available == false and
   (.members[3].drive.reason | test("regular file"))'
check "volume ok before the warning" status1.json '.volume.state == "ok"'

reason='predicted: critical warning 0x04: reliability_degraded'
check "after qom-set smart_critical_warning 4: member 0 failing, the reason says why" status2.json \
  ".members[0].state == \"failing\" and .members[0].reason == \"$reason\" and
   $d0.critical_warning == 4 and $d0.critical_warnings == [\"reliability_degraded\"] and
   $d0.predicts_failure == \"$reason\""
check "the other members stay ok, the volume is degraded" status2.json \
  '.members[1].state == "ok" and .members[2].state == "ok" and
   .members[3].state == "ok" and .volume.state == "degraded"'
if grep -q -F "MemberFailing 0 state=failing reason=$reason" "$V_TMP/hook.log"; then
  v_ok "the hook got MemberFailing for member 0 with the reason"
else
  v_bad "the hook's log has no MemberFailing for member 0 with '$reason':"
  cat "$V_TMP/hook.log" >&2
fi
prom_has ()
{
  if grep -q -x -F "$2" "$V_TMP/prom"; then v_ok "Prometheus: $1"
  else v_bad "Prometheus: no line '$2'"; fi
}
prom_has "critical warning 4 for member 0" \
  'nbdstripe_member_drive_critical_warning{volume="dh",member="0"} 4'
prom_has "member 0's drive predicts a failure" \
  'nbdstripe_member_drive_predicts_failure{volume="dh",member="0"} 1'
prom_has "member 1's drive does not" \
  'nbdstripe_member_drive_predicts_failure{volume="dh",member="1"} 0'
prom_has "member 2's drive is not available" \
  'nbdstripe_member_drive_available{volume="dh",member="2"} 0'
prom_has "member 0 failing" \
  'nbdstripe_member_state{volume="dh",member="0",path="/dev/nvme0n1",state="failing"} 1'
if grep -q -F "$reason" "$V_TMP/status2.txt"; then
  v_ok "nbdstripe status names member 0's predicted failure"
else
  v_bad "nbdstripe status does not show '$reason'"
fi
# The drives side by side: NVMe and SATA rows with their figures, the
# others saying why they have none.
for re in '^ +0 nvme +50C +0% +0%/0% +500KiB .* predicted: critical warning 0x04: reliability_degraded$' \
          '^ +1 ata +31C +- +- +- .* ok$' \
          '^ +2 - +not available: a loop device \(over /tmp/loop.img\): no drive of its own$' \
          '^ +3 - +not available: a regular file'; do
  if grep -q -E -- "$re" "$V_TMP/status2.txt"; then
    v_ok "nbdstripe status, drives: a line matches $re"
  else
    v_bad "nbdstripe status, drives: no line matches $re"
  fi
done

d3='.members[0].drive'
check "no spare yet: member 0 not replaced, the reason names the spare" status2.json \
  '.on_failing.policy == "replace" and .on_failing.last.state == "not_replaced" and
   .on_failing.last.member == 0 and
   (.on_failing.last.reason | test("no spare can take its place: /tmp/spare.img"))' \
  '.on_failing, .spares'
check "the warning again, the spare there: member 0 replaced onto it by the server" status3.json \
  '.replace.state == "done" and .replace.automatic and .replace.spare and
   .replace.member == 0 and .replace.old == "/dev/nvme0n1" and
   .replace.new == "/tmp/spare.img" and .replace.config_updated and
   .replace.unreadable == [] and .on_failing.last.state == "replaced" and
   .on_failing.last.spare == "/tmp/spare.img"' '.replace, .on_failing'
check "member 0 is the spare, ok (a file: no drive); no spare left; the volume ok" status3.json \
  '.members[0].path == "/tmp/spare.img" and .members[0].state == "ok" and
   .members[0].drive.available == false and .spares == [] and
   .volume.state == "ok"'
if grep -q -F 'members = [ "/tmp/spare.img", "/dev/sda", ' "$V_TMP/dh.conf" &&
   grep -q -x -F 'removed = [ "/dev/nvme0n1" ];' "$V_TMP/dh.conf" &&
   ! grep -q -F 'nvme0n1", ' "$V_TMP/dh.conf" &&
   ! grep -q -F '"/tmp/spare.img" ]' "$V_TMP/dh.conf"; then
  v_ok "the config: the spare member 0, /dev/nvme0n1 removed, no longer a spare"
else
  v_bad "the config is not as expected:"
  sed 's/^/   conf: /' "$V_TMP/dh.conf" >&2
fi
events=$(sed -n 's/^\(Member[A-Za-z]*\) 0 .*/\1/p' "$V_TMP/hook.log" | tr '\n' ' ')
if [[ $events =~ ^MemberFailing\ MemberNotReplaced\ .*MemberFailing\ MemberReplacing\ (MemberRecovered\ )?MemberReplaced\ $ ]] &&
   grep -q -F "MemberReplacing 0 state=failing reason=failing ($reason): replaced by spare /tmp/spare.img old=/dev/nvme0n1 new=/tmp/spare.img" "$V_TMP/hook.log" &&
   grep -q -E '^MemberReplaced 0 .* old=/dev/nvme0n1 new=/tmp/spare.img$' "$V_TMP/hook.log"; then
  v_ok "the hook: $events(old and new paths)"
else
  v_bad "the hook's events for member 0: $events"
  cat "$V_TMP/hook.log" >&2
fi
want=$(tr -d '\r' <"$CONSOLE" | sed -n 's/^vm: ORACLE pattern_sha256=//p')
got=$(tr -d '\r' <"$CONSOLE" | sed -n 's/^vm: ORACLE readback_sha256=//p')
if [[ $want =~ ^[0-9a-f]{64}$ && $got == "$want" ]]; then
  v_ok "the volume's first 1 MiB read back after the replace: the data written ($want)"
else
  v_bad "the data read back after the replace: sha256 '$got', written '$want'"
fi
v_done
