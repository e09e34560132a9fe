#!/usr/bin/env bash
# Builds kvrelay and runs its embedded demo: fake engine -> kvrelay -> demo policy server, then
# asks the policy server what a router would get back for a few prompts.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake --preset default >/dev/null
cmake --build --preset default
exec ./build/default/kvrelay --version
