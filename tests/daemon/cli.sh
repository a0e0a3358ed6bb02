#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The command line: exit status 0 on success, 1 when the command failed,
# 2 for a usage error (nbdstripe(8), EXIT STATUS).
#
#   --help, -h: usage on stdout listing every command, exit 0
#   --version, -V: "nbdstripe VERSION" (the project's version), exit 0
#   no command: a short usage on stderr (the commands, and where to read
#     more), exit 3; an unknown command: usage on stderr, exit 2
#   COMMAND --help (-h) for each command: its usage on stdout, exit 0;
#   COMMAND -V: the version
#   an unknown option, a missing or extra CONFIG: exit 2, usage on stderr
#   a well-formed command that fails (a config that does not exist): 1
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init

# expect NAME STATUS STREAM SUBSTRING -- ARGS...: nbdstripe ARGS exits
# STATUS and STREAM (out or err) contains SUBSTRING ("" for anything).
expect ()
{
  local name=$1 status=$2 stream=$3 s=$4
  shift 5
  d_run "$name" d_ns "$@"
  [[ $D_RC -eq $status ]] || d_bad "$name: nbdstripe $*: exit $D_RC, expected $status"
  [[ -z $s ]] || grep -q -F -- "$s" "$D_TMP/$name.$stream" ||
    d_bad "$name: std$stream lacks: $s"
}

expect help 0 out "Usage: nbdstripe COMMAND" -- --help
for c in create serve check status list stop accept inspect import replace; do
  grep -q -E "^ +$c( |$)" "$D_TMP/help.out" || d_bad "--help does not list '$c'"
done
[[ ! -s $D_TMP/help.err ]] || d_bad "--help wrote to stderr"
expect help.h 0 out "Usage: nbdstripe COMMAND" -- -h
expect version 0 out "nbdstripe " -- --version
if [[ -n ${NBDSTRIPE_VERSION:-} ]]; then
  [[ $(<"$D_TMP/version.out") == "nbdstripe $NBDSTRIPE_VERSION" ]] ||
    d_bad "--version says '$(<"$D_TMP/version.out")', expected 'nbdstripe $NBDSTRIPE_VERSION'"
fi
expect version.V 0 out "nbdstripe " -- -V

expect no-command 3 err "Usage: nbdstripe COMMAND" --
grep -q -F "Try 'nbdstripe --help' for more" "$D_TMP/no-command.err" ||
  d_bad "no command: does not point at 'nbdstripe --help'"
for c in create serve check status list stop accept inspect import replace grow shrink scrub; do
  grep -q -w -- "$c" "$D_TMP/no-command.err" || d_bad "no command: '$c' not named"
done
(( $(wc -l <"$D_TMP/no-command.err") <= 5 )) ||
  d_bad "no command: $(wc -l <"$D_TMP/no-command.err") lines, expected a short usage (5 at most)"
[[ ! -s $D_TMP/no-command.out ]] || d_bad "no command: wrote to stdout"
expect unknown 2 err "unknown command 'frobnicate'" -- frobnicate
expect unknown-option 2 err "" -- --frobnicate

for c in create serve check status list stop accept inspect import replace; do
  expect "$c.help" 0 out "Usage: nbdstripe $c" -- "$c" --help
  expect "$c.h" 0 out "Usage: nbdstripe $c" -- "$c" -h
  expect "$c.V" 0 out "nbdstripe " -- "$c" -V
  [[ $(<"$D_TMP/$c.V.out") == "$(<"$D_TMP/version.out")" ]] ||
    d_bad "$c -V does not say what --version says"
done

expect create.bad-option 2 err "Usage: nbdstripe create" -- create --frobnicate x.conf
expect serve.bad-option 2 err "Usage: nbdstripe serve" -- serve --frobnicate x.conf
expect check.bad-option 2 err "Usage: nbdstripe check" -- check --frobnicate
expect inspect.bad-option 2 err "Usage: nbdstripe inspect" -- inspect --frobnicate x
expect create.no-config 2 err "Usage: nbdstripe create" -- create
expect serve.no-config 2 err "Usage: nbdstripe serve" -- serve
expect check.no-config 2 err "Usage: nbdstripe check" -- check
expect inspect.no-member 2 err "Usage: nbdstripe inspect" -- inspect
expect create.two-configs 2 err "Usage: nbdstripe create" -- create a.conf b.conf
expect serve.two-configs 2 err "Usage: nbdstripe serve" -- serve a.conf b.conf
expect check.two-configs 2 err "Usage: nbdstripe check" -- check a.conf b.conf
expect list.operand 2 err "Usage: nbdstripe list" -- list a.conf
expect stop.no-volume 2 err "Usage: nbdstripe stop" -- stop
expect stop.bad-option 2 err "Usage: nbdstripe stop" -- stop --frobnicate x.conf
expect accept.no-index 2 err "Usage: nbdstripe accept" -- accept a.conf
expect accept.three 2 err "Usage: nbdstripe accept" -- accept a.conf 1 2
expect import.no-member 2 err "Usage: nbdstripe import" -- import
expect replace.no-new 2 err "Usage: nbdstripe replace" -- replace a.conf 1
expect replace.four 2 err "unexpected operand 'x'" -- replace a.conf 1 b x
expect replace.index 2 err "INDEX 'one'" -- replace a.conf one b
expect replace.rate 2 err "--rate '-1'" -- replace --rate -1 a.conf 1 b
expect replace.cancel-extra 2 err "unexpected operand '1'" -- replace --cancel a.conf 1
expect replace.cancel-wait 2 err "--cancel and --wait" -- replace a.conf --cancel -w

missing=$D_TMP/no-such.conf
expect create.missing 1 err "$missing" -- create "$missing"
expect serve.missing 1 err "$missing" -- serve "$missing"
expect check.missing 1 err "$missing" -- check "$missing"
expect inspect.missing 1 err "no-such-member" -- inspect "$D_TMP/no-such-member"
expect replace.missing 1 err "$missing" -- replace "$missing" 0 "$D_TMP/new"
expect replace.cancel-missing 1 err "$missing" -- replace --cancel "$missing"
d_done
