#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Linux md raid0 and nbdstripe, on the same bytes, both ways: arrays made
# by the real md driver and mdadm (Debian 12's 4.2) in a throw-away qemu
# VM (TCG) are served by nbdstripe byte for byte -- with md superblocks
# (mdadm --create) and without (mdadm --build, nbdstripe's metadata
# "none") -- and volumes nbdstripe creates with md metadata are assembled
# by md byte for byte.  Members are raw files on the host, virtio disks in
# the guest (cache=none, else writethrough: what the guest wrote is in the
# files when qemu exits).
#
# Host: install what is missing (qemu-system-x86, busybox-static,
# libnbd-bin, python3); fetch Debian's linux-image-6.1.0-*-amd64 and mdadm
# with `apt-get download` into $VM_CACHE (default /var/cache/nbdstripe-vm,
# reused; mdadm is never installed on the host) and unpack them there;
# initramfs: busybox, md-mod + raid0 + virtio modules, /sbin/mdadm with its
# libraries, md_raid0_guest.sh as /init (see there for what the guest
# does with each array).  A random pattern file (fixed seed) is a
# read-only disk of every boot.
#
# Part 1, md alone (needs nothing of nbdstripe's md support).
#   Boot "create": for each case A-a..A-f below, mdadm --create a raid0 on
#   its disks, write the pattern over all of it, read it back (sha256),
#   --stop, --examine every member.  Host, per case: the guest read back
#   the pattern; level, chunk, roles, one array UUID; the layout mdadm
#   wrote (Feature Map 0x1000 + "Layout :") and md's sysfs layout are the
#   ones expected; and an independent Python model of md raid0
#   (tests/lib/md_raid0_model.py) finds the pattern on the member files
#   where that layout puts it, md's size rule gives md's array size, and
#   for the cases that can tell the layouts apart the other layout does
#   not match.  Cases (chunk; member sizes, in chunks past a 1 MiB (b: 2
#   MiB) data offset, plus bytes that are no whole chunk):
#     A-a  2 equal members, chunk 64K
#     A-b  3 mixed sizes, mdadm's defaults (chunk 512K, its default layout)
#     A-c  4 mixed sizes, 4 zones, --layout=alternate, chunk 64K
#     A-d  3 mixed sizes (3,3,1 scaled: zone 1 starts at an odd chunk over
#          2 members), --layout=original, chunk 64K
#     A-e  3 mixed sizes, chunk 192K (not a power of two: md's size mask
#          drops part of the last zone); mdadm may refuse it, which is
#          recorded and allowed
#     A-f  4 members differing by less than a chunk (one zone), chunk 128K
#   Header-less arrays: mdadm --build --level=0 --chunk=64 (no superblock,
#   data from byte 0 of every member), the pattern written and read back
#   as above.  Host, per case: the guest read back the pattern; md's chunk;
#   --examine finds no superblock on any member; md used the layout
#   expected (a --build array's sysfs layout is -1, so for a multi-zone
#   one the layout md used is its raid0.default_layout); the model finds
#   the pattern from byte 0 of the members where that layout puts it, md's
#   size rule gives md's size.  Cases (no member a whole number of chunks):
#     C-a  2 mixed sizes, in boot "create": zone 1 has one member, so the
#          layouts agree and md starts it without raid0.default_layout
#     C-b  3 mixed sizes (3,3,1 scaled as A-d: zone 1 starts at an odd
#          chunk over 2 members), in boot "assemble", which has
#          raid0.default_layout=1 on its kernel command line: md 6.1
#          refuses a multi-zone array whose layouts differ when nobody
#          says which (mdadm 4.2's --build passes no raid0 layout, even
#          with --layout); md uses "original", which the model must find
#          (the other layout must not match).  That boot's other arrays
#          have superblocks that say their layout (checked as above).
# Part 2, nbdstripe (needs `nbdstripe import` and metadata = "md").
#   A, per case: `nbdstripe import --out CONF --name NAME MEMBERS...`
#   changes no member; `nbdstripe check CONF` exits 0; `nbdstripe inspect
#   MEMBER` names the array UUID mdadm printed; `nbdstripe serve CONF`
#   serves exactly md's size and md's sha256 (nbdcopy of the whole
#   export); no member changed by serving.
#   B: configs with metadata = "md" (3 mixed sizes with layout
#   "alternate", 3 mixed with "original", 2 equal), `nbdstripe create`,
#   serve, nbdcopy the pattern over the whole export; boot "assemble":
#   mdadm --assemble each must work; --examine says raid0, the chunk, the
#   layout, roles 0..N-1; md's size is the export's (and the model's);
#   md reads back the pattern; the model finds it on the members; then
#   nbdstripe serves the volume again, byte for byte.
#   Boot "assemble" also re-assembles A-d (md's own array; its layout from
#   the superblock alone), in both parts.
#   C: configs the test writes, metadata = "none", chunk = "64K", the
#   members in order, the layout md used (layout = "original" for C-b;
#   none for C-a, where md had no choice), no data_offset: `nbdstripe
#   check` exits 0 and `nbdstripe serve` serves exactly md's size and
#   sha256; no member changed by serving.  The same for C-b's members
#   shifted 1 MiB into new files behind 1 MiB of other bytes, with
#   data_offset = "1M".  (These servers run side by side and are stopped
#   together: nbdkit takes a second or two to exit.)
#
# VM_MD_PARTS=all (default) runs both parts; VM_MD_PARTS=md only part 1
# (and A-d's re-assembly), for a tree without md support in nbdstripe
# (nor the layout key, nor data_offset with metadata "none").
# VM_TIMEOUT (default 200) bounds the boots together.  Skipped (77) in
# the sanitizer build and when no VM can run here (as nbd_client_vm.sh).
#
# To see it fail: VM_SABOTAGE=model-layout (the model is told A-d is
# alternate), VM_SABOTAGE=flip (a byte of an A-c member is flipped after
# boot "create": the model and, in part 2, nbdstripe's sha256 disagree),
# VM_SABOTAGE=build-layout (C-b's configs say "alternate"),
# VM_SABOTAGE=build-offset (the shifted C-b config leaves data_offset
# out): nbdstripe's size or sha256 then differ from md's.

here=$(dirname "$(realpath "$0")")
source "$here/../lib/vm.sh"
MODEL=$here/../lib/md_raid0_model.py

[[ -z ${STRIPE_LD_PRELOAD:-} ]] ||
  v_skip "sanitizer build (STRIPE_LD_PRELOAD set): the TCG VM runs in the plain build only"
v_init
VM_TIMEOUT=${VM_TIMEOUT:-200}
VM_SABOTAGE=${VM_SABOTAGE:-none}
VM_MD_PARTS=${VM_MD_PARTS:-all}
case $VM_MD_PARTS in
  all|md) ;;
  *) v_fail "VM_MD_PARTS=$VM_MD_PARTS: all or md" ;;
esac

# The cases.  A: NAME|MDADM OPTIONS|CHUNK|LAYOUT|MEMBER SIZES, where
# LAYOUT is the one expected (1 original, 2 alternate; "-": one zone or
# zone 1 with one member, where md ignores it).  C: NAME|BOOT|MDADM
# OPTIONS|CHUNK|LAYOUT|MEMBER SIZES (mdadm --build in boot BOOT).  B:
# NAME|LAYOUT (config word or "-")|CHUNK|MEMBER SIZES.  Sizes: K and M
# are binary.
A_CASES=(
  "A-a|--chunk=64|64K|-|24M 24M"
  "A-b||512K|1|2M+41*512K 2M+37*512K+20K 2M+13*512K+44K"
  "A-c|--chunk=64 --layout=alternate|64K|2|1M+203*64K 1M+200*64K+4K 1M+197*64K+60K 1M+100*64K+32K"
  "A-d|--chunk=64 --layout=original|64K|1|1M+205*64K+8K 1M+203*64K 1M+67*64K+36K"
  "A-e|--chunk=192|192K|1|1M+61*192K 1M+59*192K+100K 1M+21*192K+8K"
  "A-f|--chunk=128|128K|-|12M 12M+12K 12M+40K 12M+100K"
)
C_CASES=(
  "C-a|create|--chunk=64|64K|-|6M+20K 4M+36K"
  "C-b|assemble|--chunk=64|64K|1|70*64K+8K 69*64K 23*64K+36K"
)
# md's raid0.default_layout on boot "assemble"'s kernel command line: the
# layout md gives C-b (mdadm 4.2's --build passes no raid0 layout to md;
# without it md 6.1 refuses a multi-zone array whose layouts differ).
ASSEMBLE_DEFAULT_LAYOUT=1
B_CASES=(
  "B-alt|alternate|64K|1M+165*64K 1M+163*64K+12K 1M+53*64K+40K"
  "B-orig|original|64K|1M+145*64K+4K 1M+141*64K 1M+47*64K+20K"
  "B-equal|-|64K|16M 16M"
)
# The case whose chunk mdadm may refuse (then recorded and dropped).
MAY_REFUSE=A-e

sz () { local e=$1; e=${e//K/*1024}; e=${e//M/*1048576}; echo $(( e )); }

TIMES=()
t_mark () { T0=$SECONDS; }
t_done () { TIMES+=("$(printf '%-44s %4d s' "$1" $(( SECONDS - T0 )))"); }

# --- packages, kernel, mdadm, initramfs ----------------------------------------
t_mark
v_apt_install qemu-system-x86 busybox-static libnbd-bin python3 ||
  v_log "could not install every package (see above)"
v_vm_require
for t in nbdcopy nbdinfo python3 sha256sum gzip ldd; do
  command -v "$t" >/dev/null || v_fail "$t is not installed"
done
python3 "$MODEL" selftest || v_fail "the md raid0 model fails its own test"
v_vm_kernel
v_vm_deb mdadm || v_skip "cannot download mdadm (no package archive?)"
MDADM=$V_DEB_DIR/sbin/mdadm
[[ -x $MDADM ]] || v_fail "$V_DEB_DIR: no sbin/mdadm (remove it to unpack again)"
v_log "mdadm: $(basename "$V_DEB")"
v_initramfs_begin "$here/md_raid0_guest.sh"
v_initramfs_bin "$MDADM"
v_initramfs_modules virtio_pci virtio_blk md-mod raid0
v_initramfs_pack
t_done "packages, kernel, mdadm, initramfs"

# --- member files, the pattern ---------------------------------------------------
t_mark
# cache=none (O_DIRECT) where the file system has it, else writethrough.
CACHE=none
dd if=/dev/zero of="$V_TMP/odirect" bs=4096 count=1 oflag=direct status=none 2>/dev/null ||
  CACHE=writethrough
rm -f "$V_TMP/odirect"

# Per case: mdadm's options (A, C) and boot (C), the member files (one per line) and
# their disks' serial numbers.
declare -A OPTS_OF=() BOOT_OF=() FILES_OF=() SERIALS_OF=()
# files_of NAME: the case's member files in the array FILES.
files_of () { mapfile -t FILES <<<"${FILES_OF[$1]}"; }
max=0
for spec in "${A_CASES[@]}" "${C_CASES[@]}" "${B_CASES[@]}"; do
  if [[ $spec == A-* ]]; then
    IFS='|' read -r name opts _ _ sizes <<<"$spec"
    OPTS_OF[$name]=$opts
  elif [[ $spec == C-* ]]; then
    IFS='|' read -r name boot opts _ _ sizes <<<"$spec"
    OPTS_OF[$name]=$opts BOOT_OF[$name]=$boot
  else
    IFS='|' read -r name _ _ sizes <<<"$spec"
  fi
  i=0 total=0 files=() serials=()
  for s in $sizes; do
    f=$V_TMP/$name.$i
    truncate -s "$(sz "$s")" "$f" || v_fail "truncate $f"
    files+=("$f"); serials+=("${name//-/}$i")
    total=$(( total + $(sz "$s") ))
    i=$((i + 1))
  done
  FILES_OF[$name]=$(printf '%s\n' "${files[@]}")
  SERIALS_OF[$name]=${serials[*]}
  (( total > max )) && max=$total
done
# The pattern: random bytes from a fixed seed, at least as long as any
# array (the arrays are shorter than their members together).
pattern_size=$(( (max + 1048575) / 1048576 * 1048576 ))
PATTERN=$V_TMP/pattern
python3 -c '
import random, sys
rng = random.Random(20141)
with open(sys.argv[1], "wb") as f:
    left = int(sys.argv[2])
    while left:
        n = min(left, 1 << 20)
        f.write(rng.randbytes(n))
        left -= n
' "$PATTERN" "$pattern_size" || v_fail "writing the pattern"
# pattern_sha BYTES: sha256 of the pattern's first BYTES.
pattern_sha () { head -c "$1" "$PATTERN" | sha256sum | cut -d' ' -f1; }
# files_sha FILE...: one line of the files' sha256s.
files_sha () { sha256sum -- "$@" | cut -d' ' -f1 | tr '\n' ' '; }
t_done "member files and a $(( pattern_size >> 20 )) MiB pattern"
v_log "cache=$CACHE; pattern $pattern_size bytes"

# disk_args NAME...: qemu's options for the cases' member disks, serial
# numbers as in SERIALS_OF, and the pattern disk (read-only).
disk_args ()
{
  local name f s i
  local -a serials
  DISK_ARGS=(-drive "file=$PATTERN,format=raw,if=none,id=pat,readonly=on"
             -device "virtio-blk-pci,drive=pat,serial=pattern")
  for name in "$@"; do
    files_of "$name"; read -r -a serials <<<"${SERIALS_OF[$name]}"
    for i in "${!FILES[@]}"; do
      f=${FILES[i]}; s=${serials[i]}
      DISK_ARGS+=(-drive "file=$f,format=raw,if=none,id=d$s,cache=$CACHE"
                  -device "virtio-blk-pci,drive=d$s,serial=$s")
    done
  done
}

# boot PHASE APPEND JOBS_FILE NAME...: boot with APPEND on the kernel
# command line, /jobs and the cases' disks.
boot ()
{
  local phase=$1 append=$2 jobs=$3 dir=$V_TMP/extra.$1
  shift 3
  mkdir -p "$dir" && cp "$jobs" "$dir/jobs" || v_fail "jobs for $phase"
  VM_BOOT_INITRD=$V_TMP/initrd.$phase.gz
  v_initramfs_extra "$VM_BOOT_INITRD" "$dir"
  disk_args "$@"
  v_vm_boot "$phase" "$append" "${DISK_ARGS[@]}"
  tr -d '\r' <"$V_TMP/console.$phase.log" >"$V_TMP/console.$phase.txt"
}

# result PHASE NAME KEY: a value from the guest's RESULT line ("refused"
# for KEY=refused when it was refused, empty when there is no line).
result ()
{
  local line
  line=$(grep -a "^vm: RESULT case=$2 " "$V_TMP/console.$1.txt" | tail -n 1)
  [[ -n $line ]] || return 0
  if [[ $3 == refused ]]; then
    [[ $line == *" refused" ]] && echo refused
    return 0
  fi
  grep -o " $3=[^ ]*" <<<"$line" | cut -d= -f2
}
# exam PHASE NAME INDEX FIELD: the value of "FIELD : VALUE" in the
# --examine of member INDEX.
exam ()
{
  sed -n "s/^vmx: $2 $3 | *$4 : //p" "$V_TMP/console.$1.txt" | head -n 1
}
# md_show PHASE NAME: the lines of the guest's mdadm output for the log.
md_show ()
{
  sed -n "s/^vmx: $2 mdadm | /   mdadm: /p" "$V_TMP/console.$1.txt"
}

VM_DEADLINE=$(( SECONDS + VM_TIMEOUT ))

# check_array PHASE NAME LAYOUT CHUNK_BYTES [EXPECT_SIZE]: the checks of
# one array the guest reported (see the header).  Sets MD_SIZE, MD_SHA,
# MD_UUID, MD_SUMMARY, MD_CLEAN (true: every check passed); returns 1 when the array was not there.
check_array ()
{
  local phase=$1 name=$2 want_layout=$3 chunk=$4 want_size=${5:-}
  local i n fm lay lay0 doff dsize role uuid members=() model_layout distinct=
  local sys_layout sys_chunk fails=$V_FAILS
  files_of "$name"; n=${#FILES[@]}
  MD_SIZE=$(result "$phase" "$name" size)
  MD_SHA=$(result "$phase" "$name" sha256)
  sys_layout=$(result "$phase" "$name" layout)
  sys_chunk=$(result "$phase" "$name" chunk)
  [[ -n $MD_SIZE && -n $MD_SHA ]] || return 1
  [[ $(pattern_sha "$MD_SIZE") == "$MD_SHA" ]] ||
    v_bad "$name: md read back sha256 $MD_SHA, the pattern's first $MD_SIZE bytes are $(pattern_sha "$MD_SIZE")"
  [[ $sys_chunk == "$chunk" ]] ||
    v_bad "$name: md's chunk is $sys_chunk bytes, expected $chunk"
  [[ -z $want_size || $MD_SIZE == "$want_size" ]] ||
    v_bad "$name: md's array has $MD_SIZE bytes, expected $want_size"
  # For the record: what the superblock says (member 0).
  sed -n "s/^vmx: $name 0 | /   examine $name 0: /p" "$V_TMP/console.$phase.txt" | grep -v ': *$'
  MD_UUID=$(exam "$phase" "$name" 0 'Array UUID')
  fm=$(exam "$phase" "$name" 0 'Feature Map')
  lay0=$(exam "$phase" "$name" 0 'Layout')
  for (( i = 0; i < n; i++ )); do
    [[ $(exam "$phase" "$name" "$i" 'Raid Level') == raid0 ]] ||
      v_bad "$name: member $i: --examine says level '$(exam "$phase" "$name" "$i" 'Raid Level')'"
    [[ $(exam "$phase" "$name" "$i" 'Raid Devices') == "$n" ]] ||
      v_bad "$name: member $i: --examine says $(exam "$phase" "$name" "$i" 'Raid Devices') raid devices, not $n"
    uuid=$(exam "$phase" "$name" "$i" 'Array UUID')
    [[ -n $uuid && $uuid == "$MD_UUID" ]] ||
      v_bad "$name: member $i: array UUID '$uuid', member 0 has '$MD_UUID'"
    role=$(exam "$phase" "$name" "$i" 'Device Role')
    [[ $role == "Active device $i" ]] ||
      v_bad "$name: member $i: role '$role', expected 'Active device $i'"
    [[ $(exam "$phase" "$name" "$i" 'Chunk Size') == "$(( chunk / 1024 ))K" ]] ||
      v_bad "$name: member $i: chunk '$(exam "$phase" "$name" "$i" 'Chunk Size')', expected $(( chunk / 1024 ))K"
    [[ $(exam "$phase" "$name" "$i" 'Feature Map') == "$fm" &&
       $(exam "$phase" "$name" "$i" 'Layout') == "$lay0" ]] ||
      v_bad "$name: member $i: feature map / layout differ from member 0's"
    doff=$(exam "$phase" "$name" "$i" 'Data Offset'); doff=${doff%% *}
    dsize=$(exam "$phase" "$name" "$i" 'Avail Dev Size'); dsize=${dsize%% *}
    [[ $doff =~ ^[0-9]+$ && $dsize =~ ^[0-9]+$ ]] ||
      { v_bad "$name: member $i: no data offset / size in --examine"; return 0; }
    members+=("${FILES[i]}:$(( doff * 512 )):$(( dsize * 512 ))")
  done
  # The layout md was told: Feature Map 0x1000 makes the Layout line count.
  lay=-
  if (( (fm & 0x1000) != 0 )); then
    case $lay0 in
      original) lay=1 ;;
      alternate) lay=2 ;;
      *) v_bad "$name: feature map $fm with layout '$lay0'" ;;
    esac
  fi
  model_layout=$want_layout
  if [[ $want_layout != - ]]; then
    [[ $lay == "$want_layout" ]] ||
      v_bad "$name: the superblocks say layout '$lay0' (feature map $fm), expected $want_layout"
    [[ $sys_layout == "$want_layout" ]] ||
      v_bad "$name: md's sysfs layout is $sys_layout, expected $want_layout"
    # md's own arrays were sized to tell the layouts apart; nbdstripe's
    # (B) depend on the data offset it chose: the model says which.
    [[ $name == A-* ]] && distinct=--require-distinct
  else
    model_layout=2      # one zone (or zone 1 alone): the layouts agree
  fi
  if [[ $VM_SABOTAGE == model-layout && $name == A-d ]]; then
    v_log "SABOTAGE: the model is told A-d is alternate"
    model_layout=2
  fi
  if v_run "model-$phase-$name" python3 "$MODEL" check --chunk "$chunk" \
       --layout "$model_layout" --pattern "$PATTERN" --size "$MD_SIZE" $distinct \
       "${members[@]}"; then
    v_ok "$name: the model finds the pattern on every member"
  else
    v_bad "$name: the member files do not hold what the md raid0 model says (see above)"
  fi
  MD_SUMMARY="$n members, chunk $(( chunk / 1024 ))K, Feature Map $fm, Layout ${lay0:-(none)}, sysfs layout $sys_layout, Data Offset $(exam "$phase" "$name" 0 'Data Offset'), array $MD_SIZE bytes"
  MD_CLEAN=false
  [[ $V_FAILS -eq $fails ]] && MD_CLEAN=true
  return 0
}

# === part 1: md creates, the model checks ===========================================
jobs=$V_TMP/jobs.create
: >"$jobs"
A_NAMES=()
for spec in "${A_CASES[@]}"; do
  IFS='|' read -r name _ <<<"$spec"
  A_NAMES+=("$name")
  printf 'job %s create "%s" %s\n' "$name" "${OPTS_OF[$name]}" "${SERIALS_OF[$name]}" >>"$jobs"
done
# build_jobs BOOT: the C cases of boot BOOT, as jobs (appended to $jobs)
# and in the array BUILT.
build_jobs ()
{
  local spec name
  BUILT=()
  for spec in "${C_CASES[@]}"; do
    IFS='|' read -r name _ <<<"$spec"
    [[ ${BOOT_OF[$name]} == "$1" ]] || continue
    printf 'job %s build "%s" %s\n' "$name" "${OPTS_OF[$name]}" "${SERIALS_OF[$name]}" >>"$jobs"
    BUILT+=("$name")
  done
}
build_jobs create
t_mark
boot create "" "$jobs" "${A_NAMES[@]}" "${BUILT[@]}"
t_done "boot create (${#A_CASES[@]} created, ${#BUILT[@]} built)"

if [[ $VM_SABOTAGE == flip ]]; then
  files_of A-c
  v_log "SABOTAGE: flipping a byte of ${FILES[1]} at 3 MiB"
  printf '\x5a' | dd of="${FILES[1]}" bs=1 seek=$(( 3 << 20 )) conv=notrunc status=none
fi

t_mark
declare -A A_SIZE=() A_SHA=() A_UUID=() A_OK=()
for spec in "${A_CASES[@]}"; do
  IFS='|' read -r name _ chunk layout _ <<<"$spec"
  md_show create "$name"
  if [[ $(result create "$name" refused) == refused ]]; then
    if [[ $name == "$MAY_REFUSE" ]]; then
      v_ok "$name: refused by mdadm/md (${OPTS_OF[$name]}): recorded, case dropped"
    else
      v_bad "$name: mdadm --create or md refused the array"
    fi
    continue
  fi
  check_array create "$name" "$layout" "$(sz "$chunk")" ||
    { v_bad "$name: no RESULT line from the guest"; continue; }
  $MD_CLEAN && v_ok "$name: $MD_SUMMARY"
  A_SIZE[$name]=$MD_SIZE; A_SHA[$name]=$MD_SHA; A_UUID[$name]=$MD_UUID
  A_OK[$name]=1
done
t_done "part 1: checks and the model, A"

# check_build PHASE NAME LAYOUT CHUNK_BYTES: the checks of one array mdadm
# --build made in boot PHASE (see the header).  Sets MD_SIZE, MD_SHA,
# MD_LAYOUT (the layout md used: its sysfs layout when that is 1 or 2,
# else its raid0.default_layout when that is, else empty), MD_SUMMARY,
# MD_CLEAN; returns 1 when the array was not there.
check_build ()
{
  local phase=$1 name=$2 want_layout=$3 chunk=$4 i n members=() distinct=
  local model_layout=2 sys_layout sys_chunk default fails=$V_FAILS
  files_of "$name"; n=${#FILES[@]}
  MD_SIZE=$(result "$phase" "$name" size)
  MD_SHA=$(result "$phase" "$name" sha256)
  sys_layout=$(result "$phase" "$name" layout)
  sys_chunk=$(result "$phase" "$name" chunk)
  default=$(result "$phase" "$name" default_layout)
  [[ -n $MD_SIZE && -n $MD_SHA ]] || return 1
  MD_LAYOUT=
  case $sys_layout/$default in
    [12]/*) MD_LAYOUT=$sys_layout ;;
    */[12]) MD_LAYOUT=$default ;;
  esac
  [[ $(pattern_sha "$MD_SIZE") == "$MD_SHA" ]] ||
    v_bad "$name: md read back sha256 $MD_SHA, the pattern's first $MD_SIZE bytes are $(pattern_sha "$MD_SIZE")"
  [[ $sys_chunk == "$chunk" ]] ||
    v_bad "$name: md's chunk is $sys_chunk bytes, expected $chunk"
  for (( i = 0; i < n; i++ )); do
    grep -q -a "^vmx: $name $i | mdadm: No md superblock detected" "$V_TMP/console.$phase.txt" ||
      v_bad "$name: member $i: mdadm --examine does not say 'No md superblock detected'"
    members+=("${FILES[i]}:0:$(stat -c %s -- "${FILES[i]}")")
  done
  if [[ $want_layout != - ]]; then
    [[ $MD_LAYOUT == "$want_layout" ]] ||
      v_bad "$name: md used layout '$MD_LAYOUT' (sysfs $sys_layout, raid0.default_layout $default), expected $want_layout"
    model_layout=$want_layout distinct=--require-distinct
  fi
  if v_run "model-$phase-$name" python3 "$MODEL" check --chunk "$chunk" \
       --layout "$model_layout" --pattern "$PATTERN" --size "$MD_SIZE" $distinct \
       "${members[@]}"; then
    v_ok "$name: the model finds the pattern on every member, from byte 0"
  else
    v_bad "$name: the member files do not hold what the md raid0 model says (see above)"
  fi
  MD_SUMMARY="$n members, no superblock, chunk $(( chunk / 1024 ))K, sysfs layout $sys_layout, raid0.default_layout $default, array $MD_SIZE bytes"
  MD_CLEAN=false
  [[ $V_FAILS -eq $fails ]] && MD_CLEAN=true
  return 0
}

# check_built PHASE: check_build for each C case of boot PHASE.
declare -A C_SIZE=() C_SHA=() C_LAYOUT=() C_OK=()
check_built ()
{
  local spec name chunk layout
  for spec in "${C_CASES[@]}"; do
    IFS='|' read -r name _ _ chunk layout _ <<<"$spec"
    [[ ${BOOT_OF[$name]} == "$1" ]] || continue
    md_show "$1" "$name"
    if [[ $(result "$1" "$name" refused) == refused ]]; then
      v_bad "$name: mdadm --build or md refused the array"
      continue
    fi
    check_build "$1" "$name" "$layout" "$(sz "$chunk")" ||
      { v_bad "$name: no RESULT line from the guest"; continue; }
    $MD_CLEAN && v_ok "$name: $MD_SUMMARY"
    C_SIZE[$name]=$MD_SIZE C_SHA[$name]=$MD_SHA C_LAYOUT[$name]=$MD_LAYOUT
    C_OK[$name]=1
  done
}
t_mark
check_built create
t_done "part 1: checks and the model, C in boot create"

# === part 2: nbdstripe serves md's arrays (A) =========================================
# serve_group CONF STEM: replace CONF's serve and health groups (if any)
# with ours: a Unix socket, pidfile and status file under $V_TMP.
serve_group ()
{
  python3 - "$1" "$V_TMP/$2" <<'EOF' || v_fail "editing $1"
import re, sys
path, stem = sys.argv[1:]
text = open(path).read()

def drop_group(text, key):
    """Remove a top-level `key = { ... };` (braces matched, strings skipped)."""
    m = re.search(r"(?m)^[ \t]*%s[ \t]*[=:][ \t]*\{" % key, text)
    if not m:
        return text
    i, depth, in_str = m.end(), 1, False
    while depth:
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        i += 1
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] in ";,":
        i += 1
    return text[:m.start()] + text[i:]

for key in ("serve", "health"):
    text = drop_group(text, key)
text = text.rstrip("\n") + '\nserve = { socket = "%s.sock"; pidfile = "%s.pid"; };\n' \
    'health = { status_file = "%s.status.json"; };\n' % (stem, stem, stem)
open(path, "w").write(text)
EOF
}

# export_of STEM: "SIZE SHA256" of the whole export on $V_TMP/STEM.sock.
export_of ()
{
  local uri="nbd+unix:///?socket=$V_TMP/$1.sock" size sha
  size=$(nbdinfo --size "$uri") || return 1
  sha=$(nbdcopy "$uri" - | sha256sum | cut -d' ' -f1)
  [[ ${PIPESTATUS[0]} -eq 0 && -n $sha ]] || return 1
  echo "$size $sha"
}

if [[ $VM_MD_PARTS == all ]]; then
  t_mark
  for spec in "${A_CASES[@]}"; do
    IFS='|' read -r name _ <<<"$spec"
    [[ -n ${A_OK[$name]:-} ]] || continue
    files_of "$name"; files=("${FILES[@]}")
    conf=$V_TMP/$name.conf
    before=$(files_sha "${files[@]}")
    if ! v_run "import-$name" "$NBDSTRIPE" import --out "$conf" --name "md${name#A-}" "${files[@]}"; then
      v_bad "$name: nbdstripe import failed"
      continue
    fi
    [[ $(files_sha "${files[@]}") == "$before" ]] ||
      v_bad "$name: nbdstripe import changed a member"
    serve_group "$conf" "$name"
    v_run "check-$name" "$NBDSTRIPE" check "$conf" ||
      v_bad "$name: nbdstripe check of the imported config failed"
    if v_run "inspect-$name" "$NBDSTRIPE" inspect "${files[0]}"; then
      # As mdadm prints it, or as 8-4-4-4-12.
      u=${A_UUID[$name]//:/}
      u="${u:0:8}-${u:8:4}-${u:12:4}-${u:16:4}-${u:20}"
      grep -q -i -F -e "${A_UUID[$name]}" -e "$u" "$V_TMP/inspect-$name.log" ||
        v_bad "$name: nbdstripe inspect does not show the array UUID ${A_UUID[$name]}"
    else
      v_bad "$name: nbdstripe inspect ${files[0]} failed"
    fi
    if ! v_serve "$conf" "$V_TMP/$name.pid"; then
      v_bad "$name: nbdstripe serve failed"
      continue
    fi
    got=$(export_of "$name") || v_bad "$name: reading the export failed"
    v_stop "$V_SERVER_PID"
    read -r esize esha <<<"$got"
    if [[ $esize == "${A_SIZE[$name]}" && $esha == "${A_SHA[$name]}" ]]; then
      v_ok "$name: nbdstripe serves md's array byte for byte ($esize bytes, sha256 $esha)"
    else
      v_bad "$name: nbdstripe serves $esize bytes, sha256 $esha; md had ${A_SIZE[$name]} bytes, sha256 ${A_SHA[$name]}"
    fi
    [[ $(files_sha "${files[@]}") == "$before" ]] ||
      v_bad "$name: serving (read only) changed a member"
  done
  t_done "part 2: nbdstripe import/check/inspect/serve, A"
fi

# === nbdstripe creates (B), then md assembles ===========================================
jobs=$V_TMP/jobs.assemble
: >"$jobs"
disks=()
declare -A B_SIZE=()
if [[ $VM_MD_PARTS == all ]]; then
  t_mark
  for spec in "${B_CASES[@]}"; do
    IFS='|' read -r name layout chunk _ <<<"$spec"
    files_of "$name"; files=("${FILES[@]}")
    conf=$V_TMP/$name.conf
    {
      printf 'name = "md%s";\nchunk = "%s";\nmembers = [' "${name#B-}" "$chunk"
      sep=""
      for f in "${files[@]}"; do printf '%s\n  "%s"' "$sep" "$f"; sep=","; done
      printf ' ];\nmetadata = "md";\n'
      [[ $layout == - ]] || printf 'layout = "%s";\n' "$layout"
    } >"$conf"
    serve_group "$conf" "$name"
    v_run "create-$name" "$NBDSTRIPE" create "$conf" ||
      { v_bad "$name: nbdstripe create (metadata md) failed"; continue; }
    v_serve "$conf" "$V_TMP/$name.pid" ||
      { v_bad "$name: nbdstripe serve failed"; continue; }
    uri="nbd+unix:///?socket=$V_TMP/$name.sock"
    esize=$(nbdinfo --size "$uri") || { v_bad "$name: nbdinfo --size"; v_stop "$V_SERVER_PID"; continue; }
    head -c "$esize" "$PATTERN" >"$V_TMP/prefix"
    v_run "write-$name" nbdcopy --flush "$V_TMP/prefix" "$uri" ||
      v_bad "$name: nbdcopy of the pattern into the export failed"
    rm -f "$V_TMP/prefix"
    v_stop "$V_SERVER_PID"
    B_SIZE[$name]=$esize
    v_log "$name: nbdstripe export of $esize bytes, pattern written"
    printf 'job %s assemble "" %s\n' "$name" "${SERIALS_OF[$name]}" >>"$jobs"
    disks+=("$name")
  done
  t_done "part 2: nbdstripe create/serve/write, B"
fi
# md's own array again, from its superblocks alone (both parts).
if [[ -n ${A_OK[A-d]:-} ]]; then
  printf 'job %s assemble "" %s\n' A-d "${SERIALS_OF[A-d]}" >>"$jobs"
  disks+=(A-d)
fi

build_jobs assemble
if [[ $(( ${#disks[@]} + ${#BUILT[@]} )) -gt 0 ]]; then
  declare -A BEFORE=()
  for name in "${disks[@]}"; do files_of "$name"; BEFORE[$name]=$(files_sha "${FILES[@]}"); done
  t_mark
  boot assemble "raid0.default_layout=$ASSEMBLE_DEFAULT_LAYOUT" "$jobs" "${disks[@]}" "${BUILT[@]}"
  t_done "boot assemble (${#disks[@]} assembled, ${#BUILT[@]} built)"
  t_mark
  check_built assemble
  for name in "${disks[@]}"; do
    md_show assemble "$name"
    # For the record: md 6.1 rewrites no superblock of a raid0 for an
    # assemble, reads and a stop (Events stay 0).
    files_of "$name"
    if [[ $(files_sha "${FILES[@]}") == "${BEFORE[$name]}" ]]; then
      v_log "$name: md's assemble, reads and stop left the members as they were"
    else
      v_log "$name: md's assemble, reads and stop changed the members (superblocks rewritten?)"
    fi
    if [[ -z $(result assemble "$name" size) ]]; then
      v_bad "$name: mdadm --assemble or md refused the array"
      continue
    fi
    if [[ $name == A-d ]]; then
      check_array assemble A-d 1 65536 "${A_SIZE[A-d]}"
      $MD_CLEAN && v_ok "A-d: md re-assembles its array: $MD_SUMMARY"
      continue
    fi
    IFS='|' read -r _ layout chunk _ <<<"$(printf '%s\n' "${B_CASES[@]}" | grep "^$name|")"
    case $layout in original) l=1 ;; alternate) l=2 ;; *) l=- ;; esac
    check_array assemble "$name" "$l" "$(sz "$chunk")" "${B_SIZE[$name]}"
    $MD_CLEAN && v_ok "$name: md assembles nbdstripe's volume: $MD_SUMMARY"
    # And back: nbdstripe serves the volume md has used.
    if v_serve "$V_TMP/$name.conf" "$V_TMP/$name.pid"; then
      got=$(export_of "$name") || v_bad "$name: reading the export failed"
      v_stop "$V_SERVER_PID"
      want="${B_SIZE[$name]} $(pattern_sha "${B_SIZE[$name]}")"
      if [[ $got == "$want" ]]; then
        v_ok "$name: after md, nbdstripe serves the volume again, byte for byte"
      else
        v_bad "$name: after md, nbdstripe serves '$got', expected '$want'"
      fi
    else
      v_bad "$name: nbdstripe serve failed after md assembled the volume"
    fi
  done
  t_done "checks and the model, C, B and A-d again"
fi

# serve_none NAME STEM DATA_OFFSET FILE...: a config with metadata =
# "none" for the --build array NAME over FILEs (DATA_OFFSET "-": the key
# left out) with the layout md used (check_build's MD_LAYOUT; left out
# when md had none to choose); `nbdstripe check`, `nbdstripe serve`.
# The server keeps running (its stem in SERVING, its pid in PID_OF) for
# served_none.
declare -A PID_OF=() CASE_OF=() DESC_OF=() BEFORE_OF=() MEMBERS_OF=()
SERVING=()
serve_none ()
{
  local name=$1 stem=$2 doff=$3 conf=$V_TMP/$2.conf layout='' f sep="" chunk desc
  shift 3
  IFS='|' read -r _ _ _ chunk _ <<<"$(printf '%s\n' "${C_CASES[@]}" | grep "^$name|")"
  case ${C_LAYOUT[$name]} in
    1) layout=original ;;
    2) layout=alternate ;;
  esac
  if [[ $VM_SABOTAGE == build-layout && -n $layout ]]; then
    v_log "SABOTAGE: $stem: the config says the other layout than md's"
    if [[ $layout == original ]]; then layout=alternate; else layout=original; fi
  fi
  if [[ $VM_SABOTAGE == build-offset && $doff != - ]]; then
    v_log "SABOTAGE: $stem: the config leaves data_offset out"
    doff=-
  fi
  {
    printf 'name = "%s";\nchunk = "%s";\nmembers = [' "$stem" "$chunk"
    for f in "$@"; do printf '%s\n  "%s"' "$sep" "$f"; sep=","; done
    printf ' ];\nmetadata = "none";\n'
    [[ -z $layout ]] || printf 'layout = "%s";\n' "$layout"
    [[ $doff == - ]] || printf 'data_offset = "%s";\n' "$doff"
  } >"$conf"
  serve_group "$conf" "$stem"
  sed 's/^/   conf: /' "$conf"
  desc="metadata none${layout:+, layout $layout}"
  [[ $doff == - ]] || desc+=", data_offset $doff"
  CASE_OF[$stem]=$name DESC_OF[$stem]=$desc
  MEMBERS_OF[$stem]=$(printf '%s\n' "$@") BEFORE_OF[$stem]=$(files_sha "$@")
  v_run "check-$stem" "$NBDSTRIPE" check "$conf" ||
    v_bad "$stem: nbdstripe check failed"
  if v_serve "$conf" "$V_TMP/$stem.pid"; then
    PID_OF[$stem]=$V_SERVER_PID
    SERVING+=("$stem")
  else
    v_bad "$stem: nbdstripe serve failed"
  fi
}

# served_none: read every export serve_none started, stop the servers
# (together), then compare with md's size and sha256; the members must be
# as before (read-only use).
served_none ()
{
  local stem name pids=() esize esha files
  declare -A got=()
  for stem in "${SERVING[@]}"; do
    got[$stem]=$(export_of "$stem") || v_bad "$stem: reading the export failed"
    pids+=("${PID_OF[$stem]}")
  done
  [[ ${#pids[@]} -eq 0 ]] || v_stop "${pids[@]}"
  for stem in "${SERVING[@]}"; do
    name=${CASE_OF[$stem]}
    read -r esize esha <<<"${got[$stem]}"
    if [[ $esize == "${C_SIZE[$name]}" && $esha == "${C_SHA[$name]}" ]]; then
      v_ok "$stem: nbdstripe (${DESC_OF[$stem]}) serves md's --build array byte for byte ($esize bytes)"
    else
      v_bad "$stem: nbdstripe (${DESC_OF[$stem]}) serves $esize bytes, sha256 $esha; md had ${C_SIZE[$name]} bytes, sha256 ${C_SHA[$name]}"
    fi
    mapfile -t files <<<"${MEMBERS_OF[$stem]}"
    [[ $(files_sha "${files[@]}") == "${BEFORE_OF[$stem]}" ]] ||
      v_bad "$stem: serving (read only) changed a member"
  done
}

# === part 2: nbdstripe serves md's --build arrays (C) =====================================
if [[ $VM_MD_PARTS == all ]]; then
  t_mark
  for spec in "${C_CASES[@]}"; do
    IFS='|' read -r name _ <<<"$spec"
    [[ -n ${C_OK[$name]:-} ]] || continue
    files_of "$name"
    serve_none "$name" "$name" - "${FILES[@]}"
  done
  # C-b's bytes 1 MiB further in, behind 1 MiB of something else (the
  # pattern's last MiB), as on members that keep a partition table or
  # anything else in front: data_offset = "1M".
  name=C-b
  if [[ -n ${C_OK[$name]:-} ]]; then
    files_of "$name"; shifted=()
    for f in "${FILES[@]}"; do
      { tail -c 1048576 "$PATTERN"; cat "$f"; } >"$f.off" || v_fail "writing $f.off"
      shifted+=("$f.off")
    done
    serve_none "$name" "$name-off" 1M "${shifted[@]}"
  fi
  served_none
  t_done "part 2: nbdstripe serves C (metadata none)"
fi

[[ $VM_MD_PARTS == all ]] ||
  v_log "VM_MD_PARTS=md: the nbdstripe steps (import, serve, create with metadata md, metadata none) were not run"
v_log "timings:"
printf '   %s\n' "${TIMES[@]}"
v_done
