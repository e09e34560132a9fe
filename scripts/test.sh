#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Installs dependencies, builds kvrelay (RelWithDebInfo) and runs every test with ctest.
# With CI=true it also runs the benchmark harness's smoke mode, the image stage (scripts/image.sh
# twice: the digests must match; then tests/image/check_image.py runs the image the way the
# reference controller's injector does) and scripts/sanitize.sh: the fuzzers (60 s each), the
# integration and fault suites under ThreadSanitizer, and the pure-logic unit tests under
# ASan+UBSan.
#   ./scripts/test.sh                 # everything in the default preset
#   ./scripts/test.sh -R Decoder      # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

cmake --preset default >/dev/null
cmake --build --preset default
rc=0
# With CI=true a test that did not run fails (scripts/ctest-all-ran.sh).
./scripts/ctest-all-ran.sh --preset default -j2 "$@" || rc=$?
# A test that skips says why on a "SKIP: " line (no Chromium, no promtool, ...); ctest keeps
# skipped tests' output to itself, so the reasons are repeated here for the log. With CI=true
# nothing skips: such a test fails with a "FAIL (CI=true, cannot run): " line.
if grep -q '^SKIP: ' build/default/Testing/Temporary/LastTest.log 2>/dev/null; then
  echo "skipped, and why:"
  grep '^SKIP: ' build/default/Testing/Temporary/LastTest.log | sort | uniq -c
fi
# What the build took and what is left: CI's disk once ran out in the TSan stage.
echo "disk: build/default $(du -sh build/default | cut -f1), $(df -h --output=avail . | tail -n 1 | tr -d ' ') free"
[ "$rc" = 0 ] || exit "$rc"

# The image stage: build the OCI image twice from one commit (one digest, or fail), then check it
# and run it as the injector would. Its tools come from Debian (apt-get); downloads stay in
# build/image-cache for the next run. A kernel that refuses namespaces fails the stage (CI=true:
# tests/image/check_image.py never passes without running the image).
image_stage() {
  local t0 log=build/image-stage.log first second
  t0=$(date +%s)
  mkdir -p build
  local missing=()
  for p in mmdebstrap umoci skopeo; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if ! ./scripts/image.sh >"$log" 2>&1; then
    tail -n 40 "$log"; echo "image: build FAILED" >&2; exit 1
  fi
  first=$(cat build/image/kvrelay-*.digest)
  if ! ./scripts/image.sh >>"$log" 2>&1; then
    tail -n 40 "$log"; echo "image: second build FAILED" >&2; exit 1
  fi
  second=$(cat build/image/kvrelay-*.digest)
  grep '^image.sh: rootfs' "$log" | tail -n 1
  if [ "$first" != "$second" ]; then
    echo "image: NOT reproducible: $first then $second ($log)" >&2; exit 1
  fi
  echo "image: $second, built twice with one digest"
  if ! python3 tests/image/check_image.py build/image/kvrelay-*.oci.tar build/default; then
    echo "image: checks FAILED" >&2; exit 1
  fi
  echo "image stage: ok in $(( $(date +%s) - t0 )) s ($log)"
}

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
  image_stage
  # The package build and the unpacked rootfs are not needed again (build/image-cache is kept):
  # CI's disk once ran out in the TSan stage that follows.
  rm -rf build/pkg build/image-work
  ./scripts/sanitize.sh
fi
