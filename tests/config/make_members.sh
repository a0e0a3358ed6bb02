#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Creates the files that the bad configs in bad/ refer to, so that every
# bad config fails for the one reason it is about (and not for a missing
# file), and so that a daemon test can checksum the members before and
# after running over the corpus:
#
#   DIR/m0 .. DIR/m3   1 MiB members, each with distinct content
#   DIR/tls/           a directory, for serve.tls_certificates
#   DIR/psk            a file, for serve.tls_psk
#
# DIR defaults to /tmp/nbdstripe-bad-config-members, the path written in
# the bad configs.  Idempotent, and safe when several tests run it at once:
# each file is written aside and renamed into place.
set -euo pipefail

dir=${1:-/tmp/nbdstripe-bad-config-members}
mkdir -p "$dir/tls"

# put NAME < CONTENT
put ()
{
  local name=$1 tmp
  tmp=$(mktemp "$dir/.$name.XXXXXX")
  cat > "$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$dir/$name"
}

for i in 0 1 2 3; do
  [[ -f $dir/m$i ]] ||
    { yes "nbdstripe bad-config member $i" || :; } | head -c $((1024 * 1024)) \
      | put "m$i"
done
[[ -f $dir/psk ]] ||
  printf 'client:%s\n' 000102030405060708090a0b0c0d0e0f | put psk
