#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# metadata = "md": arrays are created as md creates them, imported and
# assembled from their md superblocks, and refused when they are wrong --
# all checked against oracles that share no code with nbdstripe:
# tests/lib/md_sb.py (md v1.x superblocks: fields at md_p.h's offsets,
# md's checksum) and tests/lib/md_raid0_model.py (md raid0's zones, both
# layouts, md's size rule).
#
#   create   A: 4 members of mixed sizes (chunk 64K, layout "original"),
#            B: 3 equal members.  Every superblock field is what md and
#            mdadm expect (read with md_sb.py, checksum recomputed there);
#            create writes the 4 KiB at 4096 and nothing else (members
#            filled with random bytes first) -- except that an nbdstripe
#            header at 0, an md 1.1 superblock at 0 and an md 1.0 one near
#            the end, planted on B's members, are zeroed (create --force).
#   data     A and B served, a random pattern written with nbdcopy: every
#            member byte is where md's layout puts it (the model), the
#            volume size is md's; the other layout would not match.  An md
#            superblock image stored on B where a member would keep a 1.0
#            superblock (valid but for super_offset, or corrupt) is data:
#            md and mdadm do not take it for a superblock, nor may check.
#   import   from shuffled members: a config in role order with the
#            array's uuid and layout, nothing written to any member; it
#            checks and serves the same bytes; --out refuses an existing
#            file unless --force; members of two arrays refused naming both;
#            layout not recorded: refused asking for --layout, right with it.
#   refused  one fault at a time, by `check`, `serve` and `nbdkit PLUGIN
#            config=` (exit status 1, the member and the fault named,
#            every file byte-identical before and after): wrong order (the
#            right order given), a member of another md array, a stale
#            member (one event behind), level 5, feature 0x1 / 0x4 / 0x8,
#            a corrupt checksum, the config's uuid, chunk or layout
#            contradicting the superblocks, an nbdstripe-header member;
#            and with feature 0x1000 cleared on the multi-zone array A:
#            refused until the config gives the layout; the right one
#            serves the pattern, the wrong one serves other bytes (what
#            the model predicts for that layout).
#   inspect  the md superblock for people (mdadm's UUID form, role, chunk,
#            layout) and --json (kind "md").
#   none     metadata = "none" with data_offset and layout (an mdadm
#            --build array): members written by the model, served, compared;
#            the other layout serves other bytes.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit nbdcopy nbdinfo sha256sum cmp
LIB=$(cd "$(dirname "$0")/../lib" && pwd) || d_fail "tests/lib"
if [[ -x /usr/bin/python3 ]]; then PY=/usr/bin/python3; else PY=$(command -v python3) || d_skip "python3 is not installed"; fi
sb ()    { "$PY" "$LIB/md_sb.py" "$@"; }
model () { "$PY" "$LIB/md_raid0_model.py" "$@"; }
sb selftest >/dev/null || d_fail "md_sb.py selftest"
model selftest >/dev/null || d_fail "md_raid0_model.py selftest"
T=$(pwd -P)                     # import writes absolute, resolved paths

# mdimg.py read|write CHUNK LAYOUT IMAGE MEMBER...: an array image from
# member files, or a pattern into them, as md_raid0_model.py lays it out
# (MEMBER = PATH:DATA_OFFSET:DATA_SIZE, role order; the array is md's
# size).  mdimg.py where CHUNK LAYOUT I:BYTE MEMBER...: the array offset
# that lands at byte BYTE of member I.
cat >"$T/mdimg.py" <<'EOF'
import os, sys
sys.path.insert(0, sys.argv[1])
import md_raid0_model as m
cmd, chunk, layout, image = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
members = [(p, int(o), int(s)) for p, o, s in (a.rsplit(":", 2) for a in sys.argv[6:])]
csec = chunk // m.SECTOR
zones = m.build_zones([s // chunk for _, _, s in members])
size = m.md_size_sectors([s // m.SECTOR for _, _, s in members], csec) * m.SECTOR
if cmd == "where":
    dev, at = map(int, image.split(":"))
    for k in range(size // chunk):
        d, mchunk = m.locate(zones, layout, k)
        lo = members[d][1] + mchunk * chunk
        if d == dev and lo <= at < lo + chunk:
            print(k * chunk + at - lo)
            sys.exit(0)
    sys.exit("member %d byte %d holds no array data" % (dev, at))
fds = [os.open(p, os.O_RDWR) for p, _, _ in members]
with open(image, "rb" if cmd == "write" else "wb") as img:
    for k in range(size // chunk):
        dev, mchunk = m.locate(zones, layout, k)
        at = members[dev][1] + mchunk * chunk
        if cmd == "write":
            img.seek(k * chunk)
            os.pwrite(fds[dev], img.read(chunk), at)
        else:
            img.write(os.pread(fds[dev], chunk, at))
EOF
mdimg () { "$PY" "$T/mdimg.py" "$LIB" "$@"; }

K=1024 M=$((1024 * 1024)) C=$((64 * 1024))
sock=$T/vol.sock
pidfile=$T/vol.pid
uri="nbd+unix:///?socket=$sock"
serve="socket = \"$sock\"; pidfile = \"$pidfile\";"

# mdconf FILE NAME CHUNK LAYOUT MEMBER...: a metadata = "md" config
# (LAYOUT "" for none) serving on $sock.
mdconf ()
{
  local file=$1 name=$2 chunk=$3 layout=$4
  shift 4
  d_conf "$file" "$name" "$chunk" "$serve" "$@"
  echo 'metadata = "md";' >>"$file"
  [[ -z $layout ]] || echo "layout = \"$layout\";" >>"$file"
}

# expect_sb NAME FILE FIELD=VALUE...: md_sb.py reads each field as given.
expect_sb ()
{
  local name=$1 file=$2 fields=() want=() got=() i r=0
  shift 2
  for i in "$@"; do fields+=("${i%%=*}"); want+=("${i#*=}"); done
  mapfile -t got < <(sb "$file" get "${fields[@]}")
  for i in "${!fields[@]}"; do
    if [[ ${got[i]:-<none>} != "${want[i]}" ]]; then
      d_bad "$name: $file: superblock field ${fields[i]} is ${got[i]:-<unreadable>}, expected ${want[i]}"
      r=1
    fi
  done
  return "$r"
}

# spec FILE...: PATH:DATA_OFFSET:DATA_SIZE in bytes, from each superblock
# as md_sb.py reads it.
spec ()
{
  local f v
  for f in "$@"; do
    mapfile -t v < <(sb "$f" get data_offset data_size)
    printf '%s:%d:%d\n' "$f" $((v[0] * 512)) $((v[1] * 512))
  done
}

# what_md_expects NAME FEATURE LAYOUT(""=any) FILE...: the superblocks
# create wrote, field by field, as mdadm --create --level=0 -e1.2 writes
# them (md-research 1.9) and md requires (1.2-1.7); then across members.
what_md_expects ()
{
  local name=$1 feature=$2 layout=$3 n i f roles sz uuids=() dus=() ct=() cts=() lay=()
  shift 3
  n=$#
  roles=$(seq -s, 0 $((n - 1))),$(printf '65535,%.0s' $(seq $((128 - n))))
  roles=${roles%,}
  i=0
  for f in "$@"; do
    sz=$(stat -c %s "$f")
    [[ -n $layout ]] && lay=(layout="$layout") || lay=()
    expect_sb "$name" "$f" magic=$((0xa92b4efc)) major_version=1 \
      feature_map="$feature" pad0=0 level=0 "${lay[@]}" size=0 chunksize=$((C / 512)) \
      raid_disks="$n" bitmap_offset=0 new_level=0 reshape_position=0 \
      delta_disks=0 new_layout=0 new_chunk=0 new_offset=0 \
      data_offset=$((M / 512)) data_size=$(((sz - M) / 512)) super_offset=8 \
      recovery_offset=0 dev_number="$i" role="$i" devflags=0 bblog_shift=0 \
      bblog_size=0 bblog_offset=0 events=0 resync_offset=18446744073709551615 \
      max_dev=128 pad3="$(printf '0%.0s' {1..64})" set_name=vol0 \
      dev_roles="$roles" location=4096 minor=2 csum_ok=1 &&
      d_ok "$name: member $i: every superblock field as md expects, checksum right"
    # The rest of the 4 KiB block (past 256 + 2 * max_dev bytes) is zero.
    [[ $(tail -c +$((4096 + 512 + 1)) "$f" | head -c 3584 | tr -d '\0' | wc -c) -eq 0 ]] ||
      d_bad "$name: $f: bytes 4608..8191 are not zero"
    sb "$f" check || d_bad "$name: $f: md_sb.py check"
    uuids+=("$(sb "$f" get set_uuid)")
    dus+=("$(sb "$f" get device_uuid)")
    mapfile -t ct < <(sb "$f" get ctime utime)
    [[ ${ct[0]} -eq ${ct[1]} && ${ct[0]} -ge $t0 && ${ct[0]} -le $t1 ]] ||
      d_bad "$name: $f: ctime ${ct[0]}, utime ${ct[1]}: expected both the creation time ($t0..$t1)"
    cts+=("${ct[0]}")
    i=$((i + 1))
  done
  [[ $(printf '%s\n' "${uuids[@]}" | sort -u | wc -l) -eq 1 ]] ||
    d_bad "$name: set_uuid differs between members: ${uuids[*]}"
  [[ $(printf '%s\n' "${dus[@]}" | sort -u | wc -l) -eq $n ]] ||
    d_bad "$name: device_uuid not distinct: ${dus[*]}"
  [[ $(printf '%s\n' "${cts[@]}" | sort -u | wc -l) -eq 1 ]] ||
    d_bad "$name: ctime differs between members"
}

# only_changed NAME BEFORE AFTER START LEN: the files are equal but for
# [START, START + LEN) (one range; the length equal too).
only_changed ()
{
  local name=$1 a=$2 b=$3 start=$4 len=$5
  [[ $(stat -c %s "$a") -eq $(stat -c %s "$b") ]] || { d_bad "$name: $b changed size"; return 1; }
  cmp -s -n "$start" "$a" "$b" || { d_bad "$name: $b: bytes before $start changed"; return 1; }
  cmp -s -i $((start + len)) "$a" "$b" || { d_bad "$name: $b: bytes from $((start + len)) on changed"; return 1; }
  return 0
}

# ---------------------------------------------------------------------------
d_log "create A: 4 members of mixed sizes filled with random bytes, chunk 64K, layout original"
sizes=($((4 * M)) $((5 * M + 5000)) $((6 * M + 10000)) $((3 * M + 12345)))
m=("$T/m0" "$T/m1" "$T/m2" "$T/m3")
for i in 0 1 2 3; do
  d_random "${m[i]}" "${sizes[i]}"
  cp "${m[i]}" "$T/before$i"
done
mdconf good.conf vol0 64K original "${m[@]}"
t0=$(date +%s)
d_run create.A d_ns create good.conf
t1=$(date +%s)
[[ $D_RC -eq 0 ]] || d_fail "create of A failed"
what_md_expects create.A $((0x1000)) 1 "${m[@]}"
for i in 0 1 2 3; do
  only_changed create.A "$T/before$i" "${m[i]}" 4096 4096 &&
    d_ok "create.A: member $i: only the 4 KiB at 4096 written"
  rm -f "$T/before$i"
done
uuidA=$(sb "${m[0]}" get set_uuid)

d_log "create B: 3 equal members; an nbdstripe header, an md 1.1 and an md 1.0 superblock planted on them"
# A second md array of 4 members (the foreign one) and an nbdstripe
# header volume, created first: their metadata is planted on B.
o=("$T/o0" "$T/o1" "$T/o2" "$T/o3")
for i in 0 1 2 3; do truncate -s "${sizes[i]}" "${o[i]}"; done
mdconf other.conf other 64K original "${o[@]}"
d_run create.other d_ns create other.conf
[[ $D_RC -eq 0 ]] || d_fail "create other.conf"
uuidO=$(sb "${o[0]}" get set_uuid)
h=("$T/h0" "$T/h1")
for i in 0 1; do truncate -s $((3 * M)) "${h[i]}"; done
d_conf header.conf hvol 64K "" "${h[@]}"
d_run create.header d_ns create header.conf
[[ $D_RC -eq 0 ]] || d_fail "create header.conf"

b=("$T/b0" "$T/b1" "$T/b2")
for i in 0 1 2; do d_random "${b[i]}" $((3 * M)); done
# b0: the nbdstripe header of h0 at 0.  b1: o0's superblock moved to 0 as
# a 1.1 one.  b2: o0's superblock near the end as a 1.0 one.
dd if="${h[0]}" of="${b[0]}" bs=4096 count=1 conv=notrunc status=none
dd if="${o[0]}" of="${b[1]}" bs=4096 skip=1 count=1 conv=notrunc status=none
sb --minor 1 "${b[1]}" set super_offset=0
tail_at=$((((3 * M / 512 - 16) & ~7) * 512))
dd if="${o[0]}" of="${b[2]}" bs=4096 skip=1 seek=$((tail_at / 4096)) count=1 conv=notrunc status=none
sb --minor 0 "${b[2]}" set super_offset=$((tail_at / 512))
sb --minor 1 "${b[1]}" check && sb --minor 0 "${b[2]}" check || d_fail "planting md superblocks on B"
for i in 0 1 2; do cp "${b[i]}" "$T/before$i"; done
mdconf b.conf vol0 64K "" "${b[@]}"
d_run create.B.unforced d_ns create b.conf
d_expect_fail create.B.unforced
t0=$(date +%s)
d_run create.B d_ns create --force b.conf
t1=$(date +%s)
[[ $D_RC -eq 0 ]] || d_fail "create --force of B failed"
what_md_expects create.B 0 "" "${b[@]}"
d_log "create.B: layout field $(sb "${b[0]}" get layout) with feature 0x1000 clear (md ignores it)"
# b0 and b1: their first 8 KiB rewritten (zeros, then the superblock);
# b2: the 4 KiB at 4096 and the 1.0 superblock's 4 KiB (now zeros).
zeros=$(head -c 4096 /dev/zero | sha256sum)
for i in 0 1; do
  if only_changed create.B "$T/before$i" "${b[i]}" 0 8192; then
    if [[ $(head -c 4096 "${b[i]}" | sha256sum) == "$zeros" ]]; then
      d_ok "create.B: member $i: its old metadata at 0 zeroed, nothing else but the superblock written"
    else
      d_bad "create.B: member $i: its first 4 KiB (old metadata) not zeroed"
    fi
  fi
done
if cmp -s -n 4096 "$T/before2" "${b[2]}" &&
   cmp -s -i 8192 -n $((tail_at - 8192)) "$T/before2" "${b[2]}" &&
   cmp -s -i $((tail_at + 4096)) "$T/before2" "${b[2]}" &&
   [[ $(tail -c +$((tail_at + 1)) "${b[2]}" | head -c 4096 | sha256sum) == "$zeros" ]]; then
  d_ok "create.B: member 2: the md 1.0 superblock near the end zeroed, nothing else but the superblock written"
else
  d_bad "create.B: member 2: expected only the 4 KiB at 4096 and the 1.0 superblock at $tail_at changed (zeroed)"
fi
rm -f "$T"/before?
! sb --minor 1 "${b[1]}" check 2>/dev/null || d_bad "create.B: b1 still has a 1.1 superblock"
! sb --minor 0 "${b[2]}" check 2>/dev/null || d_bad "create.B: b2 still has a 1.0 superblock"

# ---------------------------------------------------------------------------
d_log "data: serve A and B, write a random pattern, find every byte where md's layout puts it"
# The model wants never-written bytes past each member's whole chunks to
# be zero: A's members hold random bytes there since before create.
for f in "${m[@]}"; do
  s=$(stat -c %s "$f")
  truncate -s $((M + (s - M) / C * C)) "$f" && truncate -s "$s" "$f"
done
d_run check.good d_ns check good.conf
[[ $D_RC -eq 0 ]] || d_fail "check of A failed"
d_serve serve.A good.conf "$pidfile" || d_fail "serve of A failed"
size=$(d_nbd_size "$uri") || d_fail "nbdinfo --size"
mapfile -t specA < <(spec "${m[@]}")
want=$(model size "$C" "${specA[@]##*:}")
[[ $size -eq $want ]] && d_ok "A: volume size $size, md's" || d_bad "A: volume size $size, md says $want"
d_random src "$size"
nbdcopy src "$uri" || d_fail "nbdcopy src -> A"
nbdcopy "$uri" out || d_fail "nbdcopy A -> out"
d_stop "$D_SERVER_PID"
cmp -s src out && d_ok "A: the pattern reads back" || d_bad "A: the pattern read back differs"
d_run model.A model check --chunk "$C" --layout 1 --pattern src --size "$size" --require-distinct "${specA[@]}"
[[ $D_RC -eq 0 ]] && d_ok "A: every member byte where md's original layout puts it (and the alternate would not)" ||
  d_bad "A: the members do not hold the pattern where md's original layout puts it"
pristine=$(d_sums "${m[@]}")

d_serve serve.B b.conf "$pidfile" || d_fail "serve of B failed"
sizeB=$(d_nbd_size "$uri") || d_fail "nbdinfo --size B"
d_random srcB "$sizeB"
nbdcopy srcB "$uri" || d_fail "nbdcopy srcB -> B"
d_stop "$D_SERVER_PID"
mapfile -t specB < <(spec "${b[@]}")
d_run model.B model check --chunk "$C" --layout 1 --pattern srcB --size "$sizeB" "${specB[@]}"
[[ $D_RC -eq 0 ]] && d_ok "B: every member byte where md puts it" || d_bad "B: the members do not hold the pattern where md puts it"

d_log "data: an md superblock stored on B where member 1 would keep a 1.0 one is data, not metadata"
# md reads a member's superblock where its version says (mdadm, not told
# the version, takes the valid ones: super_offset must be where it was
# read, the checksum right).  B's members are 1.2 members whose data
# area covers the 1.0 location; what the array stores there -- here
# another array's superblock, as a disk image on the array would hold
# it, then the same with a byte flipped -- changes nothing.
at10=$(( ((3 * M / 512 - 16) & ~7) * 512 ))
x=$(mdimg where "$C" 1 "1:$at10" "${specB[@]}") || d_fail "mdimg where"
cp "${b[1]}" "$T/b1.saved"
for variant in copy corrupt; do
  cp srcB srcB2
  dd if="${o[0]}" of=srcB2 bs=4096 skip=1 seek=$((x / 4096)) count=1 conv=notrunc status=none
  [[ $variant == copy ]] || printf '\xff' | dd of=srcB2 bs=1 seek=$((x + 100)) conv=notrunc status=none
  d_serve serve.B.$variant b.conf "$pidfile" || d_fail "serve of B failed"
  nbdcopy srcB2 "$uri" || d_fail "nbdcopy srcB2 -> B"
  d_stop "$D_SERVER_PID"
  [[ $(sb --minor 0 "${b[1]}" get magic) -eq $((0xa92b4efc)) ]] ||
    d_fail "B: the superblock image did not land at member 1's 1.0 location"
  d_run check.B.$variant d_ns check b.conf
  [[ $D_RC -eq 0 ]] && d_ok "B: an md superblock image ($variant) in the data area at the 1.0 location is data" ||
    d_bad "B: check refuses the array because its data area holds an md superblock image ($variant) at member 1's 1.0 location, which md and mdadm do not read as one (super_offset 8, read at $at10): plugin/meta/assemble_md.c md_read_member"
  # (Put back directly: while refused, B cannot be served to undo it.)
  cp "$T/b1.saved" "${b[1]}"
done
rm -f "$T/b1.saved"

# ---------------------------------------------------------------------------
d_log "import A from its members in shuffled order"
all=("${m[@]}" "${o[@]}" "${h[@]}" "${b[@]}")
before=$(d_sums "${all[@]}")
d_run import.A d_ns import --out imp.conf "${m[2]}" "${m[0]}" "${m[3]}" "${m[1]}"
[[ $D_RC -eq 0 ]] || d_bad "import of A failed"
d_run import.stdout d_ns import "${m[3]}" "${m[1]}" "${m[2]}" "${m[0]}"
[[ $D_RC -eq 0 ]] || d_bad "import of A to stdout failed"
cmp -s imp.conf "$T/import.stdout.out" || d_bad "import: --out and standard output differ"
mapfile -t listed < <(sed -n 's/^  "\([^"]*\)".*/\1/p' imp.conf)
[[ ${listed[*]} == "${m[*]}" ]] && d_ok "import: members in role order" ||
  d_bad "import: members listed as: ${listed[*]}, role order is ${m[*]}"
for line in 'metadata = "md";' "uuid = \"$uuidA\";" 'chunk = "64K";' 'layout = "original";' 'name = "vol0";'; do
  grep -q -F -x -e "$line" -e "$line  # as the superblocks record it" imp.conf ||
    d_bad "import: imp.conf has no line: $line"
done
d_same_sums import "$before" "${all[@]}" && d_ok "import wrote nothing to any member"
d_run check.imp d_ns check imp.conf
[[ $D_RC -eq 0 ]] || d_bad "check of the imported config failed"
sed -i "s|^serve = .*|serve = { $serve };|" imp.conf
d_serve serve.imp imp.conf "$pidfile" || d_fail "serve of the imported config failed"
nbdcopy "$uri" out || d_fail "nbdcopy imported -> out"
d_stop "$D_SERVER_PID"
cmp -s src out && d_ok "import: the imported config serves the pattern" ||
  d_bad "import: the imported config serves other bytes"

imp=$(sha256sum imp.conf)
d_run import.exists d_ns import --out imp.conf "${m[@]}"
d_expect_fail import.exists
d_expect_err import.exists "imp.conf: exists (use --force to replace it)"
[[ $(sha256sum imp.conf) == "$imp" ]] || d_bad "import.exists: imp.conf was changed"
d_run import.force d_ns import --force --out imp.conf "${m[@]}"
[[ $D_RC -eq 0 ]] || d_bad "import --force over imp.conf failed"
grep -q -F "uuid = \"$uuidA\";" imp.conf || d_bad "import --force: imp.conf not rewritten"

d_run import.two d_ns import --out two.conf "${o[3]}" "${m[0]}" "${m[1]}" "${m[2]}"
d_expect_fail import.two
d_expect_err import.two "${m[0]} belongs to md array 'vol0' ($uuidA)" "${o[3]} to 'other' ($uuidO)"
[[ ! -e two.conf ]] || d_bad "import.two: two.conf written"
d_same_sums import "$before" "${all[@]}" && d_ok "imports wrote nothing to any member"

# ---------------------------------------------------------------------------
# refuse NAME CONFIG SUBSTRING...: check, serve and the plugin all refuse
# with every SUBSTRING in their messages; no file in $files changes.
refuse ()
{
  local name=$1 conf=$2 before
  shift 2
  before=$(d_sums "${files[@]}")

  d_run "$name.check" d_ns check "$conf"
  d_expect_fail "$name.check"
  d_expect_err "$name.check" "$@"

  d_serve_refused "$name.serve" "$conf" "$pidfile"
  d_expect_err "$name.serve" "$@"
  ! nbdinfo --size "$uri" >/dev/null 2>&1 || d_bad "$name.serve: something serves $uri"

  d_run "$name.plugin" timeout -k 5 60 "${D_PRE[@]}" nbdkit -U - "$STRIPE_PLUGIN" \
    "config=$T/$conf" --run true
  [[ $D_RC -ne 0 ]] || d_bad "$name.plugin: nbdkit served it"
  [[ $D_RC -ne 124 && $D_RC -ne 137 ]] || d_bad "$name.plugin: nbdkit hung"
  d_expect_err "$name.plugin" "$@"

  d_same_sums "$name" "$before" "${files[@]}" && d_ok "$name: refused, nothing written"
}

# restored NAME: A's members are exactly as after the pattern was written.
restored ()
{
  d_same_sums "$1.restored" "$pristine" "${m[@]}" || d_fail "$1: could not restore the members"
}

files=("${m[@]}")

d_log "fault: members 0 and 1 swapped in the config"
mdconf swapped.conf vol0 64K original "${m[1]}" "${m[0]}" "${m[2]}" "${m[3]}"
refuse swapped swapped.conf \
  "member 0 (${m[1]}): has role 1 in md array 'vol0' (wrong order)" \
  "member 1 (${m[0]}): has role 0 in md array 'vol0' (wrong order)" \
  "the right order is: members = [ \"${m[0]}\", \"${m[1]}\", \"${m[2]}\", \"${m[3]}\" ];"

d_log "fault: member 2 of another md array"
files=("${m[@]}" "${o[@]}")
mdconf foreign.conf vol0 64K original "${m[0]}" "${m[1]}" "${o[2]}" "${m[3]}"
refuse foreign foreign.conf \
  "member 2 (${o[2]}): belongs to another md array ('other', $uuidO), not to 'vol0' ($uuidA)"
files=("${m[@]}")

d_log "fault: member 2 stale (events 0, the others 1: one event behind)"
for i in 0 1 3; do sb "${m[i]}" set events=1; done
refuse stale good.conf \
  "member 2 (${m[2]}): stale: its md superblock is at event count 0, the array is at 1"
for i in 0 1 3; do sb "${m[i]}" set events=0; done
restored stale

d_log "fault: member 1 says level 5 (and, as raid5 members do, no feature 0x1000)"
# (Level 5 with feature 0x1000 is refused too, as md refuses it: the
# raid0-layout bit only with level 0.)
sb "${m[1]}" set level=5 feature_map=0
refuse level5 good.conf "member 1 (${m[1]}): md superblock 1.2: level 5, not raid0"
sb "${m[1]}" set level=0 feature_map=0x1000
restored level5

for f in 0x1:bitmap:"write-intent bitmap (feature 0x1)" \
         0x4:reshape:"a reshape is in progress (feature 0x4)" \
         0x8:badblocks:"bad-block log in use (feature 0x8)"; do
  bit=${f%%:*} rest=${f#*:}
  d_log "fault: member 1 has feature $bit (${rest%%:*})"
  sb "${m[1]}" set feature_map=$((0x1000 | bit))
  refuse "${rest%%:*}" good.conf "member 1 (${m[1]}): md superblock 1.2: ${rest#*:}"
  sb "${m[1]}" set feature_map=0x1000
  restored "${rest%%:*}"
done

d_log "fault: a byte of member 2's superblock flipped (events, checksum not updated)"
sb "${m[2]}" flip 200
! sb "${m[2]}" check 2>/dev/null || d_fail "the flip left the checksum right"
refuse corrupt good.conf \
  "member 2 (${m[2]}): md superblock 1.2 at byte 4096: md superblock checksum mismatch"
sb "${m[2]}" flip 200
restored corrupt

d_log "fault: the config's uuid is another array's"
cp good.conf uuid.conf
echo 'uuid = "01234567:89abcdef:01234567:89abcdef";' >>uuid.conf
refuse uuid uuid.conf \
  "uuid: the config says 01234567:89abcdef:01234567:89abcdef, the members belong to md array 'vol0' ($uuidA)"
d_log "the array's own uuid, written 8-4-4-4-12, is accepted"
u=${uuidA//:/}
cp good.conf uuid-ok.conf
echo "uuid = \"${u:0:8}-${u:8:4}-${u:12:4}-${u:16:4}-${u:20:12}\";" >>uuid-ok.conf
d_run check.uuid-ok d_ns check uuid-ok.conf
[[ $D_RC -eq 0 ]] && d_ok "uuid in dashed form accepted" || d_bad "check with the array's own uuid (dashed) failed"

d_log "fault: the config's chunk differs from the superblocks'"
mdconf chunk.conf vol0 128K original "${m[@]}"
refuse chunk chunk.conf "chunk: the config says 131072, the md superblocks say 65536"

d_log "fault: the config's layout contradicts the superblocks'"
mdconf alt.conf vol0 64K alternate "${m[@]}"
refuse layout alt.conf \
  "layout: the config says \"alternate\", the md superblocks say \"original\""

d_log "fault: member 2 holds an nbdstripe header"
files=("${m[@]}" "${h[@]}")
mdconf hdr.conf vol0 64K original "${m[0]}" "${m[1]}" "${h[0]}" "${m[3]}"
refuse header hdr.conf \
  "member 2 (${h[0]}): holds an nbdstripe header (volume 'hvol'), not an md superblock: the config wants metadata = \"header\""
files=("${m[@]}")

d_log "fault: feature 0x1000 cleared on A (multi-zone, the layouts differ): the layout must be given"
for f in "${m[@]}"; do sb "$f" set feature_map=0; done
mdconf nolayout.conf vol0 64K "" "${m[@]}"
refuse ambiguous nolayout.conf \
  "md array 'vol0' ($uuidA) has members of different sizes and its superblocks do not say which of md's two layouts" \
  'give layout = "original"' 'layout = "alternate"'
before=$(d_sums "${m[@]}")
d_serve serve.orig good.conf "$pidfile" || d_bad "serve with layout original given failed"
if [[ $D_RC -eq 0 ]]; then
  nbdcopy "$uri" out.orig || d_fail "nbdcopy -> out.orig"
  d_stop "$D_SERVER_PID"
  cmp -s src out.orig && d_ok "layout \"original\" given: the pattern reads back" ||
    d_bad "layout \"original\" given: other bytes read back"
fi
d_serve serve.alt alt.conf "$pidfile" || d_bad "serve with layout alternate given failed"
if [[ $D_RC -eq 0 ]]; then
  nbdcopy "$uri" out.alt || d_fail "nbdcopy -> out.alt"
  d_stop "$D_SERVER_PID"
  mdimg read "$C" 2 want.alt "${specA[@]}"
  if cmp -s src out.alt; then
    d_bad "layout \"alternate\" given: the pattern reads back although it was written with the original layout"
  elif cmp -s want.alt out.alt; then
    d_ok "layout \"alternate\" given: other bytes, those md's alternate layout reads from the members"
  else
    d_bad "layout \"alternate\" given: neither the pattern nor what the model's alternate layout reads"
  fi
fi
d_log "import of A with feature 0x1000 cleared: refused without --layout, right with it"
d_run import.ambiguous d_ns import --out amb.conf "${m[@]}"
d_expect_fail import.ambiguous
d_expect_err import.ambiguous "has members of different sizes and its superblocks do not say which of md's two layouts"
# What the user of import must do: --layout (there is no config yet).
d_expect_err import.ambiguous "--layout" || d_log "(daemon/import.c: the refusal asks for layout = in a config instead of --layout)"
[[ ! -e amb.conf ]] || d_bad "import.ambiguous: amb.conf written"
d_run import.layout d_ns import --layout original --out amb.conf "${m[3]}" "${m[2]}" "${m[1]}" "${m[0]}"
[[ $D_RC -eq 0 ]] || d_bad "import --layout original failed"
grep -q -F -x 'layout = "original";  # given with --layout: the superblocks do not record it' amb.conf ||
  d_bad "import --layout original: no layout line in amb.conf"
d_run read.amb d_nbdkit -U - "$STRIPE_PLUGIN" "config=$T/amb.conf" --run "nbdcopy \"\$uri\" $T/out.amb"
[[ $D_RC -eq 0 ]] && cmp -s src out.amb && d_ok "import --layout original: the config serves the pattern" ||
  d_bad "import --layout original: the config does not serve the pattern"
d_same_sums served-with-layout "$before" "${m[@]}" && d_ok "serving and importing with the layout given wrote nothing"
for f in "${m[@]}"; do sb "$f" set feature_map=0x1000; done
restored ambiguous

# ---------------------------------------------------------------------------
d_log "inspect prints the md superblock"
before=$(d_sums "${m[@]}")
d_run inspect d_ns inspect "${m[1]}"
[[ $D_RC -eq 0 ]] || d_bad "inspect failed"
grep -q -E "^  array UUID: +$uuidA\$" inspect.out || d_bad "inspect: no 'array UUID: $uuidA'"
grep -q -E "^  member: +role 1 of 4 " inspect.out || d_bad "inspect: no 'member: role 1 of 4'"
grep -q -E "^  chunk: +65536 bytes\$" inspect.out || d_bad "inspect: no 'chunk: 65536 bytes'"
grep -q -E "^  layout: +original \(1\)\$" inspect.out || d_bad "inspect: no 'layout: original (1)'"
grep -q -E "^  md array: +vol0\$" inspect.out || d_bad "inspect: no 'md array: vol0'"
d_run inspect.json d_ns inspect --json "${m[1]}"
[[ $D_RC -eq 0 ]] || d_bad "inspect --json failed"
mapfile -t v < <(sb "${m[1]}" get device_uuid data_offset data_size)
"$PY" - "$T/inspect.json.out" "$uuidA" "${v[0]}" $((v[1] * 512)) $((v[2] * 512)) <<'EOF' || d_bad "inspect --json: fields (above)"
import json, sys
j = json.load(open(sys.argv[1]))
m = j["members"]
want = dict(kind="md", md_version=2, superblock_offset=4096, array_uuid=sys.argv[2],
            device_uuid=sys.argv[3], name="vol0", level=0, raid_disks=4, role=1,
            chunk=65536, layout=1, feature_map=0x1000, data_offset=int(sys.argv[4]),
            data_size=int(sys.argv[5]), events=0, servable=True)
bad = [k for k in want if m[0].get(k) != want[k]]
for k in bad:
    print("inspect --json: %s is %r, expected %r" % (k, m[0].get(k), want[k]))
sys.exit(1 if bad or len(m) != 1 or not j["ok"] else 0)
EOF
d_same_sums inspect "$before" "${m[@]}" && d_ok "inspect: the md superblock shown, nothing written"

# ---------------------------------------------------------------------------
d_log "metadata none: an mdadm --build array (no superblock), data from data_offset 128K, layout original"
# Data chunks 20, 20, 20, 10 (and odd tails): zone 1 starts at chunk 40
# over 3 members, so the two layouts differ.
off=$((128 * K))
nsz=($((off + 20 * C + 3000)) $((off + 20 * C)) $((off + 20 * C + 700)) $((off + 10 * C + 4096)))
n=("$T/n0" "$T/n1" "$T/n2" "$T/n3")
specN=()
for i in 0 1 2 3; do
  truncate -s "${nsz[i]}" "${n[i]}"
  specN+=("${n[i]}:$off:$((nsz[i] - off))")
done
sizeN=$(model size "$C" "${specN[@]##*:}")
d_random srcN "$sizeN"
mdimg write "$C" 1 srcN "${specN[@]}"
d_run model.N model check --chunk "$C" --layout 1 --pattern srcN --size "$sizeN" --require-distinct "${specN[@]}"
[[ $D_RC -eq 0 ]] || d_fail "the model's own members do not check"
for lay in original alternate; do
  d_conf none-$lay.conf build 64K "$serve" "${n[@]}"
  printf 'metadata = "none";\ndata_offset = "128K";\nlayout = "%s";\n' "$lay" >>none-$lay.conf
done
before=$(d_sums "${n[@]}")
d_serve serve.none none-original.conf "$pidfile" || d_fail "serve of the metadata none array failed"
got=$(d_nbd_size "$uri") || d_fail "nbdinfo --size"
nbdcopy "$uri" outN || d_fail "nbdcopy none -> outN"
d_stop "$D_SERVER_PID"
[[ $got -eq $sizeN ]] && d_ok "none: volume size $got, md's" || d_bad "none: volume size $got, md says $sizeN"
cmp -s srcN outN && d_ok "none, layout original: the pattern reads back" ||
  d_bad "none, layout original: other bytes read back"
d_serve serve.none-alt none-alternate.conf "$pidfile" || d_fail "serve of the metadata none array (alternate) failed"
nbdcopy "$uri" outN.alt || d_fail "nbdcopy none -> outN.alt"
d_stop "$D_SERVER_PID"
mdimg read "$C" 2 wantN.alt "${specN[@]}"
if cmp -s srcN outN.alt; then
  d_bad "none, layout alternate: the pattern reads back although it was laid out as original"
elif cmp -s wantN.alt outN.alt; then
  d_ok "none, layout alternate: other bytes, those the alternate layout reads"
else
  d_bad "none, layout alternate: neither the pattern nor what the model's alternate layout reads"
fi
d_same_sums none "$before" "${n[@]}" && d_ok "none: serving read-only clients wrote nothing"

d_done
