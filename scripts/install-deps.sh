#!/usr/bin/env bash
# Installs everything dtrain needs to build, run and test: Debian's packages,
# then the Python packages (LibTorch 2.x from the torch wheel, the peers the
# tests and benches run) into the repository's .venv/.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build ccache pkg-config git \
  libcli11-dev libyaml-cpp-dev libfmt-dev libssh-dev libboost-dev nlohmann-json3-dev \
  libgtest-dev libgmock-dev \
  clang libclang-rt-14-dev \
  libopenblas0-pthread \
  libpng-dev libjpeg-dev zlib1g-dev \
  dataset-fashion-mnist \
  openssh-server openssh-client iproute2 procps psmisc groff-base python3 \
  slurm-wlm munge pdsh rsync \
  python3-venv \
  >/dev/null

# Python: one virtual environment in the repository, pinned versions, pip's
# cache kept between runs (CI and developers alike).
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/.venv"
[ -x "$VENV/bin/python3" ] || python3 -m venv "$VENV"
"$VENV/bin/python3" -m pip install -q --disable-pip-version-check \
  -r "$ROOT/scripts/python-requirements.txt" -c "$ROOT/scripts/python-constraints.txt"

# Horovod, in its own .venv-horovod/ (see the script).
"$ROOT/scripts/install-horovod.sh"
