# SPDX-License-Identifier: BSD-3-Clause
# bash completion for nbdstripe(8)                         -*- shell-script -*-
#
# Commands, their options, volume names (the configs in the config
# directory, $NBDSTRIPE_CONFDIR or /etc/nbdstripe, and for stop the status
# files of served volumes), config files and member paths.  Standalone:
# it does not need bash-completion's helpers (_init_completion, _filedir),
# so it also works when only this file is sourced.
#
# The option lists are the ones `nbdstripe COMMAND --help` prints (the
# test tests/daemon/completion.sh compares them).

_nbdstripe_commands="create serve check status list stop accept inspect import replace grow shrink scrub lost-files"

# _nbdstripe_options COMMAND: its options, long forms.
_nbdstripe_options ()
{
  case $1 in
  create) echo "--force --discard --json" ;;
  serve) echo "--foreground --read-only --degraded" ;;
  check | status | list | accept | inspect) echo "--json" ;;
  stop) echo "--timeout --strict --json" ;;
  import) echo "--out --json --force --name --layout" ;;
  replace)
    echo "--rate --wait --force --skip-unreadable --offline --accept-stale --dry-run --cancel --json"
    ;;
  grow | shrink)
    echo "--rate --size --wait --force --offline --dry-run --cancel --json"
    ;;
  scrub) echo "--rate --wait --cancel --json" ;;
  lost-files) echo "--member --json" ;;
  esac
}

# Options that take an argument (the next word).
_nbdstripe_takes_arg ()
{
  case $1 in
  --out | -o | --name | --layout | --timeout | -t | --rate | --size | \
    --member | -m)
    return 0
    ;;
  esac
  return 1
}

# Volume names: NAME for every DIR/NAME.conf (and with served, NAME for
# every served RUNDIR/NAME.status.json).
_nbdstripe_names ()
{
  local f
  for f in "${NBDSTRIPE_CONFDIR:-/etc/nbdstripe}"/*.conf; do
    [[ -f $f ]] || continue
    f=${f##*/}
    printf '%s\n' "${f%.conf}"
  done
  if [[ ${1-} == served ]]; then
    for f in "${NBDSTRIPE_RUNDIR:-/run/nbdstripe}"/*.status.json; do
      [[ -f $f ]] || continue
      f=${f##*/}
      printf '%s\n' "${f%.status.json}"
    done
  fi
}

# _nbdstripe_files CUR [GLOB]: paths under CUR (directories, then files
# matching GLOB, all files without one), as filenames.
_nbdstripe_files ()
{
  local cur=$1 glob=${2-} line
  compopt -o filenames 2>/dev/null
  while IFS= read -r line; do
    COMPREPLY+=("$line")
  done < <(compgen -d -- "$cur"
           if [[ -n $glob ]]; then
             compgen -f -X "!$glob" -- "$cur"
           else
             compgen -f -- "$cur"
           fi)
}

_nbdstripe ()
{
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
  local cmd="" i w n=0 line opts
  COMPREPLY=()

  # The command: the first word that is not an option.
  for ((i = 1; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} != -* ]]; then
      cmd=${COMP_WORDS[i]}
      break
    fi
  done
  if [[ -z $cmd ]]; then
    while IFS= read -r line; do
      COMPREPLY+=("$line")
    done < <(compgen -W "$_nbdstripe_commands --help --version" -- "$cur")
    return 0
  fi

  # An option's argument.
  case $prev in
  --out | -o)
    _nbdstripe_files "$cur" '*.conf'
    return 0
    ;;
  --layout)
    COMPREPLY=($(compgen -W "original alternate" -- "$cur"))
    return 0
    ;;
  --name | --timeout | -t | --rate | --member | -m) return 0 ;;
  esac

  if [[ $cur == -* ]]; then
    opts="$(_nbdstripe_options "$cmd") --help --version"
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return 0
  fi

  # Which operand this is: the words after the command that are neither
  # options nor their arguments (options may follow operands).
  for ((i = i + 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    if [[ $w == -- ]]; then
      continue
    elif [[ $w == -* ]]; then
      _nbdstripe_takes_arg "$w" && ((i++))
    else
      ((n++))
    fi
  done

  case $cmd in
  create | serve | check | status | stop | accept | scrub | lost-files)
    # VOLUME (accept: then INDEX, a number: nothing to offer).
    if ((n == 0)); then
      while IFS= read -r line; do
        COMPREPLY+=("$line")
      done < <(compgen -W "$(_nbdstripe_names \
                 "$([[ $cmd == stop ]] && echo served)")" -- "$cur")
      # A path as well, once it looks like one or when no name fits.
      if [[ $cur == */* || $cur == .* || ${#COMPREPLY[@]} -eq 0 ]]; then
        _nbdstripe_files "$cur" '*.conf'
      fi
    fi
    ;;
  inspect | import)
    # MEMBER...: files and block devices.
    _nbdstripe_files "$cur"
    ;;
  grow | shrink)
    # VOLUME, then (grow) NEW...: files and block devices; (shrink) INDEX;
    # with --cancel, VOLUME alone.
    if ((n == 0)); then
      while IFS= read -r line; do
        COMPREPLY+=("$line")
      done < <(compgen -W "$(_nbdstripe_names)" -- "$cur")
      if [[ $cur == */* || $cur == .* || ${#COMPREPLY[@]} -eq 0 ]]; then
        _nbdstripe_files "$cur" '*.conf'
      fi
    elif [[ $cmd == grow && " ${COMP_WORDS[*]} " != *" --cancel "* ]]; then
      _nbdstripe_files "$cur"
    fi
    ;;
  replace)
    # VOLUME, then INDEX (a number: nothing to offer), then NEW (a file or
    # block device); with --cancel, VOLUME alone.
    if ((n == 0)); then
      while IFS= read -r line; do
        COMPREPLY+=("$line")
      done < <(compgen -W "$(_nbdstripe_names)" -- "$cur")
      if [[ $cur == */* || $cur == .* || ${#COMPREPLY[@]} -eq 0 ]]; then
        _nbdstripe_files "$cur" '*.conf'
      fi
    elif ((n == 2)) && [[ " ${COMP_WORDS[*]} " != *" --cancel "* ]]; then
      _nbdstripe_files "$cur"
    fi
    ;;
  esac
  return 0
}

complete -F _nbdstripe nbdstripe
