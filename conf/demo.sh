#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The demo: install what is needed, build, make a volume of 4 sparse member
# images of mixed sizes with member headers, and serve it on a Unix socket
# until Ctrl-C.
#   conf/demo.sh [DIR]      (default DIR: /var/tmp/nbdstripe-demo)
set -euo pipefail
cd "$(dirname "$0")/.."

.ci/setup build
dir=$(realpath -m "${1:-/var/tmp/nbdstripe-demo}")
mkdir -p "$dir"
conf=$dir/fast0.conf
sock=$dir/fast0.sock
uri="nbd+unix:///?socket=$sock"

if [ ! -e "$conf" ]; then
  # Sparse images: they take no space until written.  Mixed sizes show the
  # zones: the last 512 MiB of the two larger members form a second zone.
  for m in 0:2G 1:2G 2:1536M 3:1536M; do
    truncate -s "${m#*:}" "$dir/member${m%%:*}.img"
  done
  cat > "$conf" <<CONF
name = "fast0";
chunk = "128K";
members = [ "$dir/member0.img", "$dir/member1.img",
            "$dir/member2.img", "$dir/member3.img" ];
serve = { socket = "$sock"; };
health = { status_file = "$dir/fast0.status.json"; interval = 2; };
CONF
  build/daemon/nbdstripe create "$conf"
fi
build/daemon/nbdstripe check "$conf"

cat <<MSG
== nbdstripe demo: volume 'fast0', 4 members, chunk 128K
   config:       $conf
   headers:      build/daemon/nbdstripe inspect $dir/member*.img
   health:       build/daemon/nbdstripe status fast0   (--json: the verdict and the status)
   served here:  build/daemon/nbdstripe list
   stop it:      build/daemon/nbdstripe stop fast0   (or Ctrl-C)
   look at it:   nbdinfo '$uri'
   copy in/out:  nbdcopy disk.img '$uri'
   attach (root, with the nbd kernel module):
       nbd-client -unix $sock /dev/nbd0 -b 4096 -connections 4
       mkfs.ext4 -b 4096 -E stride=32,stripe_width=128 /dev/nbd0
   Ctrl-C stops the server.
MSG
exec build/daemon/nbdstripe serve --foreground "$conf"
