#!/bin/busybox sh
# SPDX-License-Identifier: BSD-3-Clause
# /init of the throw-away VM of drive_health.sh (busybox sh, PID 1): a
# volume whose members are qemu's emulated NVMe namespace (/dev/nvme0n1),
# its emulated SATA disk behind AHCI (/dev/sda), a loop device and a
# regular file, served in the guest by nbdstripe and nbdkit (the host's
# build), its drive health read through the real kernel drivers.
#
#   1. nbdstripe create, serve (health.drive_interval = 1, an on_change
#      hook, a Prometheus file; on_failing = "replace" and a spare,
#      /tmp/spare.img, not there yet) under the unit's capabilities and
#      no_new_privs (setpriv with the options the host read from
#      nbdstripe@.service, in /etc/unit-setpriv); print the server's
#      capability sets; wait until the NVMe and the SATA member's drives
#      have been read, and fail with the reason if either could not be;
#      print the status (--json and the table), and the kernel's count of
#      sectors written to nvme0n1 (the oracle for the drive's data units
#      written).
#   2. Ask the host for a critical warning on the NVMe controller
#      ("vm: QOM-SET /machine/peripheral/nvme0 smart_critical_warning
#      4": reliability degraded), wait until member 0 is failing and
#      on_failing has given up (no spare: it is not there); print the
#      status, the Prometheus file.  Then 1 MiB of random data written
#      to the volume (nbdcopy --flush), its sha256 printed.
#   3. The spare made (a 12 MiB file), wait until it is usable; the
#      warning cleared (0), wait until member 0 is ok again (a member is
#      tried once each time it becomes failing); the warning again (4):
#      wait until the replace onto the spare is done; print the status,
#      the config, the hook's log, and the sha256 of the volume's first
#      1 MiB read back.
#   4. Stop the server; its last status.
#
# Files for the host go to the console between "vmf: BEGIN NAME" and
# "vmf: END NAME", each line "vmf: | LINE".  vm.sabotage=noinject skips
# the request (the guest then times out waiting: the test must fail).

. /vm_guest.sh
log "phase $P_phase, kernel $(uname -r)"

for m in nvme ahci sd_mod loop; do
  modprobe "$m" || fail "modprobe $m"
done

# wait_for WHAT SECONDS CMD...: until CMD succeeds (a condition, polled),
# at most SECONDS of the guest's clock.
wait_for ()
{
  what=$1 end=$(( $(cut -d. -f1 /proc/uptime) + $2 ))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$(cut -d. -f1 /proc/uptime)" -lt $end ] || return 1
    sleep 0.2
  done
  log "$what"
}

wait_for "/dev/nvme0n1 is there" 30 test -b /dev/nvme0n1 || fail "no /dev/nvme0n1"
wait_for "/dev/sda is there" 30 test -b /dev/sda || fail "no /dev/sda"

truncate -s 8M /tmp/loop.img /tmp/file.img || fail "truncate"
LOOP=$(losetup -f) && losetup "$LOOP" /tmp/loop.img || fail "losetup"
log "loop device $LOOP over /tmp/loop.img"

mkdir -p /etc/nbdstripe /run/nbdstripe
cat >/hook.sh <<'EOF'
#!/bin/sh
echo "$1 $3 state=$NBDSTRIPE_STATE reason=$NBDSTRIPE_REASON old=$NBDSTRIPE_OLD_PATH new=$NBDSTRIPE_NEW_PATH" >>/run/hook.log
EOF
chmod 755 /hook.sh
CONF=/etc/nbdstripe/dh.conf
cat >$CONF <<EOF
name = "dh";
chunk = "64K";
members = [ "/dev/nvme0n1", "/dev/sda", "$LOOP", "/tmp/file.img" ];
serve = { socket = "/run/nbdstripe/dh.sock"; pidfile = "/run/nbdstripe/dh.pid"; };
health = {
  status_file = "/run/nbdstripe/dh.status.json";
  prometheus_file = "/run/nbdstripe/dh.prom";
  on_change = "/hook.sh";
  drive_interval = 1;
  probe_interval = 1;
};
spares = [ "/tmp/spare.img" ];
on_failing = "replace";
EOF

export NBDSTRIPE_PLUGIN=/usr/lib/nbdstripe/nbdkit-stripe-plugin.so
run nbdstripe create $CONF || fail "nbdstripe create"
# The options have no spaces in them (t_unit_caps): split on lines.
UNIT_SETPRIV=$(cat /etc/unit-setpriv) || fail "no /etc/unit-setpriv"
log "serving under setpriv" $UNIT_SETPRIV
# (/sbin/setpriv: this busybox prefers its own applet, which has no
# --bounding-set.)
run /sbin/setpriv $UNIT_SETPRIV -- nbdstripe serve $CONF || fail "nbdstripe serve"
log "served"
echo "vm: ORACLE server_credentials=$(grep -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs):' \
  "/proc/$(cat /run/nbdstripe/dh.pid)/status" | tr -s '\t' ' ' | tr '\n' ';')"

show ()   # show NAME CMD...: CMD's output for the host
{
  name=$1
  shift
  echo "vmf: BEGIN $name"
  "$@" 2>&1 | sed 's/^/vmf: | /'
  echo "vmf: END $name"
}

# drive_read INDEX: member INDEX's drive has been read (available or not).
drive_read ()
{
  # (its exit status says the volume's state: not a failure here)
  nbdstripe status --json $CONF >/tmp/st.json 2>/dev/null;
    jq -e ".status.members[$1].drive.available != null and
           (.status.members[$1].drive.reason // \"\") != \"not read yet\"" /tmp/st.json
}
# member_state INDEX STATE: the status says member INDEX is STATE.
member_state ()
{
  status_has ".members[$1].state == \"$2\""
}
# status_has JQ: the status document in status --json satisfies the
# filter JQ.
status_has ()
{
  # (its exit status says the volume's state: not a failure here)
  nbdstripe status --json $CONF >/tmp/st.json 2>/dev/null;
    jq -e ".status | ($1)" /tmp/st.json
}
# status_doc: the status document in status --json (its "status").
status_doc ()
{
  nbdstripe status --json $CONF | jq .status
}
# first1m: the sha256 of the volume's first 1 MiB (nbdcopy has no
# length: head ends it).
first1m ()
{
  nbdcopy "nbd+unix:///?socket=/run/nbdstripe/dh.sock" - 2>/dev/null |
    head -c 1048576 | sha256sum | cut -d' ' -f1
}

wait_for "the NVMe drive was read" 30 drive_read 0 || fail "member 0's drive never read"
wait_for "the SATA drive was read" 30 drive_read 1 || fail "member 1's drive never read"
# Read, but perhaps refused (a capability the unit does not grant): the
# rest would only time out.
refused=
for i in 0 1; do
  status_has ".members[$i].drive.available" >/dev/null ||
    refused="${refused:+$refused; }member $i: $(jq -r ".members[$i].drive.reason" /tmp/st.json)"
done
[ -z "$refused" ] || fail "drives not read under the unit's capabilities: $refused"
sync
echo "vm: ORACLE nvme0n1_sectors_written=$(awk '{ print $7 }' /sys/block/nvme0n1/stat)"
show status1.json status_doc
show status1.txt nbdstripe status $CONF

if [ "$P_sabotage" = noinject ]; then
  log "SABOTAGE: no critical warning asked for"
else
  echo "vm: QOM-SET /machine/peripheral/nvme0 smart_critical_warning 4"
fi
wait_for "member 0 is failing" 30 member_state 0 failing ||
  { jq -c '.status.members[0] | {state, reason, drive}' /tmp/st.json | sed 's/^/vm: | /'
    fail "member 0 never became failing"; }
wait_for "on_failing: not replaced (no spare yet)" 10 \
  status_has '.on_failing.last.state == "not_replaced"' ||
  fail "on_failing did not give up without a spare"
show status2.json status_doc
show status2.txt nbdstripe status $CONF
show prom cat /run/nbdstripe/dh.prom

# (Not before status2: the drives table's data written is checked there.)
head -c 1048576 /dev/urandom >/tmp/pattern
run nbdcopy --flush /tmp/pattern "nbd+unix:///?socket=/run/nbdstripe/dh.sock" ||
  fail "nbdcopy the pattern to the volume"
echo "vm: ORACLE pattern_sha256=$(sha256sum </tmp/pattern | cut -d' ' -f1)"
truncate -s 12M /tmp/spare.img || fail "truncate the spare"
wait_for "the spare is usable" 30 status_has '.spares[0].usable' ||
  fail "the spare never became usable"
echo "vm: QOM-SET /machine/peripheral/nvme0 smart_critical_warning 0"
wait_for "member 0 is ok again" 30 member_state 0 ok ||
  fail "member 0 did not leave failing once the warning was cleared"
echo "vm: QOM-SET /machine/peripheral/nvme0 smart_critical_warning 4"
wait_for "the replace onto the spare is done" 60 \
  status_has '.replace.state == "done" and .on_failing.last.state == "replaced"' ||
  { jq -c '.status | .replace, .on_failing' /tmp/st.json | sed 's/^/vm: | /'
    fail "member 0 was not replaced onto the spare"; }
show status3.json status_doc
show dh.conf cat $CONF
echo "vm: ORACLE readback_sha256=$(first1m)"
log "read back"
wait_for "the hook ran" 10 grep -q MemberReplaced /run/hook.log
show hook.log cat /run/hook.log

kill "$(cat /run/nbdstripe/dh.pid)"
wait_for "the server stopped" 30 sh -c '! kill -0 $(cat /run/nbdstripe/dh.pid)' ||
  fail "the server did not stop"
losetup -d "$LOOP"
vm_pass
