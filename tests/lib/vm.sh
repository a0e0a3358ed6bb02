# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers for the real-client tests (tests/vm).  Sourced by bash
# scripts; not executable on its own.
#
# Environment (set by CTest, see tests/vm/CMakeLists.txt):
#   NBDSTRIPE          the nbdstripe binary under test (required)
#   STRIPE_PLUGIN      nbdkit-stripe-plugin.so under test (required); given
#                      to `nbdstripe serve` as NBDSTRIPE_PLUGIN so that an
#                      installed plugin is never picked up by mistake
#   STRIPE_LD_PRELOAD  sanitizer runtime to preload into nbdkit (through
#                      `nbdstripe serve`, which execs it); may be empty
#   STRIPE_ASAN_SHIM   tests/lib/asan_exit_shim.c, preloaded after
#                      it (sanitizer builds only)
#
# Exit codes: 0 pass, 1 fail, 77 skip (CTest SKIP_RETURN_CODE).
#
# No sleeps as synchronisation: `nbdstripe serve` returns once nbdkit
# listens and has written its pidfile; a server is stopped with kill and a
# blocking `tail --pid` wait.

set -uo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh" || exit 1

V_TMP=
V_PIDS=()                       # servers (nbdkit pids) we started
V_PGIDS=()                      # background process groups (qemu, nbdfuse)
V_MOUNTS=()                     # mount points, unmounted in reverse order
V_LOOPS=()                      # loop devices we attached
V_RM=()                         # more paths to remove at the end
V_PRE=()                        # env prefix for `nbdstripe serve`
V_FAILS=0

v_log ()  { printf '== [%3ds] %s\n' "$SECONDS" "$*"; }
v_skip () { printf 'SKIP: %s\n' "$*" >&2; exit 77; }
v_fail () { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
v_ok ()   { printf 'ok: %s\n' "$*"; }
# A failed check that lets the test go on (the script ends with v_done).
v_bad ()  { printf 'FAIL: %s\n' "$*" >&2; V_FAILS=$((V_FAILS + 1)); }
v_done ()
{
  v_asan_reports
  if [[ $V_FAILS -ne 0 ]]; then
    printf 'FAILED: %d check(s) failed\n' "$V_FAILS" >&2
    exit 1
  fi
  v_log "PASS"
  exit 0
}

# v_wait_gone PID [SECONDS]: block until PID (not necessarily our child)
# has gone.
v_wait_gone ()
{
  timeout "${2:-30}" tail --pid="$1" -f /dev/null 2>/dev/null
}

v_cleanup ()
{
  local rc=$? i pid
  trap - EXIT INT TERM
  for pid in "${V_PGIDS[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || :
  done
  for pid in "${V_PGIDS[@]}"; do
    v_wait_gone "$pid" 10 || kill -KILL -- "-$pid" 2>/dev/null || :
  done
  for (( i = ${#V_MOUNTS[@]} - 1; i >= 0; i-- )); do
    umount "${V_MOUNTS[i]}" 2>/dev/null || umount -l "${V_MOUNTS[i]}" 2>/dev/null || :
  done
  for i in "${V_LOOPS[@]}"; do
    losetup -d "$i" 2>/dev/null || :
  done
  for pid in "${V_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || :
  done
  for pid in "${V_PIDS[@]}"; do
    v_wait_gone "$pid" 10 || kill -KILL "$pid" 2>/dev/null || :
  done
  cd /
  for i in "${V_RM[@]}"; do
    rm -rf -- "$i"
  done
  if [[ -n $V_TMP && -d $V_TMP ]]; then
    # A FUSE mount point that could not be unmounted must not be recursed
    # into (rm would try to delete the volume's backing file).
    if ! grep -q -F " $V_TMP/" /proc/self/mounts; then
      rm -rf -- "$V_TMP"
    else
      echo "warning: something is still mounted under $V_TMP; left in place" >&2
    fi
  fi
  exit "$rc"
}

# v_init [TOOL...]: preconditions, $V_TMP (the working directory), the
# cleanup trap, the environment for `nbdstripe serve`.
v_init ()
{
  t_check_env v_skip v_fail "$@"
  V_TMP=$(mktemp -d "${TMPDIR:-/tmp}/nbdstripe-vm.XXXXXX")
  trap v_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cd "$V_TMP" || v_fail "cd $V_TMP"
  t_server_env "$V_TMP"
  V_PRE=("${T_PRE[@]}")
}

# Count a failure for every sanitizer report (sanitizer builds).
v_asan_reports ()
{
  t_asan_reports "$V_TMP"
  V_FAILS=$((V_FAILS + T_REPORTS))
}

# v_run NAME CMD...: run a command with its output in $V_TMP/NAME.log,
# shown indented; returns its status.
v_run ()
{
  local name=$1 rc=0
  shift
  "$@" >"$V_TMP/$name.log" 2>&1 </dev/null || rc=$?
  printf -- '-- %s: %s -> exit %d\n' "$name" "$*" "$rc"
  sed 's/^/   | /' "$V_TMP/$name.log"
  return "$rc"
}

# v_apt_install PACKAGE...: install what is missing (Debian).  apt-get
# update only when a first attempt fails (an old package list).
v_apt_install ()
{
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
      missing+=("$p")
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  command -v apt-get >/dev/null || return 1
  [[ $(id -u) -eq 0 ]] || return 1
  v_log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Another test may be installing at the same time: wait for the lock.
  local apt=(apt-get -q -o DPkg::Lock::Timeout=120)
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}" \
      >"$V_TMP/apt.log" 2>&1 && return 0
  "${apt[@]}" update >>"$V_TMP/apt.log" 2>&1
  "${apt[@]}" install -y --no-install-recommends "${missing[@]}" \
      >>"$V_TMP/apt.log" 2>&1 && return 0
  tail -n 5 "$V_TMP/apt.log" >&2
  return 1
}

# v_conf FILE NAME CHUNK SERVE_GROUP_BODY MEMBER...: write a config.
v_conf ()
{
  local file=$1 name=$2 chunk=$3 serve=$4 m sep=""
  shift 4
  {
    printf 'name = "%s";\nchunk = "%s";\nmembers = [' "$name" "$chunk"
    for m in "$@"; do printf '%s\n  "%s"' "$sep" "$m"; sep=","; done
    printf ' ];\n'
    [[ -z $serve ]] || printf 'serve = { %s };\n' "$serve"
  } >"$file"
}

# v_serve CONFIG PIDFILE: `nbdstripe serve CONFIG` (daemonizing; returns
# once nbdkit listens).  Sets V_SERVER_PID and remembers it for cleanup.
# Returns non-zero (output in $V_TMP/serve.log) if serve failed.
v_serve ()
{
  local conf=$1 pidfile=$2
  rm -f "$pidfile"
  v_run serve "${V_PRE[@]}" "$NBDSTRIPE" serve "$conf" || return 1
  [[ -s $pidfile ]] || v_fail "serve exited 0 but wrote no pidfile $pidfile"
  V_SERVER_PID=$(<"$pidfile")
  V_PIDS+=("$V_SERVER_PID")
  kill -0 "$V_SERVER_PID" 2>/dev/null ||
    v_fail "the server ($V_SERVER_PID) is not running"
  grep -q -F "$STRIPE_PLUGIN" "/proc/$V_SERVER_PID/maps" ||
    v_fail "server $V_SERVER_PID did not load $STRIPE_PLUGIN"
}

# v_stop PID...: stop servers we started and wait until they have gone
# (all are signalled first: nbdkit takes a second or two to exit).
v_stop ()
{
  local pid keep=() p
  for pid in "$@"; do
    kill -TERM "$pid" 2>/dev/null || v_bad "server $pid was not running"
  done
  for pid in "$@"; do
    v_wait_gone "$pid" 30 || v_fail "server $pid did not exit within 30 s"
  done
  for p in "${V_PIDS[@]}"; do [[ " $* " == *" $p "* ]] || keep+=("$p"); done
  V_PIDS=("${keep[@]}")
}

# v_geometry MEMBER: "CHUNK COUNT STRIDE STRIPE_WIDTH" from the member's
# header (nbdstripe inspect --json): the ext4 geometry for 4 KiB blocks,
# stride = chunk / 4K, stripe_width = stride x members.
v_geometry ()
{
  local json chunk count
  json=$("$NBDSTRIPE" inspect --json "$1") || return 1
  chunk=$(grep -o '"chunk": *[0-9]*' <<<"$json" | grep -o '[0-9]*$')
  count=$(grep -o '"member_count": *[0-9]*' <<<"$json" | grep -o '[0-9]*$')
  [[ -n $chunk && -n $count ]] || return 1
  echo "$chunk $count $(( chunk / 4096 )) $(( chunk / 4096 * count ))"
}

# v_blocks FILE...: allocated 512-byte blocks of each (stat %b), one line.
v_blocks () { stat -c %b -- "$@" | tr '\n' ' ' | sed 's/ $//'; }

# v_trim_reached_every_member BEFORE AFTER MIN_DROP_KIB NAMES...
# BEFORE and AFTER are v_blocks lines; every member's allocation must have
# dropped by at least MIN_DROP_KIB.
v_trim_reached_every_member ()
{
  local -a b=($1) a=($2)
  local min=$3 i drop
  shift 3
  local -a names=("$@")
  for i in "${!b[@]}"; do
    drop=$(( (b[i] - a[i]) / 2 ))
    if (( drop >= min )); then
      v_ok "trim reached member $i (${names[i]:-?}): ${b[i]} -> ${a[i]} blocks (-$drop KiB)"
    else
      v_bad "trim did not reach member $i: allocated blocks ${b[i]} -> ${a[i]} (dropped $drop KiB, expected at least $min KiB)"
    fi
  done
}

# v_free_port: a TCP port that nothing listens on right now (the caller
# retries if someone takes it first).
v_free_port ()
{
  local p used
  used=$(ss -Htln 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }')
  for _ in $(seq 100); do
    p=$(( 20000 + RANDOM % 40000 ))
    grep -qx "$p" <<<"$used" || { echo "$p"; return 0; }
  done
  return 1
}

# --- the throw-away VM (nbd_client_vm.sh, md_raid0.sh) -------------------------
#
#   v_vm_require                 qemu with TCG, a static busybox, $VM_CACHE
#   v_vm_kernel                  Debian's linux-image-6.1.0-*-amd64:
#                                $VM_VMLINUZ, $VM_KVER, $VM_MODS
#   v_vm_deb PACKAGE             any Debian package, unpacked: $V_DEB_DIR
#   v_initramfs_begin INIT       $VM_ROOT: busybox, INIT as /init,
#                                vm_guest.sh (sourced by INIT)
#   v_initramfs_bin FILE [NAME]  FILE as /sbin/NAME with its libraries
#   v_initramfs_lib FILE DEST    a shared object at DEST, its libraries
#   v_initramfs_modules MOD...   kernel modules and what they depend on
#   v_initramfs_pack [OUT]       modules.dep, cpio | gzip: $VM_INITRD
#   v_vm_boot PHASE APPEND [QEMU_ARG...]   boot, check the PASS marker
#
# Downloads and unpacked packages are cached in $VM_CACHE (default
# /var/cache/nbdstripe-vm) for the next run: apt-get download (no
# install, no maintainer scripts), dpkg-deb -x.

VM_CACHE=${VM_CACHE:-/var/cache/nbdstripe-vm}
VM_ROOT=
VM_INITRD=
VM_DEADLINE=                    # a $SECONDS value every boot must end by
declare -gA V_MOD_HAVE=()

# v_vm_require: skip when no VM can run here (qemu missing, no TCG), fail
# on a dynamic busybox; the cache directory, with what a run killed by
# SIGKILL left behind there removed (a live run's is younger).
v_vm_require ()
{
  command -v qemu-system-x86_64 >/dev/null ||
    v_skip "qemu-system-x86_64 is not installed and could not be installed"
  qemu-system-x86_64 -accel tcg -machine help >/dev/null 2>&1 ||
    v_skip "qemu-system-x86_64 with TCG does not run here"
  [[ -x /bin/busybox && $(ldd /bin/busybox 2>&1) == *'not a dynamic'* ]] ||
    v_fail "/bin/busybox is not a static busybox (busybox-static)"
  command -v dpkg-deb >/dev/null || v_fail "dpkg-deb is not installed"
  mkdir -p "$VM_CACHE" 2>/dev/null ||
    v_skip "cannot create the package cache $VM_CACHE (set VM_CACHE)"
  find "$VM_CACHE" -maxdepth 1 \( -name 'download.*' -o -name 'unpack.*' \) -mmin +60 \
    -exec rm -rf -- {} + 2>/dev/null
}

# v_vm_deb PACKAGE: the newest PACKAGE_*.deb in $VM_CACHE, downloaded with
# `apt-get download` if there is none, unpacked (once) next to it.  Sets
# V_DEB and V_DEB_DIR; returns 1 (the download log shown) if it cannot be
# had.
v_vm_deb ()
{
  local pkg=$1 deb dl tmp
  deb=$(ls "$VM_CACHE/${pkg}"_*.deb 2>/dev/null | sort -V | tail -n 1)
  if [[ -z $deb ]]; then
    v_log "fetching $pkg into $VM_CACHE"
    dl=$(mktemp -d "$VM_CACHE/download.XXXXXX") || return 1
    V_RM+=("$dl")
    chown _apt "$dl" 2>/dev/null || :      # apt's download sandbox
    (cd "$dl" && { apt-get download -q "$pkg" ||
                   { apt-get update -q && apt-get download -q "$pkg"; }; }) \
      >"$V_TMP/download.$pkg.log" 2>&1
    mv "$dl"/*.deb "$VM_CACHE"/ 2>/dev/null
    rm -rf -- "$dl"
    deb=$(ls "$VM_CACHE/${pkg}"_*.deb 2>/dev/null | sort -V | tail -n 1)
    [[ -n $deb ]] || { cat "$V_TMP/download.$pkg.log" >&2; return 1; }
  fi
  V_DEB=$deb
  V_DEB_DIR=${deb%.deb}.d
  if [[ ! -d $V_DEB_DIR ]]; then
    v_log "unpacking $(basename "$deb")"
    tmp=$(mktemp -d "$VM_CACHE/unpack.XXXXXX") || return 1
    V_RM+=("$tmp")
    dpkg-deb -x "$deb" "$tmp" || { rm -rf -- "$tmp"; v_fail "dpkg-deb -x $deb"; }
    # Atomic for a concurrent run: whoever renames first wins.
    mv -T "$tmp" "$V_DEB_DIR" 2>/dev/null || rm -rf -- "$tmp"
  fi
}

# v_vm_kernel: Debian 12's kernel (the cached one, else the one
# linux-image-amd64 depends on).  Sets VM_VMLINUZ, VM_KVER and VM_MODS
# (its /lib/modules/VERSION); skips when there is none to be had.
v_vm_kernel ()
{
  local deb pkg
  deb=$(ls "$VM_CACHE"/linux-image-6.1.0-*-amd64_*.deb 2>/dev/null | sort -V | tail -n 1)
  if [[ -n $deb ]]; then
    pkg=${deb##*/}; pkg=${pkg%%_*}
  else
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
          grep -o 'linux-image-6\.1\.0-[0-9]*-amd64$' | head -n 1)
    [[ -n $pkg ]] ||
      pkg=$(apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' |
            cut -d' ' -f1 | sort -V | tail -n 1)
    [[ -n $pkg ]] || { apt-get update -q >/dev/null 2>&1
      pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
            grep -o 'linux-image-6\.1\.0-[0-9]*-amd64$' | head -n 1); }
    [[ -n $pkg ]] || v_skip "no linux-image-6.1.0-*-amd64 package known to apt"
  fi
  v_vm_deb "$pkg" || v_skip "cannot download $pkg (no package archive?)"
  VM_VMLINUZ=$(ls "$V_DEB_DIR"/boot/vmlinuz-* 2>/dev/null | head -n 1)
  VM_KVER=${VM_VMLINUZ##*/vmlinuz-}
  VM_MODS=$V_DEB_DIR/lib/modules/$VM_KVER
  [[ -f $VM_VMLINUZ && -d $VM_MODS ]] ||
    v_fail "$V_DEB_DIR: no kernel or modules (remove it to unpack again)"
  v_log "guest kernel $VM_KVER"
}

# v_initramfs_begin INIT: a new initramfs tree in $VM_ROOT ($V_TMP/root):
# the static busybox with a link per applet, INIT as /init and
# tests/lib/vm_guest.sh as /vm_guest.sh.
v_initramfs_begin ()
{
  local a
  VM_ROOT=$V_TMP/root
  V_MOD_HAVE=()
  rm -rf -- "$VM_ROOT"
  mkdir -p "$VM_ROOT"/{bin,sbin,etc,dev,proc,sys,mnt,tmp,run} || v_fail "mkdir $VM_ROOT"
  cp /bin/busybox "$VM_ROOT/bin/busybox" || v_fail "cp /bin/busybox"
  for a in $(/bin/busybox --list); do
    [[ -e $VM_ROOT/bin/$a ]] || ln -s busybox "$VM_ROOT/bin/$a"
  done
  cp "$1" "$VM_ROOT/init" && chmod 755 "$VM_ROOT/init" || v_fail "cp $1"
  cp "$(dirname "${BASH_SOURCE[0]}")/vm_guest.sh" "$VM_ROOT/vm_guest.sh" ||
    v_fail "cp vm_guest.sh"
}

# v_initramfs_bin FILE [NAME]: FILE as /sbin/NAME (default its own name;
# /sbin comes before busybox's applets in the guest's PATH), with every
# library ldd lists, the dynamic loader included, at the same paths.
# FILE may come from an unpacked package: its libraries are the host's.
v_initramfs_bin ()
{
  local file=$1 name=${2:-${1##*/}} deps lib
  cp "$file" "$VM_ROOT/sbin/$name" || v_fail "cp $file"
  deps=$(ldd "$file" 2>&1) || v_fail "ldd $file: $deps"
  [[ $deps != *'not found'* ]] ||
    v_fail "$file needs a library the host does not have: $(grep 'not found' <<<"$deps")"
  for lib in $(grep -o '/[^ ]*' <<<"$deps"); do
    cp --parents -L -n "$lib" "$VM_ROOT/" || v_fail "cp $lib"
  done
}

# v_initramfs_lib FILE DEST: a shared object (a plugin nbdkit loads) at
# DEST in the initramfs, with every library ldd lists, as
# v_initramfs_bin does for a program.
v_initramfs_lib ()
{
  local file=$1 dest=$2 deps lib
  mkdir -p "$VM_ROOT/$(dirname "$dest")" &&
    cp "$file" "$VM_ROOT/$dest" || v_fail "cp $file"
  deps=$(ldd "$file" 2>&1) || v_fail "ldd $file: $deps"
  [[ $deps != *'not found'* ]] ||
    v_fail "$file needs a library the host does not have: $(grep 'not found' <<<"$deps")"
  for lib in $(grep -o '/[^ ]*' <<<"$deps"); do
    cp --parents -L -n "$lib" "$VM_ROOT/" || v_fail "cp $lib"
  done
}

# v_initramfs_modules MODULE...: the modules from $VM_MODS and, through
# the depends= of their .modinfo, what they need (modules built into the
# kernel are skipped).
v_initramfs_modules ()
{
  local name f d rel
  for name in "$@"; do
    [[ -z ${V_MOD_HAVE[$name]:-} ]] || continue
    f=$(find "$VM_MODS/kernel" -name "$name.ko" -o -name "$name.ko.xz" | head -n 1)
    if [[ -z $f ]]; then
      grep -q "/$name.ko" "$VM_MODS/modules.builtin" 2>/dev/null && continue
      v_fail "module $name not found in $VM_MODS"
    fi
    V_MOD_HAVE[$name]=1
    rel=${f#"$VM_MODS"/}
    mkdir -p "$VM_ROOT/lib/modules/$VM_KVER/${rel%/*}" &&
      cp "$f" "$VM_ROOT/lib/modules/$VM_KVER/$rel" || v_fail "cp $f"
    # The .modinfo section: NUL-separated key=value strings.
    for d in $(tr "\0" "\n" <"$f" | sed -n "s/^depends=//p" | tr , " "); do
      v_initramfs_modules "$d"
    done
  done
}

# v_initramfs_pack [OUT]: modules.dep (busybox depmod, read by the guest's
# busybox modprobe), then the tree as a gzipped cpio archive in OUT
# (default $V_TMP/initrd.gz); sets VM_INITRD.
v_initramfs_pack ()
{
  VM_INITRD=${1:-$V_TMP/initrd.gz}
  if [[ ${#V_MOD_HAVE[@]} -gt 0 ]]; then
    cp "$VM_MODS"/modules.order "$VM_MODS"/modules.builtin "$VM_ROOT/lib/modules/$VM_KVER/"
    /bin/busybox depmod -b "$VM_ROOT" "$VM_KVER" || v_fail "busybox depmod"
    [[ -s $VM_ROOT/lib/modules/$VM_KVER/modules.dep ]] ||
      v_fail "busybox depmod wrote no modules.dep"
  fi
  (cd "$VM_ROOT" && find . | /bin/busybox cpio -o -H newc 2>/dev/null) |
    gzip -1 >"$VM_INITRD" || v_fail "cpio"
  v_log "initramfs: ${#V_MOD_HAVE[@]} modules, $(du -k "$VM_INITRD" | cut -f1) KiB"
}

# v_initramfs_extra OUT DIR: $VM_INITRD followed by DIR's files as a
# second archive (the kernel unpacks both, the second over the first), in
# OUT: per-boot files without rebuilding the whole initramfs.
v_initramfs_extra ()
{
  local out=$1 dir=$2
  { cat "$VM_INITRD"
    (cd "$dir" && find . | /bin/busybox cpio -o -H newc 2>/dev/null) | gzip -1
  } >"$out" || v_fail "cpio $dir"
}

# v_vm_boot PHASE APPEND [QEMU_ARG...]: boot $VM_VMLINUZ with $VM_INITRD
# (or $VM_BOOT_INITRD when set), "vm.phase=PHASE APPEND" on the kernel
# command line and QEMU_ARGs (devices) on qemu's: TCG, 2 CPUs, 512 MiB
# (VM_ACCEL, VM_CPU, VM_MEM change them: bench/guest-fsync uses KVM),
# the serial console in $V_TMP/console.PHASE.log (its "vm: " lines are
# shown), isa-debug-exit.  Fails the test, with the reason and the end of
# the console log, on a missing PASS marker, a kernel panic, a guest
# failure or the time limit ($VM_DEADLINE, a $SECONDS value; qemu runs
# under timeout(1)).
v_vm_boot ()
{
  local phase=$1 append=$2 log=$V_TMP/console.$1.log left pid rc=0 why= t0=$SECONDS
  shift 2
  left=$(( VM_DEADLINE - SECONDS ))
  (( left > 0 )) || v_fail "no time left for boot $phase (VM_TIMEOUT=${VM_TIMEOUT:-?})"
  v_log "boot $phase (time limit ${left} s)"
  setsid timeout -k 5 "$left" qemu-system-x86_64 \
      -accel "${VM_ACCEL:-tcg}" -cpu "${VM_CPU:-max}" -smp 2 -m "${VM_MEM:-512M}" \
      -nodefaults -nographic -serial stdio -no-reboot \
      -kernel "$VM_VMLINUZ" -initrd "${VM_BOOT_INITRD:-$VM_INITRD}" \
      -append "console=ttyS0 panic=-1 oops=panic loglevel=4 vm.phase=$phase $append" \
      -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
      "$@" </dev/null >"$log" 2>&1 &
  pid=$!
  V_PGIDS+=("$pid")
  # For a caller that runs the boot in the background (its V_PGIDS is
  # not this subshell's): the process group to stop on its way out.
  echo "$pid" >"$V_TMP/qemu.$phase.pgid"
  wait "$pid" || rc=$?
  V_PGIDS=()
  tr -d '\r' <"$log" | grep -a '^vm: ' | sed 's/^/   | /'
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    why="timed out (VM_TIMEOUT=${VM_TIMEOUT:-?} s for every boot)"
  elif grep -q -a 'Kernel panic' "$log"; then
    why=$(grep -a -m1 'Kernel panic' "$log" | tr -d '\r' | sed 's/^\[[ 0-9.]*\] //')
  elif grep -q -a '^vm: FAIL:' "$log"; then
    why="the guest failed: $(grep -a -m1 '^vm: FAIL:' "$log" | tr -d '\r')"
  elif ! grep -q -a "^vm: NBDSTRIPE-VM-PASS phase=$phase" "$log"; then
    why="no PASS marker on the console (qemu exit status $rc)"
  elif [[ $rc -ne 99 ]]; then
    why="qemu exit status $rc, not 99 (isa-debug-exit)"
  fi
  if [[ -n $why ]]; then
    echo "--- last 40 lines of the console log:" >&2
    tail -n 40 "$log" | tr -d '\r' >&2
    v_fail "boot $phase: $why"
  fi
  v_ok "boot $phase passed ($(( SECONDS - t0 )) s)"
}
