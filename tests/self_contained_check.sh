#!/bin/sh
# Fails when any file of the repository refers to a folder beside it (../shared and the like):
# a user's clone, a packager's build or a fork's CI has nothing there.
# Usage: self_contained_check.sh SOURCE_DIR
cd "$1" || exit 2
pattern='\.\./shared|shared/fixtures'
if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then
  hits=$(git grep --untracked -n -I -E "$pattern" -- . ':!tests/self_contained_check.sh' ':!tests/house.cmake')
else
  hits=$(grep -rn -I -E "$pattern" --exclude-dir=.git --exclude-dir=.venv --exclude-dir=.venv-horovod \
    --exclude-dir='build*' --exclude=self_contained_check.sh --exclude=house.cmake .)
fi
if [ -n "$hits" ]; then
  echo "these lines refer to something outside the repository; copy what they need into it" \
    "(tests/fixtures/) and point them there:"
  echo "$hits"
  exit 1
fi
echo "no file refers to a folder outside the repository"
