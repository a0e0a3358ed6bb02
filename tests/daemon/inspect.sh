#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe inspect`: a member's header for people, and --json for
# scripts, checked against what create was told and against the header
# bytes themselves (od):
#
#   - human output names the file, the volume, "member I of N", the chunk
#     and the data offset; exit 0;
#   - --json over the three members plus a blank file and a file whose
#     name needs escaping ("quote", back\slash, tab, newline) is one valid
#     JSON object (jq, else python's json.tool) whose "members" has, per
#     member, the right path, name, member_index, member_count, chunk,
#     data_offset, the same array_uuid (the bytes at offset 16),
#     member_sizes; the blank file and the odd one get an "error" key; exit
#     1 and ok false with the blank file's error because some member has
#     no header, 0 and ok true with a null error when all have;
#   - human output of a blank file: exit 1, the reason on stderr naming it.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init od

if command -v jq >/dev/null; then
  json_ok () { jq -e . "$1" >/dev/null; }
  jget () { jq -r "$2" "$1"; }
elif [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import json' 2>/dev/null; then
  json_ok () { /usr/bin/python3 -m json.tool "$1" >/dev/null; }
  # jget FILE PYTHON_EXPRESSION_ON_d (jq-like paths are not available)
  jget () { /usr/bin/python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(str(v).lower() if isinstance(v, bool) else ("null" if v is None else v))' "$1" "$(jq_to_py "$2")"; }
  # the few jq paths used below: .key, .members[i].key,
  # (.members[i] | has("key")), .members | length
  jq_to_py ()
  {
    local e=$1
    if [[ $e =~ ^\.([a-z_]+)$ ]]; then
      echo "d.get('${BASH_REMATCH[1]}')"
    elif [[ $e =~ ^\.members\[([0-9]+)\]\.([a-z_]+)$ ]]; then
      echo "d['members'][${BASH_REMATCH[1]}].get('${BASH_REMATCH[2]}')"
    elif [[ $e =~ ^\.members\[([0-9]+)\]\ \|\ has\(\"([a-z_]+)\"\)$ ]]; then
      echo "'${BASH_REMATCH[2]}' in d['members'][${BASH_REMATCH[1]}]"
    elif [[ $e == ".members | length" ]]; then echo "len(d['members'])"
    elif [[ $e =~ ^\.members\[([0-9]+)\]\.member_sizes\|join\(\",\"\)$ ]]; then
      echo "','.join(str(x) for x in d['members'][${BASH_REMATCH[1]}]['member_sizes'])"
    else echo "None"; fi
  }
else
  d_skip "neither jq nor /usr/bin/python3 (json) is installed"
fi

M=$((1024 * 1024))
sizes=($((3 * M)) $((4 * M + 4096)) $((2 * M)))
m=("$D_TMP/m0" "$D_TMP/m1" "$D_TMP/m2")
for i in 0 1 2; do truncate -s "${sizes[i]}" "${m[i]}"; done
d_conf vol.conf insp-0 32K "" "${m[@]}"
d_run create d_ns create vol.conf
[[ $D_RC -eq 0 ]] || d_fail "create failed"
uuid_hex=$(d_hex "${m[0]}" 16 16)
uuid=${uuid_hex:0:8}-${uuid_hex:8:4}-${uuid_hex:12:4}-${uuid_hex:16:4}-${uuid_hex:20:12}
usable=()
for s in "${sizes[@]}"; do usable+=($(( (s - M) / (32 * 1024) * (32 * 1024) ))); done

d_log "human output"
d_run human d_ns inspect "${m[1]}"
[[ $D_RC -eq 0 ]] || d_bad "inspect of a member: exit $D_RC"
for s in "${m[1]}:" "volume:       insp-0" "array UUID:   $uuid" "member:       1 of 3" \
         "chunk:        32768 bytes" "data offset:  1048576 bytes"; do
  grep -q -F -- "$s" "$D_TMP/human.out" || d_bad "human output lacks: $s"
done

d_log "--json"
blank=$D_TMP/blank
truncate -s $((2 * M)) "$blank"
odd=$D_TMP/$'odd "quote", back\\slash,\ttab\nnewline'
truncate -s $((2 * M)) "$odd"
d_run json d_ns inspect --json "${m[@]}" "$blank" "$odd"
[[ $D_RC -eq 1 ]] || d_bad "inspect --json with a blank file: exit $D_RC, expected 1"
if json_ok "$D_TMP/json.out"; then
  d_ok "--json output is valid JSON"
  [[ $(jget "$D_TMP/json.out" ".members | length") == 5 ]] || d_bad "--json: not 5 members"
  [[ $(jget "$D_TMP/json.out" .ok) == false &&
     $(jget "$D_TMP/json.out" .error) == "$(jget "$D_TMP/json.out" '.members[3].error')" ]] ||
    d_bad "--json: not ok false with the blank file's error"
  for i in 0 1 2; do
    for kv in "path=${m[i]}" "name=insp-0" "member_index=$i" "member_count=3" \
              "chunk=32768" "data_offset=1048576" "array_uuid=$uuid" \
              "layout=2" "flags=0" "version=2" "events=1"; do
      k=${kv%%=*} v=${kv#*=}
      got=$(jget "$D_TMP/json.out" ".members[$i].$k")
      [[ $got == "$v" ]] || d_bad "--json member $i: $k is '$got', expected '$v'"
    done
    got=$(jget "$D_TMP/json.out" ".members[$i].member_sizes|join(\",\")")
    want=$(IFS=,; echo "${usable[*]}")
    [[ $got == "$want" ]] || d_bad "--json member $i: member_sizes $got, expected $want"
    [[ $(jget "$D_TMP/json.out" ".members[$i].ok") == true &&
       $(jget "$D_TMP/json.out" ".members[$i].error") == null ]] ||
      d_bad "--json member $i is not ok, or has an error"
  done
  [[ $(jget "$D_TMP/json.out" '.members[3].path') == "$blank" ]] || d_bad "--json: blank file's path"
  [[ $(jget "$D_TMP/json.out" '.members[3] | has("error")') == true &&
     $(jget "$D_TMP/json.out" '.members[3].ok') == false ]] ||
    d_bad "--json: no \"error\" key for a blank file"
  [[ $(jget "$D_TMP/json.out" '.members[3] | has("member_index")') == false ]] ||
    d_bad "--json: a blank file has a member_index"
  [[ $(jget "$D_TMP/json.out" '.members[4].path') == "$odd" ]] ||
    d_bad "--json: a path with quote, backslash, tab and newline does not round-trip"
  [[ $(jget "$D_TMP/json.out" '.members[4] | has("error")') == true ]] ||
    d_bad "--json: no \"error\" key for the oddly named blank file"
else
  d_bad "--json output is not valid JSON"
fi

d_run json.ok d_ns inspect --json "${m[@]}"
[[ $D_RC -eq 0 ]] || d_bad "inspect --json of three good members: exit $D_RC"
json_ok "$D_TMP/json.ok.out" || d_bad "--json (three members) is not valid JSON"
[[ $(jget "$D_TMP/json.ok.out" .ok) == true &&
   $(jget "$D_TMP/json.ok.out" .error) == null ]] ||
  d_bad "--json of three good members: not ok true, error null"

d_log "a blank file, human output"
d_run blank d_ns inspect "$blank"
[[ $D_RC -eq 1 ]] || d_bad "inspect of a blank file: exit $D_RC, expected 1"
d_expect_err blank "$blank" "no header magic"
[[ ! -s $D_TMP/blank.out ]] || d_bad "inspect of a blank file printed on stdout"

d_log "recorded sizes that overflow 64 bits together"
# A valid header (version 1, which nbdstripe 0.1 wrote and every version
# reads) of member 0 of 2, each recorded at 2^63 bytes: the volume size
# is not 0, it is too large.
big=$D_TMP/big
python3 - "$big" <<'PYEOF'
import struct, sys
b = bytearray(4096)
b[0:8] = b"NBDSTRIP"
struct.pack_into("<II", b, 8, 1, 4096)
b[16:32] = bytes(range(1, 17))
b[32:48] = bytes(range(17, 33))
b[48:51] = b"big"
struct.pack_into("<QIIQIIQ", b, 112, 1700000000, 0, 2, 65536, 1, 0, 1048576)
struct.pack_into("<QQ", b, 152, 1 << 63, 1 << 63)
open(sys.argv[1], "wb").write(b)
PYEOF
crc=$("$DAEMON_HELPER" crc32c "$big" 0 4092) || d_fail "crc32c"
python3 -c "import struct, sys; f = open(sys.argv[1], 'r+b'); f.seek(4092); f.write(struct.pack('<I', int(sys.argv[2])))" "$big" "$crc"
d_run big d_ns inspect "$big"
[[ $D_RC -eq 0 ]] || d_bad "inspect of a header with huge sizes: exit $D_RC"
grep -q -F "volume size:  too large (the sizes overflow 64 bits)" "$D_TMP/big.out" &&
  d_ok "sizes that overflow are said to be too large, not 0" ||
  d_bad "inspect prints a wrong volume size for sizes that overflow"

d_log "a missing file"
d_run missing d_ns inspect --json "$D_TMP/no-such-member"
[[ $D_RC -eq 1 ]] || d_bad "inspect of a missing file: exit $D_RC, expected 1"
json_ok "$D_TMP/missing.out" && [[ $(jget "$D_TMP/missing.out" '.members[0] | has("error")') == true ]] ||
  d_bad "--json of a missing file: no error key"
d_done
