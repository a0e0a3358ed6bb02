#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `nbdstripe serve` fails, and never runs nbdkit, when one of nbdkit's
# arguments cannot be built (asprintf failing with ENOMEM, made to fail by
# an LD_PRELOAD shim for one format at a time): it used to drop the
# argument silently and run nbdkit with the rest ("-t" followed by the
# plugin's path, no config=).
#
# nbdkit is a stand-in on PATH that records its arguments, and serve runs
# with --foreground (exec): a run of it is the failure.  For each format
# serve builds -- "%u" (threads), "config=%s" (Unix socket config), "%d"
# (port) and "--tls-psk=%s" (TCP config with TLS and a PSK) -- asserts
# exit status 1, a message naming the config, and no nbdkit run.  Then,
# with no failure injected, serve runs the stand-in with every argument.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init
[[ -n ${FAIL_ASPRINTF_SHIM:-} && -f $FAIL_ASPRINTF_SHIM ]] ||
  d_fail "FAIL_ASPRINTF_SHIM is not set (run through ctest)"

mkdir bin
cat >bin/nbdkit <<EOF2
#!/bin/sh
printf '%s\n' "\$@" >"$D_TMP/nbdkit.args"
EOF2
chmod +x bin/nbdkit
# In a sanitizer build the shim must come before the sanitizer runtime,
# whose own asprintf would win otherwise; the runtime then tolerates not
# being first.
asan_options="verify_asan_link_order=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

M=$((1024 * 1024))
truncate -s $((2 * M)) m0 m1
printf 'a:%s\n' 00112233445566778899aabbccddeeff >psk
chmod 0600 psk
d_conf unix.conf vol0 64K "socket = \"$D_TMP/vol.sock\";" "$D_TMP/m0" "$D_TMP/m1"
echo 'metadata = "none";' >>unix.conf
d_conf tcp.conf vol0 64K \
  "port = 10809; tls = \"require\"; tls_psk = \"$D_TMP/psk\";" "$D_TMP/m0" "$D_TMP/m1"
echo 'metadata = "none";' >>tcp.conf

# serve_with NAME CONFIG [FORMAT]: serve --foreground CONFIG with asprintf
# failing for FORMAT.
serve_with ()
{
  rm -f nbdkit.args
  d_run "$1" env PATH="$D_TMP/bin:$PATH" LD_PRELOAD="$FAIL_ASPRINTF_SHIM" \
    ASAN_OPTIONS="$asan_options" FAIL_ASPRINTF_FORMAT="${3-}" \
    "$NBDSTRIPE" serve --foreground "$2"
}

for case in 'unix.conf|%u' 'unix.conf|config=%s' 'tcp.conf|%d' \
            'tcp.conf|--tls-psk=%s'; do
  conf=${case%%|*} fmt=${case#*|}
  serve_with "oom.$fmt" "$conf" "$fmt"
  d_expect_fail "oom.$fmt"
  d_expect_err "oom.$fmt" "$conf: cannot build nbdkit's command line"
  if [[ -e nbdkit.args ]]; then
    d_bad "asprintf(\"$fmt\") failed, yet nbdkit ran with: $(tr '\n' ' ' <nbdkit.args)"
  else
    d_ok "asprintf(\"$fmt\") failed: refused, nbdkit not run"
  fi
done

serve_with control unix.conf
[[ $D_RC -eq 0 ]] || d_bad "control: serve exited $D_RC"
grep -q -x -F "config=$D_TMP/unix.conf" nbdkit.args 2>/dev/null &&
  grep -q -x -F -- "-t" nbdkit.args && grep -q -x 16 nbdkit.args ||
  d_bad "control: nbdkit ran without config= or -t 16: $(tr '\n' ' ' <nbdkit.args 2>&1)"
d_done
