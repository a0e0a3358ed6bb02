# SPDX-License-Identifier: BSD-3-Clause
# What the throw-away VMs' /init scripts share (tests/vm/guest-init.sh,
# tests/vm/md_raid0_guest.sh).  Copied into the initramfs as /vm_guest.sh
# by v_initramfs_begin (tests/lib/vm.sh) and sourced by /init (busybox sh,
# PID 1): mounts /proc, /sys, /dev; reads the vm.KEY=VALUE parameters of
# the kernel command line into shell variables P_KEY; log, fail, run,
# vm_pass.
#
# Every line for the host starts with "vm: ".  The last one is
# "NBDSTRIPE-VM-PASS phase=PHASE" (vm_pass), then the VM exits through
# isa-debug-exit (qemu's status 99); a failure prints why and exits with
# status 3.

# This busybox prefers its own applets to PATH (it has a mke2fs too): the
# real tools are called as /sbin/NAME.
export PATH=/sbin:/bin
/bin/busybox mkdir -p /proc /sys /dev /mnt /tmp /run
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev

log () { echo "vm: [$(cut -d' ' -f1 /proc/uptime)] $*"; }

# isa-debug-exit at 0xf4: qemu exits with status (VALUE << 1) | 1.
vm_exit ()
{
  sync
  printf "\\$(printf %o "$1")" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
  # Not reached when the device is there.
  echo "vm: isa-debug-exit did not stop the VM"
  poweroff -f
}

fail ()
{
  echo "vm: FAIL: $*"
  echo "vm: --- last kernel messages:"
  dmesg | tail -n 25 | sed 's/^/vm: | /'
  vm_exit 1
}

# The PASS marker the host looks for, then exit (status 99).
vm_pass ()
{
  echo "vm: NBDSTRIPE-VM-PASS phase=$P_phase"
  vm_exit 49
}

# Show a command's output (to the console) when it fails.
run ()
{
  if ! "$@" >/tmp/run.out 2>&1; then
    sed 's/^/vm: | /' /tmp/run.out
    return 1
  fi
  return 0
}

for arg in $(cat /proc/cmdline); do
  case $arg in
    vm.*=*) k=${arg%%=*}; k=${k#vm.}; eval "P_$k=\${arg#*=}" ;;
  esac
done
: "${P_phase:?}"
P_sabotage=${P_sabotage:-none}
