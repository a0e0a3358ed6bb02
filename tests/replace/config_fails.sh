#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# When the config cannot be rewritten, a replace never leaves a volume
# that comes back with the old member and without the writes made since:
#
#   none-ro    metadata = "none" (nothing on a member says what it is),
#              the server's view of the config's directory read-only (a
#              mount namespace with a read-only bind mount): the replace
#              fails, not switched, the config unchanged; writes after it
#              go to the old member; served again from the config, the
#              volume holds every write
#   comment    metadata = "none", a comment and another setting naming the
#              member: the config is rewritten (only the member's element
#              changes), served again from NEW, every write there
#   header-ro  headers, the config's directory read-only: the replace
#              switches, having marked the old member replaced first; the
#              config still names it, so serving it again is refused
#              naming the replaced member -- never the old data served
#
# The data is a model the test keeps (tests/replace/writer.py's
# pattern): the volume is read back and compared.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd unshare mount

size=$((9 * M))
etc=$D_TMP/etc
mkdir -p "$etc"

# volume LABEL METADATA_LINES: members m0 m1 (and new) of LABEL, the
# config in $etc.
volume ()
{
  local label=$1 extra=$2
  for f in "$label.m0" "$label.m1" "$label.new"; do
    truncate -s "$size" "$D_TMP/$f"
  done
  rp_volume "$label" 64K "$extra" "$D_TMP/$label.m0" "$D_TMP/$label.m1"
  mv "$RP_CONF" "$etc/$label.conf"
  RP_CONF=$etc/$label.conf
  [[ $extra == *none* ]] || rp_create
}

# start_ro LABEL: the server sees $etc read-only.
start_ro ()
{
  local saved=("${D_PRE[@]}")
  D_PRE=(unshare --mount --propagation private sh -c \
    'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"' \
    "$etc" "${saved[@]}")
  rp_start "$1"
  D_PRE=("${saved[@]}")
}

# write_some LABEL: fresh bytes over the whole volume, also kept as
# $D_TMP/LABEL.want.
write_some ()
{
  d_random "$D_TMP/$1.want" "$(d_nbd_size "$RP_URI")"
  rp_write_pattern "$D_TMP/$1.want"
}

replace_and_wait ()
{
  rp_ctl send "{\"op\": \"replace\", \"member\": 1, \"new\": \"$D_TMP/$1.new\"}" \
    >/dev/null || d_fail "$1: the replace did not start"
  rp_wait "$1" --state done,failed --deadline 60
}

# -- metadata "none", config read-only
volume none-ro 'metadata = "none";'
start_ro none-ro
write_some none-ro
replace_and_wait none-ro
if [[ $(rp_json none-ro .state) == failed ]] &&
   rp_json none-ro .error | grep -q "not switched"; then
  d_ok "none-ro: the replace failed, not switched: $(rp_json none-ro .error)"
else
  d_bad "none-ro: the replace did not stop before the switch"
fi
grep -q -F "\"$D_TMP/none-ro.m1\"" "$RP_CONF" ||
  d_bad "none-ro: the config no longer names the old member"
write_some none-ro
rp_stop
rp_start none-ro-again
rp_same none-ro-again "$D_TMP/none-ro.want" ||
  d_bad "none-ro: served again, writes made after the replace are lost"
rp_stop

# -- metadata "none", a comment naming the member
volume comment 'metadata = "none";'
{
  printf '# member 1 was "%s" before it moved\n' "$D_TMP/comment.m1"
  printf 'remote = { connections = 2; };  # "%s"\n' "$D_TMP/comment.m1"
} >>"$RP_CONF"
cp "$RP_CONF" "$D_TMP/comment.before"
rp_start comment
write_some comment
replace_and_wait comment
[[ $(rp_json comment .state) == done && $(rp_json comment .config_updated) == true ]] ||
  d_bad "comment: the replace did not end done with the config rewritten"
if diff <(sed "s|\"$D_TMP/comment.new\"|\"$D_TMP/comment.m1\"|" "$RP_CONF") \
     "$D_TMP/comment.before" >/dev/null &&
   grep -q -F "  \"$D_TMP/comment.new\" ];" "$RP_CONF"; then
  d_ok "comment: only the members element changed"
else
  d_bad "comment: the config changed elsewhere than the members element"
  diff "$D_TMP/comment.before" "$RP_CONF" >&2
fi
write_some comment
rp_stop
rp_start comment-again
rp_same comment-again "$D_TMP/comment.want" ||
  d_bad "comment: served again, the volume lost writes"
rp_stop

# -- headers, config read-only
volume header-ro ''
start_ro header-ro
write_some header-ro
replace_and_wait header-ro
[[ $(rp_json header-ro .state) == done ]] ||
  d_bad "header-ro: the replace did not end done"
[[ $(rp_json header-ro .config_updated) == false ]] ||
  d_bad "header-ro: config_updated is not false"
rp_json header-ro .config_note | grep -q "marked replaced" ||
  d_bad "header-ro: the status does not say the old member is marked replaced"
write_some header-ro
rp_stop
flags=$("$NBDSTRIPE" inspect --json "$D_TMP/header-ro.m1" | jq -r '.members[0].flags | tostring')
d_run check-header-ro d_ns check "$RP_CONF"
if [[ $D_RC -ne 0 ]] && grep -q "replaced" "$D_TMP/check-header-ro.err"; then
  d_ok "header-ro: the config naming the replaced member is refused (flags $flags)"
else
  d_bad "header-ro: the old member, marked replaced, is not refused"
fi
d_done
