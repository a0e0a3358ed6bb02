#!/usr/bin/env bash
# The demo: install what is needed, build, make a volume of 4 sparse member
# images of mixed sizes and serve it on a Unix socket until Ctrl-C.
#   conf/demo.sh [DIR]      (default DIR: /var/tmp/nbdstripe-demo)
set -euo pipefail
cd "$(dirname "$0")/.."

.ci/setup build
dir=${1:-/var/tmp/nbdstripe-demo}
mkdir -p "$dir"
# Sparse images: they take no space until written.  Mixed sizes show the
# zones: the last 512 MiB of the two larger members form a second zone.
for m in 0:2G 1:2G 2:1536M 3:1536M; do
  img="$dir/member${m%%:*}.img"
  [ -e "$img" ] || truncate -s "${m#*:}" "$img"
done
sock="$dir/fast0.sock"
uri="nbd+unix:///?socket=$sock"

cat <<MSG
== nbdstripe demo: 4 members, chunk 128K, served on $sock
   members: $dir/member{0,1,2,3}.img
   look at it:   nbdinfo '$uri'
   copy in/out:  nbdcopy disk.img '$uri'
   attach (root, nbd module):
       nbd-client -unix $sock /dev/nbd0 -b 4096
       mkfs.ext4 -E stride=32,stripe_width=128 /dev/nbd0
   Ctrl-C stops the server.
MSG
exec nbdkit -f -U "$sock" build/plugin/nbdkit-stripe-plugin.so chunk=128K \
  file="$dir/member0.img" file="$dir/member1.img" \
  file="$dir/member2.img" file="$dir/member3.img"
