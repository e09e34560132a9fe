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
# a disabled test (a gtest DISABLED_ one, run by hand) is not a check that could not run.
if [ "${CI:-}" = "true" ] && grep -Eq '^[[:space:]]+[0-9]+ - .* \(Skipped\)$' "$log"; then
  echo "ctest-all-ran: CI=true and the tests listed above as Skipped did not run: failing" >&2
  [ "$rc" != 0 ] || rc=1
fi
exit "$rc"
