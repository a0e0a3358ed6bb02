#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every bad config of tests/config/bad is refused by `nbdstripe check`,
# `nbdstripe create`, `nbdstripe serve` and by the plugin itself (nbdkit
# ... config=FILE), each time with exit status 1 and a message on stderr
# that contains what the file promises on its first lines:
#
#   # expect: SUBSTRING      (required)
#   # line: N                the message names FILE:N: (else FILE: )
#
# and no member the configs name is changed (sha256 before and after).
#
# The configs point at /tmp/nbdstripe-bad-config-members; this test works
# on a private copy (tests/config/make_members.sh into its own directory,
# and the configs with that path replaced; lines do not move), so that
# nothing another test does can interfere, in either direction.
#
# serve runs with --foreground under a timeout: should it ever accept a bad
# config, the server it starts dies with the test instead of lingering.
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init nbdkit sha256sum

src=${NBDSTRIPE_SOURCE_DIR:-$(realpath "$(dirname "$0")/../..")}
orig_dir=/tmp/nbdstripe-bad-config-members
dir=$D_TMP/members
bash "$src/tests/config/make_members.sh" "$dir" || d_fail "make_members.sh $dir"
members=("$dir"/m0 "$dir"/m1 "$dir"/m2 "$dir"/m3 "$dir"/psk)
for m in "${members[@]}"; do [[ -f $m ]] || d_fail "make_members.sh did not make $m"; done
before=$(d_sums "${members[@]}")

mkdir "$D_TMP/bad"
n=0
for orig in "$src"/tests/config/bad/*.conf; do
  base=${orig##*/}
  conf=$D_TMP/bad/$base
  sed "s|$orig_dir|$dir|g" "$orig" >"$conf"
  expect=$(sed -n '/^[^#]/q; s/^# expect: //p' "$conf")
  line=$(sed -n '/^[^#]/q; s/^# line: //p' "$conf")
  if [[ -z $expect ]]; then
    d_bad "$base: no '# expect:' line"
    continue
  fi
  if [[ -n $line ]]; then where="$conf:$line: "; else where="$conf: "; fi
  n=$((n + 1))

  d_run "$base.check" d_ns check "$conf"
  d_expect_fail "$base.check"
  d_expect_err "$base.check" "nbdstripe: $where" "$expect"

  d_run "$base.create" d_ns create "$conf"
  d_expect_fail "$base.create"
  d_expect_err "$base.create" "nbdstripe: $where" "$expect"

  d_run "$base.serve" timeout -k 5 20 "${D_PRE[@]}" "$NBDSTRIPE" serve --foreground "$conf"
  d_expect_fail "$base.serve"
  d_expect_err "$base.serve" "nbdstripe: $where" "$expect"

  d_run "$base.plugin" timeout -k 5 20 "${D_PRE[@]}" nbdkit -U - "$STRIPE_PLUGIN" \
    "config=$conf" --run true
  [[ $D_RC -ne 0 ]] || d_bad "$base.plugin: nbdkit accepted it"
  [[ $D_RC -ne 124 && $D_RC -ne 137 ]] || d_bad "$base.plugin: nbdkit hung"
  d_expect_err "$base.plugin" "nbdkit: error: $where" "$expect"

  d_same_sums "$base" "$before" "${members[@]}" || :
done

[[ $n -ge 20 ]] || d_bad "only $n bad configs found in $src/tests/config/bad"
d_log "$n bad configs, 4 refusals each; members unchanged: $(d_same_sums final "$before" "${members[@]}" && echo yes)"
d_done
