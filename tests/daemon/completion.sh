#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The bash completion (daemon/nbdstripe.bash), sourced alone -- without
# bash-completion's helpers -- and asked as bash would ask it:
#
#   it registers itself for nbdstripe; it is valid bash
#   "nbdstripe <TAB>" offers every command `nbdstripe --help` lists
#   "nbdstripe CMD -<TAB>" offers exactly the long options CMD --help
#     lists, for every command (so the two cannot drift apart)
#   volume names from $NBDSTRIPE_CONFDIR, also after an option and for
#     stop the names of served volumes ($NBDSTRIPE_RUNDIR); nothing once
#     the VOLUME is given; an option after the operand
#   members: paths; --layout's words; --out's config files
source "$(dirname "$0")/../lib/daemon.sh" || exit 1
d_init

completion=$NBDSTRIPE_SOURCE_DIR/daemon/nbdstripe.bash
bash -n "$completion" || d_fail "$completion: not valid bash"
# shellcheck source=/dev/null
source "$completion" || d_fail "cannot source $completion"
[[ $(complete -p nbdstripe 2>/dev/null) == "complete -F _nbdstripe nbdstripe" ]] ||
  d_bad "sourcing it does not register _nbdstripe for nbdstripe"

export NBDSTRIPE_CONFDIR=$D_TMP/etc NBDSTRIPE_RUNDIR=$D_TMP/run
mkdir -p "$NBDSTRIPE_CONFDIR" "$NBDSTRIPE_RUNDIR" "$D_TMP/dev"
touch "$NBDSTRIPE_CONFDIR/fast0.conf" "$NBDSTRIPE_CONFDIR/fast1.conf" \
  "$NBDSTRIPE_CONFDIR/slow0.conf" "$NBDSTRIPE_RUNDIR/wide0.status.json" \
  "$D_TMP/dev/nvme0n1" "$D_TMP/dev/nvme1n1" "$D_TMP/x.conf" "$D_TMP/notes"

# complete WORD...: COMPREPLY for the command line WORD... (the last word
# is the one being completed; "" for a new word), sorted, one a line.
complete_words ()
{
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_LINE="$*"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _nbdstripe nbdstripe "${COMP_WORDS[COMP_CWORD]}" \
    "${COMP_WORDS[COMP_CWORD - 1]}" 2>/dev/null
  printf '%s\n' "${COMPREPLY[@]}" | sort
}
# expect NAME WANT WORD...: the completions are exactly WANT (one a line).
expect ()
{
  local name=$1 want=$2 got
  shift 2
  got=$(complete_words "$@")
  [[ $got == "$want" ]] ||
    d_bad "$name: '$*' completes to [$(tr '\n' ' ' <<<"$got")], expected [$(tr '\n' ' ' <<<"$want")]"
}
lines () { printf '%s\n' "$@" | sort; }

# Every command --help lists.
"$NBDSTRIPE" --help >"$D_TMP/help" || d_fail "nbdstripe --help"
cmds=$(sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\)\( .*\)\?$/\1/p' "$D_TMP/help")
[[ -n $cmds ]] || d_fail "no command found in nbdstripe --help"
expect commands "$(lines $cmds --help --version)" nbdstripe ""
expect ch "$(lines check)" nbdstripe ch
expect st "$(lines status stop)" nbdstripe st

# Every command's options: exactly those its --help lists.
for c in $cmds; do
  "$NBDSTRIPE" "$c" --help >"$D_TMP/$c.help" || d_bad "$c --help failed"
  opts=$(grep -E '^ +(-[a-zA-Z], )?--' "$D_TMP/$c.help" |
         grep -o -E -- '--[a-z][a-z-]*' | sort -u)
  expect "$c.options" "$(lines $opts)" nbdstripe "$c" -
done

expect names "$(lines fast0 fast1)" nbdstripe check f
expect names-after-option "$(lines fast0 fast1 slow0)" nbdstripe status --json ""
expect served-names "$(lines fast0 fast1 slow0 wide0)" nbdstripe stop ""
expect one-volume "" nbdstripe check fast0 ""
expect option-after-operand "$(lines --json)" nbdstripe check fast0 --j
expect accept-volume "$(lines slow0)" nbdstripe accept s
expect path "$(lines "$D_TMP/x.conf")" nbdstripe serve "$D_TMP/x"
expect members "$(lines "$D_TMP/dev/nvme0n1" "$D_TMP/dev/nvme1n1")" \
  nbdstripe inspect --json "$D_TMP/dev/nv"
expect more-members "$(lines "$D_TMP/dev/nvme1n1")" \
  nbdstripe import "$D_TMP/dev/nvme0n1" "$D_TMP/dev/nvme1"
expect layout "$(lines original)" nbdstripe import --layout o
expect out "$(lines "$D_TMP/x.conf")" nbdstripe import --out "$D_TMP/x"
expect timeout "" nbdstripe stop --timeout ""
expect replace-volume "$(lines fast0 fast1)" nbdstripe replace --wait f
expect replace-index "" nbdstripe replace fast0 ""
expect replace-new "$(lines "$D_TMP/dev/nvme0n1" "$D_TMP/dev/nvme1n1")" \
  nbdstripe replace fast0 1 --rate 100M "$D_TMP/dev/nv"
expect replace-done "" nbdstripe replace fast0 1 "$D_TMP/dev/nvme0n1" ""
expect replace-cancel "" nbdstripe replace --cancel fast0 ""
expect rate "" nbdstripe replace --rate ""
d_ok "commands, options, volume names, members"
d_done
