#!/usr/bin/env bash
# Installs dependencies, builds kvrelay (RelWithDebInfo) and runs every test with ctest.
# With CI=true it also runs the benchmark harness's smoke mode and scripts/sanitize.sh: the fuzzers
# (60 s each), the integration and fault suites under ThreadSanitizer, and the pure-logic unit
# tests under ASan+UBSan.
#   ./scripts/test.sh                 # everything in the default preset
#   ./scripts/test.sh -R Decoder      # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

cmake --preset default >/dev/null
cmake --build --preset default
ctest --preset default -j2 "$@"

if [ "${CI:-}" = "true" ]; then
  # The end-to-end benchmark harness, once on small inputs: it must run, no thresholds.
  smoke_log=build/default/bench-smoke.log
  if ./scripts/bench.sh --smoke --no-build --build-dir build/default >"$smoke_log" 2>&1; then
    echo "bench smoke: ok ($smoke_log)"
  else
    tail -n 40 "$smoke_log"
    echo "bench smoke: FAILED" >&2
    exit 1
  fi
  ./scripts/sanitize.sh
fi
