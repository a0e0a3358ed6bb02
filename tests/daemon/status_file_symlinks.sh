#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The status and Prometheus files may live in a directory other users can
# write to (a sticky, world-writable one like /tmp here; a node_exporter
# textfile directory shared with a group): the server, running as root,
# must never follow a symlink planted there.
#
# Another user (nobody) plants, in a sticky world-writable directory,
# symlinks to a root-owned victim file at every name the old code wrote
# through (FILE.tmp for both files) and at the files themselves.  A volume
# is served with health.status_file and health.prometheus_file there
# (interval 1 s), rewritten a few times, then stopped (the last write,
# running false).
#
# Asserts:
# - the victim is byte for byte what it was, its mode and owner too;
# - the status file is a regular file (not a link), mode 0644, owned by
#   root, a JSON document of format 1 for this volume, running true while
#   served and false once stopped; the Prometheus file is a regular file
#   with the volume's metrics;
# - the other user's links at FILE.tmp are still there (not ours to
#   remove), and no temporary of ours (.FILE.XXXXXX) is left behind;
# - a status file whose directories do not exist yet gets them (mode
#   0755), as before;
# - without serve.pidfile, the pidfile is beside the status file
#   (FILE.pid): a link nobody planted there is not followed either, with
#   serve and with serve --foreground (the victim untouched), the
#   pidfile is a regular file, 0644, root's, naming the server, and stop
#   finds the server through it; in directories that do not exist yet,
#   serve makes them for it.
#
# Needs root (the threat is root writing where others can plant links)
# and setpriv; skipped otherwise.  Waits on the status file with bounded
# polling loops (the file has no event to wait on).
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit jq setpriv

[[ $(id -u) -eq 0 ]] || d_skip "needs root: the test plants links as another user"
getent passwd nobody >/dev/null || d_skip "no user nobody"
nobody_group=$(id -gn nobody) || d_skip "user nobody has no group"

# The other user must reach the shared directory.
chmod 0711 "$D_TMP"
pub=$D_TMP/pub
mkdir "$pub" && chmod 1777 "$pub" || d_fail "mkdir $pub"
victim=$D_TMP/victim
d_random "$victim" 4096
chmod 0644 "$victim"
victim_before=$(d_sums "$victim")
victim_stat=$(stat -c '%a %U %G %s' "$victim")

as_nobody () { setpriv --reuid=nobody --regid="$nobody_group" --clear-groups "$@"; }

status=$pub/status.json
prom=$pub/metrics.prom
planted=("$status.tmp" "$prom.tmp" "$status" "$prom")
for l in "${planted[@]}"; do
  as_nobody ln -s "$victim" "$l" || d_fail "nobody cannot plant $l"
done
d_log "planted by nobody: $(cd "$pub" && stat -c '%N (%U)' ./* ./.??* 2>/dev/null | tr '\n' ' ')"

M=$((1024 * 1024))
truncate -s $((2 * M)) m0 m1
cat >vol.conf <<EOF
name = "links";
chunk = "64K";
metadata = "none";
members = [ "$D_TMP/m0", "$D_TMP/m1" ];
serve = { socket = "$D_TMP/vol.sock"; pidfile = "$D_TMP/vol.pid"; };
health = {
  status_file = "$status";
  prometheus_file = "$prom";
  interval = 1;
};
EOF

# json_ok FILE EXPR: FILE is a regular file (not a link) holding a JSON
# document for which the jq expression EXPR is true.
json_ok () { [[ -f $1 && ! -L $1 ]] && jq -e "$2" "$1" >/dev/null 2>&1; }

# wait_json WHAT FILE EXPR SECONDS: poll until json_ok FILE EXPR.
wait_json ()
{
  local what=$1 file=$2 expr=$3 deadline=$((SECONDS + $4))
  until json_ok "$file" "$expr"; do
    if ((SECONDS >= deadline)); then
      d_bad "$what: not within $4 s ($expr); $file is: $(stat -c '%F' "$file" 2>&1)"
      return 1
    fi
    sleep 0.1
  done
  d_ok "$what"
}

d_serve serve vol.conf "$D_TMP/vol.pid" || d_fail "nbdstripe serve failed"
base='.format == 1 and .volume.name == "links" and (.members | length) == 2'
wait_json "the status file is written" "$status" "$base and .running == true" 10
first=$(jq .updated_unix "$status" 2>/dev/null) || first=0
wait_json "the status file is rewritten (interval 1 s)" "$status" \
  "$base and .updated_unix > $first + 1" 10
d_stop "$D_SERVER_PID"
wait_json "the last write says running false" "$status" "$base and .running == false" 1

d_log "what the server left in $pub: $(cd "$pub" && stat -c '%n %F %a %U' ./* ./.??* 2>/dev/null | tr '\n' ';')"
if d_same_sums victim "$victim_before" "$victim" &&
   [[ $(stat -c '%a %U %G %s' "$victim") == "$victim_stat" ]]; then
  d_ok "the victim is untouched"
else
  d_bad "the victim was written through a planted link"
fi
for f in "$status" "$prom"; do
  if [[ -f $f && ! -L $f && $(stat -c '%a %U' "$f") == "644 root" ]]; then
    d_ok "$f: a regular file, 0644, root's"
  else
    d_bad "$f: $(stat -c '%F, mode %a, owner %U' "$f" 2>&1), expected a regular file, 0644, root's"
  fi
done
grep -q '^nbdstripe_volume_' "$prom" 2>/dev/null ||
  d_bad "$prom holds no nbdstripe_volume_ metrics"
for l in "$status.tmp" "$prom.tmp"; do
  [[ -L $l && $(readlink "$l") == "$victim" ]] || d_bad "$l: nobody's link was removed or changed"
done
left=$(find "$pub" -name '.status.json.*' -o -name '.metrics.prom.*')
[[ -z $left ]] || d_bad "temporaries left behind: $left"

d_log "no serve.pidfile: the one beside the status file, never through a link"
pidfile=$status.pid
sed -e '/^serve = /s|pidfile = "[^"]*"; ||' vol.conf >default.conf
grep -q pidfile default.conf && d_fail "default.conf still names a pidfile"

# beside NAME PID: the server PID (serve's NAME) wrote its pid into its
# own pidfile, not through nobody's link, and stop stops it through it.
beside ()
{
  local name=$1 pid=$2
  if d_same_sums victim "$victim_before" "$victim" &&
     [[ $(stat -c '%a %U %G %s' "$victim") == "$victim_stat" ]]; then
    d_ok "$name: the victim is untouched by the pidfile"
  else
    d_bad "$name: the server's pid was written through the link planted at $pidfile"
  fi
  if [[ -f $pidfile && ! -L $pidfile && $(stat -c '%a %U' "$pidfile") == "644 root" &&
        $(<"$pidfile") == "$pid" ]] &&
     tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null |
       grep -q -x -F "config=$D_TMP/default.conf"; then
    d_ok "$name: $pidfile: a regular file, 0644, root's, naming the server ($pid)"
  else
    d_bad "$name: $pidfile: $(stat -c '%F, mode %a, owner %U' "$pidfile" 2>&1), holding '$(head -c 32 "$pidfile" 2>&1)', not the server's ($pid)"
  fi
  d_run "$name.stop" d_ns stop default.conf
  [[ $D_RC -eq 0 ]] &&
    grep -q -x "links: stopped (server pid $pid)" "$D_TMP/$name.stop.out" ||
    d_bad "$name: stop did not stop the server $pid through its pidfile"
  d_wait_gone "$pid" 30 || d_fail "$name: the server $pid did not exit"
  D_PIDS=()
}

as_nobody ln -s "$victim" "$pidfile" || d_fail "nobody cannot plant $pidfile"
d_run serve.default d_ns_serve default.conf
[[ $D_RC -eq 0 ]] || d_fail "nbdstripe serve (no serve.pidfile) failed"
pid=$(head -c 32 "$pidfile" 2>/dev/null | tr -dc 0-9)
[[ -n $pid ]] && D_PIDS+=("$pid")
beside serve.default "$pid"

# In the foreground (as under systemd) too.  (The last server's pidfile
# is root's: nobody can no longer replace it, but it may not be there.)
rm -f "$pidfile"
as_nobody ln -s "$victim" "$pidfile" || d_fail "nobody cannot plant $pidfile"
setsid "${D_PRE[@]}" "$NBDSTRIPE" serve --foreground default.conf \
  >"$D_TMP/fg.out" 2>"$D_TMP/fg.err" </dev/null &
fg=$!
D_PIDS+=("$fg")
wait_json "serve --foreground: the status file is written" "$status" \
  "$base and .running == true and .pid == $fg" 10 ||
  sed 's/^/   | /' "$D_TMP/fg.err"
beside serve.foreground "$fg"
wait "$fg" 2>/dev/null

d_log "directories of the status file that do not exist yet are made"
deep=$D_TMP/run/a/b/status.json
sed -i -e "s|$status|$deep|" -e "/prometheus_file/d" vol.conf
d_serve deep vol.conf "$D_TMP/vol.pid" || d_fail "nbdstripe serve (deep status file) failed"
wait_json "status file in new directories" "$deep" "$base and .running == true" 10
[[ $(stat -c %a "$D_TMP/run/a/b") == 755 ]] || d_bad "$D_TMP/run/a/b: mode $(stat -c %a "$D_TMP/run/a/b"), expected 755"
d_stop "$D_SERVER_PID"
# And without serve.pidfile: serve makes them for the pidfile beside it.
deep=$D_TMP/run2/c/d/status.json
sed -e '/^serve = /s|pidfile = "[^"]*"; ||' -e "s|$D_TMP/run/a/b/status.json|$deep|" \
  vol.conf >deep.conf
d_serve deep.default deep.conf "$deep.pid" ||
  d_fail "nbdstripe serve (deep status file, no serve.pidfile) failed"
wait_json "status file in new directories, no serve.pidfile" "$deep" \
  "$base and .running == true" 10
[[ $(stat -c %a "$D_TMP/run2/c/d") == 755 ]] || d_bad "$D_TMP/run2/c/d: mode $(stat -c %a "$D_TMP/run2/c/d"), expected 755"
d_stop "$D_SERVER_PID"
d_done
