#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Nothing slow runs under a lock that the status, the health thread or the
# I/O path takes: a replace onto a NEW that takes seconds to open -- an
# NBD server that accepts the connection and never answers the handshake
# (NEW's open waits up to 30 s) -- must not stall anything else
# meanwhile:
#
#   - the control socket's status answers at once (within 3 s);
#   - the health thread goes on writing the status file (interval 1 s:
#     its updated_unix moves on);
#   - the volume serves reads and writes;
#   - a second replace asked meanwhile is refused at once ("being started
#     already");
# and once the hung server goes away, the replace is refused naming NEW,
# nothing written to the members.
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../lib/replace.sh" || exit 1
rp_init libnbd

size=$((9 * M))
for f in m0 m1 n2; do truncate -s "$size" "$D_TMP/$f"; done
rp_volume vol 64K "" "$D_TMP/m0" "$D_TMP/m1"
sed -i "s|^health = { status_file = \"\\([^\"]*\\)\"; };|health = { status_file = \"\\1\"; interval = 1; };|" "$RP_CONF"
grep -q "interval = 1;" "$RP_CONF" || d_fail "the config has no interval"
rp_create
rp_start vol

# The hung NBD server: accepts, never answers; says when it has a client.
cat >"$D_TMP/hung.py" <<EOF
import os, socket, time
s = socket.socket(socket.AF_UNIX)
s.bind("$D_TMP/hung.sock")
s.listen(8)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
    open("$D_TMP/hung.accepted", "a").write("x")
EOF
setsid "$RP_PY" "$D_TMP/hung.py" </dev/null >/dev/null 2>&1 &
D_BGPIDS+=("$!")
hung=$!
until [[ -S $D_TMP/hung.sock ]]; do sleep 0.02; done

rp_ctl send "{\"op\": \"replace\", \"member\": 1, \"new\": \"nbd+unix:///?socket=$D_TMP/hung.sock\"}" \
  >"$D_TMP/first.json" 2>&1 &
first=$!
# NEW's open is under way once the hung server has its connection.
end=$((SECONDS + 30))
until [[ -s $D_TMP/hung.accepted ]] || ((SECONDS > end)); do sleep 0.02; done
[[ -s $D_TMP/hung.accepted ]] || d_fail "the replace never connected to NEW"

t0=$EPOCHREALTIME
if timeout 3 "$RP_PY" "$RP_LIB/replace_ctl.py" "$RP_CTL" status >/dev/null; then
  d_ok "the status answers while NEW is being opened ($(r_elapsed_ms "$t0") ms)"
else
  d_bad "the status did not answer within 3 s while NEW is being opened"
fi
u1=$(jq -r .updated_unix "$RP_STATUS")
end=$((SECONDS + 5))
u2=$u1
while [[ $u2 == "$u1" ]] && ((SECONDS <= end)); do
  sleep 0.1
  u2=$(jq -r .updated_unix "$RP_STATUS" 2>/dev/null || echo "$u1")
done
if [[ $u2 != "$u1" ]]; then
  d_ok "the status file is written meanwhile ($u1 -> $u2)"
else
  d_bad "the status file was not written for 5 s while NEW is being opened"
fi
d_random "$D_TMP/pattern" $((2 * (size - M)))
if timeout 10 nbdcopy "$D_TMP/pattern" "$RP_URI"; then
  d_ok "the volume is written meanwhile"
else
  d_bad "writing the volume failed or hung while NEW is being opened"
fi
if out=$(timeout 5 "$RP_PY" "$RP_LIB/replace_ctl.py" "$RP_CTL" send \
           "{\"op\": \"replace\", \"member\": 0, \"new\": \"$D_TMP/n2\"}"); then
  d_bad "a second replace was accepted while one is being started"
elif grep -q "being started" <<<"$out"; then
  d_ok "a second replace is refused at once: $(jq -r .error <<<"$out")"
else
  d_bad "the second replace: $out"
fi
kill -KILL "$hung"
wait "$first"
if grep -q '"ok": false' "$D_TMP/first.json" && grep -q "hung.sock" "$D_TMP/first.json"; then
  d_ok "the replace is refused naming NEW: $(jq -r .error "$D_TMP/first.json")"
else
  d_bad "the replace onto the hung NEW: $(cat "$D_TMP/first.json")"
fi
rp_same after "$D_TMP/pattern" || d_bad "the volume lost data"
rp_stop
d_done
