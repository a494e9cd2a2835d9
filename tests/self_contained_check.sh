#!/bin/sh
# Fails when any file of the repository refers to the project's shared folder beside it:
# a user's clone, a packager's build or a fork's CI has nothing there.
# Usage: self_contained_check.sh SOURCE_DIR
cd "$1" || exit 2
# Spelled in two parts, so this file is not itself a reference to what it looks for.
beside='shar''ed'
pattern="\\.\\./$beside|$beside/fixtures"
if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
  hits=$(git grep --untracked -n -I -E "$pattern" -- .)
else
  hits=$(grep -rn -I -E "$pattern" --exclude-dir=.git --exclude-dir=.venv --exclude-dir=.venv-horovod \
    --exclude-dir='build*' .)
fi
if [ -n "$hits" ]; then
  echo "these lines refer to something outside the repository; copy what they need into it" \
    "(tests/fixtures/) and point them there:"
  echo "$hits"
  exit 1
fi
echo "no file refers to a folder outside the repository"
