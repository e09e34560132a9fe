#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Runs ctest with the given arguments and exits with its status. With CI=true a test that was
# skipped (a tool missing, a permission refused) fails too: CI's machine is set up to run
# every check, and a check that did not run proved nothing. The tests themselves fail instead of
# skipping under CI=true (tests/support/skip.hpp, the scripts' cannot_run); this catches a skip
# that slipped past them (ctest's SKIP_RETURN_CODE, a bare GTEST_SKIP).
#   scripts/ctest-all-ran.sh --preset default -j2 -R Decoder
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ctest "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
# ctest lists them under "The following tests did not run:", each "(Skipped)" or "(Disabled)";
# a disabled test (a gtest DISABLED_ one, run by hand) is not a check that could not run, nor is
# one whose skip the build decides (KVRELAY_SKIPS_BY_BUILD, a regex of test names: an RSS test
# under a sanitizer, whose shadow memory is in the RSS).
if [ "${CI:-}" = "true" ]; then
  skipped=$(grep -E '^[[:space:]]+[0-9]+ - .* \(Skipped\)$' "$log" |
            sed -E 's/^[[:space:]]+[0-9]+ - (.*) \(Skipped\)$/\1/' || true)
  if [ -n "${KVRELAY_SKIPS_BY_BUILD:-}" ] && [ -n "$skipped" ]; then
    skipped=$(printf '%s\n' "$skipped" | grep -Ev "$KVRELAY_SKIPS_BY_BUILD" || true)
  fi
  if [ -n "$skipped" ]; then
    echo "ctest-all-ran: CI=true and these tests were skipped: failing" >&2
    printf '  %s\n' $skipped >&2
    [ "$rc" != 0 ] || rc=1
  fi
fi
exit "$rc"
