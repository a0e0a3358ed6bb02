#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Spares are checked as members are, owned while served, and what cannot
# take a member's place is shown with the reason, never used:
#
# - a spare that is a member (the same string; a symlink to it), another
#   spare (a symlink to it) or a removed member: check and serve refuse
#   the config, naming the spare and the member; nothing is written to
#   the members.
# - volume a served with spares big (16 MiB), small (8 MiB), gone (a path
#   with nothing there), meta (a file holding an nbdstripe header: a
#   member of another volume) and blk4k (an NBD export taking 4 KiB
#   blocks at least, the volume's clients promised 1 byte): status
#   --json and `nbdstripe status` say big usable and claimed, and each
#   of the others not usable with its reason ("too small", "cannot be
#   opened", "holds an nbdstripe header", "4096 bytes at least"), claimed
#   when it is a file there (an NBD export is its server's).
# - while a is served: `nbdstripe create` of a volume with big as a
#   member, and a second server with big as a spare, are refused naming
#   a's server ("serving volume 'a'"); big's bytes are untouched.
# - gone appears (a file created at its path): within a few probe
#   intervals the status says it is usable, and claimed.
source "$(dirname "$0")/../lib/replace.sh" || exit 1
rp_init

size=$((16 * M))
truncate -s "$size" "$D_TMP/a0" "$D_TMP/a1" "$D_TMP/big" "$D_TMP/meta" \
  "$D_TMP/b1" "$D_TMP/c0" "$D_TMP/c1" "$D_TMP/x0" "$D_TMP/x1" \
  "$D_TMP/blk4k"
truncate -s $((8 * M)) "$D_TMP/small"
d_random "$D_TMP/big" "$size"

d_log "a spare that is a member, or was one"
d_conf "$D_TMP/x.conf" x 64K "" "$D_TMP/x0" "$D_TMP/x1"
ln -s "$D_TMP/x0" "$D_TMP/x0.link"
printf 'spares = [ "%s" ];\n' "$D_TMP/x1" >>"$D_TMP/x.conf"
d_run same_string d_ns check "$D_TMP/x.conf"
d_expect_fail same_string &&
  d_expect_err same_string "x.conf:6: spares[0]: \"$D_TMP/x1\" is members[1] too"
sed -i 's|^spares = .*|spares = [ "'"$D_TMP/x0.link"'" ];|' "$D_TMP/x.conf"
d_run create_x d_ns create "$D_TMP/x.conf"
before=$(d_sums "$D_TMP/x0" "$D_TMP/x1")
d_run alias d_ns check "$D_TMP/x.conf"
d_expect_fail alias &&
  d_expect_err alias "spare $D_TMP/x0.link: it and member 0 ($D_TMP/x0) are"
d_serve_refused serve_alias "$D_TMP/x.conf" "$D_TMP/x.pid"
d_expect_err serve_alias "spare $D_TMP/x0.link: it and member 0"
d_same_sums alias "$before" "$D_TMP/x0" "$D_TMP/x1" &&
  d_ok "nothing written to the members of a config refused"
ln -s "$D_TMP/big" "$D_TMP/big.link"
sed -i 's|^spares = .*|spares = [ "'"$D_TMP/big"'", "'"$D_TMP/big.link"'" ];|' \
  "$D_TMP/x.conf"
d_run twice d_ns check "$D_TMP/x.conf"
d_expect_fail twice &&
  d_expect_err twice "spare $D_TMP/big.link: it and spare $D_TMP/big are"
sed -i 's|^spares = .*|spares = [ "/dev/old" ];\nremoved = [ "/dev/old" ];|' \
  "$D_TMP/x.conf"
d_run removed d_ns check "$D_TMP/x.conf"
d_expect_fail removed &&
  d_expect_err removed "spares[0]: \"/dev/old\" was removed from the volume"

d_log "volume a: spares that cannot be used, each with its reason"
d_conf "$D_TMP/b.conf" b 64K "" "$D_TMP/meta" "$D_TMP/b1"
d_run create_b d_ns create "$D_TMP/b.conf"
[[ $D_RC -eq 0 ]] || d_fail "create b"
r_unix blk4k --filter=blocksize-policy file "$D_TMP/blk4k" \
  blocksize-minimum=4096 blocksize-error-policy=error
BLK4K=$R_URI
rp_volume a 64K "spares = [ \"$D_TMP/big\", \"$D_TMP/small\", \"$D_TMP/gone\",
  \"$D_TMP/meta\", \"$BLK4K\" ];" "$D_TMP/a0" "$D_TMP/a1"
sed -i 's|^health = { status_file = \(.*\) };|health = { status_file = \1 probe_interval = 1; interval = 1; };|' "$RP_CONF"
rp_create
big_before=$(d_sums "$D_TMP/big")
rp_start a
rp_ctl until 'len(s.get("spares", [])) == 5' 5 >"$D_TMP/st.json" ||
  d_fail "the status does not list 5 spares"
check_spare ()
{
  local k=$1 usable=$2 claimed=$3 reason=$4
  if jq -e --argjson k "$k" --argjson u "$usable" --argjson c "$claimed" \
       --arg r "$reason" '.spares[$k].usable == $u and .spares[$k].claimed == $c
                          and (.spares[$k].reason | contains($r))' \
       "$D_TMP/st.json" >/dev/null; then
    d_ok "spare $k: usable $usable, claimed $claimed${reason:+, \"$reason\"}"
  else
    d_bad "spare $k: $(jq -c ".spares[$k]" "$D_TMP/st.json"), expected usable $usable, claimed $claimed, reason with \"$reason\""
  fi
}
check_spare 0 true true ""
check_spare 1 false true "too small: 8388608 bytes, member 0 needs"
check_spare 2 false false "cannot be opened"
check_spare 3 false true "holds an nbdstripe header"
check_spare 4 false false "takes requests of 4096 bytes at least"
[[ $(jq -r '.spares[0].reason' "$D_TMP/st.json") == "" ]] ||
  d_bad "big: a reason although usable"
d_run status d_ns status "$RP_CONF"
grep -q -E "^ +2 no +no +-  $D_TMP/gone: cannot be opened" "$D_TMP/status.out" ||
  d_bad "nbdstripe status does not show gone's reason"
grep -q -F "spare $D_TMP/small: cannot be used: too small" "$D_TMP/a.log" ||
  d_bad "the server's log does not say why small cannot be used"

d_log "big is a's: another volume cannot use it"
d_conf "$D_TMP/c.conf" c 64K "" "$D_TMP/big" "$D_TMP/c1"
d_run create_c d_ns create "$D_TMP/c.conf"
d_expect_fail create_c && d_expect_err create_c "serving volume 'a'"
d_conf "$D_TMP/c.conf" c 64K \
  "socket = \"$D_TMP/c.sock\"; pidfile = \"$D_TMP/c.pid\";" \
  "$D_TMP/c0" "$D_TMP/c1"
printf 'health = { status_file = "%s"; };\nspares = [ "%s" ];\n' \
  "$D_TMP/c.status.json" "$D_TMP/big" >>"$D_TMP/c.conf"
d_run create_c2 d_ns create "$D_TMP/c.conf"
[[ $D_RC -eq 0 ]] || d_fail "create c"
d_serve_refused serve_c "$D_TMP/c.conf" "$D_TMP/c.pid"
d_expect_err serve_c "spare $D_TMP/big" "serving volume 'a'"
d_same_sums big "$big_before" "$D_TMP/big" && d_ok "big's bytes untouched"

d_log "gone appears: usable"
truncate -s "$size" "$D_TMP/gone"
rp_ctl until 's["spares"][2]["usable"] and s["spares"][2]["claimed"]' 10 \
  >/dev/null || d_bad "gone did not become usable once it was there"
rp_stop
d_done
