#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Installs kvrelay's build and test dependencies from Debian 12's archive (apt-get only; nothing
# else is downloaded). Idempotent: packages already installed are skipped, and apt is not touched
# at all when everything is present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache git
  libcaf-dev libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libtomlplusplus-dev libxxhash-dev libabsl-dev libcpp-httplib-dev nlohmann-json3-dev
  curl
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev llvm-14
  python3 python3-yaml openssl dpkg-dev
  # `ip`: the injected-sidecar test gives its network namespace a pod address.
  iproute2
  # promtool (checks and unit-tests deploy/prometheus/ and a live /metrics) and headless
  # Chromium (renders the admin page in tests/ops). The prometheus package also installs a
  # server service; on a host with systemd it starts on :9090, which no test uses.
  prometheus chromium
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
