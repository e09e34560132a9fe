#!/bin/sh
# SPDX-FileCopyrightText: 2026 The kvrelay Authors
#
# SPDX-License-Identifier: Apache-2.0
#
# Validates every TOML file under the given directories (deploy/ and config/examples/) with
# `kvrelay --check`, as an operator would before shipping it. Two stand-ins, because the files
# describe other machines:
#   - a file key names a secret that exists only where the file is deployed; it is pointed at a
#     readable stand-in: a PEM block for ca_file, cert_file and key_file (kvrelay checks that they
#     hold one), a one-line token for token_file, a writable directory for a state dir; the rest
#     is checked as is;
#   - a file without [[engine]] is the base of a sidecar whose engine comes from flags; it is
#     checked with a stand-in engine identity (the Kubernetes test runs it with the real flags).
# Before trusting a pass it makes sure the harness can fail: a broken copy must be rejected.
# Usage: check_tomls.sh KVRELAY_BINARY DEPLOY_DIR [MORE_DIRS...]
set -u
kvrelay=$1
deploy=$2
shift
dirs="$*"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo stand-in > "$tmp/stand-in"
printf -- '-----BEGIN CERTIFICATE-----\nc3RhbmQtaW4=\n-----END CERTIFICATE-----\n' > "$tmp/stand-in.pem"

check() {  # check FILE -> kvrelay's exit code; its stderr in $tmp/err
  # A state dir (the durable index's) names a directory of the deployed machine: a writable
  # stand-in directory.
  sed -E -e 's#^([[:space:]]*(ca_file|cert_file|key_file)[[:space:]]*=[[:space:]]*)"[^"]+"#\1"'"$tmp"'/stand-in.pem"#' \
    -e 's#^([[:space:]]*token_file[[:space:]]*=[[:space:]]*)"[^"]+"#\1"'"$tmp"'/stand-in"#' \
    -e 's#^([[:space:]]*dir[[:space:]]*=[[:space:]]*)"[^"]+"#\1"'"$tmp"'/state"#' \
    "$1" > "$tmp/candidate.toml"
  if grep -q '^[[:space:]]*\[\[engine\]\]' "$tmp/candidate.toml"; then
    "$kvrelay" --config "$tmp/candidate.toml" --check > "$tmp/out" 2> "$tmp/err"
  else
    "$kvrelay" --config "$tmp/candidate.toml" --replica-id=stand-in --model-id=stand-in --check \
      > "$tmp/out" 2> "$tmp/err"
  fi
}

# shellcheck disable=SC2086 # the directories are words
files=$(find $dirs -name '*.toml' | sort)
count=0
failed=0
for f in $files; do
  count=$((count + 1))
  if check "$f"; then
    echo "ok   $f"
  else
    echo "FAIL $f: $(head -n 1 "$tmp/err")"
    failed=$((failed + 1))
  fi
done

# The harness itself: an unknown key must be rejected.
first=$(echo "$files" | head -n 1)
if [ -n "$first" ]; then
  { cat "$first"; printf '\n[log]\nlevle = "info"\n'; } > "$tmp/broken.toml"
  if check "$tmp/broken.toml"; then
    echo "FAIL the harness accepted a broken file (kvrelay --check does not reject?)"
    failed=$((failed + 1))
  fi
fi

deploy_count=$(find "$deploy" -name '*.toml' | wc -l)
if [ "$deploy_count" -lt 3 ]; then
  echo "FAIL found $deploy_count TOML files under $deploy; expected the default config and both Kubernetes ones"
  failed=$((failed + 1))
fi
echo "$count files, $failed failure(s)"
[ "$failed" -eq 0 ]
