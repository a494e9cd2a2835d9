#!/usr/bin/env bash
# Installs everything dtrain needs to build, run and test, from Debian's packages.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build ccache pkg-config git \
  libcli11-dev libyaml-cpp-dev libfmt-dev libssh-dev libboost-dev nlohmann-json3-dev \
  libgtest-dev libgmock-dev \
  libtorch-dev libgloo-dev libopenblas0-pthread \
  libpng-dev libjpeg-dev zlib1g-dev \
  dataset-fashion-mnist \
  openssh-server openssh-client iproute2 procps psmisc groff-base python3 \
  slurm-wlm munge pdsh \
  python3-torch \
  >/dev/null
