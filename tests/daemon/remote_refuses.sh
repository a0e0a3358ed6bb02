#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe create` refuses a remote member (an NBD URI, served by stock
# `nbdkit file`) that holds something recognisable, as it refuses a local
# one, unless --force; libblkid looks at a copy of the member's first and
# last MiB:
#
#   - member 1 holds ext4 (mkfs.ext4 on its backing file before it is
#     served): refused naming member 1, its URI and ext4;
#   - member 2 holds a GPT whose primary header was wiped, so that only
#     the backup header in the member's last sector says "gpt" (from the
#     first MiB alone libblkid would say "PMBR"): refused naming gpt;
#   - nothing written anywhere (checksums of the backing files and of the
#     local member); with --force create succeeds, check passes, and the
#     backing file of member 1 is no longer ext4;
#   - a read-only export (nbdkit -r) is refused even with --force, with
#     the reason, and nothing written.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
source "$(dirname "$0")/../lib/remote.sh" || exit 1
d_init nbdkit mkfs.ext4 setsid sha256sum
[[ -n ${DAEMON_HELPER:-} && -x $DAEMON_HELPER ]] || d_fail "DAEMON_HELPER is not set"

M=$((1024 * 1024))
for f in m0 b1 b2 b3; do truncate -s $((8 * M)) "$D_TMP/$f"; done
files=("$D_TMP/m0" "$D_TMP/b1" "$D_TMP/b2")

# err_line NAME SUBSTRING...: one line of NAME.err contains all of them.
err_line ()
{
  local name=$1 lines s
  shift
  lines=$(cat "$D_TMP/$name.err")
  for s in "$@"; do lines=$(grep -F -- "$s" <<<"$lines"); done
  [[ -n $lines ]] || d_bad "$name: no line of stderr contains all of: $*"
}

mkfs.ext4 -F -q "$D_TMP/b1" || d_fail "mkfs.ext4"

# A protective MBR, a GPT with one partition and its backup at the end;
# then the primary header is wiped.  CRC32s by Python's zlib.
gpt=no
if [[ -x /usr/bin/python3 ]]; then
  /usr/bin/python3 - "$D_TMP/b2" <<'EOF' || d_fail "writing the GPT"
import os, struct, sys, uuid, zlib
path = sys.argv[1]
ss = 512
last = os.path.getsize(path) // ss - 1
ent = struct.pack('<16s16sQQQ72s',
                  uuid.UUID('0fc63daf-8483-4772-8e79-3d69d8477de4').bytes_le,
                  uuid.uuid4().bytes_le, 2048, 4095, 0,
                  'data'.encode('utf-16-le'))
ent += bytes(128 * 128 - len(ent))
disk = uuid.uuid4().bytes_le
def header(my, alt, entries_lba):
    h = struct.pack('<8sIIIIQQQQ16sQIII', b'EFI PART', 0x10000, 92, 0, 0,
                    my, alt, 34, last - 33, disk, entries_lba, 128, 128,
                    zlib.crc32(ent))
    h = h[:16] + struct.pack('<I', zlib.crc32(h)) + h[20:]
    return h + bytes(ss - len(h))
mbr = bytearray(ss)
mbr[446:462] = struct.pack('<B3sB3sII', 0, b'\x00\x02\x00', 0xee,
                           b'\xff\xff\xff', 1, min(last, 0xffffffff))
mbr[510:512] = b'\x55\xaa'
with open(path, 'r+b') as f:
    f.write(mbr)
    f.seek((last - 32) * ss)
    f.write(ent)
    f.seek(last * ss)
    f.write(header(last, 1, last - 32))
EOF
  if command -v blkid >/dev/null &&
     blkid -p -o value -s PTTYPE "$D_TMP/b2" 2>/dev/null | grep -q -x gpt; then
    gpt=yes
  else
    d_log "(the GPT part is left out: blkid does not see the backup-only GPT)"
  fi
else
  d_log "(the GPT part is left out: no /usr/bin/python3 to write it)"
fi

r_unix s1 file "$D_TMP/b1"
u1=$R_URI
r_unix s2 file "$D_TMP/b2"
u2=$R_URI
d_conf vol.conf vol0 64K "" "$D_TMP/m0" "$u1" "$u2"

d_log "ext4 on member 1, a GPT known by its backup header on member 2"
before=$(d_sums "${files[@]}")
d_run create d_ns create vol.conf
d_expect_fail create
err_line create "member 1 ($u1)" "ext4" "--force"
[[ $gpt == no ]] || err_line create "member 2 ($u2)" "gpt partition table" "--force"
! grep -q -F "member 0 (" "$D_TMP/create.err" ||
  d_bad "create: member 0 (blank) was complained about"
d_same_sums create "$before" "${files[@]}" && d_ok "refused, nothing written"

d_log "--force overwrites them"
d_run force d_ns create --force vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create --force failed"
d_run force.check d_ns check vol.conf
[[ $D_RC -eq 0 ]] && d_ok "check passes after create --force" || d_bad "check failed after create --force"
if command -v blkid >/dev/null; then
  ! blkid -p "$D_TMP/b1" 2>/dev/null | grep -q 'TYPE="ext4"' ||
    d_bad "member 1's backing file still looks like ext4 after create --force"
fi
d_run again d_ns create vol.conf
d_expect_fail again
err_line again "member 1 ($u1)" "is already member 1 of nbdstripe volume 'vol0'"

d_log "a read-only export, even with --force"
r_unix s3 -r file "$D_TMP/b3"
u3=$R_URI
truncate -s $((8 * M)) "$D_TMP/n0"
d_conf ro.conf vol1 64K "" "$D_TMP/n0" "$u3"
before=$(d_sums "$D_TMP/n0" "$D_TMP/b3")
d_run ro d_ns create --force ro.conf
d_expect_fail ro
err_line ro "member 1 ($u3)" "read-only"
d_same_sums ro "$before" "$D_TMP/n0" "$D_TMP/b3" && d_ok "read-only: refused, nothing written"
d_done
