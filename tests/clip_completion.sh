#!/usr/bin/env bash
# dtrain-clip's completion scripts, run for real: bash, zsh (through bashcompinit) and fish complete
# its commands, a command's flags and a flag's values; every flag the completion offers is taken by
# that command's parser as the completion says (with a value, or as a switch); and the commands
# offered are those `dtrain-clip --help` lists.
#   tests/clip_completion.sh BUILD/dtrain-clip
set -uo pipefail
clip=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
expect() {  # WHAT GOT WANT
  if [ "$2" = "$3" ]; then echo "ok: $1"; else fail "$1: got [$2], want [$3]"; fi
}

for shell in bash zsh fish; do
  "$clip" completion $shell >"$work/completion.$shell" || fail "completion $shell exited $?"
done
"$clip" completion tcsh >/dev/null 2>"$work/err"
expect "completion tcsh is refused" "$?:$(cat "$work/err")" \
  "2:dtrain-clip: no completion for shell 'tcsh': bash, zsh or fish"
bash -n "$work/completion.bash" || fail "bash -n: the bash script does not parse"
zsh -n "$work/completion.zsh" || fail "zsh -n: the zsh script does not parse"
fish -n "$work/completion.fish" || fail "fish -n: the fish script does not parse"

# Completions are asked in a folder holding one file, so that file names show where offered.
mkdir "$work/here" && touch "$work/here/shard-0.tar"
cd "$work/here" || exit 1
bash_complete() {  # WORDS... (the last one is the word being completed)
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _dtrain_clip
           printf "%s\n" "${COMPREPLY[@]}"' _ "$work/completion.bash" "$@" | sort | paste -sd' '
}
# zsh's compgen (bashcompinit) leaves the matching of the typed word to zsh's own matcher, so the
# replies are matched here as zsh matches them: by prefix.
zsh_complete() {
  zsh -fc 'autoload -U compinit && compinit -u -D; source "$1"; shift; setopt ksharrays
           COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _dtrain_clip
           print -l -- "${(M)COMPREPLY[@]:#${COMP_WORDS[COMP_CWORD]}*}"' _ "$work/completion.zsh" \
    "$@" | sort | paste -sd' '
}
fish_complete() {  # COMMAND-LINE
  fish -c 'source $argv[1]; complete -C $argv[2]' "$work/completion.fish" "$1" | cut -f1 |
    sort | paste -sd' '
}
for shell in bash zsh; do
  c=${shell}_complete
  expect "$shell: a command" "$($c dtrain-clip tr)" "train"
  expect "$shell: a flag" "$($c dtrain-clip export-data --image-f)" "--image-format"
  expect "$shell: a flag's values" "$($c dtrain-clip train --bad-data '')" "fatal skip"
  expect "$shell: values or files" "$($c dtrain-clip train --resume '')" "latest shard-0.tar"
  expect "$shell: a file after a flag that takes one" "$($c dtrain-clip train --train-data s)" \
    "shard-0.tar"
  expect "$shell: completion's shells" "$($c dtrain-clip completion '')" "bash fish zsh"
done
expect "fish: a command" "$(fish_complete 'dtrain-clip tr')" "train"
expect "fish: a flag" "$(fish_complete 'dtrain-clip export-data --image-f')" "--image-format"
expect "fish: a flag's values" "$(fish_complete 'dtrain-clip train --bad-data ')" "fatal skip"
expect "fish: completion's shells" "$(fish_complete 'dtrain-clip completion ')" "bash fish zsh"

# The commands: those of dtrain-clip --help.
listed=$("$clip" --help | sed -n '/^Commands:/,/^Flags:/p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' |
  sort | paste -sd' ')
offered=$(bash_complete dtrain-clip '' | tr ' ' '\n' | grep -v '^-' | grep -v shard | sort |
  paste -sd' ')
expect "the commands offered are those --help lists" "$offered" "$listed"

# Every flag offered, against the command's parser. A flag the fish script gives -r or -x takes a
# value: alone, it must be refused for want of one. A switch must be taken, so that the word after
# it is the one refused. train's flags are held to its parser's tables by ClipCompletion's unit
# test, so here two of them stand for the rest (each start of dtrain-clip loads LibTorch).
for cmd in $listed; do
  checked=0 before=$failed
  failed=0
  for flag in $(bash_complete dtrain-clip "$cmd" --); do
    [ "$flag" = --help ] && continue
    case $cmd:$flag in train:--local-loss | train:--text-context | train:--bad-data) ;; train:*) continue ;; esac
    if grep -Eq -- "__fish_seen_subcommand_from $cmd' -l ${flag#--} -[rx]( |$)" \
      "$work/completion.fish"; then
      timeout 20 "$clip" "$cmd" "$flag" >/dev/null 2>"$work/err"
      status=$?
      grep -q -- "$flag needs a value" "$work/err" && [ $status = 2 ] ||
        fail "$cmd $flag: offered as taking a value, but alone it gave status $status: $(cat "$work/err")"
    else
      timeout 20 "$clip" "$cmd" "$flag" --zz-not-a-flag x >/dev/null 2>"$work/err"
      status=$?
      grep -q -- "unknown flag '--zz-not-a-flag'" "$work/err" && [ $status = 2 ] ||
        fail "$cmd $flag: offered as a switch, but the parser gave status $status: $(cat "$work/err")"
    fi
    checked=$((checked + 1))
  done
  [ $failed = 0 ] && echo "ok: $cmd: $checked flag(s) checked against its parser, each taken as offered"
  [ $before = 0 ] || failed=1
done
offered=$(bash_complete dtrain-clip train -- | wc -w)
[ "$offered" -ge 50 ] && echo "ok: train: $offered flags offered" || fail "train: only $offered flags offered"
exit $failed
