#!/usr/bin/env bash
# Installs what dtrain needs, from Debian's packages and PyPI (pinned, into the repository's
# .venv/). Two sets:
#   scripts/install-deps.sh          build and run dtrain and dtrain-clip (the default job):
#                                    compilers, CLI11, yaml-cpp, fmt, libssh, libpng/libjpeg,
#                                    Fashion-MNIST, and torch (LibTorch) in .venv/
#   scripts/install-deps.sh --tests  that, and everything the tests and benches run for real:
#                                    GoogleTest, clang's sanitizer runtime, sshd and iproute2
#                                    (namespace nodes), Slurm and munge, groff, pciutils (lspci),
#                                    OpenCLIP, py-spy, HolisticTraceAnalysis, and Horovod built
#                                    into .venv-horovod/
# Both are safe to run again; pip's cache (~/.cache/pip) and the Horovod wheel cache
# (~/.cache/dtrain-wheels) make a second run quick.
set -euo pipefail
TESTS=0
case "${1:-}" in
  "") ;;
  --tests) TESTS=1 ;;
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "install-deps.sh: unknown option '$1' (use --tests for the test set)" >&2; exit 2 ;;
esac
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libcli11-dev libyaml-cpp-dev libfmt-dev libssh-dev libboost-dev nlohmann-json3-dev
  libopenblas0-pthread
  libpng-dev libjpeg-dev zlib1g-dev
  dataset-fashion-mnist
  openssh-client procps python3 python3-venv
)
TEST_PACKAGES=(
  libgtest-dev libgmock-dev
  clang libclang-rt-14-dev
  openssh-server iproute2 psmisc groff-base zsh fish e2fsprogs mount
  slurm-wlm munge pdsh rsync pciutils
)
[ "$TESTS" = 1 ] && PACKAGES+=("${TEST_PACKAGES[@]}")
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null

# Python: one virtual environment in the repository, pinned versions (every transitive one in
# python-constraints.txt), pip's cache kept between runs (CI and developers alike).
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/.venv"
[ -x "$VENV/bin/python3" ] || python3 -m venv "$VENV"
REQUIREMENTS=(-r "$ROOT/scripts/python-requirements.txt")
[ "$TESTS" = 1 ] && REQUIREMENTS+=(-r "$ROOT/scripts/python-test-requirements.txt")
"$VENV/bin/python3" -m pip install -q --disable-pip-version-check \
  "${REQUIREMENTS[@]}" -c "$ROOT/scripts/python-constraints.txt"

# Horovod, in its own .venv-horovod/ (see the script): only the tests and benches use it.
[ "$TESTS" = 1 ] && "$ROOT/scripts/install-horovod.sh"
exit 0
